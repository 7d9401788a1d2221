package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

const seedConfig = `{
  "rules": [
    {
      "name": "per-api-key",
      "key": [{"header": "x-api-key"}],
      "limits": [{"capacity": 3, "refill_tokens": 1, "refill_interval": "1s"}]
    }
  ]
}`

type seedStep struct {
	at  time.Duration
	key string // "none": the request carries no x-api-key
}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// runTrace sends the steps through one VM and renders one line per request, in the golden
// format.
func runTrace(t *testing.T, g *rig, steps []seedStep) []string {
	var lines []string
	for _, s := range steps {
		g.at(s.at)
		var headers [][2]string
		if s.key != "none" {
			headers = append(headers, [2]string{"x-api-key", s.key})
		}
		resp := g.request(g.vms[0], headers...)
		line := "t=" + itoa(int(s.at/time.Millisecond)) + "ms key=" + s.key + " -> " + itoa(resp.Status)
		switch resp.Status {
		case 200:
			line += " remaining=" + resp.Header("x-ratelimit-remaining")
		case 429:
			line += " retry-after=" + resp.Header("retry-after")
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
	steps := []seedStep{{ms(0), "alice"}, {ms(100), "alice"}, {ms(200), "alice"}, {ms(300), "alice"},
		{ms(500), "alice"}, {ms(1300), "alice"}, {ms(1400), "alice"}, {ms(3500), "alice"}}
	for _, p := range profiles {
		t.Run(p.String(), func(t *testing.T) {
			g := newRig(t, p, seedConfig, 1)
			compareGolden(t, "seed_single_key.golden", runTrace(t, g, steps))
		})
	}
}

func TestSeedTraceTwoKeys(t *testing.T) {
	steps := []seedStep{{ms(0), "alice"}, {ms(100), "alice"}, {ms(200), "alice"}, {ms(250), "bob"},
		{ms(300), "alice"}, {ms(350), "none"}, {ms(400), "bob"}, {ms(1300), "alice"}}
	for _, p := range profiles {
		t.Run(p.String(), func(t *testing.T) {
			g := newRig(t, p, seedConfig, 1)
			compareGolden(t, "seed_two_keys.golden", runTrace(t, g, steps))
		})
	}
}
