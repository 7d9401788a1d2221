package main

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-proxy/tollgate/internal/wasmnames"
)

// testBinary is the name of the bench package's test binary, and so its processes' comm in perf's
// samples.
const testBinary = "bench.test"

// record profiles every module and request type runs times, each at both lengths.
func record(runs, short, long, frequency int) (*profile, error) {
	if _, err := exec.LookPath("perf"); err != nil {
		return nil, fmt.Errorf("perf is not installed (Debian: apt-get install linux-perf); -parse FILE writes the tables from samples recorded before")
	}
	dir, err := os.MkdirTemp("", "tollgate-profile-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	binary := filepath.Join(dir, testBinary)
	build := exec.Command("go", "test", "-c", "-tags", "perfmap", "-o", binary, "./bench")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return nil, fmt.Errorf("go test -c ./bench: %w", err)
	}
	p := &profile{started: time.Now().UTC().Format(time.RFC3339), tree: describe(), frequency: frequency, short: short, long: long}
	for run := 1; run <= runs; run++ {
		for _, rt := range requestTypes {
			for _, m := range modules {
				for _, n := range []int{short, long} {
					r, cpu, err := recordOne(dir, binary, run, rt, m, n, frequency)
					if err != nil {
						return nil, fmt.Errorf("%s/%s, %d requests: %w", m, rt, n, err)
					}
					p.cpu = cmp.Or(p.cpu, cpu)
					p.runs = append(p.runs, r)
					fmt.Fprintf(os.Stderr, "run %d %s/%s %d requests: %s ns/op, %d samples\n", run, m, rt, n, r.nsPerOp, sum(r.kinds[:]))
				}
			}
		}
	}
	return p, nil
}

func sum(counts []int) int {
	total := 0
	for _, c := range counts {
		total += c
	}
	return total
}

// describe names the tree profiled, as the module's version does.
func describe() string {
	out, err := exec.Command("git", "describe", "--tags", "--always", "--dirty").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// recordOne profiles one module and request type for n requests, and counts its samples.
func recordOne(dir, binary string, run int, requestType, module string, n, frequency int) (*runSamples, string, error) {
	data, names := filepath.Join(dir, "perf.data"), filepath.Join(dir, "names")
	os.Remove(names) // the last run's module's: this run's benchmark writes its own
	pattern := "^BenchmarkAlone$/^" + regexp.QuoteMeta(module) + "$/^" + regexp.QuoteMeta(requestType) + "$"
	cmd := exec.Command("perf", "record", "-q", "-o", data, "-e", "cpu-clock", "-F", strconv.Itoa(frequency), "--",
		binary, "-test.run", "^$", "-test.bench", pattern, "-test.benchtime", strconv.Itoa(n)+"x")
	cmd.Dir = "bench" // where go test runs the package's tests
	cmd.Env = append(os.Environ(), "TOLLGATE_BENCH_NAMES="+names)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, "", fmt.Errorf("perf record: %w\n%s", err, out)
	}
	r := &runSamples{run: run, requestType: requestType, module: module, requests: n}
	var cpu string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 4 && strings.HasPrefix(f[0], "BenchmarkAlone/") && f[3] == "ns/op" {
			r.nsPerOp = f[2]
		}
		if c, ok := strings.CutPrefix(line, "cpu: "); ok {
			cpu = strings.TrimSpace(c)
		}
	}
	if r.nsPerOp == "" {
		return nil, "", fmt.Errorf("the benchmark printed no result:\n%s", out)
	}
	script, err := exec.Command("perf", "script", "-i", data, "-F", "comm,pid,ip,sym,dso").Output()
	if err != nil {
		return nil, "", fmt.Errorf("perf script: %w", err)
	}
	byProcess, err := parseScript(script)
	if err != nil {
		return nil, "", err
	}
	// The test process is the one wazero wrote a perf map for; the others are its children
	// before they ran another program (the module's build).
	var samples []sample
	var perfMap []byte
	mapFile := ""
	for pid, s := range byProcess {
		name := "/tmp/perf-" + strconv.Itoa(pid) + ".map" // where wazero writes it
		text, err := os.ReadFile(name)
		if err != nil {
			continue
		}
		os.Remove(name)
		if mapFile != "" {
			return nil, "", fmt.Errorf("two processes with perf maps: %s and %s", mapFile, name)
		}
		samples, perfMap, mapFile = s, text, name
	}
	if mapFile == "" {
		return nil, "", fmt.Errorf("no perf map of wazero's for any process of %s (is the test binary built with -tags perfmap?)", testBinary)
	}
	nameText, err := os.ReadFile(names)
	if err != nil {
		return nil, "", fmt.Errorf("the module's names (TOLLGATE_BENCH_NAMES): %w", err)
	}
	functionNames, err := wasmnames.ParseMap(nameText)
	if err != nil {
		return nil, "", fmt.Errorf("the module's names: %w", err)
	}
	entries, err := parsePerfMap(perfMap)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", mapFile, err)
	}
	r.kinds, r.functions = classify(samples, entries, functionNames)
	return r, cpu, nil
}

// sample is one sample of the test process: the instruction's address, and whether it was in
// the kernel.
type sample struct {
	ip     uint64
	kernel bool
}

// parseScript reads the samples of the test binary's processes from `perf script -F
// comm,pid,ip,sym,dso` ("bench.test 1234 7f1d21e52000 runtime.memmove (/path/bench.test)"), by
// process id: the samples of other commands (perf's own, the compiler's) are left out.
func parseScript(text []byte) (map[int][]sample, error) {
	byProcess := map[int][]sample{}
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 1 || f[0] != testBinary {
			continue
		}
		if len(f) < 3 {
			return nil, fmt.Errorf("perf script: %q is not COMM PID ADDRESS SYMBOL (OBJECT)", sc.Text())
		}
		pid, err := strconv.Atoi(f[1])
		if err != nil || pid <= 0 {
			return nil, fmt.Errorf("perf script: %q: %q is not a process id", sc.Text(), f[1])
		}
		s, err := parseSample(f[2:])
		if err != nil {
			return nil, fmt.Errorf("perf script: %q: %w", sc.Text(), err)
		}
		byProcess[pid] = append(byProcess[pid], s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("perf script: %w", err)
	}
	if len(byProcess) == 0 {
		return nil, fmt.Errorf("perf script: no samples of %s", testBinary)
	}
	return byProcess, nil
}

// parseSample reads a sample's address, symbol and object: "7f1d21e52000 runtime.memmove
// (/path/bench.test)"; in the kernel's object when that is perf's [kernel.kallsyms].
func parseSample(f []string) (sample, error) {
	ip, err := strconv.ParseUint(f[0], 16, 64)
	if err != nil {
		return sample{}, fmt.Errorf("%q is not an address", f[0])
	}
	return sample{ip: ip, kernel: slices.ContainsFunc(f[1:], func(s string) bool { return strings.Contains(s, "[kernel") })}, nil
}

// mapEntry is a line of a perf map: code at [start, start+size) named name.
type mapEntry struct {
	start, size uint64
	name        string
}

// parsePerfMap reads a perf map, "START SIZE NAME" a line with START and SIZE in hexadecimal,
// sorted by start.
func parsePerfMap(text []byte) ([]mapEntry, error) {
	var entries []mapEntry
	for i, line := range strings.Split(string(text), "\n") {
		if line == "" {
			continue
		}
		f := strings.SplitN(line, " ", 3)
		if len(f) != 3 {
			return nil, fmt.Errorf("line %d: %q is not START SIZE NAME", i+1, line)
		}
		start, err1 := strconv.ParseUint(f[0], 16, 64)
		size, err2 := strconv.ParseUint(f[1], 16, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("line %d: %q is not START SIZE NAME, in hexadecimal", i+1, line)
		}
		entries = append(entries, mapEntry{start, size, strings.TrimSpace(f[2])})
	}
	slices.SortFunc(entries, func(a, b mapEntry) int {
		return cmpEntries(a, b)
	})
	return entries, nil
}

// cmpEntries orders entries by start, then size, then name: of the entries that start at an
// address, the longest is the one a sample there falls in.
func cmpEntries(a, b mapEntry) int {
	if c := cmp.Compare(a.start, b.start); c != 0 {
		return c
	}
	if c := cmp.Compare(a.size, b.size); c != 0 {
		return c
	}
	return strings.Compare(a.name, b.name)
}

// moduleFunction matches wazero's name of a module's compiled function in its perf map:
// "[0/2161].$33:::::L0", the function with index 33 of the module (2161 its function count).
var moduleFunction = regexp.MustCompile(`^\[\d+/\d+\]\.\$(\d+)`)

// classify counts samples by kind (in the order of kinds) and those in the module's compiled code
// by function. A sample is in the entry of the perf map that starts last at or before its
// address, if it is inside it: the module's own code when wazero names the entry by its index in
// the module ("[...]"), its trampolines otherwise. A sample outside every entry is the kernel's
// or the host's (Go's code, the C library's and the vDSO's).
func classify(samples []sample, entries []mapEntry, names wasmnames.Map) (kindCounts [4]int, functions map[string]int) {
	functions = map[string]int{}
	for _, s := range samples {
		// The last entry that starts at or before the address.
		i := sort.Search(len(entries), func(i int) bool { return entries[i].start > s.ip }) - 1
		if i >= 0 && s.ip < entries[i].start+entries[i].size {
			e := entries[i]
			if !strings.HasPrefix(e.name, "[") {
				kindCounts[1]++
				continue
			}
			kindCounts[0]++
			functions[functionName(e.name, names)]++
			continue
		}
		if s.kernel {
			kindCounts[3]++
		} else {
			kindCounts[2]++
		}
	}
	return kindCounts, functions
}

// functionName is the name of a module's function from its perf map entry: its name in the
// module's name map, "$INDEX" when the map has none, the entry's name up to its first ':' when it
// holds no index.
func functionName(entry string, names wasmnames.Map) string {
	m := moduleFunction.FindStringSubmatch(entry)
	if m == nil {
		name, _, _ := strings.Cut(entry, ":")
		return name
	}
	index, err := strconv.ParseUint(m[1], 10, 32)
	if err != nil {
		return "$" + m[1]
	}
	if name, ok := names.Lookup(uint32(index)); ok {
		return name
	}
	return "$" + m[1]
}
