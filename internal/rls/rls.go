// Package rls encodes the request and decodes the response of Envoy's rate limit service
// protocol, envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit, by hand: it is linked
// into the module, where a protobuf runtime would cost megabytes of code and memory in every VM
// for two small messages (measured on the module: protobuf-go's runtime with its smallest
// generated type adds 3.6 MB, go-control-plane's generated types for the protocol 24 MB; the
// whole global-limit feature with this package added 0.13 MB).
//
// Only what Tollgate sends and reads is covered (field numbers from envoy/service/ratelimit/v3/
// rls.proto and envoy/extensions/common/ratelimit/v3/ratelimit.proto):
//
//	RateLimitRequest     domain = 1 (string), descriptors = 2 (repeated RateLimitDescriptor),
//	                     hits_addend = 3 (uint32)
//	RateLimitDescriptor  entries = 1 (repeated Entry)
//	Entry                key = 1 (string), value = 2 (string)
//	RateLimitResponse    overall_code = 1 (enum Code), statuses = 2 (repeated DescriptorStatus)
//	DescriptorStatus     code = 1, current_limit = 2 (RateLimit), limit_remaining = 3 (uint32),
//	                     duration_until_reset = 4 (google.protobuf.Duration)
//	RateLimit            requests_per_unit = 1 (uint32), unit = 2 (enum Unit), name = 3 (string)
//	Duration             seconds = 1 (int64), nanos = 2 (int32)
//
// Every other field of a response is skipped, as protobuf parsers skip unknown fields. The
// tests check both directions against the generated types of go-control-plane.
package rls

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"

	"github.com/tollgate-proxy/tollgate/internal/duration"
	"github.com/tollgate-proxy/tollgate/internal/wire"
)

// The gRPC service and method of the protocol, as proxy_grpc_call takes them.
const (
	Service = "envoy.service.ratelimit.v3.RateLimitService"
	Method  = "ShouldRateLimit"
)

// Entry is one entry of a rate limit descriptor.
type Entry struct{ Key, Value string }

// AppendRequest appends a RateLimitRequest for one descriptor to dst. hitsAddend 0 is not sent,
// and the service then counts 1: the protocol has no way to ask for 0.
func AppendRequest(dst []byte, domain string, entries []Entry, hitsAddend uint32) []byte {
	dst = appendString(dst, 1, domain)
	descriptor := 0
	for _, e := range entries {
		n := entrySize(e)
		descriptor += 1 + varintSize(uint64(n)) + n
	}
	dst = appendTag(dst, 2, wire.ProtoBytes)
	dst = binary.AppendUvarint(dst, uint64(descriptor))
	for _, e := range entries {
		dst = appendTag(dst, 1, wire.ProtoBytes)
		dst = binary.AppendUvarint(dst, uint64(entrySize(e)))
		dst = appendString(dst, 1, e.Key)
		dst = appendString(dst, 2, e.Value)
	}
	if hitsAddend != 0 {
		dst = appendTag(dst, 3, wire.ProtoVarint)
		dst = binary.AppendUvarint(dst, uint64(hitsAddend))
	}
	return dst
}

func entrySize(e Entry) int {
	size := 0
	if e.Key != "" {
		size += 1 + varintSize(uint64(len(e.Key))) + len(e.Key)
	}
	if e.Value != "" {
		size += 1 + varintSize(uint64(len(e.Value))) + len(e.Value)
	}
	return size
}

// Code is RateLimitResponse.Code.
type Code uint8

const (
	CodeUnknown   Code = 0
	CodeOK        Code = 1
	CodeOverLimit Code = 2
)

var codeNames = [...]string{CodeUnknown: "UNKNOWN", CodeOK: "OK", CodeOverLimit: "OVER_LIMIT"}

// String returns the protocol's name of the code.
func (c Code) String() string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return "UNKNOWN"
}

// Unit is RateLimitResponse.RateLimit.Unit.
type Unit uint8

// The units of a rate limit; UnitUnknown is also what an unknown value decodes to.
const (
	UnitUnknown Unit = 0
	UnitSecond  Unit = 1
	UnitMinute  Unit = 2
	UnitHour    Unit = 3
	UnitDay     Unit = 4
	UnitMonth   Unit = 5
	UnitYear    Unit = 6
	UnitWeek    Unit = 7
)

// unitSeconds is the length of each unit in seconds as envoyproxy/ratelimit counts it (a month is
// 30 days, a year 365).
var unitSeconds = [...]int64{UnitSecond: 1, UnitMinute: 60, UnitHour: 3600, UnitDay: 86400,
	UnitWeek: 7 * 86400, UnitMonth: 30 * 86400, UnitYear: 365 * 86400}

// unitNames are the units' names as envoyproxy/ratelimit's descriptor configuration spells them
// (its config.go; any case), by unit.
var unitNames = [...]string{UnitSecond: "second", UnitMinute: "minute", UnitHour: "hour", UnitDay: "day",
	UnitWeek: "week", UnitMonth: "month", UnitYear: "year"}

// UnitNamed is the unit a name spells, in any case, as the service's configuration names it.
func UnitNamed(name string) (Unit, bool) {
	for u, n := range unitNames {
		if n != "" && strings.EqualFold(name, n) {
			return Unit(u), true
		}
	}
	return UnitUnknown, false
}

// UnitNames are the names of the units, shortest first, lower-case. (The protocol numbers week
// after year, so the order is listed here.)
func UnitNames() []string {
	var names []string
	for _, u := range []Unit{UnitSecond, UnitMinute, UnitHour, UnitDay, UnitWeek, UnitMonth, UnitYear} {
		names = append(names, unitNames[u])
	}
	return names
}

// Seconds is the length of the unit in seconds as envoyproxy/ratelimit counts it (a month is 30
// days, a year 365), or 0 for an unknown unit.
func (u Unit) Seconds() int64 {
	if int(u) < len(unitSeconds) {
		return unitSeconds[u]
	}
	return 0
}

// Status is one DescriptorStatus of a response.
type Status struct {
	Code Code
	// RequestsPerUnit and Unit are the limit that applied (current_limit); zero without one.
	RequestsPerUnit uint32
	Unit            Unit
	LimitRemaining  uint32
	// DurationUntilReset is the time until the limit's window resets; HasReset is false when
	// the service sent none.
	DurationUntilReset duration.Duration
	HasReset           bool
}

// Response is a decoded RateLimitResponse. Tollgate sends one descriptor per request, so it keeps
// the first DescriptorStatus and counts the others.
type Response struct {
	OverallCode Code
	// Status is the first descriptor status, when Statuses > 0.
	Status   Status
	Statuses int
}

// ErrMalformed is returned for bytes that are not a valid protobuf message.
var ErrMalformed = errors.New("malformed RateLimitResponse")

// DecodeResponse decodes a RateLimitResponse.
func DecodeResponse(b []byte) (Response, error) {
	var r Response
	err := fields(b, func(num uint64, wireType int, v uint64, data []byte) error {
		switch {
		case num == 1 && wireType == wire.ProtoVarint:
			r.OverallCode = code(v)
		case num == 2 && wireType == wire.ProtoBytes:
			var s Status
			if err := decodeStatus(data, &s); err != nil {
				return err
			}
			if r.Statuses == 0 {
				r.Status = s
			}
			r.Statuses++
		}
		return nil
	})
	return r, err
}

func decodeStatus(b []byte, s *Status) error {
	return fields(b, func(num uint64, wireType int, v uint64, data []byte) error {
		switch {
		case num == 1 && wireType == wire.ProtoVarint:
			s.Code = code(v)
		case num == 2 && wireType == wire.ProtoBytes:
			// A message field given twice is merged: later values win field by field.
			return fields(data, func(num uint64, wireType int, v uint64, _ []byte) error {
				switch {
				case num == 1 && wireType == wire.ProtoVarint:
					s.RequestsPerUnit = uint32(v)
				case num == 2 && wireType == wire.ProtoVarint:
					s.Unit = UnitUnknown
					if v <= uint64(UnitWeek) {
						s.Unit = Unit(v)
					}
				}
				return nil
			})
		case num == 3 && wireType == wire.ProtoVarint:
			s.LimitRemaining = uint32(v)
		case num == 4 && wireType == wire.ProtoBytes:
			s.HasReset = true
			seconds, nanos := int64(s.DurationUntilReset/duration.Second), int64(s.DurationUntilReset%duration.Second)
			err := fields(data, func(num uint64, wireType int, v uint64, _ []byte) error {
				switch {
				case num == 1 && wireType == wire.ProtoVarint:
					seconds = int64(v)
				case num == 2 && wireType == wire.ProtoVarint:
					nanos = int64(int32(v))
				}
				return nil
			})
			s.DurationUntilReset = protobufDuration(seconds, nanos)
			return err
		}
		return nil
	})
}

// protobufDuration converts a protobuf Duration, saturating where a Duration cannot hold it.
func protobufDuration(seconds, nanos int64) duration.Duration {
	const maxSeconds = math.MaxInt64 / int64(duration.Second)
	switch {
	case seconds > maxSeconds:
		return math.MaxInt64
	case seconds < -maxSeconds:
		return math.MinInt64
	}
	return duration.Duration(seconds)*duration.Second + duration.Duration(nanos)
}

// code maps an enum value; protobuf keeps unknown values, which Tollgate treats as UNKNOWN.
func code(v uint64) Code {
	if v == uint64(CodeOK) || v == uint64(CodeOverLimit) {
		return Code(v)
	}
	return CodeUnknown
}

// fields walks the fields of a message, calling f with each field's number and wire type, its
// value for varints and its bytes for length-delimited fields. Fixed-size fields and groups (a
// deprecated encoding, never used by these messages) are skipped, as parsers skip unknown fields.
func fields(b []byte, f func(num uint64, wireType int, v uint64, data []byte) error) error {
	for len(b) > 0 {
		num, wireType, v, data, rest, ok := wire.ReadProtoField(b)
		if !ok || wireType == wire.ProtoEndGroup {
			return ErrMalformed
		}
		b = rest
		if wireType == wire.ProtoStartGroup {
			continue
		}
		if err := f(num, wireType, v, data); err != nil {
			return err
		}
	}
	return nil
}

func varintSize(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

func appendTag(dst []byte, num int, wireType int) []byte {
	return binary.AppendUvarint(dst, uint64(num)<<3|uint64(wireType))
}

// appendString appends a string field; proto3 leaves out empty strings.
func appendString(dst []byte, num int, s string) []byte {
	if s == "" {
		return dst
	}
	dst = appendTag(dst, num, wire.ProtoBytes)
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}
