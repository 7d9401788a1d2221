package limiter_test

import (
	"fmt"
	"strings"
	"time"

	"github.com/tollgate-proxy/tollgate/limiter"
)

// A bucket of 3 tokens refilled with one token per second: a burst of 3,
// then one request per second. Times are nanoseconds on the caller's
// monotonic clock; here, milliseconds since the first request.
func ExampleBucket() {
	bucket, err := limiter.NewBucket(limiter.BucketLimit{Capacity: 3, RefillTokens: 1, RefillInterval: time.Second})
	if err != nil {
		panic(err)
	}
	state := bucket.Initial(0)
	for _, ms := range []int64{0, 100, 200, 300, 500, 1300, 1400, 3500} {
		var d limiter.Decision
		state, d = bucket.Take(state, ms*int64(time.Millisecond), 1)
		if d.Allowed {
			fmt.Printf("%4d ms: allowed, %d left\n", ms, d.Remaining)
		} else {
			fmt.Printf("%4d ms: rejected, retry after %v\n", ms, d.RetryAfter)
		}
	}
	// Output:
	//    0 ms: allowed, 2 left
	//  100 ms: allowed, 1 left
	//  200 ms: allowed, 0 left
	//  300 ms: rejected, retry after 700ms
	//  500 ms: rejected, retry after 500ms
	// 1300 ms: allowed, 0 left
	// 1400 ms: rejected, retry after 600ms
	// 3500 ms: allowed, 1 left
}

// RetryAt answers a rejected request again without another Take: while nothing is taken from
// the bucket, the request is rejected until RetryAt, with the wait to it, as Take would say.
func ExampleDecision_RetryAt() {
	bucket, err := limiter.NewBucket(limiter.BucketLimit{Capacity: 1, RefillTokens: 1, RefillInterval: time.Second})
	if err != nil {
		panic(err)
	}
	state, _ := bucket.Take(bucket.Initial(0), 0, 1) // the token taken at 0
	_, d := bucket.Take(state, 200*int64(time.Millisecond), 1)
	retryAt, _ := d.RetryAt(state, 200*int64(time.Millisecond))
	for _, ms := range []int64{400, 900, 1000} {
		now := ms * int64(time.Millisecond)
		_, again := bucket.Take(state, now, 1)
		if now < retryAt {
			fmt.Printf("%4d ms: rejected, retry after %v (Take: %v)\n", ms, time.Duration(retryAt-now), again.RetryAfter)
		} else {
			fmt.Printf("%4d ms: admitted (Take: %v)\n", ms, again.Allowed)
		}
	}
	// Output:
	//  400 ms: rejected, retry after 600ms (Take: 600ms)
	//  900 ms: rejected, retry after 100ms (Take: 100ms)
	// 1000 ms: admitted (Take: true)
}

// Give undoes a Take that another limit overruled: a request admitted by
// this bucket but rejected by a second limit gets its token back.
func ExampleBucket_Give() {
	bucket, err := limiter.NewBucket(limiter.BucketLimit{Capacity: 2, RefillTokens: 1, RefillInterval: time.Minute})
	if err != nil {
		panic(err)
	}
	taken, d := bucket.Take(bucket.Initial(0), 0, 1)
	fmt.Println("after the take:", d.Remaining, "left")
	given := bucket.Give(taken, 0, 1)
	_, d = bucket.Take(given, 0, 2)
	fmt.Println("after the refund, two at once:", d.Allowed)
	// Output:
	// after the take: 1 left
	// after the refund, two at once: true
}

// A sliding window of 4 requests a second weighs the previous second's count
// by the share of it still inside the last second: at 1100 ms the 4 requests
// of the first second still weigh 3.6, and at 1300 ms they weigh 2.8 beside
// the one admitted at 1250 ms.
func ExampleSlidingWindow() {
	window, err := limiter.NewSlidingWindow(limiter.WindowLimit{Capacity: 4, Window: time.Second})
	if err != nil {
		panic(err)
	}
	state := window.Initial(0)
	for _, ms := range []int64{0, 100, 200, 300, 1100, 1250, 1300} {
		var d limiter.Decision
		state, d = window.Take(state, ms*int64(time.Millisecond), 1)
		if d.Allowed {
			fmt.Printf("%4d ms: allowed, %d left\n", ms, d.Remaining)
		} else {
			fmt.Printf("%4d ms: rejected, retry after %v\n", ms, d.RetryAfter)
		}
	}
	// Output:
	//    0 ms: allowed, 3 left
	//  100 ms: allowed, 2 left
	//  200 ms: allowed, 1 left
	//  300 ms: allowed, 0 left
	// 1100 ms: rejected, retry after 150ms
	// 1250 ms: allowed, 0 left
	// 1300 ms: rejected, retry after 200ms
}

// Algorithm lets one piece of code run any of the three limiters: here a
// fixed window of 2 requests a second and a token bucket of 2 tokens refilled
// one every 500 ms meet the same requests, and differ at the window's
// boundary.
func ExampleAlgorithm() {
	fixed, err := limiter.NewFixedWindow(limiter.WindowLimit{Capacity: 2, Window: time.Second})
	if err != nil {
		panic(err)
	}
	bucket, err := limiter.NewBucket(limiter.BucketLimit{Capacity: 2, RefillTokens: 1, RefillInterval: 500 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	at := []int64{900, 950, 1000, 1050, 1400}
	fmt.Println("fixed window:", run(fixed, at))
	fmt.Println("token bucket:", run(&bucket, at)) // its methods take the bucket by pointer
	// Output:
	// fixed window: 900 ok, 950 ok, 1000 ok, 1050 ok, 1400 wait 600ms
	// token bucket: 900 ok, 950 ok, 1000 wait 400ms, 1050 wait 350ms, 1400 ok
}

// run takes one unit at each instant (milliseconds) and describes the
// decisions.
func run[S any](algo limiter.Algorithm[S], at []int64) string {
	state := algo.Initial(0)
	var out []string
	for _, ms := range at {
		var d limiter.Decision
		state, d = algo.Take(state, ms*int64(time.Millisecond), 1)
		if d.Allowed {
			out = append(out, fmt.Sprintf("%d ok", ms))
		} else {
			out = append(out, fmt.Sprintf("%d wait %v", ms, d.RetryAfter))
		}
	}
	return strings.Join(out, ", ")
}

// A monthly quota of 2 on the wall clock (Unix time): the windows are calendar months, so the
// wait at the end of January is to February 1st, and a clock stepped back from February into
// January keeps counting February.
func ExampleCalendarWindow() {
	month, err := limiter.NewCalendarWindow(limiter.CalendarLimit{Capacity: 2, Unit: limiter.Month})
	if err != nil {
		panic(err)
	}
	at := func(day, hour int, monthOfYear time.Month) int64 {
		return time.Date(2025, monthOfYear, day, hour, 0, 0, 0, time.UTC).UnixNano()
	}
	state := month.Initial(at(31, 20, time.January))
	for _, now := range []int64{at(31, 20, time.January), at(31, 21, time.January), at(31, 22, time.January),
		at(1, 0, time.February), at(31, 23, time.January), at(31, 23, time.January)} {
		var d limiter.Decision
		state, d = month.Take(state, now, 1)
		when := time.Unix(0, now).UTC().Format("Jan 2 15:04")
		if d.Allowed {
			fmt.Printf("%s: allowed, %d left this month\n", when, d.Remaining)
		} else {
			fmt.Printf("%s: rejected, retry after %v\n", when, d.RetryAfter)
		}
	}
	// Output:
	// Jan 31 20:00: allowed, 1 left this month
	// Jan 31 21:00: allowed, 0 left this month
	// Jan 31 22:00: rejected, retry after 2h0m0s
	// Feb 1 00:00: allowed, 1 left this month
	// Jan 31 23:00: allowed, 0 left this month
	// Jan 31 23:00: rejected, retry after 672h0m0s
}

// A client paces its calls to an API allowing one call per 200ms: a burst of four is held
// 0, 200, 400 and 600ms, and with at most 500ms of waiting the fourth is refused instead.
func ExampleBucket_Reserve() {
	b, _ := limiter.NewBucket(limiter.BucketLimit{Capacity: 1, RefillTokens: 1, RefillInterval: 200 * time.Millisecond})
	s := b.Initial(0)
	for i := 0; i < 4; i++ {
		var r limiter.Reservation
		s, r = b.Reserve(s, 0, 1, 500*time.Millisecond)
		if r.OK {
			fmt.Println("call", i, "waits", r.Wait)
		} else {
			fmt.Println("call", i, "refused, retry after", r.RetryAfter)
		}
	}
	// Output:
	// call 0 waits 0s
	// call 1 waits 200ms
	// call 2 waits 400ms
	// call 3 refused, retry after 600ms
}

// A request admitted for an estimate (1 token) reports after the fact that it used 25: Owe takes
// the rest, into debt down to minus the capacity, and the next request waits until the debt is
// repaid and its own token is there.
func ExampleBucket_Owe() {
	b, _ := limiter.NewBucket(limiter.BucketLimit{Capacity: 10, RefillTokens: 1, RefillInterval: time.Second})
	s, d := b.Take(b.Initial(0), 0, 1)
	fmt.Println("admitted:", d.Allowed)
	s = b.Owe(s, 0, 24, 10)
	fmt.Println("tokens after the response:", s.Tokens)
	_, r := b.Reserve(s, 0, 1, 0)
	fmt.Println("next request admitted:", r.OK, "retry after", r.RetryAfter)
	// Output:
	// admitted: true
	// tokens after the response: -10
	// next request admitted: false retry after 11s
}
