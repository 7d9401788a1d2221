package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// A log on standard input (--log -) through a configuration and a second one with a shadow
// rule: the terminal says what the shadow rule would limit alone, what the second configuration
// changes, and warns of the rule whose key no request has.
func TestSimulateReadsStandardInputAndSaysWhatChanges(t *testing.T) {
	wasm := builtModule(t)
	tight := writeFile(t, "tight.json", simulateConfig)
	shadow := writeFile(t, "shadow.json", `{"rules": [{"name": "per-ip", "shadow": true, "key": [{"client_ip": {}}],
	  "limits": [{"capacity": 2, "refill_tokens": 1, "refill_interval": "1s"}]},
	  {"name": "per-user", "missing_key": {"action": "allow"}, "key": [{"header": "x-user"}],
	  "limits": [{"capacity": 2, "refill_tokens": 1, "refill_interval": "1s"}]}]}`)
	var log strings.Builder
	for i := 0; i < 5; i++ { // five requests from one client in one second
		fmt.Fprintf(&log, `192.0.2.1 - - [30/Nov/2026:10:00:00 +0000] "GET /x HTTP/1.1" 200 5 "-" "curl/8.5.0"`+"\n")
	}
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr := runCLI(log.String(), "simulate", "--config", tight, "--compare", shadow, "--log", "-",
		"--format", "combined", "--out", out, "--wasm", wasm)
	if code != 0 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	for _, want := range []string{
		"standard input: 5 requests from 2026-11-30T10:00:00Z",
		"shadow rule per-ip enforced alone would limit 3 of its 5 requests (1 keys); with the other rules it shadow-limited 3",
		shadow + " against " + tight + ": 0 requests newly limited, 3 newly admitted",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if want := "tollgate simulate: warning: " + shadow + ": rule per-user: 5 of its 5 requests (100 %) have no key"; !strings.Contains(stderr, want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr)
	}
}

// --suggest writes a configuration that tollgate check accepts, with the limits fitted to the
// log: of two clients sending five and four requests at once, the first is the key limited most
// (--top 1) and left out, so the bucket is fitted to four, its shape kept, and limits one request.
func TestSimulateSuggestWritesAValidConfiguration(t *testing.T) {
	wasm := builtModule(t)
	tight := writeFile(t, "tight.json", simulateConfig)
	var log strings.Builder
	for client, n := range map[int]int{1: 5, 2: 4} {
		for range n {
			fmt.Fprintf(&log, `192.0.2.%d - - [30/Nov/2026:10:00:00 +0000] "GET /x HTTP/1.1" 200 5 "-" "curl/8.5.0"`+"\n", client)
		}
	}
	logPath := writeFile(t, "access.log", log.String())
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr := runCLI("", "simulate", "--config", tight, "--log", logPath, "--format", "combined",
		"--out", out, "--wasm", wasm, "--suggest", "--suggest-percent", "10", "--top", "1")
	if code != 0 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	suggested := filepath.Join(out, "suggested.json")
	for _, want := range []string{
		"suggested limits (" + suggested + "): at most 10 % of each rule's keys limited, the keys limited most left out",
		"rule per-ip (1 keys left out): replayed, 1 requests limited from 1 of 2 keys",
		"limit 1: 4 requests at once, then 2 per second\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if code, _, stderr := runCLI("", "check", suggested); code != 0 {
		t.Errorf("tollgate check %s: exit %d: %s", suggested, code, stderr)
	}
}
