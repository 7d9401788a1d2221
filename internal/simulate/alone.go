package simulate

import (
	"encoding/json"
	"fmt"

	"github.com/tollgate-proxy/tollgate/config"
)

// aloneSim replays a configuration's shadow rule enforced, as the configuration's only rule.
type aloneSim struct {
	config int    // the index of the configuration in RunOptions.Configs
	rule   string // the shadow rule's name
	sim    *Simulator
}

// shadowRules names the rules of a configuration that are shadow rules (all of them under a
// top-level "shadow": true).
func shadowRules(data []byte) ([]string, error) {
	cfg, err := config.Parse(data)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, r := range cfg.Rules {
		if r.Shadow || cfg.Shadow {
			names = append(names, r.Name)
		}
	}
	return names, nil
}

// enforcedAlone rewrites a configuration so that the named rule is its only rule, enforced:
// every other rule and the shadow settings are dropped, everything else (exemptions, client_ip,
// the key table, the response) is kept as written.
func enforcedAlone(data []byte, rule string) ([]byte, error) {
	doc, rules, err := configRules(data)
	if err != nil {
		return nil, err
	}
	for _, r := range rules {
		var name string
		if json.Unmarshal(r["name"], &name) != nil || name != rule {
			continue
		}
		delete(r, "shadow")
		delete(doc, "shadow")
		only, err := json.Marshal([]map[string]json.RawMessage{r})
		if err != nil {
			return nil, err
		}
		doc["rules"] = only
		return json.Marshal(doc)
	}
	return nil, fmt.Errorf("no rule %q", rule)
}

// configRules splits a configuration's JSON into its top-level fields and its rules' fields, each
// kept as written, for a variant of it to be written back.
func configRules(data []byte) (map[string]json.RawMessage, []map[string]json.RawMessage, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, nil, err
	}
	var rules []map[string]json.RawMessage
	if err := json.Unmarshal(doc["rules"], &rules); err != nil {
		return nil, nil, err
	}
	return doc, rules, nil
}

// aloneResult reads what the rule did in its replay alone.
func (a *aloneSim) result(top int) *AloneResult {
	r := &a.sim.rules[0]
	limited, _ := topKeys(r.name, r.keys, a.sim.opts.Keys, top)
	return &AloneResult{
		Admitted: r.totals.Admitted, Limited: r.totals.Limited, MissingKey: r.totals.MissingKey,
		KeysLimited: r.keysLimited(), TopKeys: limited,
	}
}
