package config

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/tollgate-proxy/tollgate/internal/duration"
	"github.com/tollgate-proxy/tollgate/internal/netaddr"
)

// Config is a validated plugin configuration.
type Config struct {
	Rules       []Rule
	FailureMode FailureMode // default FailureAllow
	// ClientIP says how the client address is found, for client_ip key parts and CIDR
	// exemptions.
	ClientIP ClientIP
	// Exempt requests are never limited and consume no tokens.
	Exempt Exemptions
	// Shadow makes every rule a shadow rule (see Rule.Shadow).
	Shadow bool
	// Response is what a rejected request gets.
	Response Response
	// RateLimitHeaders selects the rate-limit headers added to responses; off by default.
	RateLimitHeaders HeaderStyle
	// KeyTable bounds the shared memory the buckets take.
	KeyTable KeyTable
	// EscapedSlashes says what happens to a request whose path spells a separator as %2F or %5C.
	EscapedSlashes EscapedSlashes
	// Operator configures the operator endpoint (operator.go); nil when it is off.
	Operator *Operator
}

// EscapedSlashes is the policy for paths with %2F or %5C, which some upstreams read as
// separators and others do not.
type EscapedSlashes uint8

const (
	// EscapedSlashesAllow lets such requests through, matched under every reading of the path
	// (the default): a limit applies if any reading matches it, an exemption only if every
	// reading is exempt.
	EscapedSlashesAllow EscapedSlashes = iota
	// EscapedSlashesReject answers them with 400, as Envoy's path_with_escaped_slashes_action
	// REJECT_REQUEST does.
	EscapedSlashesReject
)

var escapedSlashesNames = [...]string{EscapedSlashesAllow: "allow", EscapedSlashesReject: "reject"}

// String returns the spelling used in the JSON configuration.
func (e EscapedSlashes) String() string {
	return enumString(escapedSlashesNames[:], int(e), "EscapedSlashes")
}

// enumString is the spelling of an enum value in the JSON configuration, from names, or the
// type's name with the number for a value that has none.
func enumString(names []string, value int, typeName string) string {
	if value < len(names) && names[value] != "" {
		return names[value]
	}
	return typeName + "(" + strconv.Itoa(value) + ")"
}

// KeyTable configures the fixed table of slots that holds every bucket in Envoy's shared data,
// which has no delete: its size bounds the memory, whatever keys clients send.
type KeyTable struct {
	// MaxKeys is the number of slots: at most this many (rule, limit, key) buckets exist at once.
	MaxKeys int
	// WhenFull is what happens to a request of a new key whose row has no free slot (each holds
	// another key's bucket that is still in use).
	WhenFull WhenFull
	// MaxKeyBytes is the longest partition key (its values added up) kept as it is; a longer key
	// is replaced by a keyed 128-bit hash of it and limited like any other.
	MaxKeyBytes int
}

// WhenFull is the policy for a request of a new key whose row has no free slot.
// Whatever it is, such a key never spends another key's tokens.
type WhenFull uint8

const (
	// WhenFullReject answers as over the limit, with Retry-After until a slot of the key's row
	// frees up: a key whose row other active keys hold is turned away for as long as they stay
	// active.
	WhenFullReject WhenFull = iota
	// WhenFullOverflow charges one overflow bucket per rule and limit, shared by every key in
	// that case (the default): a flood of new keys throttles itself, the buckets in use stay
	// exact, and a legitimate new key arriving during a flood shares the flood's bucket.
	WhenFullOverflow
	// WhenFullAllow lets the request through uncounted.
	WhenFullAllow
)

// Defaults of the key table.
const (
	DefaultMaxKeys     = 100_000
	DefaultMaxKeyBytes = 1024
)

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
func (w WhenFull) String() string {
	return enumString(whenFullNames[:], int(w), "WhenFull")
}

// String returns the spelling used in the JSON configuration.
func (m FailureMode) String() string {
	return enumString(failureModeNames, int(m), "FailureMode")
}

// ClientIP configures how the client address is derived.
type ClientIP struct {
	// XFFNumTrustedHops is 0 to use the connection's address (source.address) only. N > 0 takes
	// the Nth address from the right of x-forwarded-for: the N entries nearest Envoy were
	// written by trusted proxies, so a client cannot change its address by adding entries on
	// the left. With fewer than N entries, source.address is used.
	XFFNumTrustedHops int
	// IPv4Prefix and IPv6Prefix are how many leading bits of the client address a client_ip key
	// part keeps (defaults 32 and 128: the whole address). One IPv6 client usually owns a whole
	// /64, so per-address keys would give it 2^64 buckets; 64 groups them again. A key part's
	// own prefixes, when given, take precedence. Exemptions compare the whole address.
	IPv4Prefix, IPv6Prefix int
}

// Defaults of the client address grouping: the whole address.
const (
	DefaultIPv4Prefix = 32
	DefaultIPv6Prefix = 128
)

// Exemptions are requests that bypass every rule. A request matching any entry is exempt.
type Exemptions struct {
	Paths       []PathMatch
	ClientCIDRs []netaddr.Prefix
	Headers     []HeaderMatch
}

// PathMatch matches the request path without its query string. Exactly one field is set.
type PathMatch struct {
	Exact  string
	Prefix string
}

// HeaderMatchKind is what a HeaderMatch checks.
type HeaderMatchKind uint8

const (
	// HeaderPresent: the header is present (any value).
	HeaderPresent HeaderMatchKind = iota + 1
	// HeaderAbsent: the header is absent.
	HeaderAbsent
	// HeaderExact: the header's first value equals Value.
	HeaderExact
)

var headerMatchKindNames = [...]string{HeaderPresent: "present", HeaderAbsent: "absent", HeaderExact: "exact"}

// String returns "present", "absent" or "exact".
func (k HeaderMatchKind) String() string {
	return enumString(headerMatchKindNames[:], int(k), "HeaderMatchKind")
}

// HeaderMatch checks one request header.
type HeaderMatch struct {
	Name  string // lower-cased
	Kind  HeaderMatchKind
	Value string // HeaderExact
}

// Match selects the requests a rule applies to; every set condition must hold. The zero Match
// matches every request.
type Match struct {
	Path    *PathMatch    // nil: any path
	Methods []string      // upper-case; empty: any method
	Hosts   []string      // lower-case, compared with the request's host without its port; empty: any
	Headers []HeaderMatch // all must hold
}

// Rule is one named rate limit: requests it matches that produce the same Key share the limits
// described by Limits, and a request must pass all of them.
type Rule struct {
	Name       string
	Match      Match
	Key        []KeyPart
	MissingKey MissingKey
	Limits     []Limit
	// LimitsBy, when set instead of Limits, chooses the limits by a tier (see LimitsBy).
	LimitsBy *LimitsBy
	Cost     Cost
	// Shadow rules decide and count as usual but never reject: a request they would have
	// limited goes through, marked for the upstream and counted as shadow-limited.
	Shadow bool
	// Global, when set, also checks requests the rule's limits admit with a rate limit service
	// shared by every replica.
	Global *Global
	// Count, when set, makes the rule charge a request only if its response status is in the
	// set; Refund, when set, gives an admitted request's charge back if it is. At most one is
	// set, and neither with Global. Both charge at admission and settle at the response.
	Count, Refund *Statuses
	// OnLimit says whether a request over the rule's limits is rejected or held (onlimit.go).
	OnLimit OnLimit
	// Usage, when set, charges what the response reports instead of a fixed cost (usage.go):
	// Cost is then Usage.Reserve.
	Usage *Usage
}

// KeyKind says where a KeyPart takes its value from. The zero value is
// deliberately invalid so that an unset KeyPart is never mistaken for one.
type KeyKind uint8

const (
	// KeyHeader takes the value of a request header.
	KeyHeader KeyKind = iota + 1
	// KeyClientIP takes the address of the downstream client (see Config.ClientIP).
	KeyClientIP
	// KeyPath takes the request path without the query string.
	KeyPath
	// KeyMethod takes the request method.
	KeyMethod
	// KeyAuthority takes the request's host (:authority) in its canonical spelling: lower-cased,
	// without a trailing dot, the port without leading zeros and without the scheme's default
	// port (or without any port, with StripPort).
	KeyAuthority
	// KeyQuery takes the first value of one query parameter, percent-decoded.
	KeyQuery
	// KeyAttribute takes an Envoy attribute (proxy_get_property), such as xds.route_name.
	KeyAttribute
)

// keyKindNames are the key part fields of the JSON configuration, by kind.
var keyKindNames = [...]string{
	KeyHeader: "header", KeyClientIP: "client_ip", KeyPath: "path", KeyMethod: "method",
	KeyAuthority: "authority", KeyQuery: "query", KeyAttribute: "attribute",
}

// String returns the key part's field name in the JSON configuration, such as "client_ip".
func (k KeyKind) String() string {
	return enumString(keyKindNames[:], int(k), "KeyKind")
}

// KeyPart is one component of a rule's bucket key.
type KeyPart struct {
	Kind      KeyKind
	Header    string   // KeyHeader: the header name, lower-cased
	Query     string   // KeyQuery: the parameter name
	Attribute []string // KeyAttribute: the property path, e.g. ["xds", "route_name"]
	// KeyClientIP: the leading bits of the address kept in the key; 0 takes the top-level
	// client_ip setting (Config.ClientIP).
	IPv4Prefix, IPv6Prefix int
	// KeyAuthority: key on the host alone, whatever the port.
	StripPort bool
}

// MissingKeyAction is what happens to a request a rule's key cannot be built for.
type MissingKeyAction uint8

const (
	// MissingKeyReject answers with MissingKey.Status (401 by default).
	MissingKeyReject MissingKeyAction = iota
	// MissingKeyAllow lets the request through; the rule does not apply to it.
	MissingKeyAllow
	// MissingKeyFallback uses MissingKey.Fallback as the key instead (tiered keys: the user id
	// when there is one, else the client address). If that key is missing too, the request
	// is rejected with Status.
	MissingKeyFallback
)

var missingKeyActionNames = [...]string{MissingKeyReject: "reject", MissingKeyAllow: "allow", MissingKeyFallback: "fallback"}

// String returns the spelling used in the JSON configuration.
func (a MissingKeyAction) String() string {
	return enumString(missingKeyActionNames[:], int(a), "MissingKeyAction")
}

// MissingKey configures requests without the rule's key.
type MissingKey struct {
	Action   MissingKeyAction
	Status   int       // default 401
	Fallback []KeyPart // MissingKeyFallback
}

// Algorithm is how a limit counts.
type Algorithm uint8

const (
	// TokenBucket holds up to Capacity tokens and gains RefillTokens every RefillInterval,
	// continuously (the default).
	TokenBucket Algorithm = iota
	// FixedWindow admits Capacity units per Window, windows aligned on the host's monotonic
	// clock; the count starts again at each window's start.
	FixedWindow
	// SlidingWindow estimates the units of the last Window as the current window's count plus
	// the previous window's count weighted by how much of it the sliding window still covers.
	SlidingWindow
	// Concurrency admits at most MaxInFlight requests of a key between their admission and
	// the end of their stream; a slot whose end is never seen is freed after Lease.
	Concurrency
)

var algorithmNames = [...]string{TokenBucket: "token_bucket", FixedWindow: "fixed_window", SlidingWindow: "sliding_window",
	Concurrency: "concurrency"}

// String returns the spelling used in the JSON configuration.
func (a Algorithm) String() string {
	return enumString(algorithmNames[:], int(a), "Algorithm")
}

// Limit is one limit of a rule. TokenBucket uses Capacity, RefillTokens and RefillInterval; the
// window algorithms use Capacity and Window; Concurrency uses MaxInFlight and Lease.
type Limit struct {
	Algorithm      Algorithm
	Capacity       int64
	RefillTokens   int64
	RefillInterval duration.Duration
	Window         duration.Duration
	// Calendar, on a FixedWindow instead of Window, aligns its windows on UTC days, weeks or
	// months of the wall clock.
	Calendar    Calendar
	MaxInFlight int64
	SlotTimeout duration.Duration
}

// Cost is how many units a request takes from each limit of its rule.
type Cost struct {
	// Units is the fixed cost (default 1), or, when Header is set, the cost of a request
	// without that header.
	Units int64
	// Header, when set, names a request header whose value (a whole number) is the cost;
	// values above Max count as Max and values below 1, negative ones included, as 1 (the
	// client chooses the number). A value that is not a whole number gets a 400.
	Header string
	Max    int64
}

// HeaderStyle selects the rate-limit headers on responses.
type HeaderStyle uint8

const (
	// HeadersOff adds none (the default); Retry-After is always sent on rejections.
	HeadersOff HeaderStyle = iota
	// HeadersDraft adds RateLimit-Policy and RateLimit (draft-ietf-httpapi-ratelimit-headers).
	HeadersDraft
	// HeadersXRateLimit adds X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset.
	HeadersXRateLimit
)

var headerStyleNames = [...]string{HeadersOff: "off", HeadersDraft: "draft", HeadersXRateLimit: "x-ratelimit"}

// String returns the spelling used in the JSON configuration.
func (s HeaderStyle) String() string {
	return enumString(headerStyleNames[:], int(s), "HeaderStyle")
}

// Response is the reply to a rejected request.
type Response struct {
	Status      int    // default 429
	Body        string // "{retry_after}" is replaced with the Retry-After seconds
	ContentType string // default "text/plain; charset=utf-8"
	Headers     [][2]string
	// GrpcStatus is the gRPC status (1 to 16) of a rejected gRPC request; 0 when not set, which
	// means DefaultGrpcStatus (see RejectionGrpcStatus).
	GrpcStatus int
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

// MaxSize is the largest configuration accepted, in bytes (1 MiB). A configuration holds rules,
// not data: the largest valid one, every list at its maximum, is far smaller. Refusing a larger
// one before parsing bounds the memory a hostile or mistaken document can take, in the module and
// in the CLI.
const MaxSize = 1 << 20

// ErrTooLarge is the error for a configuration of more than MaxSize bytes.
var ErrTooLarge = &Error{Problems: []Problem{{Message: "the configuration is larger than 1 MiB (1048576 bytes), " +
	"the most Tollgate reads: a configuration holds rules, not data; check that this is the file meant"}}}

// Parse decodes and validates. On failure it returns a *Error listing every
// problem found (not just the first).
func Parse(data []byte) (*Config, error) {
	if len(data) > MaxSize {
		return nil, ErrTooLarge
	}
	if problem := encodingProblem(data); problem != "" {
		return nil, &Error{Problems: []Problem{{Message: problem}}}
	}
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

// encodingProblem names a document that is not plain UTF-8: a byte-order mark, or UTF-16 or
// UTF-32 text, which JSON in a configuration is never meant to be (RFC 8259 §8.1); "" otherwise.
func encodingProblem(data []byte) string {
	const resave = ": save the file as UTF-8 without a byte-order mark"
	switch {
	case bytes.HasPrefix(data, []byte{0xef, 0xbb, 0xbf}):
		return "the configuration starts with a UTF-8 byte-order mark (EF BB BF), which JSON does not allow" + resave
	case bytes.HasPrefix(data, []byte{0xff, 0xfe, 0, 0}), bytes.HasPrefix(data, []byte{0, 0, 0xfe, 0xff}):
		return "the configuration is UTF-32 text (its byte-order mark is " + hexBytes(data[:4]) + ")" + resave
	case bytes.HasPrefix(data, []byte{0xff, 0xfe}), bytes.HasPrefix(data, []byte{0xfe, 0xff}):
		return "the configuration is UTF-16 text (its byte-order mark is " + hexBytes(data[:2]) + ")" + resave
	case len(data) >= 2 && (data[0] == 0) != (data[1] == 0):
		// JSON text starts with an ASCII character: a NUL next to it is UTF-16 or UTF-32.
		return "the configuration is UTF-16 or UTF-32 text without a byte-order mark (NUL bytes between its characters)" + resave
	}
	return ""
}

func hexBytes(b []byte) string {
	const digits = "0123456789ABCDEF"
	out := make([]byte, 0, 3*len(b))
	for i, c := range b {
		if i > 0 {
			out = append(out, ' ')
		}
		out = append(out, digits[c>>4], digits[c&0xf])
	}
	return string(out)
}
