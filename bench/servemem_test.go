package bench

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate-proxy/tollgate/internal/testbuild"
)

// serveMemoryKeys is the key table of BenchmarkServeMemory: the default max_keys.
const serveMemoryKeys = 100_000

// BenchmarkServeMemory reports the resident memory (VmRSS in /proc, Linux only) of a `tollgate
// serve` process, built as make builds it, with 1, 2 and 4 worker VMs: idle after start, after a
// flood of max_keys distinct keys (every slot of the key table taken) and after as many more
// (the table already full: what still grows is the Go heap's, not slots). The rule admits 10 per key; requests come from 8
// closed-loop clients over keep-alive connections to a local upstream. It does its fixed work
// once, whatever b.N. The figures are the embedded host's (wazero, a Go map for shared data), not
// Envoy's: they size `tollgate serve` itself, and show what a VM and a table slot cost there.
func BenchmarkServeMemory(b *testing.B) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		b.Skip("no /proc/self/status to read resident memory from: Linux only")
	}
	dir := b.TempDir()
	cli, wasm, cfg := filepath.Join(dir, "tollgate"), filepath.Join(dir, "tollgate.wasm"), filepath.Join(dir, "config.json")
	if err := testbuild.Command("./cmd/tollgate", cli); err != nil {
		b.Fatal(err)
	}
	config := fmt.Sprintf(`{"key_table": {"max_keys": %d}, "rules": [{"name": "per-key", "key": [{"header": "x-api-key"}],
	  "limits": [{"capacity": 10, "refill_tokens": 1, "refill_interval": "1s"}]}]}`, serveMemoryKeys)
	for path, data := range map[string][]byte{wasm: tollgateModule(b), cfg: []byte(config)} {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") }))
	defer upstream.Close()
	for _, workers := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			cmd, base := startServe(b, cli, "--config", cfg, "--wasm", wasm, "--upstream", upstream.URL,
				"--listen", "127.0.0.1:0", "--workers", strconv.Itoa(workers))
			defer stopServe(b, cmd)
			idle := residentMiB(b, cmd.Process.Pid)
			floodKeys(b, base, 0, serveMemoryKeys)
			full := residentMiB(b, cmd.Process.Pid)
			floodKeys(b, base, serveMemoryKeys, 2*serveMemoryKeys)
			twice := residentMiB(b, cmd.Process.Pid)
			for b.Loop() {
			}
			b.ReportMetric(idle, "idle-MiB")
			b.ReportMetric(full, "table-full-MiB")
			b.ReportMetric(twice, "twice-MiB")
			b.ReportMetric((full-idle)*(1<<20)/serveMemoryKeys, "bytes/key")
		})
	}
}

// startServe starts `tollgate serve` and returns it with its listener's base URL, read from the
// line it prints once it listens.
func startServe(b *testing.B, cli string, args ...string) (*exec.Cmd, string) {
	cmd := exec.Command(cli, append([]string{"serve"}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		if _, rest, ok := strings.Cut(lines.Text(), "listening on "); ok {
			base, _, _ := strings.Cut(rest, ",")
			go io.Copy(io.Discard, stdout)
			return cmd, base
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	b.Fatalf("tollgate serve ended without listening: %v", lines.Err())
	return nil, ""
}

func stopServe(b *testing.B, cmd *exec.Cmd) {
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		b.Errorf("tollgate serve: %v", err)
	}
}

// residentMiB reads a process's resident set size from /proc.
func residentMiB(b *testing.B, pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kib, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			if err != nil {
				b.Fatal(line)
			}
			return float64(kib) / 1024
		}
	}
	b.Fatal("no VmRSS line")
	return 0
}

// floodKeys sends one request for each key from..to-1 from httpClients closed-loop clients; each
// must be admitted (a new key has a full bucket, and finds a free slot while the table has one)
// or, once the table is full, limited by the overflow bucket.
func floodKeys(b *testing.B, base string, from, to int) {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: httpClients}}
	defer client.CloseIdleConnections()
	var failed sync.Once
	closedLoop(from, to, func(i int) bool {
		req, _ := http.NewRequest("GET", base+"/", nil)
		req.Header.Set("x-api-key", "flood-"+strconv.Itoa(i))
		resp, err := client.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		if err != nil || (resp.StatusCode != 200 && resp.StatusCode != 429) {
			failed.Do(func() { b.Errorf("key %d: %v %v", i, resp, err) })
			return false
		}
		return true
	})
}
