package config

import (
	"strconv"
	"strings"
)

// maxProblems bounds how many problems are listed, so that a document with
// thousands of mistakes (or a generated one gone wrong) produces a readable
// error and a bounded log line rather than megabytes.
const maxProblems = 100

// validator walks a decoded document, building the Config and collecting
// every problem rather than stopping at the first.
type validator struct {
	problems []Problem
	unlisted int // problems found beyond maxProblems
}

func (v *validator) add(field, message string) {
	if len(v.problems) >= maxProblems {
		v.unlisted++
		return
	}
	v.problems = append(v.problems, Problem{Field: field, Message: message})
}

// addContains records that text contains r, which it may not: text clipped and quoted,
// "contains", r quoted, then rest (the explanation).
func (v *validator) addContains(path, text string, r rune, rest string) {
	v.add(path, quoteClipped(text)+" contains "+strconv.QuoteRune(r)+rest)
}

// count is how many problems have been found so far, listed or not; callers
// compare counts to learn whether a part of the document was valid.
func (v *validator) count() int {
	return len(v.problems) + v.unlisted
}

// result returns the problems found, ending with a note of how many were
// not listed, if any.
func (v *validator) result() []Problem {
	if v.unlisted == 0 {
		return v.problems
	}
	return append(v.problems, Problem{Message: "and " + strconv.Itoa(v.unlisted) +
		" more problems not listed: fix the ones above and check again"})
}

// closestName returns the known name within two edits of name, if any,
// to catch typos such as "capcity" and camelCase such as "refillTokens".
func closestName(name string, known []string) string {
	if len(name) > 64 {
		return ""
	}
	best, bestDistance := "", 3
	for _, candidate := range known {
		if d := editDistance(strings.ToLower(name), candidate); d < bestDistance {
			best, bestDistance = candidate, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance over bytes:
// insertions, deletions, substitutions and adjacent transpositions.
func editDistance(a, b string) int {
	previous2 := make([]int, len(b)+1)
	previous := make([]int, len(b)+1)
	current := make([]int, len(b)+1)
	for j := range previous {
		previous[j] = j
	}
	for i := 1; i <= len(a); i++ {
		current[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			current[j] = min(previous[j]+1, current[j-1]+1, previous[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				current[j] = min(current[j], previous2[j-2]+1)
			}
		}
		previous2, previous, current = previous, current, previous2
	}
	return previous[len(b)]
}

func fieldPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func indexPath(path string, index int) string {
	return path + "[" + strconv.Itoa(index) + "]"
}

// describe names a value's type together with the value itself, for
// "got ..., want ..." messages.
func describe(value *jsonValue) string {
	switch value.kind {
	case kindNull:
		return "null"
	case kindBool:
		return strconv.FormatBool(value.boolean)
	case kindNumber:
		return "the number " + clip(value.text)
	case kindString:
		return "the string " + quoteClipped(value.text)
	case kindArray:
		return "an array"
	default:
		return "an object"
	}
}

func kindName(kind jsonKind) string {
	switch kind {
	case kindNull:
		return "null"
	case kindBool:
		return "true or false"
	case kindNumber:
		return "a number"
	case kindString:
		return "a string"
	case kindArray:
		return "an array"
	default:
		return "an object"
	}
}

// maxQuotedLength bounds how much of a value a message repeats, so that a
// huge value cannot make a huge error.
const maxQuotedLength = 40

// clip shortens s to maxQuotedLength runes, marking the cut with "...".
func clip(s string) string {
	count := 0
	for i := range s {
		if count == maxQuotedLength {
			return s[:i] + "..."
		}
		count++
	}
	return s
}

func quoteClipped(s string) string {
	return strconv.Quote(clip(s))
}

// quotedList quotes names and joins them for a sentence: `both "a" and "b"`
// for two, `"a", "b" and "c"` for more.
func quotedList(names []string) string {
	quoted := make([]string, len(names))
	for i, name := range names {
		quoted[i] = strconv.Quote(name)
	}
	if len(quoted) == 2 {
		return "both " + quoted[0] + " and " + quoted[1]
	}
	return strings.Join(quoted[:len(quoted)-1], ", ") + " and " + quoted[len(quoted)-1]
}

// countWord spells out the small numbers of parts a message can mention.
func countWord(n int) string {
	words := []string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight"}
	if n < len(words) {
		return words[n]
	}
	return strconv.Itoa(n)
}
