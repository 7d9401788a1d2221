package main

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-proxy/tollgate/internal/simulate"
)

// topFunctions is how many of a module's functions its table lists.
const topFunctions = 15

// packagePrefix is how this repository's packages begin in a Go Wasm module's function names; the
// tables leave it out.
const packagePrefix = "github.com_tollgate_proxy_tollgate_"

// tables writes the profile's tables: for each round and request type, each module's time a
// request by kind, then the largest functions of the modules in byFunction. samplesFile names the
// samples they are written from.
func (p *profile) tables(samplesFile string) ([]byte, error) {
	var b bytes.Buffer
	p.header(&b, samplesFile)
	requests := p.long - p.short
	// A sample is 10^9/frequency ns of one CPU's time, spread over requests requests.
	ns := func(samples int) float64 {
		return float64(samples) * (1e6 / float64(p.frequency)) * 1000 / float64(requests)
	}
	for round := 1; round <= p.rounds(); round++ {
		fmt.Fprintf(&b, "## Round %d\n", round)
		for _, rt := range requestTypes {
			fmt.Fprintf(&b, "### %s: samples of %s requests minus those of %s, per request (ns)\n", rt, simulate.Thousands(int64(p.long)), simulate.Thousands(int64(p.short)))
			fmt.Fprintf(&b, "%-12s %8s %8s %8s %8s %8s %8s\n", "module", "ns/op", "samples", "module", "wazero", "host-Go", "kernel")
			functions := map[string]map[string]int{}
			for _, m := range modules {
				shorter, longer := p.find(round, rt, m, p.short), p.find(round, rt, m, p.long)
				if shorter == nil || longer == nil {
					n := p.short
					if shorter != nil {
						n = p.long
					}
					return nil, fmt.Errorf("no counts of %s/%s at %d requests in round %d (a counts line \"counts %d %s %s %d ...\"): profile again",
						m, rt, n, round, round, rt, m, n)
				}
				var delta [kindCount]int
				for i := range delta {
					delta[i] = longer.kinds[i] - shorter.kinds[i]
				}
				fmt.Fprintf(&b, "%-12s %8s %8.0f %8.0f %8.0f %8.0f %8.0f\n", m, longer.nsPerOp, ns(sum(delta[:])),
					ns(delta[kindModule]), ns(delta[kindWazero]), ns(delta[kindHost]), ns(delta[kindKernel]))
				functions[m] = difference(shorter.functions, longer.functions)
			}
			for _, m := range byFunction {
				fmt.Fprintf(&b, "\n%s, its compiled code by function (ns a request, the %d largest):\n", m, topFunctions)
				for _, f := range largest(functions[m], topFunctions) {
					name := strings.ReplaceAll(f.name, packagePrefix, "")
					fmt.Fprintf(&b, "  %5.0f  %s\n", ns(f.samples), name[:min(len(name), 90)])
				}
			}
			b.WriteByte('\n')
		}
	}
	return b.Bytes(), nil
}

// header is the tables' opening comment: what they are, how they were made, and what they hold.
func (p *profile) header(b *bytes.Buffer, samplesFile string) {
	started := p.started
	if t, err := time.Parse(time.RFC3339, started); err == nil {
		started = t.UTC().Format("2006-01-02T15:04Z") // to the minute
	}
	text := fmt.Sprintf(`Where each module's time goes when it runs alone: sampling profiles of BenchmarkAlone
(bench/surface_test.go), %s begun at %s on %q, the tree at %s. Written by bench/profile
(make bench-profile) from its samples, %s: go run ./bench/profile -parse %s -out FILE, from the
repository's root, writes these tables again.

How: the bench package's test binary built with wazero's perfmap build tag (wazero then writes a perf map of the functions it compiles, which perf reads to name the samples in them), and each module and request type recorded alone, at two lengths, under perf record -e cpu-clock -F %d, its samples those of the test process. A recording also builds, compiles and instantiates its module and serves the warm-up's requests: the longer one's samples minus the shorter one's are those of %s requests. A sample is %s of one CPU's time; the figures are ns a request. "module" is the samples in the module's own compiled code (the perf map's entries of its functions), by function through the module's function name map (as make build writes Tollgate's); "wazero" its other compiled code (the trampolines); "host-Go" the test process's other code outside the kernel (the host's side: wazero's calls into and out of the module, the host's functions for the callbacks, shared data and the reply, its allocations and garbage collector, and runtime.memmove, which copies for the host and does the module's memory.copy and memory.fill instructions too); "kernel" the kernel's. Names are without this repository's package path. "samples" is their sum, over all CPUs, more than ns/op (the benchmark's own time a request, in the longer recording) by the work of the process's other threads, the garbage collector's workers among them. ns/op of modules run alone are not for ratios: BenchmarkFloor, BenchmarkSurface and BenchmarkDirect interleave the modules for that. The floor probe answers the rejected requests with its upstream's 200, as in the interleaved benchmarks.`,
		plural(p.rounds(), "round"), started, p.cpu, p.tree, samplesFile, samplesFile, p.frequency, simulate.Thousands(int64(p.long-p.short)), sampleTime(p.frequency))
	if p.note != "" {
		text += "\n\nNote: " + p.note
	}
	for _, paragraph := range strings.Split(text, "\n\n") {
		for _, line := range wrap(strings.ReplaceAll(paragraph, "\n", " "), 98) {
			b.WriteString(strings.TrimRight("# "+line, " ") + "\n")
		}
		b.WriteString("#\n")
	}
}

// plural is n nouns: "1 round", "2 rounds".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// sampleTime is how long one sample stands for, at frequency samples a second.
func sampleTime(frequency int) string {
	if 1_000_000%frequency == 0 {
		return strconv.Itoa(1_000_000/frequency) + " µs"
	}
	return strconv.FormatFloat(1e9/float64(frequency), 'f', 0, 64) + " ns"
}

// wrap breaks text into lines of at most width bytes where it can, at spaces.
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(text) {
		if line != "" && len(line)+1+len(word) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	return append(lines, line)
}

// difference is the samples of each function in long less those in short.
func difference(short, long map[string]int) map[string]int {
	d := map[string]int{}
	for name, n := range long {
		d[name] += n
	}
	for name, n := range short {
		d[name] -= n
	}
	return d
}

type functionSamples struct {
	name    string
	samples int
}

// largest is the n functions with the most samples, most first, those with as many by name.
func largest(functions map[string]int, n int) []functionSamples {
	all := make([]functionSamples, 0, len(functions))
	for name, s := range functions {
		all = append(all, functionSamples{name, s})
	}
	slices.SortFunc(all, func(a, b functionSamples) int {
		if c := cmp.Compare(b.samples, a.samples); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	return all[:min(n, len(all))]
}
