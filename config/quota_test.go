package config_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-proxy/tollgate/config"
)

// Long quotas: days and weeks in refill_interval and window up to "366d", and calendar windows.
func TestParseLongQuotas(t *testing.T) {
	const day = 24 * time.Hour
	limitPath := "rules[0].limits[0]"
	tests := []struct {
		name     string
		limit    string
		want     config.Limit
		problems []problem
	}{
		{name: "daily bucket", limit: `{"capacity": 100, "refill_tokens": 100, "refill_interval": "1d"}`,
			want: config.Limit{Capacity: 100, RefillTokens: 100, RefillInterval: day}},
		{name: "weekly bucket", limit: `{"capacity": 5, "refill_tokens": 1, "refill_interval": "1w"}`,
			want: config.Limit{Capacity: 5, RefillTokens: 1, RefillInterval: 7 * day}},
		{name: "366d bucket", limit: `{"capacity": 1000000000, "refill_tokens": 1, "refill_interval": "366d"}`,
			want: config.Limit{Capacity: 1e9, RefillTokens: 1, RefillInterval: 366 * day}},
		{name: "mixed units", limit: `{"capacity": 1, "refill_tokens": 1, "refill_interval": "2w3d12h30m"}`,
			want: config.Limit{Capacity: 1, RefillTokens: 1, RefillInterval: 17*day + 12*time.Hour + 30*time.Minute}},
		{name: "7d window", limit: `{"algorithm": "fixed_window", "capacity": 1000, "window": "7d"}`,
			want: config.Limit{Algorithm: config.FixedWindow, Capacity: 1000, Window: 7 * day}},
		{name: "30d sliding window", limit: `{"algorithm": "sliding_window", "capacity": 1000, "window": "30d"}`,
			want: config.Limit{Algorithm: config.SlidingWindow, Capacity: 1000, Window: 30 * day}},
		{name: "52w window", limit: `{"algorithm": "fixed_window", "capacity": 1, "window": "52w"}`,
			want: config.Limit{Algorithm: config.FixedWindow, Capacity: 1, Window: 364 * day}},
		{name: "hours still work", limit: `{"algorithm": "fixed_window", "capacity": 1, "window": "8784h"}`,
			want: config.Limit{Algorithm: config.FixedWindow, Capacity: 1, Window: 366 * day}},
		{name: "calendar month", limit: `{"algorithm": "fixed_window", "capacity": 100000, "calendar": "month"}`,
			want: config.Limit{Algorithm: config.FixedWindow, Capacity: 100000, Calendar: config.CalendarMonth}},
		{name: "calendar week", limit: `{"algorithm": "fixed_window", "capacity": 7, "calendar": "week"}`,
			want: config.Limit{Algorithm: config.FixedWindow, Capacity: 7, Calendar: config.CalendarWeek}},
		{name: "calendar day", limit: `{"algorithm": "fixed_window", "capacity": 7, "calendar": "day"}`,
			want: config.Limit{Algorithm: config.FixedWindow, Capacity: 7, Calendar: config.CalendarDay}},

		{name: "367d", limit: `{"capacity": 1, "refill_tokens": 1, "refill_interval": "367d"}`,
			problems: []problem{{limitPath + ".refill_interval", `"367d" is longer than "366d": refill_interval is a duration from "1ms" to "366d"`}}},
		{name: "366d and a second", limit: `{"algorithm": "fixed_window", "capacity": 1, "window": "366d1s"}`,
			problems: []problem{{limitPath + ".window", `"366d1s" is longer than "366d"`}}},
		{name: "huge days", limit: `{"algorithm": "fixed_window", "capacity": 1, "window": "99999999999999999999d"}`,
			problems: []problem{{limitPath + ".window", `is not a valid duration (want a whole number of days or weeks`}}},
		{name: "many weeks", limit: `{"algorithm": "fixed_window", "capacity": 1, "window": "9999999999999w"}`,
			problems: []problem{{limitPath + ".window", `"9999999999999w" is longer than "366d"`}}},
		{name: "fractional days", limit: `{"algorithm": "fixed_window", "capacity": 1, "window": "1.5d"}`,
			problems: []problem{{limitPath + ".window", `days and weeks are whole numbers: write "36h" rather than "1.5d"`}}},
		{name: "negative days", limit: `{"algorithm": "fixed_window", "capacity": 1, "window": "-1d"}`,
			problems: []problem{{limitPath + ".window", `want a whole number of days or weeks`}}},
		{name: "a word with a d is no day", limit: `{"capacity": 1, "refill_tokens": 1, "refill_interval": "1 second"}`,
			problems: []problem{{limitPath + ".refill_interval", `"1 second" is not a valid duration: refill_interval is a duration from "1ms"`}}},
		{name: "unit alone", limit: `{"algorithm": "fixed_window", "capacity": 1, "window": "d"}`,
			problems: []problem{{limitPath + ".window", `want a whole number of days or weeks`}}},
		{name: "bad rest", limit: `{"algorithm": "fixed_window", "capacity": 1, "window": "1dx"}`,
			problems: []problem{{limitPath + ".window", `"1dx" is not a valid duration (want whole days (d) and weeks (w) followed by the units ms, s, m and h)`}}},
		{name: "year unit", limit: `{"algorithm": "fixed_window", "capacity": 1, "window": "1y"}`,
			problems: []problem{{limitPath + ".window", `"1y" is not a valid duration: window is a duration from "1ms" to "366d"`}}},

		{name: "calendar and window", limit: `{"algorithm": "fixed_window", "capacity": 1, "calendar": "month", "window": "30d"}`,
			problems: []problem{{limitPath + ".window", `window and calendar are exclusive`}}},
		{name: "calendar on a sliding window", limit: `{"algorithm": "sliding_window", "capacity": 1, "calendar": "month"}`,
			problems: []problem{
				{limitPath + ".calendar", `calendar belongs to "algorithm": "fixed_window", but this limit is a "sliding_window"`},
				{limitPath + ".window", `required field is missing`},
			}},
		{name: "calendar on a token bucket", limit: `{"capacity": 1, "refill_tokens": 1, "refill_interval": "1d", "calendar": "day"}`,
			problems: []problem{{limitPath + ".calendar", `calendar belongs to "algorithm": "fixed_window", but this limit is a token bucket`}}},
		{name: "unknown calendar", limit: `{"algorithm": "fixed_window", "capacity": 1, "calendar": "months"}`,
			problems: []problem{{limitPath + ".calendar", `"months" is not a calendar: calendar is "day", "week" (from Monday) or "month": UTC calendar windows`}}},
		{name: "calendar year", limit: `{"algorithm": "fixed_window", "capacity": 1, "calendar": "year"}`,
			problems: []problem{{limitPath + ".calendar", `"year" is not a calendar`}}},
		{name: "calendar not a string", limit: `{"algorithm": "fixed_window", "capacity": 1, "calendar": 30}`,
			problems: []problem{{limitPath + ".calendar", `got the number 30, want a string: calendar is "day"`}}},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			got, err := config.Parse([]byte(withLimit(test.limit)))
			if test.problems == nil {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				if want := oneRule(test.want); !reflect.DeepEqual(got, want) {
					t.Fatalf("Parse:\n got %+v\nwant %+v", got.Rules[0].Limits, want.Rules[0].Limits)
				}
				return
			}
			var parseErr *config.Error
			if !errors.As(err, &parseErr) {
				t.Fatalf("Parse: got error %v, want *config.Error", err)
			}
			if len(parseErr.Problems) != len(test.problems) {
				t.Fatalf("Parse: got %d problems, want %d: %v", len(parseErr.Problems), len(test.problems), err)
			}
			for i, want := range test.problems {
				p := parseErr.Problems[i]
				if p.Field != want.field || !strings.Contains(p.Message, want.contains) {
					t.Errorf("problem %d:\n got %q: %q\nwant %q containing %q", i, p.Field, p.Message, want.field, want.contains)
				}
			}
		})
	}
}

func TestCalendarString(t *testing.T) {
	for c, want := range map[config.Calendar]string{config.NoCalendar: "", config.CalendarDay: "day", config.CalendarWeek: "week", config.CalendarMonth: "month", 9: "Calendar(9)"} {
		if got := c.String(); got != want {
			t.Errorf("Calendar(%d).String() = %q, want %q", c, got, want)
		}
	}
}
