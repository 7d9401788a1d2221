package config_test

import (
	"testing"
	"time"

	"github.com/tollgate-proxy/tollgate/config"
)

func TestConcurrencyLimit(t *testing.T) {
	const (
		maxPath   = "rules[0].limits[0].max_in_flight"
		leasePath = "rules[0].limits[0].slot_timeout"
	)
	concurrency := func(n int64, lease time.Duration) config.Limit {
		return config.Limit{Algorithm: config.Concurrency, MaxInFlight: n, SlotTimeout: lease}
	}
	tests := []struct {
		name     string
		input    string
		want     *config.Config
		problems []problem
	}{
		{name: "max_in_flight and lease", input: withLimit(`{"algorithm": "concurrency", "max_in_flight": 4, "slot_timeout": "30s"}`), want: oneRule(concurrency(4, 30*time.Second))},
		{name: "lease defaults to 1m", input: withLimit(`{"algorithm": "concurrency", "max_in_flight": 1}`), want: oneRule(concurrency(1, time.Minute))},
		{name: "bounds", input: withLimit(`{"algorithm": "concurrency", "max_in_flight": 1000000, "slot_timeout": "24h"}`), want: oneRule(concurrency(1_000_000, 24*time.Hour))},
		{name: "shortest lease", input: withLimit(`{"algorithm": "concurrency", "max_in_flight": 2, "slot_timeout": "1s"}`), want: oneRule(concurrency(2, time.Second))},
		{
			name: "with a rate limit in the same rule",
			input: withRule(`{"name": "r", "key": [{"client_ip": {}}], "limits": [{"capacity": 10, "refill_tokens": 1, "refill_interval": "1s"}, ` +
				`{"algorithm": "concurrency", "max_in_flight": 2, "slot_timeout": "10s"}]}`),
			want: configWith(ruleWith("r", clientIPKey, config.Limit{Capacity: 10, RefillTokens: 1, RefillInterval: time.Second}, concurrency(2, 10*time.Second))),
		},
		{name: "max_in_flight missing", input: withLimit(`{"algorithm": "concurrency", "slot_timeout": "30s"}`), problems: []problem{{maxPath, `required field is missing: add "max_in_flight": 4`}}},
		{name: "max_in_flight 0", input: withLimit(`{"algorithm": "concurrency", "max_in_flight": 0}`), problems: []problem{{maxPath, "0 is not allowed: max_in_flight is how many requests of a key may be in flight at once, a whole number from 1 to 1000000"}}},
		{name: "max_in_flight too large", input: withLimit(`{"algorithm": "concurrency", "max_in_flight": 1000001}`), problems: []problem{{maxPath, "1000001 is too large: max_in_flight"}}},
		{name: "max_in_flight fraction", input: withLimit(`{"algorithm": "concurrency", "max_in_flight": 1.5}`), problems: []problem{{maxPath, "1.5 is not a whole number"}}},
		{name: "lease too short", input: withLimit(`{"algorithm": "concurrency", "max_in_flight": 1, "slot_timeout": "999ms"}`), problems: []problem{{leasePath, `"999ms" is shorter than 1s: slot_timeout is how long a request holds its slot`}}},
		{name: "lease too long", input: withLimit(`{"algorithm": "concurrency", "max_in_flight": 1, "slot_timeout": "25h"}`), problems: []problem{{leasePath, `"25h" is longer than 24h: slot_timeout`}}},
		{name: "the former name lease", input: withLimit(`{"algorithm": "concurrency", "max_in_flight": 1, "lease": "30s"}`), problems: []problem{{"rules[0].limits[0].lease", `lease is now called slot_timeout: write "slot_timeout" instead (e.g. {"algorithm": "concurrency", "max_in_flight": 4, "slot_timeout": "30s"})`}}},
		{name: "lease a number", input: withLimit(`{"algorithm": "concurrency", "max_in_flight": 1, "slot_timeout": 30}`), problems: []problem{{leasePath, "got the number 30, want a string"}}},
		{
			name:  "rate fields on a concurrency limit",
			input: withLimit(`{"algorithm": "concurrency", "max_in_flight": 4, "capacity": 10, "refill_tokens": 1, "refill_interval": "1s", "window": "1m"}`),
			problems: []problem{
				{capacityPath, `capacity does not apply to a "concurrency" limit, which admits max_in_flight requests at once whatever their rate: remove it (use max_in_flight), or add a separate limit such as`},
				{refillTokensPath, `refill_tokens does not apply to a "concurrency" limit`},
				{refillIntervalPath, `refill_interval does not apply to a "concurrency" limit`},
				{windowPath, `window does not apply to a "concurrency" limit`},
			},
		},
		{
			name:     "concurrency fields on a token bucket",
			input:    withLimit(`{"capacity": 10, "refill_tokens": 1, "refill_interval": "1s", "max_in_flight": 4, "slot_timeout": "30s"}`),
			problems: []problem{{maxPath, `max_in_flight belongs to the "concurrency" algorithm, but this limit is a "token_bucket": set "algorithm": "concurrency"`}, {leasePath, `slot_timeout belongs to the "concurrency" algorithm`}},
		},
		{
			name:     "concurrency fields on a window",
			input:    withLimit(`{"algorithm": "fixed_window", "capacity": 10, "window": "1s", "max_in_flight": 4}`),
			problems: []problem{{maxPath, `max_in_flight belongs to the "concurrency" algorithm, but this limit is a "fixed_window"`}},
		},
		{name: "misspelt", input: withLimit(`{"algorithm": "concurency", "max_in_flight": 4}`), problems: []problem{{"rules[0].limits[0].algorithm", `(did you mean "concurrency"?)`}, {capacityPath, "required field is missing"}}},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) { checkParse(t, test.input, test.want, test.problems) })
	}
}
