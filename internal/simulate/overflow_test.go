package simulate

import (
	"context"
	"encoding/json"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// overflowScript, added to a copy of the report (which has no script of its own), lists every
// piece of text that leaves its chart, every element past the viewport's right edge and every
// element that leaves its column, in a <pre id="overflow"> that --dump-dom prints.
const overflowScript = `<script>
(function () {
  const problems = [];
  const what = el => el.tagName.toLowerCase() + ' "' + (el.textContent || '').trim().slice(0, 80) + '"';
  const drawn = el => { const r = el.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
  const outside = (r, box) => r.left < box.left - 1 || r.right > box.right + 1 || r.top < box.top - 1 || r.bottom > box.bottom + 1;
  for (const svg of document.querySelectorAll('svg')) {
    const box = svg.getBoundingClientRect();
    for (const t of svg.querySelectorAll('text')) {
      const r = t.getBoundingClientRect();
      if (drawn(t) && outside(r, box)) problems.push('text leaves its chart: ' + what(t));
    }
  }
  const width = document.documentElement.clientWidth;
  for (const el of document.body.querySelectorAll('*')) {
    if (drawn(el) && el.getBoundingClientRect().right > width + 1) problems.push('past the viewport: ' + what(el));
  }
  for (const col of document.querySelectorAll('.columns > div')) {
    const box = col.getBoundingClientRect();
    for (const el of col.querySelectorAll('*')) {
      const r = el.getBoundingClientRect();
      if (drawn(el) && (r.left < box.left - 1 || r.right > box.right + 1)) problems.push('leaves its column: ' + what(el));
    }
  }
  const out = document.createElement('pre');
  out.id = 'overflow';
  out.textContent = JSON.stringify(problems);
  document.body.appendChild(out);
})();
</script>`

// chromium is the path of Chromium, or skips the test saying so (fails in CI, which has it).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed; CI needs it (.ci/run installs Debian's chromium)")
	}
	t.Skip("chromium is not installed (Debian: apt-get install chromium), so report.html is not rendered")
	return ""
}

// overflows renders page at a window width in Chromium and returns what the script found.
func overflows(t *testing.T, browser string, page []byte, width string) []string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "report.html")
	withScript := strings.Replace(string(page), "</body>", overflowScript+"</body>", 1)
	if err := os.WriteFile(path, []byte(withScript), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // a guard, not a measure
	defer cancel()
	out, err := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
		"--user-data-dir="+filepath.Join(dir, "profile"), "--window-size="+width+",2000", "--dump-dom", "file://"+path).Output()
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	m := regexp.MustCompile(`(?s)<pre id="overflow">(.*?)</pre>`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("chromium ran no script: the page's DOM has no result:\n%.2000s", out)
	}
	var problems []string
	if err := json.Unmarshal([]byte(html.UnescapeString(string(m[1]))), &problems); err != nil {
		t.Fatal(err)
	}
	return problems
}

// No text of the report leaves its chart, its column or the window, at a wide and a narrow
// window, with long names (a long configuration path, keys shown as they are).
func TestReportTextFitsInChromium(t *testing.T) {
	browser := chromium(t)
	htmlPath, _ := writeTestReport(t)
	page, err := os.ReadFile(htmlPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, width := range []string{"1400", "1000"} {
		for _, p := range overflows(t, browser, page, width) {
			t.Errorf("at %s px: %s", width, p)
		}
	}
}
