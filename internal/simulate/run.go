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
	namer := &KeyNamer{Show: opts.ShowKeys}
	if !opts.ShowKeys {
		namer.Secret = make([]byte, 32)
		if _, err := rand.Read(namer.Secret); err != nil {
			return nil, err
		}
	}
	cache := opts.Cache
	if cache == nil {
		cache = wazero.NewCompilationCache()
		defer cache.Close(ctx)
	}
	sims := make([]*Simulator, len(opts.Configs))
	defer func() {
		for _, s := range sims {
			if s != nil {
				s.Close(ctx)
			}
		}
	}()
	for i, c := range opts.Configs {
		s, err := New(ctx, Options{
			Wasm: opts.Wasm, Config: c.Data, ConfigName: c.Name, Start: log.First,
			Span: time.Duration(log.Last - log.First), Keys: namer, Cache: cache, Seed: opts.Seed,
		})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.Name, err)
		}
		sims[i] = s
	}

	// One reader feeds batches to every simulator; a simulator that fails stops the others.
	const batchSize = 256
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	feeds := make([]chan []Entry, len(sims))
	done := make(chan error, len(sims))
	progress := make([]atomic.Int64, len(sims))
	for i := range sims {
		feeds[i] = make(chan []Entry, 8)
		go func(s *Simulator, feed <-chan []Entry, replayed *atomic.Int64) {
			for batch := range feed {
				for j := range batch {
					if err := s.Do(&batch[j]); err != nil {
						cancel(err)
						for range feed { // let the reader finish
						}
						done <- err
						return
					}
				}
				replayed.Add(int64(len(batch)))
			}
			done <- nil
		}(sims[i], feeds[i], &progress[i])
	}
	replayed := func() int {
		slowest := progress[0].Load()
		for i := range progress {
			slowest = min(slowest, progress[i].Load())
		}
		return int(slowest)
	}
	batch := make([]Entry, 0, batchSize)
	send := func() {
		for _, f := range feeds {
			f <- batch
		}
		batch = make([]Entry, 0, batchSize)
		if opts.Progress != nil {
			opts.Progress(replayed())
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
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if opts.Progress != nil {
		opts.Progress(log.Requests())
	}
	results := make([]*Result, len(sims))
	for i, s := range sims {
		results[i] = s.Result(opts.Top)
	}
	return results, nil
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
	}
	return s
}
