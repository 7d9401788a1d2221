package config

import "strconv"

// Warnings lists what is valid in a configuration but most likely not what its author meant, one
// Problem per finding, naming the field. They never make a configuration invalid: `tollgate
// check` prints them and still exits 0.
func Warnings(cfg *Config) []Problem {
	var warnings []Problem
	for i, h := range cfg.Exempt.Headers {
		if h.Name == "" || envoyRemovesFromClients(h.Name) {
			continue
		}
		var what string
		switch h.Kind {
		case HeaderAbsent:
			what = "a client that leaves " + h.Name + " out of its requests skips every limit"
		case HeaderPresent:
			what = "a client can send " + h.Name + " itself, with any value, and skip every limit"
		default:
			what = "a client can send " + h.Name + ": " + strconv.Quote(h.Value) + " itself and skip every limit"
		}
		warnings = append(warnings, Problem{
			Field: indexPath("exempt.headers", i),
			Message: what + ": exempt on a header only if a proxy in front of Envoy removes or overwrites it " +
				`on every client request (x-envoy-internal, which Envoy removes from external requests with "use_remote_address: true", is safe)`,
		})
	}
	warnings = append(warnings, cidrWarnings(cfg)...)
	warnings = appendRuleWarnings(warnings, cfg, tierWarnings)
	warnings = appendRuleWarnings(warnings, cfg, usageWarnings)
	warnings = append(warnings, operatorWarnings(cfg)...)
	return warnings
}

// appendRuleWarnings appends what check finds in each rule, rule by rule; check is given the
// rule's path.
func appendRuleWarnings(warnings []Problem, cfg *Config, check func(path string, r *Rule) []Problem) []Problem {
	for i := range cfg.Rules {
		warnings = append(warnings, check(indexPath("rules", i), &cfg.Rules[i])...)
	}
	return warnings
}

// usageWarnings flags the rules with usage whose usage may go unread: a header the response
// cannot carry as such, or an unknown that charges an unread response no more than its reserve
// (a client that hangs up before the usage arrives pays only that).
func usageWarnings(rulePath string, r *Rule) []Problem {
	u := r.Usage
	if u == nil {
		return nil
	}
	var warnings []Problem
	path := rulePath + ".usage"
	switch h := u.Header; {
	case u.Source != UsageHeader:
	case h != "" && h[0] == ':', h == "connection", h == "transfer-encoding", h == "keep-alive", h == "upgrade", h == "te":
		warnings = append(warnings, Problem{Field: path + ".header", Message: strconv.Quote(h) +
			" is not a header an upstream's response carries to a filter (a pseudo-header or a hop-by-hop header): " +
			"every response would be charged unknown; name the header the upstream writes the usage in"})
	}
	if u.Source != UsageResponseBytes && u.Unknown <= u.Reserve {
		warnings = append(warnings, Problem{Field: path + ".unknown", Message: "a response whose usage cannot be read " +
			"is charged " + strconv.FormatInt(u.Unknown, 10) + ", no more than the reserve: a client that hangs up " +
			"before the usage arrives (or streams without asking for it) pays only that; set unknown to what a " +
			"request can use at most, e.g. the max_tokens your clients may ask for"})
	}
	return warnings
}

// cidrWarnings flags the exempt client CIDRs of length 0, which hold every address of their
// family ("0.0.0.0/0", "::/0", "::ffff:0:0/96"): every client exempt, no limit left.
func cidrWarnings(cfg *Config) []Problem {
	var warnings []Problem
	for i, p := range cfg.Exempt.ClientCIDRs {
		if p.Bits() != 0 {
			continue
		}
		family := "IPv6"
		if p.Addr().Is4() {
			family = "IPv4"
		}
		warnings = append(warnings, Problem{
			Field: indexPath("exempt.client_cidrs", i),
			Message: strconv.Quote(p.String()) + " holds every " + family + " address, so every client that connects over " +
				family + " skips every limit: list only the ranges of trusted callers, e.g. \"10.0.0.0/8\"",
		})
	}
	return warnings
}

// envoyRemovesFromClients reports whether Envoy itself removes a header from requests of
// external clients at the edge (use_remote_address: true), so that only trusted hops can set it:
// x-envoy-internal is set by Envoy alone (Envoy's docs/root/configuration/http/http_conn_man/
// header_sanitizing.rst lists it among the headers sanitized from external requests).
func envoyRemovesFromClients(name string) bool {
	return name == "x-envoy-internal"
}
