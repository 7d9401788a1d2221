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
	"strconv"
	"strings"
	"time"

	"golang.org/x/perf/benchfmt"

	"github.com/tollgate-proxy/tollgate/internal/wasmnames"
)

// testBinary is the name of the bench package's test binary, and so its processes' comm in perf's
// samples.
const testBinary = "bench.test"

// record profiles every module and request type rounds times, each at both lengths.
func record(rounds, short, long, frequency int) (*profile, error) {
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
	for round := 1; round <= rounds; round++ {
		for _, rt := range requestTypes {
			for _, m := range modules {
				for _, n := range []int{short, long} {
					r, cpu, err := recordOne(dir, binary, round, rt, m, n, frequency)
					if err != nil {
						return nil, fmt.Errorf("%s/%s, %d requests: %w", m, rt, n, err)
					}
					p.cpu = cmp.Or(p.cpu, cpu)
					p.recordings = append(p.recordings, r)
					fmt.Fprintf(os.Stderr, "round %d %s/%s %d requests: %s ns/op, %d samples\n", round, m, rt, n, r.nsPerOp, sum(r.kinds[:]))
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

// describe names the tree profiled as the module's version does: git describe --tags --always
// --dirty.
func describe() string {
	out, err := exec.Command("git", "describe", "--tags", "--always", "--dirty").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// perfMaps are the perf maps in /tmp, where wazero writes them.
func perfMaps() []string {
	maps, _ := filepath.Glob("/tmp/perf-*.map")
	return maps
}

// recordOne profiles one module and request type for n requests, and counts its samples.
func recordOne(dir, binary string, round int, requestType, module string, n, frequency int) (r *recording, cpu string, err error) {
	data, namesFile := filepath.Join(dir, "perf.data"), filepath.Join(dir, "names")
	os.Remove(namesFile) // the last recording's module's: this one's benchmark writes its own
	// The perf maps that appear while it runs are its test process's: removed when it ends, once
	// perf script has read them, whatever the outcome. (Another process running wazero with its
	// perfmap tag at the same time would lose its map too.)
	before := perfMaps()
	defer func() {
		for _, m := range perfMaps() {
			if !slices.Contains(before, m) {
				os.Remove(m)
			}
		}
	}()
	pattern := "^BenchmarkAlone$/^" + regexp.QuoteMeta(module) + "$/^" + regexp.QuoteMeta(requestType) + "$"
	cmd := exec.Command("perf", "record", "-q", "-o", data, "-e", "cpu-clock", "-F", strconv.Itoa(frequency), "--",
		binary, "-test.run", "^$", "-test.bench", pattern, "-test.benchtime", strconv.Itoa(n)+"x")
	cmd.Dir = "bench" // where go test runs the package's tests
	cmd.Env = append(os.Environ(), "TOLLGATE_BENCH_NAMES="+namesFile)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, "", fmt.Errorf("perf record: %w (if perf says it may not, see kernel.perf_event_paranoid)\n%s", err, out)
	}
	r = &recording{round: round, requestType: requestType, module: module, requests: n}
	if r.nsPerOp, cpu, err = parseBenchOutput(out); err != nil {
		return nil, "", err
	}
	script, err := exec.Command("perf", "script", "-i", data, "-F", "comm,pid,ip,sym,dso").Output()
	if err != nil {
		return nil, "", fmt.Errorf("perf script: %w", err)
	}
	byProcess, err := parseScript(script)
	if err != nil {
		return nil, "", err
	}
	// The test process is the one with samples in its perf map; the others are its children
	// before they ran another program (the module's build).
	pid := 0
	for p, samples := range byProcess {
		if slices.ContainsFunc(samples, func(s sample) bool { return s.object == perfMap(p) }) {
			if pid != 0 {
				return nil, "", fmt.Errorf("perf script: samples in the perf maps of two processes, %d and %d", pid, p)
			}
			pid = p
		}
	}
	switch {
	case pid == 0:
		return nil, "", fmt.Errorf("perf script: no samples in a perf map of wazero's (is /tmp writable?)")
	case slices.Contains(before, perfMap(pid)):
		return nil, "", fmt.Errorf("%s was there before the benchmark ran, and wazero added to it: remove it and profile again", perfMap(pid))
	}
	nameText, err := os.ReadFile(namesFile)
	if err != nil {
		return nil, "", fmt.Errorf("the module's names (TOLLGATE_BENCH_NAMES): %w", err)
	}
	names, err := wasmnames.ParseMap(nameText)
	if err != nil {
		return nil, "", fmt.Errorf("the module's names: %w", err)
	}
	r.kinds, r.functions = classify(byProcess[pid], perfMap(pid), names)
	return r, cpu, nil
}

// perfMap is the perf map wazero writes for the process pid.
func perfMap(pid int) string { return "/tmp/perf-" + strconv.Itoa(pid) + ".map" }

// parseBenchOutput reads BenchmarkAlone's ns/op and go test's cpu line from the test binary's
// output (benchfmt reads the format; ns/op is kept as go test printed it).
func parseBenchOutput(out []byte) (nsPerOp, cpu string, err error) {
	rd := benchfmt.NewReader(bytes.NewReader(out), "the benchmark's output")
	for rd.Scan() {
		r, ok := rd.Result().(*benchfmt.Result)
		if !ok || string(r.Name.Base()) != "Alone" {
			continue
		}
		for _, v := range r.Values {
			if v.OrigUnit == "ns/op" {
				nsPerOp = strconv.FormatFloat(v.OrigValue, 'f', -1, 64)
			}
		}
		cpu = strings.TrimSpace(r.GetConfig("cpu"))
	}
	if err := rd.Err(); err != nil {
		return "", "", err
	}
	if nsPerOp == "" {
		return "", "", fmt.Errorf("the benchmark printed no result:\n%s", out)
	}
	return nsPerOp, cpu, nil
}

// sample is one sample of the test binary's: its address, the symbol perf names it by and the
// object it is in, as perf script prints them.
type sample struct {
	ip             uint64
	symbol, object string
}

// parseScript reads the samples of the test binary's processes from `perf script -F
// comm,pid,ip,sym,dso` ("bench.test 1234 7f1d21e52000 runtime.memmove (/tmp/bench.test)"), by
// process id: the samples of other commands (perf's own, the compiler's) are left out.
func parseScript(text []byte) (map[int][]sample, error) {
	byProcess := map[int][]sample{}
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for line := 1; sc.Scan(); line++ {
		f := strings.Fields(sc.Text())
		if len(f) < 1 || f[0] != testBinary {
			continue
		}
		if len(f) < 5 || !strings.HasPrefix(f[len(f)-1], "(") || !strings.HasSuffix(f[len(f)-1], ")") {
			return nil, fmt.Errorf("perf script, line %d: %q is not COMM PID ADDRESS SYMBOL (OBJECT)", line, sc.Text())
		}
		pid, err := strconv.Atoi(f[1])
		if err != nil || pid <= 0 {
			return nil, fmt.Errorf("perf script, line %d: %q is not a process id", line, f[1])
		}
		ip, err := strconv.ParseUint(f[2], 16, 64)
		if err != nil {
			return nil, fmt.Errorf("perf script, line %d: %q is not an address", line, f[2])
		}
		object := f[len(f)-1]
		byProcess[pid] = append(byProcess[pid], sample{ip, strings.Join(f[3:len(f)-1], " "), object[1 : len(object)-1]})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("perf script: %w", err)
	}
	if len(byProcess) == 0 {
		return nil, fmt.Errorf("perf script: no samples of %s", testBinary)
	}
	return byProcess, nil
}

// moduleEntry matches the start of wazero's names of a module's compiled functions in its perf
// map, "[CODE/LAST]" (see functionName).
var moduleEntry = regexp.MustCompile(`^\[\d+/\d+\]`)

// classify counts samples by kind (in the order of kinds) and those in the module's compiled code
// by function. A sample in perfMap, wazero's map of the code it compiled, is in the module's own
// code when perf names it by an entry of a module's function, in wazero's other code (its
// trampolines) otherwise; any other is the kernel's (in its object, or at a kernel address) or
// the host's (Go's code, the C library's and the vDSO's).
func classify(samples []sample, perfMap string, names wasmnames.Map) (kindCounts [kindCount]int, functions map[string]int) {
	functions = map[string]int{}
	for _, s := range samples {
		switch {
		case s.object == perfMap && moduleEntry.MatchString(s.symbol):
			kindCounts[kindModule]++
			functions[functionName(s.symbol, names)]++
		case s.object == perfMap:
			kindCounts[kindWazero]++
		case strings.HasPrefix(s.object, "[kernel") || s.ip >= 1<<63:
			kindCounts[kindKernel]++
		default:
			kindCounts[kindHost]++
		}
	}
	return kindCounts, functions
}

// functionName is the name of a module's function from wazero's name of its compiled code in the
// perf map: "[CODE/LAST]" (its place among the module's compiled functions), then the name the
// module exports it by, or "." and the name the module's name section gives it, or ".$INDEX"
// (its index in the module's function index space) when it has neither, then ":::::L" and the
// number of a block of it. A function by its index takes its name from names, the module's name
// map (with "$INDEX" when the map has none).
func functionName(entry string, names wasmnames.Map) string {
	name, _, _ := strings.Cut(entry, ":::::")
	if prefix := moduleEntry.FindString(name); prefix != "" {
		name = strings.TrimPrefix(name[len(prefix):], ".")
	}
	digits, ok := strings.CutPrefix(name, "$")
	if !ok {
		return name
	}
	index, err := strconv.ParseUint(digits, 10, 32)
	if err != nil {
		return name
	}
	if n, ok := names.Lookup(uint32(index)); ok {
		return n
	}
	return name
}
