package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tollgate-proxy/tollgate/config"
	"github.com/tollgate-proxy/tollgate/internal/simulate"
)

// progressFrom is the number of requests from which the replay draws a progress bar (on a
// terminal only).
const progressFrom = 50_000

// simulateFlags are tollgate simulate's flags, checked.
type simulateFlags struct {
	configPath, logPath, outDir, comparePath, wasmPath string
	format                                             simulate.Format
	showKeys, suggest                                  bool
	suggestPercent                                     float64
	top, phases                                        int
	seed                                               uint64
	fleet                                              *fleetFlags
}

// simulateCmd replays an access log through the module with one configuration (and another to
// compare) and writes DIR/summary.json and DIR/report.html.
func simulateCmd(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	f, ok := parseSimulateFlags(args, stderr)
	if !ok {
		return 2
	}
	configs, ok := readSimulateConfigs(stderr, f.configPath, f.comparePath)
	if !ok {
		return 1
	}
	if !checkFleet(stderr, f.fleet, configs[0].Data) {
		return 2
	}
	wasm, err := readRegularFile(f.wasmPath)
	if err != nil {
		fmt.Fprintf(stderr, "tollgate simulate: cannot read the module: %v (run `make build`, or pass --wasm)\n", err)
		return 1
	}
	if err := os.MkdirAll(f.outDir, 0o755); err != nil {
		fmt.Fprintf(stderr, "tollgate simulate: %v\n", err)
		return 1
	}

	log, err := openLog(stderr, stdin, f.logPath, f.format)
	if err != nil {
		fmt.Fprintf(stderr, "tollgate simulate: %v\n", err)
		return 1
	}
	defer log.Close()

	bar := progressFor(stderr, log.Requests())
	started := time.Now()
	opts := simulate.RunOptions{Wasm: wasm, Configs: configs, ShowKeys: f.showKeys, Top: f.top, Seed: f.seed, Phases: f.phases}
	if f.suggest {
		opts.SuggestPercent = f.suggestPercent
	}
	if bar != nil {
		opts.Progress = bar.update
	}
	results, err := simulate.Run(context.Background(), log, opts)
	if bar != nil {
		bar.finish()
	}
	if err != nil {
		fmt.Fprintf(stderr, "tollgate simulate: %v\n", err)
		return 1
	}
	elapsed := time.Since(started)
	summary := simulate.Summarize(log, f.showKeys, results)
	if err := runFleet(f.fleet, log, configs[0].Data, summary); err != nil {
		fmt.Fprintf(stderr, "tollgate simulate: %v\n", err)
		return 1
	}
	if err := writeSimulation(f.outDir, summary); err != nil {
		fmt.Fprintf(stderr, "tollgate simulate: %v\n", err)
		return 1
	}

	fmt.Fprintf(stdout, "%s: %s requests from %s to %s (%d bad lines skipped), replayed in %s\n",
		log.Path, simulate.Thousands(int64(log.Requests())), summary.Log.First.Format(time.RFC3339), summary.Log.Last.Format(time.RFC3339),
		log.Bad, elapsed.Round(10*time.Millisecond))
	for _, r := range results {
		printTable(stdout, r)
		printAlone(stdout, r)
		printPhases(stdout, r)
		for _, name := range globalRules(r, configs) {
			fmt.Fprintf(stdout, "  rule %s has a global limit: no rate limit service is called in a simulation, so its global failure_mode decided\n", name)
		}
	}
	printChanges(stdout, summary.Changes)
	printSuggestion(stdout, summary.Suggestion, f.outDir)
	printWarnings(stderr, results)
	if summary.Fleet != nil {
		simulate.WriteFleetTable(stdout, summary.Fleet)
	}
	fmt.Fprintf(stdout, "wrote %s and %s\n", filepath.Join(f.outDir, "summary.json"), filepath.Join(f.outDir, "report.html"))
	return 0
}

// parseSimulateFlags reads and checks the flags of tollgate simulate. When they are wrong it
// says why on stderr, every problem at once, and returns false: the command then exits with 2.
func parseSimulateFlags(args []string, stderr io.Writer) (simulateFlags, bool) {
	fs := commandFlags("simulate", stderr)
	configPath := fs.String("config", "", "plugin configuration `FILE` (JSON), required")
	logPath := fs.String("log", "", "access log `FILE` to replay, required; - reads standard input")
	format := fs.String("format", "envoy-json", "log format: envoy-json or combined")
	outDir := fs.String("out", "", "`DIR` for summary.json and report.html, required (created if missing)")
	comparePath := fs.String("compare", "", "another configuration `FILE` to replay the same log through, side by side")
	showKeys := fs.Bool("show-keys", false, "show partition keys as they are instead of by a keyed hash")
	wasmPath := moduleFlag(fs)
	top := fs.Int("top", 10, "how many keys to list per rule")
	suggest := fs.Bool("suggest", false, "fit each rule's limits to the log (the smallest under which few keys would be limited), write DIR/suggested.json and replay it")
	suggestPercent := fs.Float64("suggest-percent", 1, "with --suggest, the `P` percent of keys the fitted limits may limit, the keys limited most left out")
	phases := fs.Int("phases", 8, "replay configurations with fixed or sliding windows at `N` phases of their windows, and give each rule's range (1: one replay)")
	seed := fs.Uint64("seed", 1, "seed of the module's randomness: its key table's secret, and so which keys share a slot")
	fleet := addFleetFlags(fs)
	if err := fs.Parse(args); err != nil {
		return simulateFlags{}, false
	}
	var problems []string
	for _, required := range []struct{ flag, value, example string }{
		{"--config", *configPath, "--config examples/tollgate.json"},
		{"--log", *logPath, "--log access.log"},
		{"--out", *outDir, "--out simulation"},
	} {
		if required.value == "" {
			problems = append(problems, required.flag+" is required, e.g. "+required.example)
		}
	}
	logFormat, err := simulate.ParseFormat(*format)
	if err != nil {
		problems = append(problems, "--format: "+err.Error())
	}
	if *top < 1 || *top > 1000 {
		problems = append(problems, fmt.Sprintf("--top %d is out of range: use 1 to 1000", *top))
	}
	if *suggestPercent <= 0 || *suggestPercent >= 100 {
		problems = append(problems, fmt.Sprintf("--suggest-percent %g is out of range: use more than 0 and less than 100, such as 1", *suggestPercent))
	}
	if *phases < 1 || *phases > simulate.MaxPhases {
		problems = append(problems, fmt.Sprintf("--phases %d is out of range: use 1 to %d", *phases, simulate.MaxPhases))
	}
	problems = append(problems, fleet.problems(fs)...)
	if fs.NArg() > 0 {
		problems = append(problems, fmt.Sprintf("unexpected argument %q: every input is given with a flag", fs.Arg(0)))
	}
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintln(stderr, "tollgate simulate: "+p)
		}
		return simulateFlags{}, false
	}
	return simulateFlags{
		configPath: *configPath, logPath: *logPath, outDir: *outDir, comparePath: *comparePath, wasmPath: *wasmPath,
		format: logFormat, showKeys: *showKeys, top: *top, phases: *phases, seed: *seed,
		suggest: *suggest, suggestPercent: *suggestPercent, fleet: fleet,
	}, true
}

// writeSimulation writes DIR/summary.json and DIR/report.html.
func writeSimulation(outDir string, summary *simulate.Summary) error {
	summaryJSON, err := summary.MarshalIndent()
	if err == nil {
		err = os.WriteFile(filepath.Join(outDir, "summary.json"), summaryJSON, 0o644)
	}
	if err == nil {
		err = writeReport(filepath.Join(outDir, "report.html"), summary)
	}
	if err == nil && summary.Suggestion != nil {
		err = os.WriteFile(filepath.Join(outDir, "suggested.json"), append(summary.Suggestion.Config, '\n'), 0o644)
	}
	return err
}

// readSimulateConfigs reads and checks the configurations to replay (an empty path is skipped),
// saying on stderr what is wrong with one.
func readSimulateConfigs(stderr io.Writer, paths ...string) ([]simulate.ConfigFile, bool) {
	var configs []simulate.ConfigFile
	for _, path := range paths {
		if path == "" {
			continue
		}
		data, _, ok := loadConfig("simulate", path, nil, stderr)
		if !ok {
			return nil, false
		}
		configs = append(configs, simulate.ConfigFile{Name: path, Data: data})
	}
	return configs, true
}

// openLog reads and indexes the log ("-": standard input), reporting its bad lines on stderr and,
// on a terminal, how many lines it has read so far.
func openLog(stderr io.Writer, stdin io.Reader, path string, format simulate.Format) (*simulate.Log, error) {
	in := simulate.Input{Path: path}
	if path == "-" {
		in = simulate.Input{Path: "standard input", Reader: stdin}
	} else if info, err := os.Stat(path); err == nil && info.Mode()&os.ModeNamedPipe != 0 {
		// Opening a named pipe waits for its writer: say so rather than sit silent.
		fmt.Fprintf(stderr, "tollgate simulate: %s is a named pipe: waiting for a writer\n", path)
	}
	reading := isTerminal(stderr)
	if reading {
		in.Progress = func(lines int) {
			fmt.Fprintf(stderr, "\rreading %s: %s lines", in.Path, simulate.Thousands(int64(lines)))
		}
	}
	log, err := simulate.OpenInput(in, format)
	if reading {
		fmt.Fprint(stderr, "\r\033[K") // the reading line is erased, whatever follows
	}
	if err != nil {
		return nil, err
	}
	for _, bad := range log.BadSamples {
		fmt.Fprintf(stderr, "%s:%d: skipped: %s\n", log.Path, bad.Line, bad.Error)
	}
	if more := log.Bad - len(log.BadSamples); more > 0 {
		fmt.Fprintf(stderr, "%s: %d more bad lines skipped (summary.json counts them)\n", log.Path, more)
	}
	return log, nil
}

func writeReport(path string, s *simulate.Summary) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := simulate.WriteReport(f, s); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// globalRules names the rules of r's configuration that have a global limit.
func globalRules(r *simulate.Result, configs []simulate.ConfigFile) []string {
	var names []string
	for _, c := range configs {
		if c.Name != r.Config {
			continue
		}
		cfg, err := config.Parse(c.Data)
		if err != nil {
			return nil
		}
		for _, rule := range cfg.Rules {
			if rule.Global != nil {
				names = append(names, rule.Name)
			}
		}
	}
	return names
}

// printTable writes one configuration's figures, a line per rule.
func printTable(w io.Writer, r *simulate.Result) {
	codes := make([]string, 0, len(r.Statuses))
	for code := range r.Statuses {
		codes = append(codes, code)
	}
	sort.Strings(codes)
	for i, code := range codes {
		codes[i] = code + ": " + simulate.Thousands(r.Statuses[code])
	}
	fmt.Fprintf(w, "\n%s: %s requests, %s exempt; responses %s\n", r.Config, simulate.Thousands(r.Requests),
		simulate.Thousands(r.Exempt), strings.Join(codes, ", "))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "rule\tadmitted\tlimited\tshadow_limited\tmissing_key\texempt\tkeys\ttop limited key\t")
	for _, name := range r.RuleNames() {
		rr := r.Rules[name]
		topKey := "-"
		if len(rr.TopLimitedKeys) > 0 {
			k := rr.TopLimitedKeys[0]
			topKey = fmt.Sprintf("%s (%s)", k.Key, simulate.Thousands(k.Limited+k.ShadowLimited))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", name, simulate.Thousands(rr.Admitted), simulate.Thousands(rr.Limited),
			simulate.Thousands(rr.ShadowLimited), simulate.Thousands(rr.MissingKey), simulate.Thousands(rr.Exempt), simulate.Thousands(int64(rr.Keys)), topKey)
	}
	tw.Flush()
}

// progressFor is the progress bar of a replay of requests requests, or nil: only a long replay
// draws one, and only on a terminal.
func progressFor(stderr io.Writer, requests int) *progressBar {
	if requests < progressFrom || !isTerminal(stderr) {
		return nil
	}
	return &progressBar{w: stderr, total: requests, started: time.Now()}
}

// progressBar draws the replay's progress on one line of stderr, redrawn at each whole percent.
type progressBar struct {
	w       io.Writer
	total   int
	started time.Time
	percent int
	drawn   bool
}

func (p *progressBar) update(done int) {
	percent := done * 100 / p.total
	if p.drawn && percent == p.percent {
		return
	}
	p.percent, p.drawn = percent, true
	const width = 40
	filled := width * percent / 100
	rate := float64(done) / max(time.Since(p.started).Seconds(), 1e-3)
	fmt.Fprintf(p.w, "\rreplaying [%s%s] %3d%% %s/%s requests, %s/s", strings.Repeat("=", filled), strings.Repeat(" ", width-filled),
		percent, simulate.Thousands(int64(done)), simulate.Thousands(int64(p.total)), simulate.Thousands(int64(rate)))
}

func (p *progressBar) finish() {
	if p.drawn {
		fmt.Fprintln(p.w)
	}
}
