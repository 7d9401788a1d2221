package rls

import (
	"math"
	"strings"
	"testing"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// What AppendRequest writes is what the generated code reads, for every shape Tollgate sends.
func TestRequestDecodesWithTheGeneratedType(t *testing.T) {
	tests := []struct {
		name    string
		domain  string
		entries []Entry
		hits    uint32
	}{
		{"rule and key", "tollgate", []Entry{{"rule", "per-api-key"}, {"key", "0123456789abcdef0123456789abcdef"}}, 1},
		{"constants first", "edge", []Entry{{"env", "prod"}, {"tenant", "acme"}, {"rule", "r"}, {"key", "k"}}, 7},
		{"no hits addend", "d", []Entry{{"rule", "r"}}, 0},
		{"largest cost", "d", []Entry{{"rule", "r"}}, 1_000_000_000},
		{"long values need multi-byte lengths", strings.Repeat("d", 300), []Entry{{strings.Repeat("k", 200), strings.Repeat("v", 70000)}}, 1},
		{"empty value kept out", "d", []Entry{{"rule", ""}}, 1},
		{"unicode", "dömäin", []Entry{{"ключ", "値"}}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			encoded := AppendRequest(nil, tt.domain, tt.entries, tt.hits)
			var got rlsv3.RateLimitRequest
			if err := proto.Unmarshal(encoded, &got); err != nil {
				t.Fatalf("the generated type refuses it: %v", err)
			}
			want := &rlsv3.RateLimitRequest{Domain: tt.domain, HitsAddend: tt.hits,
				Descriptors: []*commonv3.RateLimitDescriptor{{}}}
			for _, e := range tt.entries {
				want.Descriptors[0].Entries = append(want.Descriptors[0].Entries,
					&commonv3.RateLimitDescriptor_Entry{Key: e.Key, Value: e.Value})
			}
			if !proto.Equal(want, &got) {
				t.Fatalf("decoded %v, want %v", &got, want)
			}
			// The generated marshaller writes the same bytes (fields in number order, proto3
			// defaults left out), so the encoding is canonical.
			canonical, err := proto.MarshalOptions{Deterministic: true}.Marshal(want)
			if err != nil {
				t.Fatal(err)
			}
			if string(canonical) != string(encoded) {
				t.Fatalf("encoded %x, the generated code writes %x", encoded, canonical)
			}
		})
	}
}

// Appending reuses the caller's buffer and leaves what was there.
func TestAppendRequestAppends(t *testing.T) {
	buf := append(make([]byte, 0, 256), "prefix"...)
	out := AppendRequest(buf, "d", []Entry{{"rule", "r"}}, 1)
	if !strings.HasPrefix(string(out), "prefix") || &out[0] != &buf[0] {
		t.Fatal("AppendRequest did not append to the given buffer")
	}
}

func status(code rlsv3.RateLimitResponse_Code, perUnit uint32, unit rlsv3.RateLimitResponse_RateLimit_Unit, remaining uint32, reset *durationpb.Duration) *rlsv3.RateLimitResponse_DescriptorStatus {
	s := &rlsv3.RateLimitResponse_DescriptorStatus{Code: code, LimitRemaining: remaining, DurationUntilReset: reset}
	if perUnit > 0 || unit != 0 {
		s.CurrentLimit = &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: perUnit, Unit: unit, Name: "the limit"}
	}
	return s
}

// What the generated code writes, DecodeResponse reads, including fields Tollgate skips.
func TestResponseFromTheGeneratedType(t *testing.T) {
	tests := []struct {
		name string
		msg  *rlsv3.RateLimitResponse
		want Response
	}{
		{"empty message", &rlsv3.RateLimitResponse{}, Response{}},
		{"ok", &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK,
			Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{status(rlsv3.RateLimitResponse_OK, 10, rlsv3.RateLimitResponse_RateLimit_MINUTE, 9, durationpb.New(42*time.Second))}},
			Response{OverallCode: CodeOK, Statuses: 1, Status: Status{Code: CodeOK, RequestsPerUnit: 10, Unit: UnitMinute, LimitRemaining: 9, DurationUntilReset: 42 * time.Second, HasReset: true}}},
		{"over limit with a fraction of a second", &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OVER_LIMIT,
			Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{status(rlsv3.RateLimitResponse_OVER_LIMIT, 3, rlsv3.RateLimitResponse_RateLimit_HOUR, 0, &durationpb.Duration{Seconds: 12, Nanos: 500_000_000})}},
			Response{OverallCode: CodeOverLimit, Statuses: 1, Status: Status{Code: CodeOverLimit, RequestsPerUnit: 3, Unit: UnitHour, DurationUntilReset: 12500 * time.Millisecond, HasReset: true}}},
		{"week, the unit out of order", &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK,
			Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{status(rlsv3.RateLimitResponse_OK, 1, rlsv3.RateLimitResponse_RateLimit_WEEK, 0, nil)}},
			Response{OverallCode: CodeOK, Statuses: 1, Status: Status{Code: CodeOK, RequestsPerUnit: 1, Unit: UnitWeek}}},
		{"only the first status is kept", &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OVER_LIMIT,
			Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{
				status(rlsv3.RateLimitResponse_OVER_LIMIT, 5, rlsv3.RateLimitResponse_RateLimit_SECOND, 0, durationpb.New(time.Second)),
				status(rlsv3.RateLimitResponse_OK, 9, rlsv3.RateLimitResponse_RateLimit_DAY, 8, durationpb.New(time.Hour)),
			}},
			Response{OverallCode: CodeOverLimit, Statuses: 2, Status: Status{Code: CodeOverLimit, RequestsPerUnit: 5, Unit: UnitSecond, DurationUntilReset: time.Second, HasReset: true}}},
		{"unknown enum values read as unknown", &rlsv3.RateLimitResponse{OverallCode: 9,
			Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{status(7, 1, 99, 0, nil)}},
			Response{OverallCode: CodeUnknown, Statuses: 1, Status: Status{Code: CodeUnknown, RequestsPerUnit: 1, Unit: UnitUnknown}}},
		{"headers, body and metadata skipped", &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK,
			RawBody: []byte("body"), Quota: &rlsv3.RateLimitResponse_Quota{Requests: 3}},
			Response{OverallCode: CodeOK}},
		{"negative duration", &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OVER_LIMIT,
			Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{status(rlsv3.RateLimitResponse_OVER_LIMIT, 0, 0, 0, &durationpb.Duration{Seconds: -3, Nanos: -5})}},
			Response{OverallCode: CodeOverLimit, Statuses: 1, Status: Status{Code: CodeOverLimit, DurationUntilReset: -3*time.Second - 5, HasReset: true}}},
		{"duration beyond time.Duration saturates", &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OVER_LIMIT,
			Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{status(rlsv3.RateLimitResponse_OVER_LIMIT, 0, 0, 0, &durationpb.Duration{Seconds: math.MaxInt64})}},
			Response{OverallCode: CodeOverLimit, Statuses: 1, Status: Status{Code: CodeOverLimit, DurationUntilReset: math.MaxInt64, HasReset: true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			encoded, err := proto.Marshal(tt.msg)
			if err != nil {
				t.Fatal(err)
			}
			got, err := DecodeResponse(encoded)
			if err != nil {
				t.Fatalf("DecodeResponse(%x): %v", encoded, err)
			}
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// Broken messages are refused, never misread.
func TestMalformedResponsesAreRefused(t *testing.T) {
	for _, tt := range []struct{ name, hex string }{
		{"truncated varint", "08"},
		{"truncated length", "12"},
		{"length beyond the end", "1205"},
		{"varint longer than 64 bits", "08ffffffffffffffffff7f"},
		{"field number 0", "0001"},
		{"group without its end", "0b"},
		{"end of a group that never started", "0c"},
		{"group ended by another field number", "0b14"},
		{"truncated fixed64", "0901020304"},
		{"broken nested status", "120108"},
		{"broken duration", "1204220208"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := DecodeResponse(unhex(t, tt.hex)); err == nil {
				t.Fatalf("%s was accepted", tt.hex)
			}
		})
	}
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	var b []byte
	for i := 0; i+1 < len(s); i += 2 {
		var v byte
		for _, c := range s[i : i+2] {
			v <<= 4
			switch {
			case '0' <= c && c <= '9':
				v |= byte(c - '0')
			default:
				v |= byte(c-'a') + 10
			}
		}
		b = append(b, v)
	}
	return b
}

func TestUnitSeconds(t *testing.T) {
	want := map[Unit]int64{UnitUnknown: 0, UnitSecond: 1, UnitMinute: 60, UnitHour: 3600, UnitDay: 86400,
		UnitWeek: 604800, UnitMonth: 2592000, UnitYear: 31536000, UnitWeek + 1: 0, 255: 0}
	for u, s := range want {
		if got := u.Seconds(); got != s {
			t.Errorf("%d.Seconds() = %d, want %d", u, got, s)
		}
	}
}

// The codes' names are the protocol's; a code it does not define is UNKNOWN.
func TestCodeString(t *testing.T) {
	for c := range Code(255) {
		want := "UNKNOWN"
		if c <= CodeOverLimit {
			want = rlsv3.RateLimitResponse_Code(c).String()
		}
		if got := c.String(); got != want {
			t.Errorf("Code(%d).String() = %q, want %q", c, got, want)
		}
	}
}

// FuzzDecodeResponse: any bytes decode or are refused without a panic, and whatever the
// generated code accepts, DecodeResponse accepts and reads the same way.
func FuzzDecodeResponse(f *testing.F) {
	for _, msg := range []*rlsv3.RateLimitResponse{
		{},
		{OverallCode: rlsv3.RateLimitResponse_OVER_LIMIT, Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{
			status(rlsv3.RateLimitResponse_OVER_LIMIT, 3, rlsv3.RateLimitResponse_RateLimit_HOUR, 0, &durationpb.Duration{Seconds: 12, Nanos: 5})}},
		{OverallCode: rlsv3.RateLimitResponse_OK, RawBody: []byte("x"), Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{
			status(rlsv3.RateLimitResponse_OK, 10, rlsv3.RateLimitResponse_RateLimit_MINUTE, 9, durationpb.New(time.Minute))}},
	} {
		b, err := proto.Marshal(msg)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := DecodeResponse(b)
		var ref rlsv3.RateLimitResponse
		if proto.Unmarshal(b, &ref) != nil {
			return
		}
		if err != nil {
			t.Fatalf("the generated code reads %x, DecodeResponse refuses it: %v", b, err)
		}
		if got.OverallCode != code(uint64(ref.GetOverallCode())) || got.Statuses != len(ref.GetStatuses()) {
			t.Fatalf("%x: got %+v, the generated code reads %v", b, got, &ref)
		}
		if got.Statuses == 0 {
			return
		}
		s := ref.GetStatuses()[0]
		want := Status{Code: code(uint64(s.GetCode())), RequestsPerUnit: s.GetCurrentLimit().GetRequestsPerUnit(),
			LimitRemaining: s.GetLimitRemaining(), HasReset: s.GetDurationUntilReset() != nil}
		if u := s.GetCurrentLimit().GetUnit(); u >= 0 && u <= 7 {
			want.Unit = Unit(u)
		}
		if d := s.GetDurationUntilReset(); d != nil {
			want.DurationUntilReset = protobufDuration(d.GetSeconds(), int64(d.GetNanos()))
		}
		if got.Status != want {
			t.Fatalf("%x: first status %+v, the generated code reads %+v", b, got.Status, want)
		}
	})
}

// Every unit has its name, read back in any case, and a length; nothing else is a unit.
func TestUnitNames(t *testing.T) {
	names := UnitNames()
	if len(names) != 7 {
		t.Fatalf("%d unit names, want 7: %v", len(names), names)
	}
	var last int64
	for _, name := range names {
		for _, spelling := range []string{name, strings.ToUpper(name), strings.ToUpper(name[:1]) + name[1:]} {
			if u, ok := UnitNamed(spelling); !ok || u.Seconds() <= last {
				t.Errorf("UnitNamed(%q) = %d, %t; want a unit longer than the one before (%d s)", spelling, u, ok, last)
			}
		}
		u, _ := UnitNamed(name)
		last = u.Seconds()
	}
	for _, name := range []string{"", "seconds", "fortnight", "sec", "unknown"} {
		if u, ok := UnitNamed(name); ok {
			t.Errorf("UnitNamed(%q) = %d, want no unit", name, u)
		}
	}
}
