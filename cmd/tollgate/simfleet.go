package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-proxy/tollgate/config"
	"github.com/tollgate-proxy/tollgate/internal/ratelimitconf"
	"github.com/tollgate-proxy/tollgate/internal/simulate"
)

// The fleet model's flags of tollgate simulate (--replicas and the flags that shape it).

const (
	maxReplicas = 10_000
	maxWorkers  = 256
)

type fleetFlags struct {
	replicas, workers, shards *int
	balance, ratelimitConfig  *string
	latency                   *time.Duration
	limits                    globalLimitFlag
	// opts are the checked options, nil without --replicas.
	opts *simulate.FleetOptions
}

// globalLimitFlag collects --global-limit RULE=N/UNIT, repeatable.
type globalLimitFlag struct {
	limits   map[string]simulate.GlobalLimit
	problems []string
}

func (g *globalLimitFlag) String() string { return "" }

func (g *globalLimitFlag) Set(s string) error {
	rule, limit, err := simulate.ParseGlobalLimit(s)
	if err != nil {
		g.problems = append(g.problems, "--global-limit "+err.Error())
		return nil // reported with the other problems
	}
	if g.limits == nil {
		g.limits = map[string]simulate.GlobalLimit{}
	}
	if _, twice := g.limits[rule]; twice {
		g.problems = append(g.problems, "--global-limit "+rule+" is given twice: give each rule's limit once")
	}
	g.limits[rule] = limit
	return nil
}

func addFleetFlags(fs *flag.FlagSet) *fleetFlags {
	f := &fleetFlags{
		replicas:        fs.Int("replicas", 0, "replay the log as `N` replicas behind a load balancer and report what the rules' global limits cost (the fleet model)"),
		workers:         fs.Int("workers", 2, "`W` worker VMs per replica in the fleet model (Envoy's --concurrency)"),
		balance:         fs.String("balance", "round-robin", "how the fleet model's load balancer spreads requests: round-robin, or hash (of the client address)"),
		shards:          fs.Int("redis-shards", 1, "`S` masters of the rate limit service's Redis Cluster in the fleet model, for the busiest one's load (1: one Redis)"),
		ratelimitConfig: fs.String("ratelimit-config", "", "envoyproxy/ratelimit's descriptor configuration `FILE` (YAML), for the global limits the fleet model applies (--global-limit overrides it per rule)"),
		latency:         fs.Duration("service-latency", time.Millisecond, "the fleet model's time from a call to the rate limit service to its answer"),
	}
	fs.Var(&f.limits, "global-limit", "a rule's limit in the rate limit service for the fleet model, as `RULE=N/UNIT`: N requests per second, minute, hour, day, week, month or year; once per rule with a global limit, unless --ratelimit-config gives it")
	return f
}

// problems checks the flags after parsing, and keeps the options when --replicas is given.
func (f *fleetFlags) problems(fs *flag.FlagSet) []string {
	problems := f.limits.problems
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	if !set["replicas"] {
		for _, name := range []string{"workers", "balance", "service-latency", "redis-shards", "global-limit", "ratelimit-config"} {
			if set[name] {
				problems = append(problems, "--"+name+" shapes the fleet model: add --replicas N")
			}
		}
		return problems
	}
	if *f.replicas < 1 || *f.replicas > maxReplicas {
		problems = append(problems, fmt.Sprintf("--replicas %d is out of range: use 1 to %d", *f.replicas, maxReplicas))
	}
	if *f.workers < 1 || *f.workers > maxWorkers {
		problems = append(problems, fmt.Sprintf("--workers %d is out of range: use 1 to %d", *f.workers, maxWorkers))
	}
	if *f.shards < 1 || *f.shards > simulate.ClusterSlots {
		problems = append(problems, fmt.Sprintf("--redis-shards %d is out of range: use 1 to %d", *f.shards, simulate.ClusterSlots))
	}
	if *f.latency < 0 || *f.latency > time.Minute {
		problems = append(problems, fmt.Sprintf("--service-latency %s is out of range: use 0s to 1m", *f.latency))
	}
	balance, err := simulate.ParseBalance(*f.balance)
	if err != nil {
		problems = append(problems, "--balance: "+err.Error())
	}
	// The replicas' secrets come from --seed, as the module's does.
	seed, _ := strconv.ParseUint(fs.Lookup("seed").Value.String(), 10, 64)
	f.opts = &simulate.FleetOptions{Replicas: *f.replicas, Workers: *f.workers, Balance: balance,
		Limits: f.limits.limits, ServiceLatency: *f.latency, RedisShards: *f.shards, Seed: seed}
	return problems
}

// checkFleet completes the fleet model's limits from --ratelimit-config and checks them against
// the configuration, saying on stderr what does not fit; true without --replicas.
func checkFleet(stderr io.Writer, f *fleetFlags, configJSON []byte) bool {
	if f.opts == nil {
		return true
	}
	cfg, err := config.Parse(configJSON)
	if err != nil {
		return true // reported by the replay
	}
	if *f.ratelimitConfig != "" {
		err = limitsFromFile(*f.ratelimitConfig, cfg, f.opts)
	}
	if err == nil {
		err = simulate.CheckFleet(cfg, *f.opts)
	}
	switch {
	case err == nil:
		return true
	case errors.Is(err, simulate.ErrNoGlobalRule):
		fmt.Fprintf(stderr, "tollgate simulate: --replicas: %v: the fleet model reports what global limits cost; add \"global\" to a rule or drop --replicas\n", err)
	default:
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintln(stderr, "tollgate simulate: "+line)
		}
	}
	return false
}

// limitsFromFile adds to opts the limit the service's descriptor configuration at path gives
// each rule with a global limit that --global-limit did not.
func limitsFromFile(path string, cfg *config.Config, opts *simulate.FleetOptions) error {
	data, err := readRegularFile(path)
	if err != nil {
		return fmt.Errorf("--ratelimit-config: %w", err)
	}
	file, err := ratelimitconf.Read(path, data)
	if err != nil {
		return fmt.Errorf("--ratelimit-config: %w", err)
	}
	if opts.Limits == nil {
		opts.Limits = map[string]simulate.GlobalLimit{}
	}
	var problems []error
	for i := range cfg.Rules {
		r := &cfg.Rules[i]
		if _, given := opts.Limits[r.Name]; given || r.Global == nil {
			continue
		}
		limit, err := ruleLimit(file, r)
		if err != nil {
			problems = append(problems, fmt.Errorf("--ratelimit-config %s: rule %s: %w", path, r.Name, err))
			continue
		}
		opts.Limits[r.Name] = limit
	}
	return errors.Join(problems...)
}

// ruleLimit is the limit file gives the descriptor Tollgate sends for rule r.
func ruleLimit(file *ratelimitconf.File, r *config.Rule) (simulate.GlobalLimit, error) {
	if file.Domain != r.Global.Domain {
		return simulate.GlobalLimit{}, fmt.Errorf("its global domain is %q, the file's %q: give the service's file for that domain, or --global-limit %s=N/UNIT", r.Global.Domain, file.Domain, r.Name)
	}
	entries := ratelimitconf.RuleDescriptor(r)
	l := file.LimitFor(entries)
	switch {
	case l == nil:
		return simulate.GlobalLimit{}, fmt.Errorf("the file has no limit for the descriptor Tollgate sends, %s: add one, or give --global-limit %s=N/UNIT", ratelimitconf.DescribeEntries(entries), r.Name)
	case l.Unlimited:
		return simulate.UnlimitedGlobalLimit(), nil
	}
	multiplier := int64(1)
	if l.UnitMultiplier != nil {
		multiplier = int64(*l.UnitMultiplier)
	}
	return simulate.NewGlobalLimit(int64(l.RequestsPerUnit), l.Unit, multiplier)
}

// runFleet runs the fleet model over the log into the summary.
func runFleet(f *fleetFlags, log *simulate.Log, configJSON []byte, summary *simulate.Summary) error {
	if f.opts == nil {
		return nil
	}
	res, err := simulate.RunFleet(log, configJSON, *f.opts)
	if err != nil {
		return fmt.Errorf("fleet model: %w", err)
	}
	summary.Fleet = res
	return nil
}
