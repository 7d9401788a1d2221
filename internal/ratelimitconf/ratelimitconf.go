// Package ratelimitconf reads envoyproxy/ratelimit's descriptor configuration (the YAML file
// under $RUNTIME_ROOT/$RUNTIME_SUBDIRECTORY/config/) and finds the limit the service applies to
// the descriptor Tollgate sends for a rule: deploy's tests check shipped pairs with it, and
// `tollgate simulate --ratelimit-config` takes the fleet model's global limits from it.
package ratelimitconf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/tollgate-proxy/tollgate/config"
	"github.com/tollgate-proxy/tollgate/internal/rls"
)

// File is envoyproxy/ratelimit's configuration file (src/config/config_impl.go, yamlRoot,
// yamlDescriptor and yamlRateLimit), with the fields it reads.
type File struct {
	Domain      string       `json:"domain"`
	Descriptors []Descriptor `json:"descriptors"`
}

// Descriptor is one node of the descriptor tree.
type Descriptor struct {
	Key            string       `json:"key"`
	Value          string       `json:"value"`
	RateLimit      *Limit       `json:"rate_limit"`
	Descriptors    []Descriptor `json:"descriptors"`
	ShadowMode     bool         `json:"shadow_mode"`
	QuotaMode      bool         `json:"quota_mode"`
	DetailedMetric bool         `json:"detailed_metric"`
	ValueToMetric  bool         `json:"value_to_metric"`
	ShareThreshold bool         `json:"share_threshold"`
}

// Limit is a descriptor's rate_limit.
type Limit struct {
	RequestsPerUnit uint32   `json:"requests_per_unit"`
	Unit            string   `json:"unit"`
	UnitMultiplier  *uint32  `json:"unit_multiplier"`
	Unlimited       bool     `json:"unlimited"`
	Name            string   `json:"name"`
	Replaces        []string `json:"replaces"`
}

// Units are the units the service knows, in its spelling (any case).
var Units = upper(rls.UnitNames())

func upper(names []string) []string {
	for i, n := range names {
		names[i] = strings.ToUpper(n)
	}
	return names
}

// Read reads a descriptor configuration, refusing unknown fields and what the service refuses
// when it loads one: an empty domain or key, an unknown unit, a limit of 0 requests that is not
// unlimited, and a key and value given twice at one level. name names the file in errors.
func Read(name string, data []byte) (*File, error) {
	jsonData, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("%s: not YAML: %w", name, err)
	}
	var f File
	decoder := json.NewDecoder(bytes.NewReader(jsonData))
	decoder.DisallowUnknownFields()
	if err := decoder.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var problems []error
	if f.Domain == "" {
		problems = append(problems, fmt.Errorf("%s: domain: empty", name))
	}
	var walk func(path string, ds []Descriptor)
	walk = func(path string, ds []Descriptor) {
		seen := map[string]bool{}
		for i, d := range ds {
			at := fmt.Sprintf("%s[%d]", path, i)
			if d.Key == "" {
				problems = append(problems, fmt.Errorf("%s: %s.key: empty", name, at))
			}
			if seen[d.Key+"_"+d.Value] {
				problems = append(problems, fmt.Errorf("%s: %s: key %q value %q given twice at one level", name, at, d.Key, d.Value))
			}
			seen[d.Key+"_"+d.Value] = true
			if l := d.RateLimit; l != nil {
				if !l.knownUnit() && !l.Unlimited {
					problems = append(problems, fmt.Errorf("%s: %s.rate_limit.unit: %q, want one of %s", name, at, l.Unit, strings.Join(Units, ", ")))
				}
				if l.RequestsPerUnit == 0 && !l.Unlimited {
					problems = append(problems, fmt.Errorf("%s: %s.rate_limit.requests_per_unit: 0 requests; say unlimited: true instead", name, at))
				}
			}
			walk(at+".descriptors", d.Descriptors)
		}
	}
	walk("descriptors", f.Descriptors)
	return &f, errors.Join(problems...)
}

func (l *Limit) knownUnit() bool {
	_, known := rls.UnitNamed(l.Unit)
	return known
}

// LimitFor finds the limit the service applies to a descriptor, as envoyproxy/ratelimit's
// GetLimit does: each entry matches "key_value" first, then "key" alone (any value), and only
// a node reached by the last entry gives its limit. An empty entry value stands for any value.
func (f *File) LimitFor(entries []config.GlobalEntry) *Limit {
	level := f.Descriptors
	for i, e := range entries {
		var next *Descriptor
		for j := range level {
			if level[j].Key == e.Key && level[j].Value == e.Value && e.Value != "" {
				next = &level[j]
			}
		}
		if next == nil {
			for j := range level {
				if level[j].Key == e.Key && level[j].Value == "" {
					next = &level[j]
				}
			}
		}
		if next == nil {
			return nil
		}
		if i == len(entries)-1 {
			return next.RateLimit
		}
		level = next.Descriptors
	}
	return nil
}

// RuleDescriptor is the descriptor Tollgate sends for a rule's global limit, with the hashed
// key left open (an empty value).
func RuleDescriptor(r *config.Rule) []config.GlobalEntry {
	entries := append([]config.GlobalEntry(nil), r.Global.Entries...)
	return append(entries, config.GlobalEntry{Key: r.Global.RuleEntry, Value: r.Name}, config.GlobalEntry{Key: r.Global.KeyEntry})
}

// DescribeEntries writes a descriptor as (key, value) pairs, the open value as the key's hash.
func DescribeEntries(entries []config.GlobalEntry) string {
	parts := make([]string, len(entries))
	for i, e := range entries {
		value := e.Value
		if value == "" {
			value = "<hash of the key>"
		}
		parts[i] = "(" + e.Key + ", " + value + ")"
	}
	return strings.Join(parts, " ")
}
