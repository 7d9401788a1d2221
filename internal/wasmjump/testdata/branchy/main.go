// Command branchy is a module of upstream Go's with many branches, forward and back, for the
// tests of internal/wasmjump: its function work gives the same for every input whether or not
// its jumps were threaded.
package main

import (
	"sort"
	"strconv"
	"strings"
)

func main() {}

// work formats, sorts, counts and searches: the standard library's loops and branches, and a
// switch of its own; then it hands its sum to another goroutine and back, and adds what a
// recovered panic gives.
//
//go:wasmexport work
func work(n int32) int64 {
	words := make([]string, 0, 32)
	for i := int32(0); i < n%23+3; i++ {
		words = append(words, strconv.Itoa(int(n*31+i*7)%97))
	}
	sort.Strings(words)
	seen := map[string]int{}
	var sum int64
	for i, w := range words {
		seen[w]++
		v, err := strconv.Atoi(w)
		switch {
		case err != nil:
			sum -= 1000
		case v%3 == 0:
			sum += int64(v) * int64(i)
		case strings.Contains(w, "7"):
			sum ^= int64(v) << 3
		default:
			sum += int64(seen[w])
		}
	}
	// A hand-off to another goroutine and a recovered panic: the runtime leaves and enters again
	// this function's callers through their dispatch (resumption, deferreturn).
	ch := make(chan int64)
	go func() { ch <- sum + int64(n) }()
	sum = <-ch
	sum += recovered(n)
	return sum*int64(len(seen)) + int64(len(strings.Join(words, ",")))
}

// recovered panics for every third n, and recovers.
func recovered(n int32) (v int64) {
	defer func() {
		if r := recover(); r != nil {
			v = int64(len(r.(string)))
		}
	}()
	if n%3 == 0 {
		panic("every third " + strconv.Itoa(int(n)))
	}
	return int64(n) * 5
}
