package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-proxy/tollgate/internal/host"
)

// seedConfig is the design's core rule, with the X-RateLimit headers on so that the remaining
// tokens are visible to the client.
const seedConfig = `{
  "rules": [
    {
      "name": "per-api-key",
      "key": [{"header": "x-api-key"}],
      "limits": [{"capacity": 3, "refill_tokens": 1, "refill_interval": "1s"}]
    }
  ],
  "rate_limit_headers": "x-ratelimit"
}`

// coreConfig is the design's core rule exactly, with every option at its default.
const coreConfig = `{"rules": [{"name": "per-api-key", "key": [{"header": "x-api-key"}],
  "limits": [{"capacity": 3, "refill_tokens": 1, "refill_interval": "1s"}]}]}`

type seedStep struct {
	at  time.Duration
	key string // "none": the request carries no x-api-key
}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// runTrace sends the steps through the rig's VMs in turn and renders one line per request, in
// the golden format.
func runTrace(t *testing.T, g *rig, steps []seedStep) []string {
	var lines []string
	for i, s := range steps {
		g.at(s.at)
		var headers [][2]string
		if s.key != "none" {
			headers = append(headers, [2]string{"x-api-key", s.key})
		}
		resp := g.request(g.vms[i%len(g.vms)], headers...)
		line := "t=" + itoa(int(s.at/time.Millisecond)) + "ms key=" + s.key + " -> " + itoa(resp.Status)
		switch resp.Status {
		case 200:
			line += " remaining=" + resp.Header("x-ratelimit-remaining")
		case 429:
			// The exact wait is in the module's debug line for the decision.
			line += " retry-after=" + resp.Header("retry-after") + " wait=" + g.exactWait()
		}
		lines = append(lines, line)
	}
	return lines
}

func itoa(n int) string { return strconv.Itoa(n) }

// compareGolden checks the rendered lines against a golden file, naming the first differing step.
func compareGolden(t *testing.T, name string, got []string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, line := range strings.Split(string(data), "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			want = append(want, line)
		}
	}
	for i := 0; i < max(len(got), len(want)); i++ {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			t.Errorf("%s step %d:\n got  %q\n want %q", name, i, g, w)
		}
	}
}

func TestSeedTraceSingleKey(t *testing.T) {
	t.Parallel()
	steps := []seedStep{{ms(0), "alice"}, {ms(100), "alice"}, {ms(200), "alice"}, {ms(300), "alice"},
		{ms(500), "alice"}, {ms(1300), "alice"}, {ms(1400), "alice"}, {ms(3500), "alice"}}
	for _, p := range profiles {
		for _, workers := range []int{1, 3} {
			t.Run(p.String()+"/"+strconv.Itoa(workers)+" workers", func(t *testing.T) {
				g := newRig(t, p, seedConfig, workers)
				compareGolden(t, "seed_single_key.golden", runTrace(t, g, steps))
			})
		}
	}
}

func TestSeedTraceTwoKeys(t *testing.T) {
	t.Parallel()
	steps := []seedStep{{ms(0), "alice"}, {ms(100), "alice"}, {ms(200), "alice"}, {ms(250), "bob"},
		{ms(300), "alice"}, {ms(350), "none"}, {ms(400), "bob"}, {ms(1300), "alice"}}
	for _, p := range profiles {
		for _, workers := range []int{1, 3} {
			t.Run(p.String()+"/"+strconv.Itoa(workers)+" workers", func(t *testing.T) {
				g := newRig(t, p, seedConfig, workers)
				compareGolden(t, "seed_two_keys.golden", runTrace(t, g, steps))
			})
		}
	}
}

// Steps of the wall clock (NTP, an operator) do not touch the buckets: the module's time base is
// the host's monotonic clock.
func TestWallClockStepsDoNotMatter(t *testing.T) {
	t.Parallel()
	steps := []seedStep{{ms(0), "alice"}, {ms(100), "alice"}, {ms(200), "alice"}, {ms(300), "alice"},
		{ms(500), "alice"}, {ms(1300), "alice"}, {ms(1400), "alice"}, {ms(3500), "alice"}}
	g := newRig(t, host.Envoy133, seedConfig, 2)
	var lines []string
	for i, s := range steps {
		// Alternate big steps back and forth between requests.
		if i%2 == 0 {
			g.clock.StepWall(-time.Hour)
		} else {
			g.clock.StepWall(3 * time.Hour)
		}
		lines = append(lines, runTrace(t, g, []seedStep{s})...)
	}
	compareGolden(t, "seed_single_key.golden", lines)
}
