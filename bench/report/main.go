// Command report runs the benchmarks BENCHMARKS.md quotes, once, and writes what it quotes from
// that one run: the raw `go test -bench` output (bench/results/report.txt, for benchstat), the
// tables (bench/results/report.md), and the same tables into BENCHMARKS.md's generated sections,
// each between its markers ("bench-report", "bench-report:http", "bench-report:startup"). No
// figure in those tables comes from anywhere else, so none can go stale. `make bench-report`
// runs it from the repository's root; -count sets the repetitions (medians with [min..max] are
// reported), -parse FILE rebuilds the tables from a raw output without running anything.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/perf/benchfmt"
)

func main() {
	count := flag.Int("count", 5, "repetitions of each benchmark")
	parse := flag.String("parse", "", "build the tables from this raw output instead of running the benchmarks")
	dir := flag.String("out", "bench/results", "where report.txt and report.md go")
	doc := flag.String("doc", "BENCHMARKS.md", "the document whose bench-report section is replaced")
	flag.Parse()
	if err := run(*count, *parse, *dir, *doc); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}

// The benchmarks the tables quote, by how long each runs: one `go test` each, in this order. The
// interleaved ones (Floor, Surface, Direct) each have a process of their own: run after the others
// in one process, BenchmarkDirect measured every module it interleaves slower by about as many
// nanoseconds a request, which lowered its ratios (BENCHMARKS.md, section 1, "One process each").
var benchmarks = []struct{ pattern, benchtime string }{
	{`^BenchmarkFloor$`, "20000x"},
	{`^BenchmarkSurface$`, "20000x"},
	{`^BenchmarkDirect$`, "20000x"},
	{`^(BenchmarkCrossings|BenchmarkModuleSize|BenchmarkMemory|BenchmarkDecision)$`, "20000x"},
	// Ten blocks of 512 requests per load, through the gateway and around it.
	{`^BenchmarkHTTP$`, "5120x"},
	// A worker's start takes milliseconds with the module compiled, most of a second with its
	// compilation.
	{`^BenchmarkStartup$/./^compiled$`, "50x"},
	{`^BenchmarkStartup$/./^with-compile$`, "5x"},
	// Instantiation alone, the module against its build before its data was packed.
	{`^BenchmarkUnpack$`, "200x"},
}

func run(count int, parse, dir, doc string) error {
	var raw []byte
	if parse != "" {
		var err error
		if raw, err = os.ReadFile(parse); err != nil {
			return err
		}
	} else {
		var out bytes.Buffer
		start := time.Now()
		for _, set := range benchmarks {
			// TOLLGATE_BENCH_BASELINE, when set, passes through to BenchmarkFloor.
			cmd := exec.Command("go", "test", "-run", "^$", "-bench", set.pattern, "-benchtime", set.benchtime,
				"-count", strconv.Itoa(count), "-timeout", "2h", "./bench/")
			cmd.Stdout, cmd.Stderr = io.MultiWriter(&out, os.Stdout), os.Stderr
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("go test -bench %s: %w", set.pattern, err)
			}
		}
		fmt.Fprintf(&out, "# report: %s, -count %d, %s, load average at the end %s\n",
			time.Now().UTC().Format(time.RFC3339), count, time.Since(start).Round(time.Second), loadAverage())
		raw = out.Bytes()
		if err := os.WriteFile(dir+"/report.txt", raw, 0o644); err != nil {
			return err
		}
	}
	results, err := parseBench(raw)
	if err != nil {
		return err
	}
	sections := render(results, header(raw))
	all := make([]string, len(sections))
	for i, s := range sections {
		all[i] = s.tables
	}
	if err := os.WriteFile(dir+"/report.md", []byte(strings.Join(all, "\n")), 0o644); err != nil {
		return err
	}
	return replaceSections(doc, sections)
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// header is the run's environment lines (the cpu, the report line), each once: every `go test`
// of the run prints the cpu.
func header(raw []byte) []string {
	var lines []string
	for _, l := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(l, "cpu:") || strings.HasPrefix(l, "# report:") {
			if line := strings.TrimSpace(strings.TrimPrefix(l, "# report:")); !slices.Contains(lines, line) {
				lines = append(lines, line)
			}
		}
	}
	return append(lines, "go: "+runtime.Version())
}

// results holds every value of every metric of every benchmark, by name ("Floor/rejected") and
// unit ("ns/op", "vs-floor").
type results map[string]map[string][]float64

// renamedUnits are units of older runs (bench/results) under their current names: the floor
// ratios were "tollgate/floor" and "tollgate/floor+clock", one a prefix of the other.
var renamedUnits = map[string]string{"tollgate/floor": "vs-floor", "tollgate/floor+clock": "vs-clocked-floor"}

// parseBench reads `go test -bench` output with benchfmt: each result under its name without the
// GOMAXPROCS suffix ("Floor/admitted-known"), each value under the unit go test printed.
func parseBench(raw []byte) (results, error) {
	r := results{}
	rd := benchfmt.NewReader(bytes.NewReader(raw), "the run's output")
	for rd.Scan() {
		switch rec := rd.Result().(type) {
		case *benchfmt.SyntaxError:
			// A result line benchfmt cannot read: a benchmark that failed after its name was
			// printed ("--- FAIL" follows it on the line). go test fails then, and so does the report.
			return nil, fmt.Errorf("a benchmark failed: %v", rec)
		case *benchfmt.Result:
			name := benchName(rec.Name)
			if r[name] == nil {
				r[name] = map[string][]float64{}
			}
			for _, v := range rec.Values {
				value, unit := v.Value, v.Unit
				if v.OrigUnit != "" { // benchfmt tidied it (ns/op into sec/op)
					value, unit = v.OrigValue, v.OrigUnit
				}
				if current, ok := renamedUnits[unit]; ok {
					unit = current
				}
				r[name][unit] = append(r[name][unit], value)
			}
		}
	}
	if err := rd.Err(); err != nil {
		return nil, err
	}
	if len(r) == 0 {
		return nil, fmt.Errorf("no benchmark results")
	}
	return r, nil
}

// benchName is a benchmark's name without its GOMAXPROCS suffix.
func benchName(n benchfmt.Name) string {
	base, parts := n.Parts()
	name := string(base)
	for _, p := range parts {
		if p[0] != '-' {
			name += string(p)
		}
	}
	return name
}

// figure is a metric's median over the runs, with its range.
type figure struct {
	median, min, max float64
	ok               bool
}

func (r results) get(name, unit string) figure {
	vs := slices.Clone(r[name][unit])
	if len(vs) == 0 {
		return figure{}
	}
	slices.Sort(vs)
	m := vs[len(vs)/2]
	if len(vs)%2 == 0 {
		m = (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
	}
	return figure{median: m, min: vs[0], max: vs[len(vs)-1], ok: true}
}

// runByRun is the figure of f(a, b) taken run by run (the values of one run are paired by order).
func (r results) runByRun(name, a, b string, f func(a, b float64) float64) figure {
	as, bs := r[name][a], r[name][b]
	if len(as) == 0 || len(as) != len(bs) {
		return figure{}
	}
	q := results{name: {"q": make([]float64, len(as))}}
	for i := range as {
		q[name]["q"][i] = f(as[i], bs[i])
	}
	return q.get(name, "q")
}

// quotient is the figure of a/b taken run by run.
func (r results) quotient(name, a, b string) figure {
	return r.runByRun(name, a, b, func(a, b float64) float64 { return a / b })
}

// cutToReach is how much of Tollgate's time beyond a probe's must go for its vs-clocked-floor
// to reach target, run by run: 1 - (target - bound) / (ratio - bound), where bound is the
// probe's time over the clocked floor's (the unit boundUnit of BenchmarkSurface). Above 1 when
// the probe alone is over the target.
func (r results) cutToReach(name, boundUnit string, target float64) figure {
	return r.runByRun(name, "vs-clocked-floor", boundUnit, func(ratio, bound float64) float64 {
		return 1 - (target-bound)/(ratio-bound)
	})
}

// percent writes a fraction as a whole percentage, with its range when the runs differ.
func (f figure) percent() string {
	if !f.ok {
		return "–"
	}
	s := number(f.median*100, 0) + " %"
	if f.min != f.max {
		s += " [" + number(f.min*100, 0) + ".." + number(f.max*100, 0) + "]"
	}
	return s
}

// format writes a figure with the given decimals; the range only when the runs differ.
func (f figure) format(decimals int) string {
	if !f.ok {
		return "–"
	}
	s := number(f.median, decimals)
	if f.min != f.max {
		s += " [" + number(f.min, decimals) + ".." + number(f.max, decimals) + "]"
	}
	return s
}

// number formats with thousands separators for large values.
func number(v float64, decimals int) string {
	s := strconv.FormatFloat(v, 'f', decimals, 64)
	intPart, frac, _ := strings.Cut(s, ".")
	neg := strings.HasPrefix(intPart, "-")
	intPart = strings.TrimPrefix(intPart, "-")
	var b strings.Builder
	for i, c := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	out := b.String()
	if frac != "" {
		out += "." + frac
	}
	if neg {
		out = "-" + out
	}
	return out
}

// met says whether a measured figure meets its target; "–" when it was not measured.
func met(measured, ok bool) string {
	if !measured {
		return "–"
	}
	if ok {
		return "yes"
	}
	return "**no**"
}

var requestTypes = []struct{ name, label string }{
	{"admitted-known", "admitted, known key"},
	{"rejected", "rejected (bucket empty)"},
	{"new-key", "new key, row never written"},
	{"new-key-reused-slot", "new key, idle slot in a row written before"},
	{"missing-key", "no key (401)"},
	{"admitted-known-headers", "admitted, known key, rate-limit headers"},
	{"rejected-headers", "rejected (bucket empty), rate-limit headers"},
}

// section is the tables of one generated section of the document, by its marker's name.
type section struct{ marker, tables string }

// render is the sections BENCHMARKS.md quotes, from one run's results and its environment.
func render(r results, env []string) []section {
	one := func(marker string, parts ...func(writef, results)) section {
		var b strings.Builder
		w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
		w("<!-- Generated by `make bench-report` from bench/results/report.txt; do not edit by hand. -->\n\n")
		if marker == "bench-report" {
			w("Run: %s.\n\n", strings.Join(env, "; "))
		}
		for _, part := range parts {
			part(w, r)
		}
		return section{marker, b.String()}
	}
	return []section{
		one("bench-report", renderTargets, renderRequestTypes, renderModule, renderMemoryAndDecisions),
		one("bench-report:http", renderHTTP),
		one("bench-report:startup", renderStartup),
	}
}

// writef writes to the tables being rendered.
type writef func(format string, args ...any)

// renderTargets writes the table of targets, each with its figure and whether it is met. A time
// target is met robustly: by the range's upper end, not by one good run.
func renderTargets(w writef, r results) {
	count := len(r["Floor/admitted-known"]["ns/op"])
	guest := r.get("Crossings/tollgate/admitted-known", "guest-calls/op")
	size := r.get("ModuleSize/tollgate", "bytes")
	allocs := figure{}
	for _, rt := range requestTypes {
		if f := r.get("Crossings/tollgate/"+rt.name, "guest-allocs/op"); f.ok && (!allocs.ok || f.median > allocs.median) {
			allocs = f
		}
	}
	first, second := r.get("Memory", "1M-pages"), r.get("Memory", "2M-pages")
	w("| target | measured (median of %d runs [min..max]) | met? |\n|---|---|---|\n", count)
	// The Go runtime adds about one WASI call per thousand requests of its own (the .01).
	for _, t := range timeTargets {
		ratio := r.get("Floor/"+t.request, t.unit)
		host := r.get("Crossings/tollgate/"+t.request, "hostcalls/op")
		label := labelOf(t.request)
		w("| %s: `%s` ≤ %s | **%s** | %s |\n", label, t.unit, number(t.ratio, 1), ratio.format(2), met(ratio.ok, ratio.max <= t.ratio))
		w("| %s: host calls ≤ %d | **%s** (floor: %s) | %s |\n", label, t.hostCalls, host.format(3),
			r.get("Crossings/floor/"+t.request, "hostcalls/op").format(3), met(host.ok, host.median < float64(t.hostCalls)+0.5))
		// The least vs-clocked-floor any module making Tollgate's crossings can have, and how much
		// less of Tollgate's own time the target leaves, both from BenchmarkSurface alone.
		if bound := r.get("Surface/"+t.request, "surface-over-clocked-floor"); bound.ok && t.unit == "vs-clocked-floor" {
			surface := "Surface/" + t.request
			w("| (bound) %s: the surface probe (Tollgate's crossings and nothing else) / clocked floor, same run | %s | – |\n",
				label, bound.format(2))
			// The same crossings through Tollgate's ABI layer, deciding nothing: what is left
			// for the decision itself.
			if glue := r.get(surface, "glue-over-clocked-floor"); glue.ok {
				w("| (bound) %s: the glue probe (the same crossings through Tollgate's ABI layer, deciding nothing) / clocked floor, same run | %s | – |\n",
					label, glue.format(2))
			}
			w("| (bound) %s: Tollgate / clocked floor in the same benchmark; its time beyond the surface probe's must fall by | %s; %s | – |\n",
				label, r.get(surface, "vs-clocked-floor").format(2), r.cutToReach(surface, "surface-over-clocked-floor", t.ratio).percent())
			if cut := r.cutToReach(surface, "glue-over-clocked-floor", t.ratio); cut.ok {
				w("| (bound) %s: with the ABI layer as it is, the decision's time (Tollgate's beyond the glue probe's) must fall by | %s | – |\n",
					label, cut.percent())
			}
			// A decision written directly for the benchmarks' rule on the same layer, from
			// BenchmarkDirect: how far the target lies from what deciding costs there at all.
			if direct := r.get("Direct/"+t.request, "direct-over-clocked-floor"); direct.ok {
				w("| (bound) %s: the direct-decision probe (the same crossings through Tollgate's ABI layer, the benchmarks' one rule decided in one function) / clocked floor, same run | %s | – |\n",
					label, direct.format(2))
				w("| (bound) %s: Tollgate / the direct-decision probe, same run | %s | – |\n",
					label, r.get("Direct/"+t.request, "vs-direct").format(2))
			}
		}
	}
	// A baseline module (TOLLGATE_BENCH_BASELINE) interleaved in the same run: before and after.
	for _, rt := range requestTypes {
		if f := r.get("Floor/"+rt.name, "baseline/floor"); f.ok {
			w("| (reported) baseline module / floor, %s, same run | %s | – |\n", rt.label, f.format(2))
			w("| (reported) Tollgate / baseline module, %s, run by run | %s | – |\n", rt.label, r.quotient("Floor/"+rt.name, "vs-floor", "baseline/floor").format(2))
		}
	}
	w("| guest function calls per admitted request ≤ 45 | **%s** (floor: %s) | %s |\n", guest.format(0),
		r.get("Crossings/floor/admitted-known", "guest-calls/op").format(0), met(guest.ok, guest.median <= 45))
	w("| guest heap allocations per request 0 | %s (most of any request type) | %s |\n", allocs.format(2), met(allocs.ok, allocs.median == 0))
	w("| linear memory flat between 1M and 2M requests | %s pages after 1M, %s after 2M | %s |\n",
		first.format(0), second.format(0), met(first.ok, first.median == second.median))
	configure := r.get("Startup/example/compiled", "configure-ns/op")
	w("| configure ≤ %d ms (`proxy_on_vm_start`, `proxy_on_configure`, the first request), example configuration, one worker | **%s** ms | %s |\n",
		startupTarget, configure.milliseconds(), met(configure.ok, configure.median <= startupTarget*1e6))
	w("| module (`make build`) ≤ %s bytes | **%s** bytes (gzip %s) | %s |\n\n", number(moduleTarget, 0), size.format(0),
		r.get("ModuleSize/tollgate", "gzip-bytes").format(0), met(size.ok, size.median <= moduleTarget))
}

// timeTargets are the targets on time and host calls per request type: Tollgate's time over the
// floor probe's (or the clocked probe's, for the requests every time-based limiter must read the
// clock for), met by the range's upper end.
var timeTargets = []struct {
	request, unit string
	ratio         float64
	hostCalls     int
}{
	{"admitted-known", "vs-clocked-floor", 1.8, 4},
	{"rejected", "vs-clocked-floor", 1.5, 3},
	{"new-key", "vs-floor", 2.5, 6},
	{"new-key-reused-slot", "vs-floor", 2.5, 6},
}

// labelOf is a request type's label in the tables (requestTypes).
func labelOf(request string) string {
	for _, rt := range requestTypes {
		if rt.name == request {
			return rt.label
		}
	}
	return request
}

// moduleTarget is the most the module may weigh, in bytes.
const moduleTarget = 2_500_000

// renderRequestTypes writes the table of time, crossings and bulk memory instructions per request
// type.
func renderRequestTypes(w writef, r results) {
	w("Per request type: Tollgate against the floor probe, interleaved in one run (`BenchmarkFloor`), and\n")
	w("what crosses the boundary per request, with the `memory.copy` and `memory.fill` instructions the\n")
	w("module runs (`BenchmarkCrossings`, exact counts; section 1, \"Copies\").\n\n")
	w("| request | Tollgate ns/op | floor ns/op | vs-floor | host calls | callbacks | allocator calls | guest calls | copies | fills | guest allocs |\n")
	w("|---|---|---|---|---|---|---|---|---|---|---|\n")
	counts := func(c string) []any {
		return []any{r.get(c, "hostcalls/op").format(3), r.get(c, "callbacks/op").format(3), r.get(c, "alloc-callbacks/op").format(3),
			r.get(c, "guest-calls/op").format(0), r.get(c, "bulk-copies/op").format(2), r.get(c, "bulk-fills/op").format(2),
			r.get(c, "guest-allocs/op").format(2)}
	}
	for _, rt := range requestTypes {
		f := "Floor/" + rt.name
		w("| %s | %s | %s | **%s** | %s | %s | %s | %s | %s | %s | %s |\n", append([]any{rt.label,
			r.get(f, "ns/op").format(0), r.get(f, "floor-ns/op").format(0), r.get(f, "vs-floor").format(2)},
			counts("Crossings/tollgate/"+rt.name)...)...)
	}
	for _, rt := range []string{"admitted-known", "new-key"} {
		w("| floor probe, %s | | | | %s | %s | %s | %s | %s | %s | %s |\n",
			append([]any{strings.ReplaceAll(rt, "-", " ")}, counts("Crossings/floor/"+rt)...)...)
	}
}

// renderModule writes the modules' sizes and where the Tollgate module's bytes go.
func renderModule(w writef, r results) {
	w("\n| module | raw bytes | gzip bytes |\n|---|---|---|\n")
	for _, m := range []string{"tollgate", "floor"} {
		w("| %s | %s | %s |\n", m, r.get("ModuleSize/"+m, "bytes").format(0), r.get("ModuleSize/"+m, "gzip-bytes").format(0))
	}
	w("\nWhere the Tollgate module's bytes go (`BenchmarkModuleSize`: function bodies by package from the function\n")
	w("name map `make build` writes beside the module, and the other sections; the pieces add up to the module).\n\n")
	w("| piece of the module | bytes |\n|---|---|\n")
	for _, p := range []struct{ unit, label string }{
		{"code-runtime-bytes", "code: the Go runtime"},
		{"code-config-bytes", "code: `config` (parser and validator)"},
		{"code-admission-bytes", "code: `internal/admission`"},
		{"code-filter-bytes", "code: `filter`, `internal/plugin`, `internal/abi`, `internal/wire`, `internal/rls`, `internal/usage`, `internal/heavy`, `internal/digest`"},
		{"code-limiter-netaddr-bytes", "code: `limiter`, `internal/netaddr`, `internal/duration`"},
		{"code-strconv-bytes", "code: `strconv`"},
		{"code-other-bytes", "code: the rest of the standard library"},
		{"data-bytes", "data (the runtime's pclntab, types, strings), packed into one segment, and the start function that unpacks it"},
		{"names-bytes", "name section (the entry points' names, for Envoy's backtraces; the rest in `tollgate.wasm.names`)"},
		{"other-bytes", "the rest (types, imports, exports, section headers)"},
	} {
		w("| %s | %s |\n", p.label, r.get("ModuleSize/tollgate", p.unit).format(0))
	}
}

// renderMemoryAndDecisions writes the linear memory table and the native decisions' table.
func renderMemoryAndDecisions(w writef, r results) {
	first, second := r.get("Memory", "1M-pages"), r.get("Memory", "2M-pages")
	w("\n| linear memory (64 KiB pages) | after `_initialize` | after start | after 1M requests | after 2M |\n|---|---|---|---|---|\n")
	w("| one VM, 10,000 keys | %s | %s | %s | %s |\n", r.get("Memory", "init-pages").format(0),
		r.get("Memory", "started-pages").format(0), first.format(0), second.format(0))
	w("\nNatively (`BenchmarkDecision`, no Wasm): one decision on a per-key limiter from a map, cycling over\n")
	w("10,000 keys, and the module's whole decision on an in-memory store.\n\n")
	w("| decision | ns/op | allocs/op |\n|---|---|---|\n")
	for _, d := range []struct{ name, label string }{
		{"limiter", "`limiter.Bucket.Take` (Tollgate)"},
		{"x-time-rate", "`rate.Limiter.Allow` (golang.org/x/time/rate)"},
		{"admission", "`admission.Gate.Admit`, the module's whole decision"},
	} {
		w("| %s | %s | %s |\n", d.label, r.get("Decision/"+d.name, "ns/op").format(1), r.get("Decision/"+d.name, "allocs/op").format(0))
	}
}

// httpLoads are BenchmarkHTTP's loads, in the order of the table.
var httpLoads = []struct{ name, label string }{
	{"admitted-known", "admitted, known keys"},
	{"rejected", "rejected: every key over its limit"},
	{"new-key", "new key: every request a key never seen"},
	{"missing-key", "no key: every request without one (401)"},
}

// renderHTTP writes the throughput through the gateway under each load, with and without the
// filter, measured in turns in the same run.
func renderHTTP(w writef, r results) {
	w("| load (2 worker VMs, 8 clients) | with the filter, req/s | pass-through, req/s | with / without |\n|---|---|---|---|\n")
	for _, l := range httpLoads {
		name := "HTTP/" + l.name
		w("| %s | %s | %s | **%s** |\n", l.label, r.get(name, "req/s").format(0),
			r.get(name, "passthrough-req/s").format(0), r.get(name, "filter/passthrough").format(2))
	}
}

// startupTarget is the most the example configuration's configure phase may take, in ms.
const startupTarget = 5

// renderStartup writes what starting one worker costs, phase by phase, in milliseconds.
func renderStartup(w writef, r results) {
	w("| one worker's start, ms | compile | instantiate, `_initialize` | configure, first request | whole |\n|---|---|---|---|---|\n")
	for _, config := range []struct{ name, label string }{{"example", "example (`examples/tollgate.json`)"}, {"64-rules", "64 rules"}} {
		for _, mode := range []struct{ name, label string }{{"compiled", "compiled"}, {"with-compile", "with compilation"}} {
			name := "Startup/" + config.name + "/" + mode.name
			w("| %s, %s | %s | %s | %s | %s |\n", config.label, mode.label,
				r.get(name, "compile-ns/op").milliseconds(), r.get(name, "instantiate-ns/op").milliseconds(),
				r.get(name, "configure-ns/op").milliseconds(), r.get(name, "ns/op").milliseconds())
		}
	}
	w("\nInstantiation alone (`BenchmarkUnpack`: no `_initialize`, the imports stubbed): the module, whose\n"+
		"start function unpacks its data, %s ms; the same build before its data was packed, whose\n"+
		"segments the engine writes, %s ms: **%s** of the time, run by run.\n",
		r.get("Unpack", "ns/op").milliseconds(), r.get("Unpack", "segments-ns/op").milliseconds(),
		r.get("Unpack", "packed/segments").format(2))
}

// milliseconds formats a figure in nanoseconds as milliseconds: whole ones from 100 ms.
func (f figure) milliseconds() string {
	ms := figure{median: f.median / 1e6, min: f.min / 1e6, max: f.max / 1e6, ok: f.ok}
	if ms.median >= 100 {
		return ms.format(0)
	}
	return ms.format(2)
}

// replaceSections puts each section's tables between its markers in the document.
func replaceSections(path string, sections []section) error {
	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(doc)
	for _, sec := range sections {
		beginMarker, endMarker := "<!-- "+sec.marker+":begin -->", "<!-- "+sec.marker+":end -->"
		begin, end := strings.Index(s, beginMarker), strings.Index(s, endMarker)
		if begin < 0 || end < begin {
			return fmt.Errorf("%s has no %s … %s section", path, beginMarker, endMarker)
		}
		s = s[:begin+len(beginMarker)] + "\n" + sec.tables + s[end:]
	}
	return os.WriteFile(path, []byte(s), 0o644)
}
