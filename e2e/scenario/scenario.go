package scenario

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Config is the plugin configuration both runs load: three requests per API key, then one more
// per minute. The refill is slow on purpose: a real Envoy runs on a real clock, and no token may
// come back between two steps of the scenario.
const Config = `{
  "rules": [
    {
      "name": "per-api-key",
      "key": [{"header": "x-api-key"}],
      "limits": [{"capacity": 3, "refill_tokens": 1, "refill_interval": "1m"}]
    }
  ]
}`

// Rule is the name of Config's only rule; per-rule counters carry it.
const Rule = "per-api-key"

// KeyHeader is the request header Config keys on.
const KeyHeader = "x-api-key"

// Path is the path every step requests.
const Path = "/scenario?step=1"

// UpstreamBody is what the upstream answers every request with. A response with exactly this body
// reached the upstream; Tollgate's own replies never carry it.
const UpstreamBody = "hello from the upstream\n"

// Upstream is the upstream of the in-process run; the Envoy run's upstream container
// (e2e/envoy/upstream.yaml) answers the same.
func Upstream() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("content-type", "text/plain")
		_, _ = io.WriteString(w, UpstreamBody)
	})
}

// Step is one request of the scenario and what the client must see.
type Step struct {
	Name string
	// Key is the x-api-key header's value; "" sends the request without it.
	Key string
	// Status is the response status.
	Status int
	// RetryAfter is the Retry-After of a 429 in whole seconds, exact when the clock does not move
	// between steps. Responses of any other status must not carry the header.
	RetryAfter int
	// BodyContains must occur in the response body.
	BodyContains string
	// ReachesUpstream says whether the request must reach the upstream (its body is UpstreamBody)
	// or be answered by Tollgate (any other body).
	ReachesUpstream bool
}

// Steps is the scenario: a key spends its burst and is limited, with Retry-After, and stays
// limited without being charged for the rejections; a second key is unaffected; a request
// without a key is refused. Nothing in it depends on the response headers Tollgate adds to
// admitted requests, which are optional.
var Steps = []Step{
	{Name: "alice, 1st of 3", Key: "alice", Status: 200, BodyContains: UpstreamBody, ReachesUpstream: true},
	{Name: "alice, 2nd of 3", Key: "alice", Status: 200, BodyContains: UpstreamBody, ReachesUpstream: true},
	{Name: "alice, 3rd of 3", Key: "alice", Status: 200, BodyContains: UpstreamBody, ReachesUpstream: true},
	{Name: "alice over the limit", Key: "alice", Status: 429, RetryAfter: 60, BodyContains: "Too Many Requests"},
	{Name: "alice still over the limit", Key: "alice", Status: 429, RetryAfter: 60, BodyContains: "Too Many Requests"},
	{Name: "bob has his own bucket", Key: "bob", Status: 200, BodyContains: UpstreamBody, ReachesUpstream: true},
	{Name: "no key", Status: 401, BodyContains: KeyHeader},
}

// Clock says how far a run's clock may move between steps.
type Clock int

const (
	// FrozenClock does not move (the in-process host's manual clock): Retry-After is exact.
	FrozenClock Clock = iota
	// RealClock moves (a real Envoy): Retry-After may be lower than with a frozen clock, as
	// the bucket refills meanwhile, but never above it and at least 1.
	RealClock
)

// Response is what a step saw.
type Response struct {
	Status     int
	RetryAfter string // "" when absent
	Body       string
}

// Run sends every step to baseURL in order and checks each response. It returns every mismatch,
// one per step, joined; a request that fails outright stops the run.
func Run(ctx context.Context, client *http.Client, baseURL string, clock Clock) error {
	var mismatches []error
	for i, step := range Steps {
		got, err := step.Send(ctx, client, baseURL)
		if err != nil {
			return fmt.Errorf("step %d (%s): %w", i+1, step.Name, err)
		}
		if err := step.Check(got, clock); err != nil {
			mismatches = append(mismatches, fmt.Errorf("step %d (%s): %w", i+1, step.Name, err))
		}
	}
	return errors.Join(mismatches...)
}

// Send sends the step's request and reads the whole response.
func (s Step) Send(ctx context.Context, client *http.Client, baseURL string) (Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(baseURL, "/")+Path, nil)
	if err != nil {
		return Response{}, err
	}
	if s.Key != "" {
		req.Header.Set(KeyHeader, s.Key)
	}
	resp, err := client.Do(req)
	if err != nil {
		return Response{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return Response{}, fmt.Errorf("read the body: %w", err)
	}
	return Response{Status: resp.StatusCode, RetryAfter: resp.Header.Get("Retry-After"), Body: string(body)}, nil
}

// Check compares a response with the step, naming everything that differs.
func (s Step) Check(got Response, clock Clock) error {
	var problems []string
	if got.Status != s.Status {
		problems = append(problems, fmt.Sprintf("status %d, want %d", got.Status, s.Status))
	}
	if problem := s.checkRetryAfter(got.RetryAfter, clock); problem != "" {
		problems = append(problems, problem)
	}
	if !strings.Contains(got.Body, s.BodyContains) {
		problems = append(problems, fmt.Sprintf("body %q does not contain %q", got.Body, s.BodyContains))
	}
	if reached := got.Body == UpstreamBody; reached != s.ReachesUpstream {
		if s.ReachesUpstream {
			problems = append(problems, "the request did not reach the upstream")
		} else {
			problems = append(problems, "the request reached the upstream; Tollgate should have answered it")
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return errors.New(strings.Join(problems, "; "))
}

func (s Step) checkRetryAfter(header string, clock Clock) string {
	if s.Status != http.StatusTooManyRequests {
		if header != "" {
			return fmt.Sprintf("Retry-After %q on a %d response", header, s.Status)
		}
		return ""
	}
	seconds, err := strconv.Atoi(header)
	switch {
	case header == "":
		return "no Retry-After on a 429"
	case err != nil:
		return fmt.Sprintf("Retry-After %q is not a whole number of seconds", header)
	case clock == FrozenClock && seconds != s.RetryAfter:
		return fmt.Sprintf("Retry-After %d, want %d", seconds, s.RetryAfter)
	case clock == RealClock && (seconds < 1 || seconds > s.RetryAfter):
		return fmt.Sprintf("Retry-After %d, want 1 to %d", seconds, s.RetryAfter)
	}
	return ""
}
