package config

import (
	"strconv"
	"strings"

	"github.com/tollgate-proxy/tollgate/internal/netaddr"
)

// Operator configures the operator endpoint: requests under PathPrefix are answered by the
// filter itself (who is being limited, one key's state, a reset), never forwarded and never
// charged, and only for a peer in ClientCIDRs carrying a bearer token whose SHA-256 is listed.
// A nil Operator (the default) turns the endpoint off.
type Operator struct {
	// PathPrefix starts and ends with '/', e.g. "/.tollgate/".
	PathPrefix string
	// ClientCIDRs are the peers (source.address, never x-forwarded-for) that may ask.
	ClientCIDRs []netaddr.Prefix
	// TokenSHA256 are the SHA-256 digests of the accepted bearer tokens.
	TokenSHA256 [][32]byte
	// RawKeys shows the keys themselves in the top offenders, instead of their hashes.
	RawKeys bool
	// TopKeys is how many keys each rule's top offenders summary keeps.
	TopKeys int
}

// DefaultTopKeys is the size of each rule's top offenders summary.
const DefaultTopKeys = 32

// Bounds of the operator block.
const (
	maxOperatorTokens = 8
	maxTopKeys        = 256
	maxPrefixBytes    = 256
)

// Rules of the operator block's fields.
const (
	operatorShape = `operator is an object such as {"path_prefix": "/.tollgate/", "client_cidrs": ["10.0.0.0/8"], ` +
		`"token_sha256": ["<64 hex digits>"]}`
	pathPrefixRule = `path_prefix is the path the operator endpoint answers under: 2 to 256 bytes starting and ending with '/', ` +
		`of letters, digits and - . _ ~ /, such as "/.tollgate/"`
	operatorCIDRsRule = `client_cidrs lists the peers that may use the operator endpoint, 1 to 64 CIDRs such as ["10.0.0.0/8"]`
	tokenSHA256Rule   = `token_sha256 lists 1 to 8 SHA-256 digests of the accepted bearer tokens, each 64 hex digits, ` +
		`such as printf %s "$TOKEN" | sha256sum prints`
	rawKeysRule = "raw_keys is true (show the keys themselves in the top offenders) or false (their hashes, the default)"
	topKeysRule = "top_keys is how many keys each rule's top offenders summary keeps, a whole number from 1 to 256 (default 32)"
)

// operator reads the operator block; nil when it is invalid (the problems are recorded).
func (v *validator) operator(path string, value *jsonValue) *Operator {
	if !v.wantKind(path, value, kindObject, operatorShape) {
		return nil
	}
	v.checkFieldNames(path, value, operatorFields)
	op := &Operator{TopKeys: DefaultTopKeys}
	if prefix := v.required(value, path, "path_prefix", `"/.tollgate/"`); prefix != nil {
		op.PathPrefix = v.pathPrefix(fieldPath(path, "path_prefix"), prefix)
	}
	if cidrs := v.required(value, path, "client_cidrs", `["10.0.0.0/8"]`); cidrs != nil {
		op.ClientCIDRs = v.clientCIDRs(fieldPath(path, "client_cidrs"), cidrs, operatorCIDRsRule,
			`add the range your operators connect from, such as "10.0.0.0/8"`)
	}
	if tokens := v.required(value, path, "token_sha256", `["<64 hex digits>"]`); tokens != nil {
		op.TokenSHA256 = v.tokenDigests(fieldPath(path, "token_sha256"), tokens)
	}
	if raw := value.member("raw_keys"); raw != nil {
		op.RawKeys = v.boolean(fieldPath(path, "raw_keys"), raw, rawKeysRule)
	}
	if n := value.member("top_keys"); n != nil {
		if count, ok := v.wholeNumber(fieldPath(path, "top_keys"), n, 1, maxTopKeys, topKeysRule); ok {
			op.TopKeys = int(count)
		}
	}
	return op
}

var operatorFields = []string{"path_prefix", "client_cidrs", "token_sha256", "raw_keys", "top_keys"}

// pathPrefix reads the endpoint's path prefix: a plain path, so that no spelling of it needs
// decoding to be recognized.
func (v *validator) pathPrefix(path string, value *jsonValue) string {
	text := v.boundedString(path, value, maxPrefixBytes, pathPrefixRule)
	if text == "" {
		return ""
	}
	switch {
	case len(text) < 2 || text[0] != '/' || text[len(text)-1] != '/':
		v.add(path, quoteClipped(text)+" does not start and end with '/': "+pathPrefixRule)
	case strings.Contains(text, "//"):
		v.add(path, quoteClipped(text)+` has an empty segment ("//"): `+pathPrefixRule)
	default:
		for i := 0; i < len(text); i++ {
			if !isPrefixByte(text[i]) {
				v.add(path, quoteClipped(text)+" has "+strconv.QuoteRune(rune(text[i]))+": "+pathPrefixRule)
				return ""
			}
		}
		return text
	}
	return ""
}

func isPrefixByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~/", c) >= 0
}

// tokenDigests reads the SHA-256 digests of the accepted tokens, in hex.
func (v *validator) tokenDigests(path string, value *jsonValue) [][32]byte {
	var digests [][32]byte
	for i, item := range v.listItems(path, value, maxOperatorTokens, "digests", tokenSHA256Rule, `add one such as the output of "sha256sum token.txt"`) {
		itemPath := indexPath(path, i)
		if !v.wantKind(itemPath, item, kindString, tokenSHA256Rule) {
			continue
		}
		digest, ok := parseDigest(item.text)
		if !ok {
			v.add(itemPath, quoteClipped(item.text)+" is not 64 hex digits: "+tokenSHA256Rule)
			continue
		}
		digests = append(digests, digest)
	}
	return digests
}

// parseDigest reads 64 hex digits, either case.
func parseDigest(text string) (digest [32]byte, ok bool) {
	if len(text) != 64 {
		return digest, false
	}
	for i := range digest {
		hi, okHi := netaddr.HexValue(text[2*i])
		lo, okLo := netaddr.HexValue(text[2*i+1])
		if !okHi || !okLo {
			return digest, false
		}
		digest[i] = hi<<4 | lo
	}
	return digest, true
}

// operatorWarnings flags operator client CIDRs of length 0: anyone who can reach the listener
// is then stopped only by the token.
func operatorWarnings(cfg *Config) []Problem {
	if cfg.Operator == nil {
		return nil
	}
	var warnings []Problem
	for i, p := range cfg.Operator.ClientCIDRs {
		if p.Bits() != 0 {
			continue
		}
		warnings = append(warnings, Problem{
			Field: indexPath("operator.client_cidrs", i),
			Message: strconv.Quote(p.String()) + " lets every peer reach the operator endpoint, where only the token stops it: " +
				`list the ranges your operators connect from, e.g. "10.0.0.0/8"`,
		})
	}
	return warnings
}
