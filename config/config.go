package config

import (
	"strconv"
	"strings"
	"time"
)

// Config is a validated plugin configuration.
type Config struct {
	Rules       []Rule
	FailureMode FailureMode // default FailureAllow
}

// FailureMode says what to do with a request when the limiter itself fails,
// for example when shared memory cannot be read or updated.
type FailureMode uint8

const (
	// FailureAllow lets the request through: a broken limiter must not take
	// the service down with it.
	FailureAllow FailureMode = iota
	// FailureDeny rejects the request: for limits that protect something
	// more important than availability.
	FailureDeny
)

// String returns the spelling used in the JSON configuration.
func (m FailureMode) String() string {
	switch m {
	case FailureAllow:
		return "allow"
	case FailureDeny:
		return "deny"
	}
	return "FailureMode(" + strconv.Itoa(int(m)) + ")"
}

// Rule is one named rate limit: requests that produce the same Key share
// the token buckets described by Limits, and a request must pass all of them.
type Rule struct {
	Name   string
	Key    []KeyPart
	Limits []Limit
}

// KeyKind says where a KeyPart takes its value from. The zero value is
// deliberately invalid so that an unset KeyPart is never mistaken for one.
type KeyKind uint8

const (
	// KeyHeader takes the value of a request header.
	KeyHeader KeyKind = iota + 1
	// KeyClientIP takes the address of the downstream client.
	KeyClientIP
)

// KeyPart is one component of a rule's bucket key.
type KeyPart struct {
	Kind   KeyKind
	Header string // KeyHeader: the header name, lower-cased
}

// Limit is a token bucket: it holds up to Capacity tokens and gains
// RefillTokens tokens every RefillInterval; each request takes one token.
type Limit struct {
	Capacity       int64
	RefillTokens   int64
	RefillInterval time.Duration
}

// Problem is one thing wrong with a configuration document.
type Problem struct {
	Field   string // path such as "rules[0].limits[1].refill_interval" ("" for the document itself)
	Message string // what is wrong with which value, and the fix
}

// String returns "field: message", or just the message for the document.
func (p Problem) String() string {
	if p.Field == "" {
		return p.Message
	}
	return p.Field + ": " + p.Message
}

// Error is returned by Parse for a document that is not a valid
// configuration. It lists every problem found so that a user can fix them
// all in one go rather than one per deploy; past 100, a final Problem with
// an empty Field counts the rest.
type Error struct{ Problems []Problem }

// Error joins the problems with "; ". Callers that want one line per
// problem use Problems.
func (e *Error) Error() string {
	if e == nil || len(e.Problems) == 0 {
		return "invalid configuration"
	}
	lines := make([]string, len(e.Problems))
	for i, problem := range e.Problems {
		lines[i] = problem.String()
	}
	return strings.Join(lines, "; ")
}

// Parse decodes and validates. On failure it returns a *Error listing every
// problem found (not just the first).
func Parse(data []byte) (*Config, error) {
	root, syntax := decodeDocument(data)
	if syntax != nil {
		return nil, &Error{Problems: []Problem{*syntax}}
	}
	var v validator
	cfg := v.document(root)
	if problems := v.result(); len(problems) > 0 {
		return nil, &Error{Problems: problems}
	}
	return cfg, nil
}
