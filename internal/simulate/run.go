package simulate

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
)

// ConfigFile is a plugin configuration to replay the log through.
type ConfigFile struct {
	Name string // how reports name it, such as the file's path
	Data []byte
}

// RunOptions configure Run.
type RunOptions struct {
	Wasm []byte
	// Configs are the configuration and, with --compare, the other one.
	Configs []ConfigFile
	// ShowKeys names keys as they are instead of by a keyed hash.
	ShowKeys bool
	// Seed seeds the module's randomness (Options.Seed).
	Seed uint64
	// Top is how many keys the results list per rule (default 10).
	Top int
	// Cache, when set, keeps the compiled module between runs.
	Cache wazero.CompilationCache
	// SuggestPercent, when above 0, fits each rule of the first configuration to the log: the
	// smallest limits under which at most that percent of keys would be limited (Suggestion).
	SuggestPercent float64
	// Phases is how many phases of their windows configurations with fixed or sliding windows
	// are replayed at (Result's WindowPhases); 0 or 1 replays one.
	Phases int
	// Progress, when set, is called now and then with the requests replayed so far (by the
	// slowest configuration).
	Progress func(done int)
}

// Run replays the log through every configuration, each in its own host on its own goroutine,
// the lines read and parsed once for all, and returns the results in the order of Configs.
func Run(ctx context.Context, log *Log, opts RunOptions) ([]*Result, error) {
	if opts.Top <= 0 {
		opts.Top = 10
	}
	namer, err := newKeyNamer(opts.ShowKeys)
	if err != nil {
		return nil, err
	}
	cache := opts.Cache
	if cache == nil {
		cache = wazero.NewCompilationCache()
		defer cache.Close(ctx)
	}
	var all []*Simulator
	defer func() {
		for _, s := range all {
			s.Close(ctx)
		}
	}()
	start := func(name string, data []byte, v simVariant) (*Simulator, error) {
		s, err := New(ctx, Options{
			Wasm: opts.Wasm, Config: data, ConfigName: name, Start: log.First,
			Span: time.Duration(log.Last - log.First), Keys: namer, Cache: cache, Seed: opts.Seed,
			LogFormat: log.Format, RecordVerdicts: v.record, Phase: v.phase, RecordRequests: v.requests,
		})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		all = append(all, s)
		return s, nil
	}
	sims := make([]*Simulator, len(opts.Configs))
	for i, c := range opts.Configs {
		v := simVariant{record: len(opts.Configs) > 1, requests: i == 0 && opts.SuggestPercent > 0}
		if sims[i], err = start(c.Name, c.Data, v); err != nil {
			return nil, err
		}
	}
	alone, err := startAlone(opts.Configs, start)
	if err != nil {
		return nil, err
	}
	phased, err := startPhases(opts.Configs, opts.Phases, start)
	if err != nil {
		return nil, err
	}
	if err := replay(ctx, log, all, opts.Progress); err != nil {
		return nil, err
	}
	if opts.Progress != nil {
		opts.Progress(log.Requests())
	}
	results := make([]*Result, len(sims))
	for i, s := range sims {
		results[i] = s.Result(opts.Top)
	}
	for _, a := range alone {
		results[a.config].Rules[a.rule].EnforcedAlone = a.result(opts.Top)
	}
	for _, p := range phased {
		p.apply(results[p.config], sims[p.config])
	}
	if len(sims) > 1 {
		results[1].changes = compare(sims[0], sims[1], opts.Top)
	}
	if opts.SuggestPercent > 0 {
		if results[0].suggestion, err = suggest(ctx, log, sims[0], opts, start); err != nil {
			return nil, err
		}
	}
	return results, nil
}

// suggest fits the first configuration's limits to the log and replays the configuration with
// the fitted limits.
func suggest(ctx context.Context, log *Log, s *Simulator, opts RunOptions, start startFunc) (*Suggestion, error) {
	sug, data, err := suggestion(s, opts.Configs[0].Data, opts.SuggestPercent, opts.Top)
	if err != nil {
		return nil, fmt.Errorf("suggest: %w", err)
	}
	fitted, err := start(opts.Configs[0].Name+" (suggested)", data, simVariant{})
	if err != nil {
		return nil, fmt.Errorf("the suggested configuration: %w", err)
	}
	if err := replay(ctx, log, []*Simulator{fitted}, nil); err != nil {
		return nil, err
	}
	sug.Result = fitted.Result(opts.Top)
	return sug, nil
}

// simVariant is how a simulator differs from its configuration's main replay.
type simVariant struct {
	phase    time.Duration // Options.Phase
	record   bool          // Options.RecordVerdicts
	requests bool          // Options.RecordRequests
}

// startFunc starts a simulator of a configuration.
type startFunc func(name string, data []byte, v simVariant) (*Simulator, error)

// startAlone starts a simulator per shadow rule of each configuration, enforcing the rule alone.
func startAlone(configs []ConfigFile, start startFunc) ([]aloneSim, error) {
	var alone []aloneSim
	for i, c := range configs {
		rules, err := shadowRules(c.Data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.Name, err)
		}
		for _, rule := range rules {
			data, err := enforcedAlone(c.Data, rule)
			if err != nil {
				return nil, fmt.Errorf("%s: rule %s enforced alone: %w", c.Name, rule, err)
			}
			s, err := start(c.Name+" (rule "+rule+" enforced alone)", data, simVariant{})
			if err != nil {
				return nil, err
			}
			alone = append(alone, aloneSim{config: i, rule: rule, sim: s})
		}
	}
	return alone, nil
}

// newKeyNamer names keys as they are, or by a hash keyed with a fresh random secret.
func newKeyNamer(show bool) (*KeyNamer, error) {
	namer := &KeyNamer{Show: show}
	if !show {
		namer.Secret = make([]byte, 32)
		if _, err := rand.Read(namer.Secret); err != nil {
			return nil, err
		}
	}
	return namer, nil
}

// replay feeds the log to every simulator: one reader sends batches of entries to each, and a
// simulator that fails stops the others. progress, when set, is called after each batch with
// the entries the slowest simulator has replayed.
func replay(ctx context.Context, log *Log, sims []*Simulator, progress func(done int)) error {
	const batchSize = 256
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	feeds := make([]chan []Entry, len(sims))
	done := make(chan error, len(sims))
	replayed := make([]atomic.Int64, len(sims))
	for i := range sims {
		feeds[i] = make(chan []Entry, 8)
		go func() { done <- replayFeed(sims[i], feeds[i], &replayed[i], cancel) }()
	}
	slowest := func() int {
		least := replayed[0].Load()
		for i := range replayed {
			least = min(least, replayed[i].Load())
		}
		return int(least)
	}
	batch := make([]Entry, 0, batchSize)
	send := func() {
		for _, f := range feeds {
			f <- batch
		}
		batch = make([]Entry, 0, batchSize)
		if progress != nil {
			progress(slowest())
		}
	}
	readErr := log.Each(func(_ int, e *Entry) error {
		if ctx.Err() != nil {
			return errStop
		}
		batch = append(batch, *e)
		if len(batch) == batchSize {
			send()
		}
		return nil
	})
	if len(batch) > 0 && readErr == nil {
		send()
	}
	for _, f := range feeds {
		close(f)
	}
	var errs []error
	for range sims {
		if err := <-done; err != nil {
			errs = append(errs, err)
		}
	}
	if readErr != nil && !errors.Is(readErr, errStop) {
		errs = append(errs, readErr)
	}
	return errors.Join(errs...)
}

// replayFeed runs one simulator over the batches of its feed, counting the entries replayed. On
// a failure it cancels the replay and drains the feed, so that the reader can finish.
func replayFeed(s *Simulator, feed <-chan []Entry, replayed *atomic.Int64, cancel context.CancelCauseFunc) error {
	for batch := range feed {
		for j := range batch {
			if err := s.Do(&batch[j]); err != nil {
				cancel(err)
				for range feed {
				}
				return err
			}
		}
		replayed.Add(int64(len(batch)))
	}
	return nil
}

// Summarize puts a run's results into summary.json's form.
func Summarize(log *Log, showKeys bool, results []*Result) *Summary {
	s := &Summary{
		Log: LogInfo{
			File: log.Path, Format: log.Format.String(), Lines: log.Lines, BadLines: log.Bad,
			BadSamples: log.BadSamples,
			First:      time.Unix(0, log.First).UTC(), Last: time.Unix(0, log.Last).UTC(),
		},
		Keys:   "hashed",
		Result: results[0],
	}
	if showKeys {
		s.Keys = "shown"
	}
	if len(results) > 1 {
		s.Compare = results[1]
		s.Changes = results[1].changes
	}
	s.Suggestion = results[0].suggestion
	return s
}
