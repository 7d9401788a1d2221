package ratelimit

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A Redis Cluster of three masters with a replica each, on loopback, for envoyproxy/ratelimit in
// cluster mode (REDIS_TYPE=cluster): Debian's redis-server in cluster mode, joined with
// `redis-cli --cluster create`. A master is marked failed after clusterNodeTimeoutMs without an
// answer, and its replica then takes over.

const clusterNodeTimeoutMs = 1000

// redisNode is one redis-server of the cluster.
type redisNode struct {
	addr string
	proc *process
	id   string // the cluster's node id
	// masterID is the id of the master a replica follows ("" for a master).
	masterID string
}

type redisCluster struct{ nodes []*redisNode }

// clusterTools returns redis-server and redis-cli, failing the test in CI and skipping it
// elsewhere when one is missing.
func clusterTools(t *testing.T) (server, cli string) {
	t.Helper()
	server, err := exec.LookPath("redis-server")
	if err == nil {
		cli, err = exec.LookPath("redis-cli")
	}
	switch {
	case err != nil && inCI():
		t.Fatalf("%v: the Redis Cluster tests need redis-server and redis-cli (apt-get install -y redis-server redis-tools) (CI is true)", err)
	case err != nil:
		t.Skipf("skipping the Redis Cluster tests: %v (apt-get install -y redis-server redis-tools; with CI=true this is a failure)", err)
	}
	return server, cli
}

// startRedisCluster starts six cluster-enabled redis-servers, joins them into three masters with
// a replica each, and waits until every node says the cluster is ok and every replica is in sync.
func startRedisCluster(t *testing.T) *redisCluster {
	t.Helper()
	server, cli := clusterTools(t)
	dir := t.TempDir()
	c := &redisCluster{}
	var addrs []string
	for i := 0; i < 6; i++ {
		port := strconv.Itoa(freePort())
		addr := "127.0.0.1:" + port
		p, err := start("redis cluster node "+addr, nil, server, "--port", port, "--bind", "127.0.0.1",
			"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes-"+port+".conf"),
			"--cluster-node-timeout", strconv.Itoa(clusterNodeTimeoutMs), "--dir", dir,
			"--save", "", "--appendonly", "no", "--protected-mode", "no")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.stop)
		c.nodes = append(c.nodes, &redisNode{addr: addr, proc: p})
		addrs = append(addrs, addr)
	}
	for _, n := range c.nodes {
		if err := waitFor(10*time.Second, func() error { return redisPing(n.addr) }); err != nil {
			t.Fatalf("redis-server did not answer on %s: %v\n%s", n.addr, err, n.proc.output())
		}
	}
	args := append(append([]string{"--cluster", "create"}, addrs...), "--cluster-replicas", "1", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	if err := waitFor(30*time.Second, c.ready); err != nil {
		t.Fatalf("the Redis Cluster did not come up: %v", err)
	}
	if err := c.readTopology(); err != nil {
		t.Fatal(err)
	}
	return c
}

// ready reports whether every node sees all slots served and every replica is in sync.
func (c *redisCluster) ready() error {
	for _, n := range c.nodes {
		info, err := redisDo(n.addr, "CLUSTER", "INFO")
		if err != nil {
			return err
		}
		for _, want := range []string{"cluster_state:ok", "cluster_slots_ok:16384", "cluster_known_nodes:6"} {
			if !strings.Contains(info, want+"\r\n") {
				return fmt.Errorf("%s: CLUSTER INFO lacks %s:\n%s", n.addr, want, info)
			}
		}
		repl, err := redisDo(n.addr, "INFO", "replication")
		if err != nil {
			return err
		}
		if strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up") {
			return fmt.Errorf("%s: the replica is not in sync yet", n.addr)
		}
	}
	return nil
}

// readTopology reads which node is a master and which one's replica (CLUSTER NODES: id,
// address@bus-port, flags, master id, ...).
func (c *redisCluster) readTopology() error {
	out, err := redisDo(c.nodes[0].addr, "CLUSTER", "NODES")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 {
			return fmt.Errorf("CLUSTER NODES line %q", line)
		}
		addr, _, _ := strings.Cut(f[1], "@")
		for _, n := range c.nodes {
			if n.addr == addr {
				n.id = f[0]
				if strings.Contains(f[2], "slave") {
					n.masterID = f[3]
				}
			}
		}
	}
	return nil
}

func (c *redisCluster) masters() []*redisNode {
	var out []*redisNode
	for _, n := range c.nodes {
		if n.masterID == "" {
			out = append(out, n)
		}
	}
	return out
}

// replicaOf is the replica that follows master.
func (c *redisCluster) replicaOf(master *redisNode) *redisNode {
	for _, n := range c.nodes {
		if n.masterID == master.id {
			return n
		}
	}
	return nil
}

// addrs is the list REDIS_URL takes in cluster mode.
func (c *redisCluster) addrs() string {
	var out []string
	for _, n := range c.nodes {
		out = append(out, n.addr)
	}
	return strings.Join(out, ",")
}

// kill ends a node with SIGKILL, as a crash would, and waits for it to be gone.
func (n *redisNode) kill() {
	_ = n.proc.cmd.Process.Signal(syscall.SIGKILL)
	<-n.proc.done
}

// promoted reports whether a replica has become a master and its cluster is ok again.
func (n *redisNode) promoted() error {
	repl, err := redisDo(n.addr, "INFO", "replication")
	if err != nil {
		return err
	}
	if !strings.Contains(repl, "role:master\r\n") {
		return errors.New("still a replica")
	}
	info, err := redisDo(n.addr, "CLUSTER", "INFO")
	if err != nil {
		return err
	}
	if !strings.Contains(info, "cluster_state:ok\r\n") {
		return errors.New("the cluster is not ok yet")
	}
	return nil
}

// keys is the number of keys a node holds (DBSIZE).
func (n *redisNode) keys() (int, error) {
	out, err := redisDo(n.addr, "DBSIZE")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(out)
}

// count reads one counter of the cluster: a GET on each node, of which only the master serving
// the key's slot answers (the others redirect, a killed one refuses the connection). A key that
// is not there counts 0.
func (c *redisCluster) count(key string) (int, error) {
	for _, n := range c.nodes {
		v, err := redisDo(n.addr, "GET", key)
		if err != nil {
			continue
		}
		if v == "" {
			return 0, nil
		}
		return strconv.Atoi(v)
	}
	return 0, fmt.Errorf("no node of the cluster answers GET %s", key)
}

// redisDo sends one command and returns its reply: a simple string, an integer or a bulk string
// (the replies of the commands above; a missing key's null reply is ""); an error reply is an
// error.
func redisDo(addr string, args ...string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(conn, b.String()); err != nil {
		return "", err
	}
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", fmt.Errorf("%s: %s", addr, line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if n == -1 {
			return "", nil
		}
		if err != nil || n < 0 {
			return "", fmt.Errorf("bulk reply %q", line)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("unexpected reply %q", line)
}
