package ratelimit

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tollgate-proxy/tollgate/internal/testbuild"
)

// repoRoot is the repository root, relative to this package.
const repoRoot = "../.."

// engine is what the package's tests share: the binaries and one Redis.
type engine struct {
	service, checker string // envoyproxy/ratelimit's service_cmd and config_check_cmd
	tollgate, module string // the CLI and the module, built for this run into dir
	dir              string
	redis            *process
	redisAddr        string
}

var (
	shared    *engine
	missing   string // the piece that is missing, when shared is nil
	setupErr  error  // a failure that is not a missing piece
	processes struct {
		sync.Mutex
		all []*process
	}
)

// TestMain builds and starts what the tests share before any test runs, so that no test's time
// includes a build.
func TestMain(m *testing.M) {
	shared, missing, setupErr = build()
	code := m.Run()
	processes.Lock()
	for _, p := range processes.all {
		p.stop()
	}
	processes.Unlock()
	if shared != nil {
		os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

// inCI reports whether the tests run in CI, where a missing piece is a failure.
func inCI() bool {
	ci, _ := strconv.ParseBool(os.Getenv("CI"))
	return ci
}

// setUp returns the shared engine that TestMain set up. A missing piece (redis-server, or a
// service that cannot be built) fails the test in CI and skips it elsewhere.
func setUp(t testing.TB) *engine {
	t.Helper()
	switch {
	case setupErr != nil:
		t.Fatal(setupErr)
	case missing != "" && inCI():
		t.Fatalf("%s (CI is true: the global-limit tests need the real Redis and envoyproxy/ratelimit)", missing)
	case missing != "":
		t.Skipf("skipping the tests against the real engine: %s (with CI=true this is a failure)", missing)
	}
	return shared
}

func build() (*engine, string, error) {
	e := &engine{}
	redis, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, "redis-server is not installed: apt-get update && apt-get install -y redis-server (.ci/run does this)", nil
	}
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		return nil, "", err
	}
	bin := filepath.Join(root, "build", "ratelimit", RateLimitVersion)
	e.service, e.checker = filepath.Join(bin, "service_cmd"), filepath.Join(bin, "config_check_cmd")
	if !exists(e.service) || !exists(e.checker) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "install",
			RateLimitModule+"/src/service_cmd@"+RateLimitVersion, RateLimitModule+"/src/config_check_cmd@"+RateLimitVersion)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GOBIN="+bin, "GOOS=", "GOARCH=", "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Sprintf("envoyproxy/ratelimit %s could not be built with go install (run `make ratelimit` "+
				"where the Go module proxy is reachable): %v\n%s", RateLimitVersion, err, out), nil
		}
	}
	dir, err := os.MkdirTemp("", "tollgate-ratelimit-e2e-")
	if err != nil {
		return nil, "", err
	}
	e.dir, e.tollgate, e.module = dir, filepath.Join(dir, "tollgate"), filepath.Join(dir, "tollgate.wasm")
	if err := testbuild.Command("./cmd/tollgate", e.tollgate); err != nil {
		return nil, "", err
	}
	wasm, err := testbuild.ModuleBytes("./filter")
	if err == nil {
		err = os.WriteFile(e.module, wasm, 0o644)
	}
	if err != nil {
		return nil, "", err
	}
	port := freePort()
	e.redisAddr = "127.0.0.1:" + strconv.Itoa(port)
	e.redis, err = start("redis", nil, redis, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--protected-mode", "no")
	if err != nil {
		return nil, "", err
	}
	if err := waitFor(10*time.Second, func() error { return redisPing(e.redisAddr) }); err != nil {
		return nil, "", fmt.Errorf("redis-server did not answer on %s: %v\n%s", e.redisAddr, err, e.redis.output())
	}
	return e, "", nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func redisPing(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// freePort returns a loopback port nothing listens on now.
func freePort() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func waitFor(limit time.Duration, ready func() error) error {
	deadline := time.Now().Add(limit)
	for {
		err := ready()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// process is a child process the tests started, with its output.
type process struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	mu   sync.Mutex
	out  bytes.Buffer
	// lines receives stdout lines, for processes that announce their addresses there.
	lines chan string
}

func (p *process) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

func (p *process) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// start runs a process with its stdout and stderr kept; it is stopped when the package's tests
// end, if not before.
func start(name string, env []string, path string, args ...string) (*process, error) {
	p := &process{name: name, cmd: exec.Command(path, args...), done: make(chan struct{}), lines: make(chan string, 64)}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stderr = p
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	processes.Lock()
	processes.all = append(processes.all, p)
	processes.Unlock()
	go func() {
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			line := scanner.Text()
			_, _ = p.Write([]byte(line + "\n"))
			select {
			case p.lines <- line:
			default:
			}
		}
		_ = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// stop ends the process (SIGTERM, then SIGKILL after 5 seconds) and waits for it.
func (p *process) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// service is one envoyproxy/ratelimit process.
type service struct {
	e          *engine
	dir        string
	grpcPort   int
	httpPorts  [2]int
	proc       *process
	GrpcAddr   string
	client     rlsv3.RateLimitServiceClient
	clientConn *grpc.ClientConn
	env        []string // settings over the defaults of start (a later one wins)
}

// startService starts envoyproxy/ratelimit on loopback ports with descriptors as its only
// configuration file, against the shared Redis unless env says otherwise, and waits until it
// answers.
func (e *engine) startService(t testing.TB, descriptors string, env ...string) *service {
	t.Helper()
	dir := t.TempDir()
	configDir := filepath.Join(dir, "runtime", "ratelimit", "config")
	if err := os.MkdirAll(configDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(configDir, "tollgate.yaml"), []byte(descriptors), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &service{e: e, dir: dir, grpcPort: freePort(), httpPorts: [2]int{freePort(), freePort()}, env: env}
	s.GrpcAddr = "127.0.0.1:" + strconv.Itoa(s.grpcPort)
	conn, err := grpc.NewClient(s.GrpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	s.clientConn, s.client = conn, rlsv3.NewRateLimitServiceClient(conn)
	s.start(t)
	t.Cleanup(s.stop)
	return s
}

func (s *service) start(t testing.TB) {
	t.Helper()
	env := []string{
		"USE_STATSD=false", "LOG_LEVEL=warn", "LOG_FORMAT=text",
		"REDIS_SOCKET_TYPE=tcp", "REDIS_URL=" + s.e.redisAddr,
		"RUNTIME_ROOT=" + filepath.Join(s.dir, "runtime"), "RUNTIME_SUBDIRECTORY=ratelimit",
		"RUNTIME_WATCH_ROOT=false", "RUNTIME_IGNOREDOTFILES=true",
		"HOST=127.0.0.1", "PORT=" + strconv.Itoa(s.httpPorts[0]),
		"DEBUG_HOST=127.0.0.1", "DEBUG_PORT=" + strconv.Itoa(s.httpPorts[1]),
		"GRPC_HOST=127.0.0.1", "GRPC_PORT=" + strconv.Itoa(s.grpcPort),
	}
	p, err := start("ratelimit", append(env, s.env...), s.e.service)
	if err != nil {
		t.Fatal(err)
	}
	s.proc = p
	err = waitFor(30*time.Second, func() error {
		select {
		case <-p.done:
			return errors.New("the service exited")
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := s.client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "readiness",
			Descriptors: []*commonv3.RateLimitDescriptor{{Entries: []*commonv3.RateLimitDescriptor_Entry{{Key: "readiness", Value: "x"}}}}})
		return err
	})
	if err != nil {
		t.Fatalf("envoyproxy/ratelimit did not come up on %s: %v\n%s", s.GrpcAddr, err, p.output())
	}
}

func (s *service) stop() {
	if s.proc != nil {
		s.proc.stop()
	}
}

// replica is one `tollgate serve` process: one Envoy replica.
type replica struct {
	proc        *process
	URL, Admin  string
	client      *http.Client
	description string
}

// startReplica runs `tollgate serve` with the module, two worker VMs, the cluster "ratelimit"
// mapped to the service, and the given Tollgate configuration.
func (e *engine) startReplica(t testing.TB, name, config, upstream, rateLimitAddr string) *replica {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tollgate.json")
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := start("tollgate serve "+name, nil, e.tollgate, "serve", "--config", path, "--upstream", upstream,
		"--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--wasm", e.module, "--workers", "2", "--envoy", "1.39",
		"--log-level", "warn", "--grpc-cluster", "ratelimit="+rateLimitAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.stop)
	r := &replica{proc: p, description: name,
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	timeout := time.After(60 * time.Second)
	for r.URL == "" || r.Admin == "" {
		select {
		case line := <-p.lines:
			if rest, ok := strings.CutPrefix(line, "tollgate serve: listening on "); ok {
				r.URL, _, _ = strings.Cut(rest, ",")
			}
			if rest, ok := strings.CutPrefix(line, "tollgate serve: metrics on "); ok {
				admin, _, _ := strings.Cut(rest, " ")
				r.Admin = strings.TrimSuffix(admin, "/stats")
			}
		case <-p.done:
			t.Fatalf("%s exited:\n%s", name, p.output())
		case <-timeout:
			t.Fatalf("%s did not announce its addresses:\n%s", name, p.output())
		}
	}
	return r
}

// get sends a GET with an API key and returns the status, the Retry-After header and the body.
func (r *replica) get(t testing.TB, path, key string) (int, string, string) {
	t.Helper()
	status, retryAfter, body, err := r.do(path, key)
	if err != nil {
		t.Fatal(err)
	}
	return status, retryAfter, body
}

// do is get for goroutines other than the test's: it returns the error.
func (r *replica) do(path, key string) (status int, retryAfter, body string, err error) {
	req, err := http.NewRequest("GET", r.URL+path, nil)
	if err != nil {
		return 0, "", "", err
	}
	req.Header.Set("x-api-key", key)
	resp, err := r.client.Do(req)
	if err != nil {
		return 0, "", "", fmt.Errorf("%s: %v\n%s", r.description, err, r.proc.output())
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After"), string(data), err
}

// stats reads the replica's counters.
func (r *replica) stats(t testing.TB) map[string]int64 {
	t.Helper()
	resp, err := r.client.Get(r.Admin + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]int64{}
	scanner := bufio.NewScanner(resp.Body)
	for scanner.Scan() {
		name, value, ok := strings.Cut(scanner.Text(), ": ")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(value, 10, 64)
		if err == nil {
			out[name] = n
		}
	}
	return out
}

// healthy fails the test if the replica's VMs trapped: `tollgate serve` logs "wasm VM failed"
// and answers 503 "the rate limit filter failed" from then on.
func (r *replica) healthy(t testing.TB) {
	t.Helper()
	if out := r.proc.output(); strings.Contains(out, "wasm VM failed") || strings.Contains(out, "the rate limit filter failed") {
		t.Fatalf("%s: a VM failed:\n%s", r.description, out)
	}
}
