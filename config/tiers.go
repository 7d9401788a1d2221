package config

import (
	"strconv"
	"strings"
)

// LimitsBy gives a rule its limits by tier: the value of one key part names the tier whose
// limits apply, and a request without that value, or with a value that names no tier, gets the
// Default tier's. The tier value must come from a source the client cannot set (a header an
// auth filter writes, metadata read through an attribute): a client that chooses it chooses
// its own limits.
//
// Every tier's limit at position i is one bucket of the key: a key that changes tier carries
// its state over (docs/configuration.md, "Tiers"), so it never gains tokens by switching.
type LimitsBy struct {
	Part    KeyPart
	Default int    // index in Tiers
	Tiers   []Tier // in document order
}

// Tier is one named set of limits of a LimitsBy.
type Tier struct {
	Name   string
	Limits []Limit
}

// LimitPositions is the number of limit positions of the rule: its limits, or the most limits
// any of its tiers has.
func (r *Rule) LimitPositions() int {
	if r.LimitsBy == nil {
		return len(r.Limits)
	}
	n := 0
	for _, t := range r.LimitsBy.Tiers {
		n = max(n, len(t.Limits))
	}
	return n
}

// Bounds of limits_by.
const (
	maxTiers          = 64
	maxTierNameLength = 256
	// maxListedTiers bounds the tier names a message lists.
	maxListedTiers = 16
)

var limitsByFields = []string{"part", "default", "tiers"}

const (
	exampleLimitsBy = `{"part": {"header": "x-plan"}, "default": "free", "tiers": {"free": [` + exampleLimit +
		`], "pro": [{"capacity": 100, "refill_tokens": 10, "refill_interval": "1s"}]}}`
	limitsByShape = `limits_by is an object with "part" (the key part whose value names the tier), ` +
		`"default" (the tier of requests without that value or with an unknown one) and "tiers", e.g. ` + exampleLimitsBy
	tiersRule = `tiers is an object of 1 to 64 tiers, each a name (1 to 256 bytes) and its 1 to 8 limits, ` +
		`e.g. {"free": [` + exampleLimit + `]}`
	tierDefaultRule = `default is the name of the tier whose limits apply to a request without the part's value ` +
		`or with a value that names no tier`
)

// ruleLimits reads a rule's limits or limits_by, exactly one of which must be given.
func (v *validator) ruleLimits(path string, value *jsonValue, rule *Rule) {
	limits, limitsBy := value.member("limits"), value.member("limits_by")
	switch {
	case limits != nil && limitsBy != nil:
		v.add(path, `has both "limits" and "limits_by": a rule takes exactly one, `+
			`so remove "limits" to give every tier its own limits, or remove "limits_by" to limit every request alike`)
	case limits == nil && limitsBy == nil:
		v.add(fieldPath(path, "limits"), "required field is missing: add \"limits\": ["+exampleLimit+
			"], or \"limits_by\": "+exampleLimitsBy+" to choose the limits by a tier")
	case limits != nil:
		rule.Limits = v.limits(fieldPath(path, "limits"), limits)
	default:
		rule.LimitsBy = v.limitsBy(fieldPath(path, "limits_by"), limitsBy)
	}
}

func (v *validator) limitsBy(path string, value *jsonValue) *LimitsBy {
	if !v.wantKind(path, value, kindObject, limitsByShape) {
		return nil
	}
	v.checkFieldNames(path, value, limitsByFields)
	by := &LimitsBy{}
	if part := v.required(value, path, "part", `{"header": "x-plan"}`); part != nil {
		by.Part = v.keyPart(fieldPath(path, "part"), part)
	}
	tiersPath := fieldPath(path, "tiers")
	if tiers := v.required(value, path, "tiers", `{"free": [`+exampleLimit+`]}`); tiers != nil &&
		v.wantKind(tiersPath, tiers, kindObject, tiersRule) {
		for _, name := range tiers.repeated {
			v.add(fieldPath(tiersPath, name), "the tier is given more than once: keep exactly one "+
				"(JSON parsers disagree about which copy wins)")
		}
		switch n := len(tiers.members); {
		case n == 0:
			v.add(tiersPath, `an empty object is not allowed: `+tiersRule)
		case n > maxTiers:
			v.add(tiersPath, strconv.Itoa(n)+" tiers are too many: at most "+strconv.Itoa(maxTiers)+" are allowed")
		}
		for _, member := range tiers.members {
			tierPath := fieldPath(tiersPath, clip(member.name))
			if member.name == "" || len(member.name) > maxTierNameLength {
				v.add(tierPath, "the tier name "+quoteClipped(member.name)+" is "+strconv.Itoa(len(member.name))+
					" bytes long: a tier name is the part's value that selects it, 1 to 256 bytes")
			}
			by.Tiers = append(by.Tiers, Tier{Name: member.name, Limits: v.limits(tierPath, member.value)})
		}
	}
	by.Default = -1
	if name := v.required(value, path, "default", `"free"`); name != nil && v.wantKind(fieldPath(path, "default"), name, kindString, tierDefaultRule) {
		for i, t := range by.Tiers {
			if t.Name == name.text {
				by.Default = i
			}
		}
		if by.Default < 0 && len(by.Tiers) > 0 {
			var names []string
			for i, t := range by.Tiers {
				if i == maxListedTiers {
					names = append(names, "and "+strconv.Itoa(len(by.Tiers)-i)+" more")
					break
				}
				names = append(names, strconv.Quote(clip(t.Name)))
			}
			message := quoteClipped(name.text) + " is not one of the tiers (" + strings.Join(names, ", ") + "): " + tierDefaultRule
			if len(by.Tiers) <= maxListedTiers {
				tierNames := make([]string, len(by.Tiers))
				for i, t := range by.Tiers {
					tierNames[i] = t.Name
				}
				if suggestion := closestName(name.text, tierNames); suggestion != "" {
					message += " (did you mean " + strconv.Quote(suggestion) + "?)"
				}
			}
			v.add(fieldPath(path, "default"), message)
		}
	}
	return by
}

// checkTierCosts reports a cost that exceeds a capacity of one of the tiers' limits.
func (v *validator) checkTierCosts(path string, cost Cost, fromHeader bool, limitsByPath string, by *LimitsBy) {
	for _, t := range by.Tiers {
		v.checkCostFits(path, cost, fromHeader, fieldPath(fieldPath(limitsByPath, "tiers"), t.Name), t.Limits)
	}
}

// tierWarnings warns of a rule whose tier comes from something the client sends.
func tierWarnings(rulePath string, r *Rule) []Problem {
	if r.LimitsBy == nil {
		return nil
	}
	var what string
	switch p := r.LimitsBy.Part; p.Kind {
	case KeyHeader:
		if envoyRemovesFromClients(p.Header) {
			return nil
		}
		what = "the tier is read from the request header " + p.Header + ", which a client can send itself with the name " +
			"of the most generous tier: use it only if an auth filter before Tollgate sets or overwrites it on every request " +
			"(jwt_authn's claim_to_headers, an ext_authz response header), or read the tier from metadata with " +
			`{"attribute": ["metadata", ...]}`
	case KeyQuery, KeyPath, KeyMethod, KeyAuthority:
		what = "the tier is read from the request's " + p.Kind.String() + ", which the client chooses: any client can " +
			"name the most generous tier; read it from a header an auth filter writes or from metadata " +
			`with {"attribute": [...]}`
	default:
		return nil
	}
	return []Problem{{Field: fieldPath(fieldPath(rulePath, "limits_by"), "part"), Message: what}}
}
