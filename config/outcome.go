package config

import (
	"strconv"
)

// Statuses is a set of HTTP response statuses: exact codes and whole classes.
type Statuses struct {
	// Codes are exact statuses, 100 to 599, as listed ("401").
	Codes []int
	// Classes are whole classes by their first digit, 1 to 5, as listed ("4xx" is 4).
	Classes []int
}

// Match reports whether status is in the set. A status outside 100..599 (0 for a stream that
// ended without a response) matches nothing.
func (s *Statuses) Match(status int) bool {
	if status < 100 || status > 599 {
		return false
	}
	for _, c := range s.Codes {
		if c == status {
			return true
		}
	}
	for _, c := range s.Classes {
		if c == status/100 {
			return true
		}
	}
	return false
}

// String lists the statuses as they are written in the configuration, exact codes first:
// "401, 403, 5xx".
func (s *Statuses) String() string {
	var b []byte
	for _, c := range s.Codes {
		if len(b) > 0 {
			b = append(b, ", "...)
		}
		b = strconv.AppendInt(b, int64(c), 10)
	}
	for _, c := range s.Classes {
		if len(b) > 0 {
			b = append(b, ", "...)
		}
		b = append(b, byte('0'+c), 'x', 'x')
	}
	return string(b)
}

// maxStatuses bounds the entries of a statuses list.
const maxStatuses = 32

var outcomeFields = []string{"statuses"}

// Rules of the outcome fields, quoted in their problems.
const (
	countShape = `count is an object such as {"statuses": ["401", "403"]}: the rule charges a request only ` +
		`when its response has one of these statuses`
	refundShape = `refund is an object such as {"statuses": ["5xx"]}: an admitted request whose response has ` +
		`one of these statuses gets its charge back`
	statusEntryRule = `a status is an exact code from "100" to "599" such as "401", or a class such as "4xx" ` +
		`("1xx" to "5xx"), written as a string`
	countAndRefund = `a rule has count or refund, not both: count lists the statuses that are charged, so ` +
		`leave out of it the statuses refund would give back`
)

// outcomes reads a rule's count and refund, once the rest of the rule is read.
func (v *validator) outcomes(path string, value *jsonValue, rule *Rule) {
	count, refund := value.member("count"), value.member("refund")
	if count != nil {
		rule.Count = v.statusesField(fieldPath(path, "count"), count, countShape)
	}
	if refund != nil {
		rule.Refund = v.statusesField(fieldPath(path, "refund"), refund, refundShape)
	}
	switch {
	case count != nil && refund != nil:
		v.add(fieldPath(path, "refund"), countAndRefund)
	case count != nil && rule.Global != nil:
		v.add(fieldPath(path, "count"), outcomeWithGlobalMessage("count"))
	case refund != nil && rule.Global != nil:
		v.add(fieldPath(path, "refund"), outcomeWithGlobalMessage("refund"))
	}
}

func outcomeWithGlobalMessage(field string) string {
	return "a rule with a global limit cannot have " + field + ": the rate limit service is charged when the " +
		"request is admitted and cannot give a charge back, so the global limit would still count every request; " +
		"put the global limit in a rule of its own (with the same match and key) and keep " + field + " on this one"
}

// statusesField reads {"statuses": [...]}.
func (v *validator) statusesField(path string, value *jsonValue, shape string) *Statuses {
	if !v.wantKind(path, value, kindObject, shape) {
		return nil
	}
	v.checkFieldNames(path, value, outcomeFields)
	list := v.required(value, path, "statuses", `["401", "403"]`)
	if list == nil {
		return nil
	}
	listPath := fieldPath(path, "statuses")
	if !v.wantKind(listPath, list, kindArray, shape) {
		return nil
	}
	v.checkCount(listPath, len(list.items), maxStatuses, "statuses", `list at least one status, e.g. ["401"] or ["5xx"]`)
	s := &Statuses{}
	for i, item := range list.items {
		itemPath := indexPath(listPath, i)
		code, class, ok := v.statusEntry(itemPath, item)
		switch {
		case !ok:
		case class > 0 && containsInt(s.Classes, class):
			v.add(itemPath, quoteClipped(item.text)+" is listed twice: keep one")
		case class > 0:
			s.Classes = append(s.Classes, class)
		case containsInt(s.Codes, code):
			v.add(itemPath, quoteClipped(item.text)+" is listed twice: keep one")
		default:
			s.Codes = append(s.Codes, code)
		}
	}
	// An exact code its class already covers says nothing more, and probably not what was meant.
	for i, item := range list.items {
		if item.kind != kindString || len(item.text) != 3 || !isDigitString(item.text) {
			continue
		}
		if code, _ := strconv.Atoi(item.text); containsInt(s.Classes, code/100) {
			v.add(indexPath(listPath, i), strconv.Quote(item.text)+" is already in "+
				strconv.Quote(strconv.Itoa(code/100)+"xx")+", also listed: keep one")
		}
	}
	return s
}

// statusEntry reads one status: an exact code (class 0) or a class (code 0).
func (v *validator) statusEntry(path string, value *jsonValue) (code, class int, ok bool) {
	if value.kind == kindNumber {
		v.add(path, "got "+describe(value)+", want a string: quote the status, e.g. \""+clip(value.text)+"\"; "+statusEntryRule)
		return 0, 0, false
	}
	if !v.wantKind(path, value, kindString, statusEntryRule) {
		return 0, 0, false
	}
	text := value.text
	if len(text) == 3 && '1' <= text[0] && text[0] <= '5' {
		rest := text[1:]
		switch {
		case rest == "xx" || rest == "XX":
			return 0, int(text[0] - '0'), true
		case isDigitString(rest):
			n, _ := strconv.Atoi(text)
			return n, 0, true
		}
	}
	v.add(path, quoteClipped(text)+" is not a status: "+statusEntryRule)
	return 0, 0, false
}

func isDigitString(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func containsInt(list []int, n int) bool {
	for _, item := range list {
		if item == n {
			return true
		}
	}
	return false
}
