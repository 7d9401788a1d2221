package simulate

import (
	"fmt"
	"time"

	"github.com/tollgate-proxy/tollgate/config"
)

// MaxPhases bounds RunOptions.Phases: each phase is a whole replay.
const MaxPhases = 64

// PhaseRange is what a rule did over several phases of its configuration's windows: fixed and
// sliding windows are aligned on Envoy's monotonic clock, whose zero differs on every start, so
// one replay is one of many outcomes. The phases are spread evenly over the configuration's
// longest window.
type PhaseRange struct {
	Phases int `json:"phases"`
	// WindowSeconds is the longest window, which the phases are spread over.
	WindowSeconds    float64 `json:"window_seconds"`
	LimitedMin       int64   `json:"limited_min"`
	LimitedMax       int64   `json:"limited_max"`
	ShadowLimitedMin int64   `json:"shadow_limited_min"`
	ShadowLimitedMax int64   `json:"shadow_limited_max"`
}

// phaseSims are the replays of one configuration at phases other than the first.
type phaseSims struct {
	config int
	phases int
	window time.Duration
	sims   []*Simulator
}

// phasedWindow is a rule's longest fixed or sliding window on the monotonic clock (calendar
// windows follow the wall clock, which the log gives): 0 when it has none.
func phasedWindow(r *config.Rule) time.Duration {
	var longest time.Duration
	eachLimit(r, func(_ string, _ int, l config.Limit) {
		if l.Calendar == config.NoCalendar {
			longest = max(longest, windowOf(l))
		}
	})
	return longest
}

// startPhases starts, for each configuration with a phased window, a replay at each of phases-1
// more phases, k/phases of its longest window for k from 1.
func startPhases(configs []ConfigFile, phases int, start startFunc) ([]phaseSims, error) {
	if phases <= 1 {
		return nil, nil
	}
	var out []phaseSims
	for i, c := range configs {
		cfg, err := config.Parse(c.Data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.Name, err)
		}
		var window time.Duration
		for j := range cfg.Rules {
			window = max(window, phasedWindow(&cfg.Rules[j]))
		}
		if window == 0 {
			continue
		}
		p := phaseSims{config: i, phases: phases, window: window}
		for k := 1; k < phases; k++ {
			phase := window * time.Duration(k) / time.Duration(phases)
			s, err := start(fmt.Sprintf("%s (windows moved by %s)", c.Name, phase), c.Data, simVariant{phase: phase})
			if err != nil {
				return nil, err
			}
			p.sims = append(p.sims, s)
		}
		out = append(out, p)
	}
	return out, nil
}

// Describe says what the range is, in words.
func (p *PhaseRange) Describe(shadow bool) string {
	what, lo, hi := "limits", p.LimitedMin, p.LimitedMax
	if shadow {
		what, lo, hi = "shadow-limits", p.ShadowLimitedMin, p.ShadowLimitedMax
	}
	amount := Thousands(lo) + " requests at every one"
	if hi != lo {
		amount = Thousands(lo) + " to " + Thousands(hi) + " requests"
	}
	return fmt.Sprintf("at %d phases of the windows, spread over %s, it %s %s", p.Phases,
		spanWords(time.Duration(p.WindowSeconds*float64(time.Second))), what, amount)
}

// apply puts the range over the phases (the main replay's included) into res, for each rule
// with a phased window or whose figures the phases move (through another rule's windows).
func (p *phaseSims) apply(res *Result, main *Simulator) {
	for i := range main.rules {
		r := &main.rules[i]
		pr := &PhaseRange{Phases: p.phases, WindowSeconds: p.window.Seconds(),
			LimitedMin: r.totals.Limited, LimitedMax: r.totals.Limited,
			ShadowLimitedMin: r.totals.ShadowLimited, ShadowLimitedMax: r.totals.ShadowLimited}
		for _, s := range p.sims {
			t := s.rules[i].totals
			pr.LimitedMin, pr.LimitedMax = min(pr.LimitedMin, t.Limited), max(pr.LimitedMax, t.Limited)
			pr.ShadowLimitedMin, pr.ShadowLimitedMax = min(pr.ShadowLimitedMin, t.ShadowLimited), max(pr.ShadowLimitedMax, t.ShadowLimited)
		}
		if phasedWindow(&main.cfg.Rules[i]) > 0 || pr.LimitedMin != pr.LimitedMax || pr.ShadowLimitedMin != pr.ShadowLimitedMax {
			res.Rules[r.name].WindowPhases = pr
		}
	}
}
