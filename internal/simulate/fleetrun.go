package simulate

import (
	"errors"
	"sync"
	"time"

	"github.com/tollgate-proxy/tollgate/config"
)

// FleetResult is the fleet model's answer: per rule with a global limit, its costs with the
// configuration's leases and without any.
type FleetResult struct {
	Replicas       int    `json:"replicas"`
	Workers        int    `json:"workers"`
	Balance        string `json:"balance"`
	ServiceLatency string `json:"service_latency"`
	RedisShards    int    `json:"redis_shards"`
	// Rules are the rules with a global limit, in configuration order.
	Rules []FleetRule `json:"rules"`
}

// FleetRule is one rule's figures. WithLeases is the configuration as it is (for a rule without
// a lease, the same as WithoutLeases); WithoutLeases has every lease removed: a call per request.
type FleetRule struct {
	Rule          string       `json:"rule"`
	GlobalLimit   string       `json:"global_limit"`
	Lease         string       `json:"lease,omitempty"` // max_tokens and ttl, "" without a lease
	WithLeases    FleetFigures `json:"with_leases"`
	WithoutLeases FleetFigures `json:"without_leases"`
}

// RunFleet replays the log through the fleet model twice at once: with the configuration's
// leases and without them.
func RunFleet(log *Log, configJSON []byte, opts FleetOptions) (*FleetResult, error) {
	cfg, err := config.Parse(configJSON)
	if err != nil {
		return nil, err
	}
	if opts.Replicas < 1 || opts.Workers < 1 {
		return nil, errors.New("the fleet needs at least one replica of one worker VM")
	}
	if err := CheckFleet(cfg, opts); err != nil {
		return nil, err
	}
	var fleets [2]*fleet
	for i, c := range []*config.Config{cfg, withoutLeases(cfg)} {
		fleets[i], err = newFleet(c, opts, i == 0, newFleetStats(len(cfg.Rules), log.First, log.Last))
		if err != nil {
			return nil, err
		}
	}
	if err := replayFleets(log, fleets[:]); err != nil {
		return nil, err
	}
	res := &FleetResult{Replicas: opts.Replicas, Workers: opts.Workers, Balance: opts.Balance.String(),
		ServiceLatency: opts.ServiceLatency.String(), RedisShards: max(opts.RedisShards, 1)}
	var figures [2][]FleetFigures
	for i, f := range fleets {
		f.finish()
		figures[i] = f.stats.figures(f.rules)
	}
	for i, r := range cfg.Rules {
		if r.Global == nil {
			continue
		}
		fr := FleetRule{Rule: r.Name, GlobalLimit: opts.Limits[r.Name].String(),
			WithLeases: figures[0][i], WithoutLeases: figures[1][i]}
		if l := r.Global.Lease; l != nil {
			fr.Lease = "max_tokens " + Thousands(l.MaxTokens) + ", ttl " + time.Duration(l.TTL).String()
		}
		res.Rules = append(res.Rules, fr)
	}
	return res, nil
}

// replayFleets feeds the log to each fleet on a goroutine of its own: the lines are read and
// parsed once, in batches every fleet reads (and none writes).
func replayFleets(log *Log, fleets []*fleet) error {
	const batchSize = 1024
	feeds := make([]chan []Entry, len(fleets))
	var wg sync.WaitGroup
	for i, f := range fleets {
		feeds[i] = make(chan []Entry, 8)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for batch := range feeds[i] {
				for j := range batch {
					f.do(&batch[j])
				}
			}
		}()
	}
	batch := make([]Entry, 0, batchSize)
	send := func() {
		for _, feed := range feeds {
			feed <- batch
		}
		batch = make([]Entry, 0, batchSize)
	}
	err := log.Each(func(_ int, e *Entry) error {
		if batch = append(batch, *e); len(batch) == batchSize {
			send()
		}
		return nil
	})
	if len(batch) > 0 {
		send()
	}
	for _, feed := range feeds {
		close(feed)
	}
	wg.Wait()
	return err
}
