package config

// Usage makes a rule charge what a response reports it used (LLM tokens, a usage header, the
// body's size) instead of a fixed cost. The rule's limits are charged Reserve when the request is
// admitted; when the response ends, the charge is settled to the reported amount: the difference
// is taken (a token bucket may go into debt, down to minus its capacity) or given back. A response
// whose usage cannot be read is charged Unknown.
type Usage struct {
	Source UsageSource
	// Count chooses the tokens of an OpenAI or Anthropic response: input, output or both.
	Count UsageCount
	// Header is the response header (or trailer) that carries the usage (UsageHeader).
	Header string
	// Reserve is what admission charges, before the response (at least 1).
	Reserve int64
	// Unknown is what a response is charged when its usage cannot be read: none reported, a
	// malformed or compressed body, a client gone before the end. It defaults to Reserve.
	Unknown int64
}

// UsageSource says where a response's usage is read.
type UsageSource uint8

const (
	// UsageOpenAI reads usage.total_tokens (or prompt_tokens, completion_tokens) of an OpenAI
	// JSON response, or of the streamed event that carries usage.
	UsageOpenAI UsageSource = iota + 1
	// UsageAnthropic reads usage.input_tokens and output_tokens of an Anthropic Messages
	// response, or of its message_start and last message_delta events.
	UsageAnthropic
	// UsageHeader reads a whole number in a response header or trailer.
	UsageHeader
	// UsageResponseBytes counts the response body's bytes.
	UsageResponseBytes
)

var usageSourceNames = []string{UsageOpenAI: "openai", UsageAnthropic: "anthropic", UsageHeader: "header", UsageResponseBytes: "response_bytes"}

func (s UsageSource) String() string { return enumString(usageSourceNames, int(s), "UsageSource") }

// ReadsBody reports whether the usage is read from a JSON or event-stream body.
func (s UsageSource) ReadsBody() bool { return s == UsageOpenAI || s == UsageAnthropic }

// UsageCount chooses which tokens of an LLM response are charged.
type UsageCount uint8

const (
	// UsageTotal charges input and output tokens (the default).
	UsageTotal UsageCount = iota
	// UsageInput charges the prompt's (input) tokens.
	UsageInput
	// UsageOutput charges the completion's (output) tokens.
	UsageOutput
)

var usageCountNames = []string{UsageTotal: "total", UsageInput: "input", UsageOutput: "output"}

func (c UsageCount) String() string { return enumString(usageCountNames, int(c), "UsageCount") }

// maxUsage bounds reserve and unknown: usage figures above 2^53 are not read either.
const maxUsage = 1 << 53

var usageFields = []string{"source", "count", "header", "reserve", "unknown"}

const (
	exampleUsage = `{"source": "openai", "reserve": 500}`
	usageShape   = `usage is an object such as ` + exampleUsage + `: the rule's limits are charged what the ` +
		`response reports it used, reserve when the request is admitted and the rest when the response ends`
	usageSourceRule = `source is "openai" (usage.total_tokens of an OpenAI response), "anthropic" (usage.input_tokens + ` +
		`output_tokens of an Anthropic Messages response), "header" (a whole number in the response header or trailer ` +
		`named by "header") or "response_bytes" (the response body's size)`
	usageCountRule   = `count is "total" (the default), "input" (prompt tokens) or "output" (completion tokens)`
	usageReserveRule = `reserve is what a request is charged when it is admitted, before its usage is known: a whole ` +
		`number from 1 to 9007199254740992 (default 1); reserving the most a request can use makes the limit exact`
	usageUnknownRule = `unknown is what a response whose usage cannot be read is charged (none reported, malformed, ` +
		`compressed, a client gone before the end): a whole number from 0 to 9007199254740992 (default: reserve)`
)

// usage reads a rule's usage.
func (v *validator) usage(path string, value *jsonValue) *Usage {
	if !v.wantKind(path, value, kindObject, usageShape) {
		return nil
	}
	v.checkFieldNames(path, value, usageFields)
	u := &Usage{Reserve: 1}
	if source := v.required(value, path, "source", `"openai"`); source != nil {
		if i, ok := v.enum(fieldPath(path, "source"), source, usageSourceNames, "a usage source", usageSourceRule); ok {
			u.Source = UsageSource(i)
		}
	}
	if count := value.member("count"); count != nil {
		countPath := fieldPath(path, "count")
		if i, ok := v.enum(countPath, count, usageCountNames, "a usage count", usageCountRule); ok {
			u.Count = UsageCount(i)
		}
		if u.Source != 0 && !u.Source.ReadsBody() {
			v.add(countPath, `is only for "source": "openai" or "anthropic", which report input and output tokens apart: remove count`)
		}
	}
	header := value.member("header")
	switch {
	case u.Source == UsageHeader && header == nil:
		v.add(fieldPath(path, "header"), `missing: "source": "header" needs the response header that carries the usage, e.g. "header": "x-usage-tokens"`)
	case u.Source == UsageHeader:
		u.Header = v.headerName(fieldPath(path, "header"), header)
	case header != nil && u.Source != 0:
		v.add(fieldPath(path, "header"), `is only for "source": "header": remove it, or write "source": "header"`)
	}
	switch reserve := value.member("reserve"); {
	case reserve == nil:
	case reserve.kind == kindObject && reserve.member("request_field") != nil:
		// Reading it would hold every such request until its body is in; a reserve of the
		// most a request may ask for is exact without that.
		v.add(fieldPath(path, "reserve"), `a reserve read from the request body ({"request_field": ...}) is not `+
			`supported: give the most a request may use as a number (e.g. the largest max_tokens your clients `+
			`send, "reserve": 1000); a smaller one is settled to the usage when the response ends`)
	default:
		u.Reserve, _ = v.wholeNumber(fieldPath(path, "reserve"), reserve, 1, maxUsage, usageReserveRule)
	}
	u.Unknown = u.Reserve
	if unknown := value.member("unknown"); unknown != nil {
		u.Unknown, _ = v.wholeNumber(fieldPath(path, "unknown"), unknown, 0, maxUsage, usageUnknownRule)
	}
	return u
}

// checkUsageFits reports what a rule with usage cannot have: count or refund (the usage is the
// settlement), cost (reserve is the charge at admission), on_limit delay (a debt is not a
// reservation), a concurrency limit (a slot is not an amount), and a reserve above a capacity.
func (v *validator) checkUsageFits(path string, value *jsonValue, rule *Rule) {
	usagePath := fieldPath(path, "usage")
	for _, field := range []string{"count", "refund", "cost"} {
		if value.member(field) != nil {
			v.add(fieldPath(path, field), "a rule with usage cannot have "+field+": "+usageConflict(field))
		}
	}
	if rule.OnLimit.Action == OnLimitDelay {
		v.add(fieldPath(path, "on_limit"), `a rule with usage rejects over its limits: a request's usage is known only `+
			`after it ran, so it cannot be held until its tokens are due; remove on_limit or usage`)
	}
	if rule.HasConcurrency() {
		v.add(usagePath, "a rule with usage cannot have a concurrency limit, which counts requests in flight, not "+
			"amounts: put the concurrency limit in a rule of its own with the same match and key")
	}
	reserve, reservePath := Cost{Units: rule.Usage.Reserve}, fieldPath(usagePath, "reserve")
	v.checkCostFits(reservePath, reserve, false, fieldPath(path, "limits"), rule.Limits)
	if rule.LimitsBy != nil {
		v.checkTierCosts(reservePath, reserve, false, fieldPath(path, "limits_by"), rule.LimitsBy)
	}
}

func usageConflict(field string) string {
	switch field {
	case "cost":
		return "usage.reserve is what admission charges; move the cost there"
	default:
		return "the response's usage settles the charge; put " + field + " in a rule of its own with the same match and key"
	}
}
