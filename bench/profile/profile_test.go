package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tollgate-proxy/tollgate/internal/wasmnames"
)

// Every profile in bench/results is written from its samples, unedited: the tables of each
// .samples file are its .txt, byte for byte.
func TestCommittedProfilesRegenerate(t *testing.T) {
	files, err := filepath.Glob("../results/*.samples")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no samples in bench/results")
	}
	for _, file := range files {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		p, err := parseSamples(text)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		name := "bench/results/" + filepath.Base(file)
		got, err := p.tables(name)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		txt := strings.TrimSuffix(name, ".samples") + ".txt"
		want, err := os.ReadFile(filepath.Join("..", "..", txt))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the tables of its samples: go run ./bench/profile -parse %s -out %s, from the repository's root, writes it again",
				txt, name, txt)
		}
	}
}

// oneRound is a profile of one round: every module and request type at 200 and 1,000 requests.
// The longer recording has 3,200 samples more in the module, 1,600 more in wazero, 6,400 more in
// the host and 800 fewer in the kernel, 2,400 and 800 more in the module's two functions, and
// another ns/op.
func oneRound() *profile {
	p := &profile{started: "2026-12-03T05:28:41Z", cpu: "Some CPU", tree: "abc1234", frequency: 4000, short: 200, long: 1000}
	for _, rt := range requestTypes {
		for _, m := range modules {
			p.recordings = append(p.recordings,
				&recording{round: 1, requestType: rt, module: m, requests: 200, nsPerOp: "7777",
					kinds: [kindCount]int{100, 10, 1000, 900}, functions: map[string]int{
						packagePrefix + "internal_admission.__Gate_.admitLean": 70, "runtime.memmove": 30, "gone": 5}},
				&recording{round: 1, requestType: rt, module: m, requests: 1000, nsPerOp: "4834",
					kinds: [kindCount]int{3300, 1610, 7400, 100}, functions: map[string]int{
						packagePrefix + "internal_admission.__Gate_.admitLean": 2470, "runtime.memmove": 830}})
		}
	}
	return p
}

// At 4,000 samples a second each sample is 250 µs; over the 800 requests between the two
// recordings, 312,500 ns a request.
func TestTablesSubtractTheShorterRecording(t *testing.T) {
	out, err := oneRound().tables("x.samples")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"## Round 1\n### admitted-known: samples of 1,000 requests minus those of 200, per request (ns)\n",
		"module          ns/op  samples   module   wazero  host-Go   kernel\n",
		"tollgate         4834  3250000  1000000   500000  2000000  -250000\n",
		"floor+clock      4834  3250000  1000000   500000  2000000  -250000\n",
		"tollgate, its compiled code by function (ns a request, the 15 largest):\n" +
			"  750000  internal_admission.__Gate_.admitLean\n  250000  runtime.memmove\n  -1562  gone\n\n",
		"1 round begun at 2026-12-03T05:28Z on \"Some CPU\", the tree at abc1234.",
		"are those of 800 requests.",
		"sample is 250 µs of one CPU's time",
	} {
		// The header's lines joined, wherever they wrap.
		if !strings.Contains(strings.ReplaceAll(string(out), "\n# ", " "), want) && !strings.Contains(string(out), want) {
			t.Errorf("the tables lack %q:\n%s", want, out)
		}
	}
	p := oneRound()
	p.recordings = p.recordings[:len(p.recordings)-1] // the last module's longer recording
	if _, err := p.tables("x.samples"); err == nil || !strings.Contains(err.Error(), "no counts of floor+clock/rejected at 1000 requests in round 1") {
		t.Errorf("tables without a recording: %v", err)
	}
}

func TestSamplesTextRoundTrips(t *testing.T) {
	p := oneRound()
	p.note = "recorded by hand"
	p.recordings[0].functions["byn$mgfn-shared$name with spaces"] = 7
	back, err := parseSamples(p.text())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, p) {
		t.Errorf("read back %+v\nwant %+v", back, p)
	}
}

func TestParseSamplesNamesTheLineAndTheFault(t *testing.T) {
	settings := "profile started s\nprofile cpu c\nprofile tree t\nprofile frequency 4000\nprofile requests 2 10\n"
	counts := "counts 1 rejected glue 2 ns/op 12.5 module 1 wazero 2 host 3 kernel 4\n"
	for _, c := range []struct{ text, want string }{
		{settings, "no counts lines"},
		{strings.Replace(settings, "profile started s\n", "", 1) + counts, `no "profile started" line`},
		{settings + "profile cpu d\n" + counts, "line 6: profile cpu twice"},
		{settings + "profile colour red\n", `line 6: unknown setting "colour"`},
		{strings.Replace(settings, "4000", "0", 1) + counts, "line 4: profile frequency: 0: at least 1"},
		{strings.Replace(settings, "2 10", "10 2", 1) + counts, "line 5: profile requests 10 2: the longer recording's length must be the second"},
		{strings.Replace(settings, "2 10", "2", 1) + counts, `line 5: profile requests: "" is not a count`},
		{counts + settings, "line 1: a recording before the profile requests line"},
		{settings + "counts 1 rejected glue 2 ns/op 12.5\n", "line 6: a counts line is"},
		{settings + strings.Replace(counts, "glue", "toll", 1), `line 6: module "toll": one of tollgate, direct, glue, surface, floor+clock`},
		{settings + strings.Replace(counts, "rejected", "new-key", 1), `line 6: request type "new-key"`},
		{settings + strings.Replace(counts, "counts 1", "counts 0", 1), "line 6: round: 0: at least 1"},
		{settings + strings.Replace(counts, "glue 2", "glue 5", 1), "line 6: 5 requests: the profile's recordings have 2 or 10"},
		{settings + strings.Replace(counts, "host 3", "host 03", 1), `line 6: host: "03" is not a count`},
		{settings + strings.Replace(counts, "host 3", "host -3", 1), `line 6: host: "-3" is not a count`},
		{settings + strings.Replace(counts, "wazero", "trampolines", 1), `line 6: "trampolines" where wazero belongs`},
		{settings + strings.Replace(counts, "12.5", "fast", 1), `line 6: ns/op "fast" is not a number`},
		{settings + counts + counts, "line 7: counts 1 rejected glue 2 twice"},
		{settings + "function 1 rejected glue 2 5 f\n", "line 6: function of 1 rejected glue 2 before its counts line"},
		{settings + counts + "function 1 rejected glue 2 5 f\nfunction 1 rejected glue 2 6 f\n", "line 8: function f twice"},
		{settings + counts + "function 1 rejected glue 2 5\n", "line 7: a function line is"},
		{settings + counts + "function 1 rejected glue 2 x f\n", `line 7: function f: "x" is not a count`},
		{settings + counts + "profile requests 2 20\n", "line 7: profile requests twice"},
		{settings + "run 1\n", `line 6: unknown line "run"`},
	} {
		_, err := parseSamples([]byte(c.text))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.text, err, c.want)
		}
	}
}

// A sample perf names by an entry of the module's in wazero's perf map is the module's, by the
// function the entry names; one in the perf map by another entry, wazero's; any other, the
// kernel's or the host's.
func TestClassify(t *testing.T) {
	const perfMap = "/tmp/perf-17001.map"
	names := wasmnames.Map{{Index: 3, Name: "main.decide"}}
	samples := []sample{
		{0x1000, "[0/9].$3:::::L0", perfMap}, {0x1045, "[0/9].$3:::::L2", perfMap}, // main.decide, by its index
		{0x3000, "[1/9].$8:::::L0", perfMap},                        // an index the name map lacks
		{0x3100, "[8/9]proxy_on_request_headers:::::L4", perfMap},   // exported
		{0x3200, "[7/9].main.main:::::L1", perfMap},                 // in the module's name section
		{0x2010, "memory_grow_trampoline", perfMap},                 // wazero's
		{0x3300, "[unknown]", perfMap},                              // in the map, no entry: wazero's
		{0xffffffff8225f759, "pvm_irq_enable", "[kernel.kallsyms]"}, // the kernel's
		{0xffffffff8225f000, "[unknown]", "[unknown]"},              // a kernel address
		{0x4a5b6c, "runtime.memmove", "/tmp/bench.test"},            // the host's
		{0x7f00, "[0/9].$3:::::L0", "/tmp/perf-17002.map"},          // another process's map: the host's
	}
	kinds, functions := classify(samples, perfMap, names)
	if want := [kindCount]int{5, 2, 2, 2}; kinds != want {
		t.Errorf("kinds %v, want %v (module, wazero, host, kernel)", kinds, want)
	}
	want := map[string]int{"main.decide": 2, "$8": 1, "proxy_on_request_headers": 1, "main.main": 1}
	if !reflect.DeepEqual(functions, want) {
		t.Errorf("functions %v, want %v", functions, want)
	}
}

func TestParseScriptKeepsTheTestBinarysSamplesByProcess(t *testing.T) {
	byProcess, err := parseScript([]byte(
		"      perf-exec  17000 ffffffff8225f759 pvm_irq_enable ([kernel.kallsyms])\n" +
			"     bench.test  17001 ffffffff8225f759 pvm_irq_enable ([kernel.kallsyms])\n" +
			"     bench.test  17001     7f1d21e52000 [0/9].$3:::::L0 (/tmp/perf-17001.map)\n" +
			"     bench.test  17002           4a5b6c operator new(unsigned long) (/usr/lib/libstdc++.so.6)\n" +
			"             go  17003           4a5b6c main.main (/usr/bin/go)\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[int][]sample{
		17001: {{0xffffffff8225f759, "pvm_irq_enable", "[kernel.kallsyms]"}, {0x7f1d21e52000, "[0/9].$3:::::L0", "/tmp/perf-17001.map"}},
		17002: {{0x4a5b6c, "operator new(unsigned long)", "/usr/lib/libstdc++.so.6"}},
	}
	if !reflect.DeepEqual(byProcess, want) {
		t.Errorf("%v, want %v", byProcess, want)
	}
	for _, c := range []struct{ text, want string }{
		{"go 1 4a5b6c main.main (/usr/bin/go)\n", "no samples of bench.test"},
		{"go 1 2 f (o)\nbench.test x 4a5b6c f (o)\n", `line 2: "x" is not a process id`},
		{"bench.test 12 4z5b6c f (o)\n", `line 1: "4z5b6c" is not an address`},
		{"bench.test 12 4a5b6c f\n", "line 1: \"bench.test 12 4a5b6c f\" is not COMM PID ADDRESS SYMBOL (OBJECT)"},
	} {
		if _, err := parseScript([]byte(c.text)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.text, err, c.want)
		}
	}
}

func TestParseBenchOutput(t *testing.T) {
	out := "goos: linux\ncpu: Oxide Virtual Turin-like Processor             \n" +
		"BenchmarkAlone/tollgate/admitted-known-2         \t 1000000\t      4834 ns/op\nPASS\n"
	nsPerOp, cpu, err := parseBenchOutput([]byte(out))
	if err != nil || nsPerOp != "4834" || cpu != "Oxide Virtual Turin-like Processor" {
		t.Errorf("%q, %q, %v", nsPerOp, cpu, err)
	}
	if _, _, err := parseBenchOutput([]byte("--- FAIL: BenchmarkAlone/tollgate/admitted-known\nFAIL\n")); err == nil ||
		!strings.Contains(err.Error(), "printed no result") {
		t.Errorf("a failed benchmark: %v", err)
	}
}

// Samples text never crashes the parser, and what it reads it writes back as it reads it.
func FuzzParseSamples(f *testing.F) {
	f.Add(oneRound().text())
	f.Add([]byte("profile requests 1 2\nfunction 1 rejected glue 1 5 f g\n"))
	f.Fuzz(func(t *testing.T, text []byte) {
		p, err := parseSamples(text)
		if err != nil {
			return
		}
		again, err := parseSamples(p.text())
		if err != nil {
			t.Fatalf("its own text: %v", err)
		}
		if !reflect.DeepEqual(again, p) {
			t.Fatalf("read back differently:\n%s\n%s", p.text(), again.text())
		}
		if _, err := p.tables("x"); err != nil && !strings.Contains(err.Error(), "no counts of") {
			t.Fatal(err)
		}
	})
}

// perf script's output never crashes its parser, which keeps every sample of the test binary's
// and no other.
func FuzzParseScript(f *testing.F) {
	f.Add([]byte("     bench.test  17001 ffffffff8225f759 pvm_irq_enable ([kernel.kallsyms])\n"))
	f.Fuzz(func(t *testing.T, text []byte) {
		byProcess, err := parseScript(text)
		if err != nil {
			return
		}
		lines := 0
		for _, line := range strings.Split(string(text), "\n") {
			if f := strings.Fields(line); len(f) > 0 && f[0] == testBinary {
				lines++
			}
		}
		kept := 0
		for _, samples := range byProcess {
			kept += len(samples)
		}
		if kept != lines || kept == 0 {
			t.Fatalf("%d samples kept of %d lines of %s", kept, lines, testBinary)
		}
	})
}
