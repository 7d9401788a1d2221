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
		got, err := p.tables("bench/results/" + filepath.Base(file))
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		want, err := os.ReadFile(strings.TrimSuffix(file, ".samples") + ".txt")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: its tables differ from the .txt beside it; write them again with go run ./bench/profile -parse", file)
		}
	}
}

// twoRuns is a profile of one run: every module and request type at 200 and 1,000 requests, the
// longer with 3,200 samples more of each kind, the module's own in two functions.
func twoRuns() *profile {
	p := &profile{started: "2026-12-03T05:28:41Z", cpu: "Some CPU", tree: "abc1234", frequency: 4000, short: 200, long: 1000}
	for _, rt := range requestTypes {
		for _, m := range modules {
			for _, n := range []int{200, 1000} {
				extra := 0
				if n == 1000 {
					extra = 3200
				}
				p.runs = append(p.runs, &runSamples{run: 1, requestType: rt, module: m, requests: n, nsPerOp: "4834",
					kinds: [4]int{100 + extra, 10, 1000 + extra, 500}, functions: map[string]int{
						packagePrefix + "internal_admission.__Gate_.admitLean": 70 + extra/2, "runtime.memmove": 30 + extra/2}})
			}
		}
	}
	return p
}

// 3,200 samples more over 800 requests more, at 4,000 a second: each sample 250 µs, 1,000 µs a
// request.
func TestTablesSubtractTheShorterRun(t *testing.T) {
	out, err := twoRuns().tables("x.samples")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"### admitted-known: samples of 1,000 requests minus those of 200, per request (ns)\n",
		"module          ns/op  samples   module   wazero  host-Go   kernel\n",
		"tollgate         4834  2000000  1000000        0  1000000        0\n",
		"floor+clock      4834  2000000  1000000        0  1000000        0\n",
		"tollgate, its compiled code by function (ns a request, the 15 largest):\n" +
			"  500000  internal_admission.__Gate_.admitLean\n  500000  runtime.memmove\n",
		"1 run begun at 2026-12-03T05:28Z on \"Some CPU\", the tree at abc1234.",
		"are those of 800 requests.",
		"sample is 250 µs of one CPU's time",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the tables lack %q:\n%s", want, out)
		}
	}
	p := twoRuns()
	p.runs = p.runs[:len(p.runs)-1] // the last module's longer run
	if _, err := p.tables("x.samples"); err == nil || !strings.Contains(err.Error(), "floor+clock/rejected at 200 and 1000") {
		t.Errorf("tables without a run: %v", err)
	}
}

func TestSamplesTextRoundTrips(t *testing.T) {
	p := twoRuns()
	p.runs[0].functions["byn$mgfn-shared$name with spaces"] = 7
	text := p.text()
	back, err := parseSamples(text)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, p) {
		t.Errorf("read back %+v\nwant %+v", back, p)
	}
}

func TestParseSamplesNamesTheLineAndTheFault(t *testing.T) {
	settings := "profile started s\nprofile cpu c\nprofile tree t\nprofile frequency 4000\nprofile requests 2 10\n"
	run := "run 1 rejected glue 2 ns/op 12.5 module 1 wazero 2 host 3 kernel 4\n"
	for _, c := range []struct{ text, want string }{
		{settings, "no run lines"},
		{run, `no "profile started" line`},
		{settings + "profile cpu d\n" + run, "line 6: profile cpu twice"},
		{settings + "profile colour red\n", `line 6: unknown setting "colour"`},
		{strings.Replace(settings, "4000", "0", 1) + run, "line 4: profile frequency: 0: at least 1"},
		{strings.Replace(settings, "2 10", "10 2", 1) + run, "line 5: profile requests 10 2: the longer run must be the second"},
		{strings.Replace(settings, "2 10", "2", 1) + run, `line 5: profile requests: "" is not a count`},
		{settings + "run 1 rejected glue 2 ns/op 12.5\n", "line 6: a run line is"},
		{settings + strings.Replace(run, "glue", "toll", 1), `line 6: module "toll": one of tollgate, direct, glue, surface, floor+clock`},
		{settings + strings.Replace(run, "rejected", "new-key", 1), `line 6: request type "new-key"`},
		{settings + strings.Replace(run, "run 1", "run 0", 1), "line 6: run: 0: at least 1"},
		{settings + strings.Replace(run, "host 3", "host 03", 1), `line 6: host: "03" is not a count`},
		{settings + strings.Replace(run, "host 3", "host -3", 1), `line 6: host: "-3" is not a count`},
		{settings + strings.Replace(run, "wazero", "trampolines", 1), `line 6: "trampolines" where wazero belongs`},
		{settings + strings.Replace(run, "12.5", "fast", 1), `line 6: ns/op "fast" is not a number`},
		{settings + run + run, "line 7: run 1 rejected glue 2 twice"},
		{settings + "function 1 rejected glue 2 5 f\n", "line 6: function of run 1 rejected glue 2 before its run line"},
		{settings + run + "function 1 rejected glue 2 5 f\nfunction 1 rejected glue 2 6 f\n", "line 8: function f twice"},
		{settings + run + "function 1 rejected glue 2 5\n", "line 7: a function line is"},
		{settings + run + "function 1 rejected glue 2 x f\n", `line 7: function f: "x" is not a count`},
		{settings + "sample 1\n", `line 6: unknown line "sample"`},
	} {
		_, err := parseSamples([]byte(c.text))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.text, err, c.want)
		}
	}
}

// A sample falls in the perf map's entry that starts last at or before it, if it is inside it:
// the module's function by its index and name map, or wazero's trampolines; outside every entry,
// the kernel's or the host's.
func TestClassify(t *testing.T) {
	entries, err := parsePerfMap([]byte("1000 40 [0/9].$3:::::L0\n" +
		"1040 10 [0/9].$3:::::L2\n1040 0 [0/9].$3:::::L1\n" + // two entries at one address: the longer holds it
		"2000 20 memory_grow_trampoline\n" +
		"3000 10 [1/9].$8:::::L0\n" + // an index the name map lacks
		"4000 10 [odd]:thing\n"))
	if err != nil {
		t.Fatal(err)
	}
	names := wasmnames.Map{{Index: 3, Name: "main.decide"}}
	samples := []sample{
		{ip: 0x1000}, {ip: 0x103f}, {ip: 0x1045}, // main.decide, thrice
		{ip: 0x1050},              // past the entries at 0x1040: the host's
		{ip: 0x2010},              // a trampoline
		{ip: 0x3000},              // $8
		{ip: 0x4001},              // a module's entry without an index
		{ip: 0x500, kernel: true}, // the kernel's
		{ip: 0x5000},              // the host's
	}
	kinds, functions := classify(samples, entries, names)
	if want := [4]int{5, 1, 2, 1}; kinds != want {
		t.Errorf("kinds %v, want %v (module, wazero, host, kernel)", kinds, want)
	}
	if want := map[string]int{"main.decide": 3, "$8": 1, "[odd]": 1}; !reflect.DeepEqual(functions, want) {
		t.Errorf("functions %v, want %v", functions, want)
	}
	for _, bad := range []string{"1000 40\n", "10x0 40 f\n", "1000 -40 f\n"} {
		if _, err := parsePerfMap([]byte(bad)); err == nil || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("perf map %q: %v", bad, err)
		}
	}
}

func TestParseScriptKeepsTheTestBinarysSamplesByProcess(t *testing.T) {
	byProcess, err := parseScript([]byte(
		"      perf-exec  17000 ffffffff8225f759 pvm_irq_enable ([kernel.kallsyms])\n" +
			"     bench.test  17001 ffffffff8225f759 pvm_irq_enable ([kernel.kallsyms])\n" +
			"     bench.test  17001     7f1d21e52000 [unknown] (/tmp/perf-17001.map)\n" +
			"     bench.test  17002           4a5b6c runtime.memmove (/tmp/bench.test)\n" +
			"             go  17003           4a5b6c main.main (/usr/bin/go)\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[int][]sample{17001: {{0xffffffff8225f759, true}, {0x7f1d21e52000, false}}, 17002: {{0x4a5b6c, false}}}
	if !reflect.DeepEqual(byProcess, want) {
		t.Errorf("%v, want %v", byProcess, want)
	}
	for _, c := range []struct{ text, want string }{
		{"go 1 4a5b6c main.main (/usr/bin/go)\n", "no samples of bench.test"},
		{"bench.test x 4a5b6c f (o)\n", `"x" is not a process id`},
		{"bench.test 12 4z5b6c f (o)\n", `"4z5b6c" is not an address`},
		{"bench.test 12\n", "is not COMM PID ADDRESS SYMBOL (OBJECT)"},
	} {
		if _, err := parseScript([]byte(c.text)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.text, err, c.want)
		}
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 800_000: "800,000", 1_000_000: "1,000,000", -1234: "-1,234"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

// Samples text never crashes the parser, and what it reads it writes back as it reads it.
func FuzzParseSamples(f *testing.F) {
	f.Add(twoRuns().text())
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
		if !bytes.Equal(again.text(), p.text()) {
			t.Fatalf("read back differently:\n%s\n%s", p.text(), again.text())
		}
		if _, err := p.tables("x"); err != nil && !strings.Contains(err.Error(), "has no samples of") {
			t.Fatal(err)
		}
	})
}

// A perf map never crashes its parser, and classifying against it never does.
func FuzzParsePerfMap(f *testing.F) {
	f.Add([]byte("1000 40 [0/9].$3:::::L0\n1040 0 [0/9].$3:::::L1\n2000 20 memory_grow_trampoline\n"), uint64(0x1001))
	f.Add([]byte("ffffffffffffffff ffffffffffffffff [0/1].$99999999999:x\n"), uint64(0xfffffffffffffffe))
	f.Fuzz(func(t *testing.T, text []byte, ip uint64) {
		entries, err := parsePerfMap(text)
		if err != nil {
			return
		}
		kinds, _ := classify([]sample{{ip: ip}}, entries, wasmnames.Map{{Index: 3, Name: "f"}})
		if sum(kinds[:]) != 1 {
			t.Fatalf("one sample counted %v", kinds)
		}
	})
}

// perf script's output never crashes its parser.
func FuzzParseScript(f *testing.F) {
	f.Add([]byte("     bench.test  17001 ffffffff8225f759 pvm_irq_enable ([kernel.kallsyms])\n"))
	f.Fuzz(func(t *testing.T, text []byte) {
		byProcess, err := parseScript(text)
		if err == nil && len(byProcess) == 0 {
			t.Fatal("no error and no samples")
		}
	})
}
