package config_test

import (
	"errors"
	"fmt"

	"github.com/tollgate-proxy/tollgate/config"
)

// A configuration with one rule: three requests at once per API key, then one a second.
// Parse fills in every field the document leaves out.
func ExampleParse() {
	cfg, err := config.Parse([]byte(`{
		"rules": [{
			"name": "per-api-key",
			"match": {"path": {"prefix": "/api/"}, "methods": ["get", "POST"]},
			"key": [{"header": "X-Api-Key"}],
			"limits": [{"capacity": 3, "refill_tokens": 1, "refill_interval": "1s"}]
		}]
	}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	rule := cfg.Rules[0]
	limit := rule.Limits[0]
	fmt.Println("rule:", rule.Name, "on", rule.Match.Path.Prefix, rule.Match.Methods)
	fmt.Println("key:", rule.Key[0].Kind, rule.Key[0].Header)
	fmt.Println("limit:", limit.Algorithm, limit.Capacity, "then", limit.RefillTokens, "per", limit.RefillInterval)
	fmt.Println("cost:", rule.Cost.Units, "missing key:", rule.MissingKey.Action, rule.MissingKey.Status)
	fmt.Println("over the limit:", cfg.Response.Status, "failure mode:", cfg.FailureMode)
	// Output:
	// rule: per-api-key on /api/ [GET POST]
	// key: header x-api-key
	// limit: token_bucket 3 then 1 per 1s
	// cost: 1 missing key: reject 401
	// over the limit: 429 failure mode: allow
}

// A document with mistakes: Parse reports every problem at once, each naming the field, the
// value and how to fix it.
func ExampleParse_problems() {
	_, err := config.Parse([]byte(`{
		"rules": [{
			"name": "per api key",
			"key": [{"header": "x-api-key"}],
			"limits": [{"capcity": 3, "refill_tokens": 1, "refill_interval": 5}]
		}]
	}`))
	var problems *config.Error
	if errors.As(err, &problems) {
		for _, p := range problems.Problems {
			fmt.Println(p)
		}
	}
	// Output:
	// rules[0].name: "per api key" contains ' ', which is not allowed: a rule name is 1 to 64 characters of A-Z, a-z, 0-9, '.', '_' and '-' (it becomes part of a shared-memory key), e.g. "per-api-key"
	// rules[0].limits[0]: unknown field "capcity": known fields are algorithm, capacity, refill_tokens, refill_interval, window, calendar, max_in_flight, slot_timeout (did you mean "capacity"?)
	// rules[0].limits[0].capacity: required field is missing: add "capacity": 10
	// rules[0].limits[0].refill_interval: got the number 5, want a string: quote the duration and give it a unit, e.g. "1s" or "500ms"
}

// Broken JSON syntax is reported once, where it is, since nothing after it can be trusted.
func ExampleParse_syntax() {
	_, err := config.Parse([]byte(`{
  "rules": [
    {"name": "a",}
  ]
}`))
	fmt.Println(err)
	// Output:
	// invalid JSON at line 3, column 18 (byte offset 32): invalid character '}' looking for beginning of object key string (look for a missing or extra comma, quote or bracket at or just before that point)
}
