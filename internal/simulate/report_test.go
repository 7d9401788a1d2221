package simulate

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// compareConfigs are two configurations of one log: a tight limit per key, and a looser one with
// a shadow rule per client.
var compareConfigs = []string{
	`{"rules": [{"name": "per-key", "key": [{"header": "x-api-key"}],
	  "limits": [{"capacity": 4, "refill_tokens": 3, "refill_interval": "250ms"}]}],
	  "exempt": {"paths": [{"exact": "/health"}]}}`,
	`{"rules": [{"name": "per-key", "key": [{"header": "x-api-key"}],
	  "limits": [{"capacity": 10, "refill_tokens": 6, "refill_interval": "250ms"}]},
	  {"name": "per-client", "shadow": true, "key": [{"client_ip": {}}],
	  "limits": [{"capacity": 20, "refill_tokens": 10, "refill_interval": "1s"}]}],
	  "exempt": {"paths": [{"exact": "/health"}]}}`,
}

func writeTestReport(t *testing.T) (htmlPath string, s *Summary) {
	t.Helper()
	dir := t.TempDir()
	logPath := filepath.Join(dir, "access.log")
	generateLog(t, logPath, 3, genOptions{requests: 30_000, keys: 40, noKey: 0.05, exempt: 0.02, clients: 30, meanGapMs: 4})
	s, _ = simulateFileWith(t, logPath, EnvoyJSON, false, func(o *RunOptions) { o.SuggestPercent = 1 }, compareConfigs...)
	htmlPath = filepath.Join(dir, "report.html")
	f, err := os.Create(htmlPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := WriteReport(f, s); err != nil {
		t.Fatal(err)
	}
	return htmlPath, s
}

// The page holds every chart inline and fetches nothing.
func TestReportIsSelfContained(t *testing.T) {
	htmlPath, s := writeTestReport(t)
	page, err := os.ReadFile(htmlPath)
	if err != nil {
		t.Fatal(err)
	}
	// Per rule: the series and the peak rates, and the top limited keys when any was limited.
	want, limitedRules := 0, 0
	for _, r := range []*Result{s.Result, s.Compare} {
		for _, rr := range r.Rules {
			want += 2
			if len(rr.TopLimitedKeys) > 0 {
				want++
				limitedRules++
			}
		}
	}
	if limitedRules < 2 {
		t.Fatalf("only %d rules limited a key: the log does not exercise the report", limitedRules)
	}
	// Besides the charts, each limit's legend has two line samples.
	if n := bytes.Count(page, []byte("<svg")) - bytes.Count(page, []byte(`<svg class="sample"`)); n != want {
		t.Errorf("%d SVG charts, want %d", n, want)
	}
	if m := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:|//)`).Find(page); m != nil {
		t.Errorf("the page refers outside itself: %s", m)
	}
	for _, name := range []string{"config-0.json", "config-1.json", "rule per-key", "rule per-client (shadow)",
		"What config-1.json changes from config-0.json", "limit 1: 4 requests at once, then 3 every 250ms",
		"Enforced, as the only rule, it would limit", "What this log cannot tell", "<td>429</td>",
		"Suggested limits for config-0.json"} {
		if !bytes.Contains(page, []byte(name)) {
			t.Errorf("the page does not mention %q", name)
		}
	}
}

// TestReportRendersInChromium opens report.html in headless Chromium, takes a screenshot and
// checks that both columns show both series' colours: the charts are drawn, not blank. Without
// Chromium the test skips, saying so, except in CI (CI=true), where it fails.
// TOLLGATE_REPORT_PNG=FILE keeps the screenshot (docs/report.png is one).
func TestReportRendersInChromium(t *testing.T) {
	browser := ""
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			browser = p
			break
		}
	}
	if browser == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("chromium is not installed; CI needs it (.ci/run installs Debian's chromium)")
		}
		t.Skip("chromium is not installed (Debian: apt-get install chromium), so report.html is not rendered")
	}
	htmlPath, _ := writeTestReport(t)
	shot := filepath.Join(t.TempDir(), "report.png")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // a guard, not a measure
	defer cancel()
	cmd := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
		"--user-data-dir="+t.TempDir(), "--window-size=1400,2000", "--screenshot="+shot, "file://"+htmlPath)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, out)
	}
	data, err := os.ReadFile(shot)
	if err != nil {
		t.Fatalf("chromium wrote no screenshot: %v", err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if keep := os.Getenv("TOLLGATE_REPORT_PNG"); keep != "" {
		if err := os.WriteFile(keep, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b := img.Bounds()
	halves := []struct {
		name string
		r    image.Rectangle
	}{
		{"left column", image.Rect(b.Min.X, b.Min.Y, b.Min.X+b.Dx()/2, b.Max.Y)},
		{"right column", image.Rect(b.Min.X+b.Dx()/2, b.Min.Y, b.Max.X, b.Max.Y)},
	}
	for _, h := range halves {
		admitted, limited, ink := 0, 0, 0
		for y := h.r.Min.Y; y < h.r.Max.Y; y++ {
			for x := h.r.Min.X; x < h.r.Max.X; x++ {
				c := img.At(x, y)
				switch {
				case near(c, ColorAdmitted):
					admitted++
				case near(c, ColorLimited):
					limited++
				}
				if r, g, bl, _ := c.RGBA(); r>>8 < 200 || g>>8 < 200 || bl>>8 < 200 {
					ink++
				}
			}
		}
		area := h.r.Dx() * h.r.Dy()
		t.Logf("%s: %d admitted-coloured, %d limited-coloured pixels, %.1f %% ink", h.name, admitted, limited, 100*float64(ink)/float64(area))
		// A drawn series line is hundreds of pixels; bars of limited keys thousands.
		if admitted < 300 || limited < 300 {
			t.Errorf("%s: %d pixels of the admitted colour and %d of the limited colour: the charts are missing or blank", h.name, admitted, limited)
		}
		if ink < area/50 {
			t.Errorf("%s: only %d of %d pixels are not white: the page is blank", h.name, ink, area)
		}
	}
}

// near reports whether c is within a small distance of want (anti-aliasing shifts edges).
func near(c color.Color, want color.RGBA) bool {
	r, g, b, _ := c.RGBA()
	d := func(a uint32, w uint8) int {
		x := int(a>>8) - int(w)
		if x < 0 {
			return -x
		}
		return x
	}
	return d(r, want.R)+d(g, want.G)+d(b, want.B) <= 24
}
