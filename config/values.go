package config

import (
	"strconv"
	"strings"

	"github.com/tollgate-proxy/tollgate/internal/duration"
)

// wholeNumber reads a whole number from lowest to highest.
func (v *validator) wholeNumber(path string, value *jsonValue, lowest, highest int64, rule string) (int64, bool) {
	if !v.wantKind(path, value, kindNumber, rule+", written without quotes") {
		return 0, false
	}
	count, verdict := parseWholeNumber(value.text, lowest, highest)
	switch verdict {
	case wholeNumberOK:
		return count, true
	case wholeNumberFraction:
		v.add(path, clip(value.text)+" is not a whole number: "+rule)
	case wholeNumberTooSmall:
		v.add(path, clip(value.text)+" is not allowed: "+rule)
	case wholeNumberTooLarge:
		v.add(path, clip(value.text)+" is too large: "+rule)
	}
	return 0, false
}

// durationBounds are what differs between the duration fields: how a duration is parsed, its
// bounds as they are compared and as the messages write them, and the fix for a bare number.
type durationBounds struct {
	parse            func(text string) (duration.Duration, string)
	min, max         duration.Duration
	minText, maxText string
	numberFix        string
}

// durations: from 1ms to 24h.
var durations = durationBounds{parseDuration, minDuration, maxDuration, "1ms", "24h",
	`quote the duration and give it a unit, e.g. "1s" or "500ms"`}

// boundedDuration reads a duration within bounds.
func (v *validator) boundedDuration(path string, value *jsonValue, bounds *durationBounds, rule string) (duration.Duration, bool) {
	if value.kind == kindNumber {
		// Most likely seconds or milliseconds were meant; only a unit says which.
		v.add(path, "got "+describe(value)+", want a string: "+bounds.numberFix)
		return 0, false
	}
	if !v.wantKind(path, value, kindString, rule) {
		return 0, false
	}
	d, problem := bounds.parse(value.text)
	switch {
	case problem != "":
		v.add(path, invalidDuration(value.text, problem, rule))
	case d < bounds.min:
		v.add(path, quoteClipped(value.text)+" is shorter than "+bounds.minText+": "+rule)
	case d > bounds.max:
		v.add(path, quoteClipped(value.text)+" is longer than "+bounds.maxText+": "+rule)
	default:
		return d, true
	}
	return 0, false
}

// durationUnits are the units of every duration field, as the documentation lists them;
// refill_interval and window also take days and weeks (quotaUnits).
const (
	durationUnits = "the units are ms, s, m and h"
	quotaUnits    = "the units are ms, s, m, h, d and w"
)

// parseDuration reads a duration in time.ParseDuration's syntax ("500ms", "1.5s", "1h30m") with
// the units the documentation lists only: ns, us and µs would spell a duration below the 1ms
// every field starts at, or a longer one the long way ("1000us"). problem is "" when text
// parses, else notADuration or what is wrong with it.
func parseDuration(text string) (d duration.Duration, problem string) {
	d, err := duration.Parse(text)
	if err != nil {
		return 0, notADuration
	}
	// Parse succeeded, so the text is numbers and units: these spell only ns, us, µs or μs.
	for _, unit := range []string{"ns", "us", "µs", "μs"} {
		if strings.Contains(text, unit) {
			return 0, durationUnits
		}
	}
	return d, ""
}

// invalidDuration is the problem of a duration parseDuration or parseQuotaDuration refused.
func invalidDuration(text, problem, rule string) string {
	message := quoteClipped(text) + " is not a valid duration"
	if problem != notADuration {
		message += " (" + problem + ")"
	}
	return message + ": " + rule
}

// enum reads a string that must be one of names, returning its index.
// noun names what the value should have been, e.g. "a failure mode".
func (v *validator) enum(path string, value *jsonValue, names []string, noun, rule string) (int, bool) {
	if !v.wantKind(path, value, kindString, rule) {
		return 0, false
	}
	for i, name := range names {
		if value.text == name {
			return i, true
		}
	}
	message := quoteClipped(value.text) + " is not " + noun + ": " + rule
	if suggestion := closestName(value.text, names); suggestion != "" {
		message += " (did you mean " + strconv.Quote(suggestion) + "?)"
	}
	v.add(path, message)
	return 0, false
}

func (v *validator) boolean(path string, value *jsonValue, rule string) bool {
	if !v.wantKind(path, value, kindBool, rule) {
		return false
	}
	return value.boolean
}

// required returns the named member of object, reporting it if absent.
func (v *validator) required(object *jsonValue, path, name, example string) *jsonValue {
	value := object.member(name)
	if value == nil {
		v.add(fieldPath(path, name), "required field is missing: add "+strconv.Quote(name)+": "+example)
	}
	return value
}

// wantKind reports a value of the wrong JSON type, null included.
func (v *validator) wantKind(path string, value *jsonValue, kind jsonKind, fix string) bool {
	if value.kind == kind {
		return true
	}
	v.add(path, "got "+describe(value)+", want "+kindName(kind)+": "+fix)
	return false
}

// memberAt returns the path of object's member name, and the member: nil when object has none.
func memberAt(path string, object *jsonValue, name string) (string, *jsonValue) {
	return fieldPath(path, name), object.member(name)
}

// listItems reads value, a member that may be absent (nil), as a list of 1 to maximum items
// (noun, in the message of a list too long), and returns its items (none when it is no list).
// shape is the fix of a value that is no list, addFix the fix of an empty one. (A loop over what
// it returns costs the module less than a callback per item.)
func (v *validator) listItems(path string, value *jsonValue, maximum int, noun, shape, addFix string) []*jsonValue {
	if value == nil || !v.wantKind(path, value, kindArray, shape) {
		return nil
	}
	v.checkCount(path, len(value.items), maximum, noun, addFix)
	return value.items
}

// checkCount reports an empty list or one with more than max entries.
func (v *validator) checkCount(path string, count, maximum int, noun, addFix string) {
	switch {
	case count == 0:
		v.add(path, "an empty list is not allowed: "+addFix)
	case count > maximum:
		v.add(path, strconv.Itoa(count)+" "+noun+" are too many: at most "+strconv.Itoa(maximum)+" are allowed")
	}
}

// checkFieldNames reports repeated and unknown members of object. Both are
// rejected rather than ignored: a misspelt or repeated field almost always
// means the configuration does not say what its author thinks it says.
func (v *validator) checkFieldNames(path string, object *jsonValue, known []string) {
	for _, name := range object.repeated {
		v.add(fieldPath(path, name), "the field is given more than once in the same object: keep exactly one "+
			"(JSON parsers disagree about which copy wins)")
	}
	for _, member := range object.members {
		if containsString(known, member.name) {
			continue
		}
		if member.name == "lease" && containsString(known, "slot_timeout") {
			// The one renamed field: a concurrency limit's slot_timeout was called lease, which
			// is also a global limit's token lease.
			v.add(fieldPath(path, member.name), `lease is now called slot_timeout: write "slot_timeout" instead (e.g. `+
				exampleConcurrencyLimit+")")
			continue
		}
		message := "unknown field " + quoteClipped(member.name) + ": known fields are " + strings.Join(known, ", ")
		if suggestion := closestName(member.name, known); suggestion != "" {
			message += " (did you mean " + strconv.Quote(suggestion) + "?)"
		}
		v.add(path, message)
	}
}

func containsString(list []string, s string) bool {
	for _, item := range list {
		if item == s {
			return true
		}
	}
	return false
}

// hasUnknownField reports whether object has a member not in known.
func hasUnknownField(object *jsonValue, known []string) bool {
	for _, member := range object.members {
		if !containsString(known, member.name) {
			return true
		}
	}
	return false
}

// boundedString reads a string that must be neither empty nor longer than limit bytes (a name:
// a header, a query parameter, a rule); "" when it is not, with the problem recorded.
func (v *validator) boundedString(path string, value *jsonValue, limit int, rule string) string {
	name, ok := v.nonEmptyString(path, value, rule)
	if ok && len(name) > limit {
		v.add(path, quoteClipped(name)+" is "+strconv.Itoa(len(name))+" bytes long: "+rule)
		return ""
	}
	return name
}

// nonEmptyString reads a string that must not be empty; "" and false when it is not one, with
// the problem recorded.
func (v *validator) nonEmptyString(path string, value *jsonValue, rule string) (string, bool) {
	if !v.wantKind(path, value, kindString, rule) {
		return "", false
	}
	if value.text == "" {
		v.add(path, `"" is not allowed: `+rule)
		return "", false
	}
	return value.text, true
}
