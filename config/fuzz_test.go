package config_test

import (
	"encoding/json"
	"errors"
	"math/big"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-proxy/tollgate/config"
)

// FuzzParse checks that Parse never panics and always either returns a
// Config that satisfies every documented limit or a *config.Error with at
// least one explained problem. An accepted Config must also survive being
// written back out as JSON and parsed again unchanged.
func FuzzParse(f *testing.F) {
	f.Add([]byte(exampleJSON))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := config.Parse(data)
		if err != nil {
			if cfg != nil {
				t.Fatalf("Parse returned both a Config and an error: %v", err)
			}
			var parseErr *config.Error
			if !errors.As(err, &parseErr) {
				t.Fatalf("Parse error is %T, want *config.Error: %v", err, err)
			}
			if len(parseErr.Problems) == 0 {
				t.Fatal("*config.Error has no problems")
			}
			for i, problem := range parseErr.Problems {
				if problem.Message == "" {
					t.Fatalf("problem %d (field %q) has an empty message", i, problem.Field)
				}
			}
			if err.Error() == "" {
				t.Fatal("Error() is empty")
			}
			return
		}
		if cfg == nil {
			t.Fatal("Parse returned neither a Config nor an error")
		}
		if err := revalidate(cfg); err != nil {
			t.Fatalf("Parse accepted an invalid Config: %v\ninput: %q", err, data)
		}
		again, err := config.Parse(encode(t, cfg))
		if err != nil {
			t.Fatalf("re-parsing the accepted Config failed: %v", err)
		}
		if !reflect.DeepEqual(again, cfg) {
			t.Fatalf("re-parsed Config differs:\n got %+v\nwant %+v", again, cfg)
		}
	})
}

// revalidate checks a Config against the documented limits independently
// of the package's own validation code.
func revalidate(cfg *config.Config) error {
	if cfg.FailureMode != config.FailureAllow && cfg.FailureMode != config.FailureDeny {
		return errors.New("failure mode " + cfg.FailureMode.String())
	}
	if len(cfg.Rules) < 1 || len(cfg.Rules) > 64 {
		return errors.New(strconv.Itoa(len(cfg.Rules)) + " rules")
	}
	names := make(map[string]bool)
	for _, rule := range cfg.Rules {
		if len(rule.Name) < 1 || len(rule.Name) > 64 || strings.Trim(rule.Name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != "" {
			return errors.New("rule name " + strconv.Quote(rule.Name))
		}
		if names[rule.Name] {
			return errors.New("repeated rule name " + strconv.Quote(rule.Name))
		}
		names[rule.Name] = true
		if len(rule.Key) < 1 || len(rule.Key) > 8 {
			return errors.New(rule.Name + ": " + strconv.Itoa(len(rule.Key)) + " key parts")
		}
		for _, part := range rule.Key {
			if err := revalidateKeyPart(part); err != nil {
				return errors.New(rule.Name + ": " + err.Error())
			}
		}
		if len(rule.Limits) < 1 || len(rule.Limits) > 8 {
			return errors.New(rule.Name + ": " + strconv.Itoa(len(rule.Limits)) + " limits")
		}
		for _, limit := range rule.Limits {
			if err := revalidateLimit(limit); err != nil {
				return errors.New(rule.Name + ": " + err.Error())
			}
		}
	}
	return nil
}

func revalidateKeyPart(part config.KeyPart) error {
	switch part.Kind {
	case config.KeyClientIP:
		if part.Header != "" {
			return errors.New("client_ip part with header " + strconv.Quote(part.Header))
		}
		return nil
	case config.KeyHeader:
		header := part.Header
		if header != strings.ToLower(header) {
			return errors.New("header not lower-cased: " + strconv.Quote(header))
		}
		switch header {
		case ":authority", ":method", ":path", ":scheme", ":protocol":
			return nil
		}
		if len(header) < 1 || len(header) > 256 || strings.Trim(header, "abcdefghijklmnopqrstuvwxyz0123456789!#$%&'*+-.^_`|~") != "" {
			return errors.New("header " + strconv.Quote(header))
		}
		return nil
	}
	return errors.New("key part kind " + strconv.Itoa(int(part.Kind)))
}

func revalidateLimit(limit config.Limit) error {
	if limit.Capacity < 1 || limit.Capacity > 1_000_000_000 {
		return errors.New("capacity " + strconv.FormatInt(limit.Capacity, 10))
	}
	if limit.RefillTokens < 1 || limit.RefillTokens > 1_000_000_000 {
		return errors.New("refill_tokens " + strconv.FormatInt(limit.RefillTokens, 10))
	}
	if limit.RefillInterval < time.Millisecond || limit.RefillInterval > 24*time.Hour {
		return errors.New("refill_interval " + limit.RefillInterval.String())
	}
	// Recompute the overflow bound with big integers rather than the
	// package's 128-bit multiplication.
	interval := big.NewInt(int64(limit.RefillInterval))
	gcd := new(big.Int).GCD(nil, nil, interval, big.NewInt(limit.RefillTokens))
	product := new(big.Int).Mul(big.NewInt(limit.Capacity), new(big.Int).Quo(interval, gcd))
	if product.Cmp(new(big.Int).Lsh(big.NewInt(1), 62)) > 0 {
		return errors.New("token arithmetic overflows: " + product.String())
	}
	return nil
}

// encode writes cfg back out in the configuration's JSON schema.
func encode(t *testing.T, cfg *config.Config) []byte {
	type limitJSON struct {
		Capacity       int64  `json:"capacity"`
		RefillTokens   int64  `json:"refill_tokens"`
		RefillInterval string `json:"refill_interval"`
	}
	type ruleJSON struct {
		Name   string           `json:"name"`
		Key    []map[string]any `json:"key"`
		Limits []limitJSON      `json:"limits"`
	}
	document := struct {
		Rules       []ruleJSON `json:"rules"`
		FailureMode string     `json:"failure_mode"`
	}{FailureMode: cfg.FailureMode.String()}
	for _, rule := range cfg.Rules {
		encoded := ruleJSON{Name: rule.Name}
		for _, part := range rule.Key {
			if part.Kind == config.KeyHeader {
				encoded.Key = append(encoded.Key, map[string]any{"header": part.Header})
			} else {
				encoded.Key = append(encoded.Key, map[string]any{"client_ip": struct{}{}})
			}
		}
		for _, limit := range rule.Limits {
			encoded.Limits = append(encoded.Limits, limitJSON{limit.Capacity, limit.RefillTokens, limit.RefillInterval.String()})
		}
		document.Rules = append(document.Rules, encoded)
	}
	data, err := json.Marshal(document)
	if err != nil {
		t.Fatalf("encoding the accepted Config: %v", err)
	}
	return data
}

func TestRevalidateAcceptsExample(t *testing.T) {
	cfg, err := config.Parse([]byte(exampleJSON))
	if err != nil {
		t.Fatal(err)
	}
	if err := revalidate(cfg); err != nil {
		t.Fatal(err)
	}
}
