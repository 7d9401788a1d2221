package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
)

// The endpoint's replies, as the operator commands read them for their human output.

type topReply struct {
	CoversMs int64 `json:"covers_ms"`
	Rules    []struct {
		Rule       string `json:"rule"`
		Rejections int64  `json:"rejections"`
		ErrorBound int64  `json:"error_bound"`
		Keys       []struct {
			KeyHash string  `json:"key_hash"`
			Key     *string `json:"key"`
			AtLeast int64   `json:"limited_at_least"`
			AtMost  int64   `json:"limited_at_most"`
		} `json:"keys"`
	} `json:"rules"`
}

type keysReply struct {
	Rules []struct {
		Rule    string       `json:"rule"`
		KeyHash string       `json:"key_hash"`
		Tier    string       `json:"tier"`
		Limits  []limitReply `json:"limits"`
	} `json:"rules"`
	Skipped []struct {
		Rule   string `json:"rule"`
		Reason string `json:"reason"`
	} `json:"skipped"`
}

type limitReply struct {
	Limit     int    `json:"limit"`
	Algorithm string `json:"algorithm"`
	Bucket    bool   `json:"bucket"`
	Capacity  int64  `json:"capacity"`
	Remaining int64  `json:"remaining"`
	Tokens    int64  `json:"tokens"`
	Debt      int64  `json:"debt"`
	Count     int64  `json:"count"`
	Previous  int64  `json:"previous"`
	InFlight  int64  `json:"in_flight"`
	NextMs    int64  `json:"next_refill_ms"`
	WholeMs   int64  `json:"whole_ms"`
	Written   bool   `json:"written"`
	Skipped   string `json:"skipped"`
}

// printOperatorReply reads a reply and writes it for people, unless quiet; looked is false for a
// key operation that found no rule whose key takes the key given.
func printOperatorReply(name string, body []byte, w io.Writer, quiet bool) (looked bool, err error) {
	if name == "top" {
		var top topReply
		if err := decodeStrict(body, &top); err != nil {
			return false, err
		}
		if !quiet {
			printTop(&top, w)
		}
		return true, nil
	}
	var keys keysReply
	if err := decodeStrict(body, &keys); err != nil {
		return false, err
	}
	if !quiet {
		printKeys(&keys, name == "reset", w)
	}
	return len(keys.Rules) > 0, nil
}

func printTop(top *topReply, w io.Writer) {
	covers := (time.Duration(top.CoversMs) * time.Millisecond).Round(time.Second)
	for _, r := range top.Rules {
		fmt.Fprintf(w, "rule %s: %d rejection(s) in the last %s", r.Rule, r.Rejections, covers)
		if r.ErrorBound > 0 {
			fmt.Fprintf(w, " (each count within %d)", r.ErrorBound)
		}
		fmt.Fprintln(w)
		if len(r.Keys) == 0 {
			continue
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  KEY\tLIMITED")
		for _, k := range r.Keys {
			key := "key#" + k.KeyHash
			if k.Key != nil {
				key = printableKey(*k.Key) + " (" + key + ")"
			}
			count := fmt.Sprint(k.AtLeast)
			if k.AtMost != k.AtLeast {
				count = fmt.Sprintf("%d to %d", k.AtLeast, k.AtMost)
			}
			fmt.Fprintf(tw, "  %s\t%s\n", key, count)
		}
		tw.Flush()
	}
}

func printKeys(keys *keysReply, reset bool, w io.Writer) {
	for _, r := range keys.Rules {
		tier := ""
		if r.Tier != "" {
			tier = ", tier " + r.Tier
		}
		fmt.Fprintf(w, "rule %s (key#%s%s):\n", r.Rule, r.KeyHash, tier)
		for _, l := range r.Limits {
			fmt.Fprintf(w, "  limit %d %s: %s\n", l.Limit, l.Algorithm, describeLimitState(&l, reset))
		}
	}
	for _, s := range keys.Skipped {
		fmt.Fprintf(w, "rule %s: not looked at: %s\n", s.Rule, s.Reason)
	}
}

// describeLimitState is one limit's line.
func describeLimitState(l *limitReply, reset bool) string {
	var parts []string
	switch {
	case reset && l.Skipped != "":
		parts = append(parts, "left alone: "+l.Skipped)
	case reset && l.Written:
		parts = append(parts, "reset")
	}
	if !l.Bucket {
		return strings.Join(append(parts, fmt.Sprintf("no bucket: whole (%d of %d)", l.Capacity, l.Capacity)), "; ")
	}
	switch l.Algorithm {
	case "concurrency":
		parts = append(parts, fmt.Sprintf("%d of %d slot(s) in flight", l.InFlight, l.Capacity))
	case "token_bucket":
		state := fmt.Sprintf("%d of %d token(s) left", max(l.Remaining, 0), l.Capacity)
		if l.Debt > 0 {
			state += fmt.Sprintf(", %d owed to held requests", l.Debt)
		}
		parts = append(parts, state)
	case "sliding_window":
		parts = append(parts, fmt.Sprintf("%d of %d left, %d counted (previous window %d)", max(l.Remaining, 0), l.Capacity, l.Count, l.Previous))
	default:
		parts = append(parts, fmt.Sprintf("%d of %d left, %d counted", max(l.Remaining, 0), l.Capacity, l.Count))
	}
	if l.NextMs > 0 {
		parts = append(parts, "next in "+formatMs(l.NextMs))
	}
	if l.WholeMs > 0 {
		parts = append(parts, "whole in "+formatMs(l.WholeMs))
	}
	return strings.Join(parts, ", ")
}

// printableKey is a key as a client sent it, quoted when it holds anything but printable
// characters: a key must not move the operator's cursor or recolour their terminal.
func printableKey(key string) string {
	if strings.IndexFunc(key, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return strconv.Quote(key)
	}
	return key
}

func formatMs(ms int64) string { return (time.Duration(ms) * time.Millisecond).String() }
