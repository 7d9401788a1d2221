// Command profile makes the sampling profiles of BenchmarkAlone (bench/surface_test.go): for each
// module it runs alone (Tollgate, the direct-decision, glue and surface probes, the clocked floor)
// and each request type, where a request's time goes: the module's own compiled code, by
// function; wazero's other compiled code (its trampolines); the host's Go code; the kernel.
// `make bench-profile` runs it from the repository's root, on Linux with perf.
//
// It builds the bench package's test binary with wazero's perfmap build tag, so that wazero writes
// a perf map of the functions it compiles (/tmp/perf-PID.map), which perf reads to name the
// samples in them. A round records each module and request type alone, at two lengths (-short and
// -long requests), each under `perf record -e cpu-clock`; BenchmarkAlone writes its module's
// function name map where TOLLGATE_BENCH_NAMES says. A recording also builds, compiles and
// instantiates its module and serves the warm-up's requests: the longer one's samples minus the
// shorter one's are those of the requests in between, and nothing else.
//
// It writes the samples, counted by kind and by function, to -samples, then the tables from them
// to -out. -parse FILE writes the tables from samples written before, and runs nothing: a table
// quoted anywhere is written again from its samples, never edited.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	rounds := flag.Int("rounds", 2, "how many times each module and request type is profiled")
	short := flag.Int("short", 200_000, "requests of the shorter recording of each pair")
	long := flag.Int("long", 1_000_000, "requests of the longer recording of each pair")
	frequency := flag.Int("frequency", 4000, "samples a second of each CPU's time (perf record -F)")
	samplesFile := flag.String("samples", "bench/results/profile.samples", "the file the samples go to")
	out := flag.String("out", "bench/results/profile.txt", "the file the tables go to")
	parse := flag.String("parse", "", "write the tables from this samples file instead of profiling")
	flag.Parse()
	if err := run(*rounds, *short, *long, *frequency, *samplesFile, *out, *parse); err != nil {
		fmt.Fprintln(os.Stderr, "profile:", err)
		os.Exit(1)
	}
}

func run(rounds, short, long, frequency int, samplesFile, out, parse string) error {
	var p *profile
	if parse != "" {
		text, err := os.ReadFile(parse)
		if err != nil {
			return err
		}
		if p, err = parseSamples(text); err != nil {
			return fmt.Errorf("%s: %w", parse, err)
		}
		samplesFile = parse
	} else {
		switch {
		case rounds < 1:
			return fmt.Errorf("-rounds %d: at least 1", rounds)
		case short < 1 || long <= short:
			return fmt.Errorf("-short %d, -long %d: the longer recording must have more requests, and the shorter at least one", short, long)
		case frequency < 1:
			return fmt.Errorf("-frequency %d: at least 1 sample a second", frequency)
		}
		var err error
		if p, err = record(rounds, short, long, frequency); err != nil {
			return err
		}
		if err := os.WriteFile(samplesFile, p.text(), 0o644); err != nil {
			return err
		}
	}
	tables, err := p.tables(samplesFile)
	if err != nil {
		return err
	}
	return os.WriteFile(out, tables, 0o644)
}
