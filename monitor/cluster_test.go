package monitor_test

// This file is a minimal, throw-away PostgreSQL cluster for the monitor's
// integration tests. It exists because the shared harness
// (github.com/pgowl/pgowl/integration/cluster) was not ready when these tests
// were written; its method names mirror the harness so that this file can be
// replaced by it without touching monitor_test.go.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/monitor"
)

const (
	defaultPGBin = "/usr/lib/postgresql/15/bin"
	pgBinEnv     = "PGOWL_PG_BIN"
	// commandTimeout bounds each PostgreSQL tool run.
	commandTimeout = 2 * time.Minute
	// waitTimeout bounds every wait for an observed server state.
	waitTimeout = 30 * time.Second
)

type testCluster struct {
	bin   string
	dir   string
	cred  *syscall.Credential
	Nodes []*testNode
}

type testNode struct {
	cluster *testCluster
	Name    string
	dataDir string
	port    int
	running bool
}

// startCluster starts a primary "pg1" and standbys "pg2", ... streaming from
// it, each caught up with the primary, and stops them when t ends. It skips t
// only when the PostgreSQL binaries are missing.
func startCluster(t *testing.T, standbys int) *testCluster {
	t.Helper()
	bin := os.Getenv(pgBinEnv)
	if bin == "" {
		bin = defaultPGBin
	}
	for _, tool := range []string{"initdb", "pg_ctl", "pg_basebackup", "postgres"} {
		if _, err := os.Stat(filepath.Join(bin, tool)); err != nil {
			t.Skipf("skipping: PostgreSQL binaries not found in %s (set %s): %v", bin, pgBinEnv, err)
		}
	}
	began := time.Now()
	defer func() {
		t.Logf("test cluster with %d standby(s) started in %s", standbys, time.Since(began).Round(time.Millisecond))
	}()
	c := &testCluster{bin: bin}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root needs an operating-system user postgres: %v", err)
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	dir, err := os.MkdirTemp("", "pgowl-monitor-")
	if err != nil {
		t.Fatal(err)
	}
	c.dir = dir
	t.Cleanup(func() { c.close(t) })
	c.chown(t, dir)

	primary := c.newNode(t, "pg1")
	c.run(t, "initdb", "-D", primary.dataDir, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8")
	primary.configure(t)
	primary.Start(t)
	for i := 0; i < standbys; i++ {
		standby := c.newNode(t, "pg"+strconv.Itoa(i+2))
		c.run(t, "pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(primary.port), "-U", "postgres",
			"-D", standby.dataDir, "-R", "-X", "stream", "-c", "fast", "--no-sync")
		standby.configure(t)
		standby.Start(t)
		standby.WaitCaughtUp(t, primary)
	}
	return c
}

func (c *testCluster) newNode(t *testing.T, name string) *testNode {
	t.Helper()
	n := &testNode{cluster: c, Name: name, dataDir: filepath.Join(c.dir, name), port: freePort(t)}
	c.Nodes = append(c.Nodes, n)
	return n
}

// configure makes the node listen on its own port and socket directory.
func (n *testNode) configure(t *testing.T) {
	t.Helper()
	settings := fmt.Sprintf("\n# pgowl monitor test\nport = %d\nlisten_addresses = '127.0.0.1'\n"+
		"unix_socket_directories = '%s'\nfsync = off\nshared_buffers = '16MB'\nmax_connections = 30\n"+
		"wal_keep_size = '256MB'\nhot_standby = on\n", n.port, n.dataDir)
	f, err := os.OpenFile(filepath.Join(n.dataDir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(settings); err != nil {
		t.Fatal(err)
	}
}

func (n *testNode) Addr() monitor.NodeAddr {
	return monitor.NodeAddr{Name: n.Name, Host: "127.0.0.1", Port: n.port}
}

// Start starts the node and waits until it accepts connections.
func (n *testNode) Start(t *testing.T) {
	t.Helper()
	n.cluster.run(t, "pg_ctl", "-D", n.dataDir, "-l", filepath.Join(n.cluster.dir, n.Name+".log"), "-w", "-t", "60", "start")
	n.running = true
}

// Stop shuts the node down (fast mode) and waits until it is gone.
func (n *testNode) Stop(t *testing.T) {
	t.Helper()
	n.cluster.run(t, "pg_ctl", "-D", n.dataDir, "-m", "fast", "-w", "-t", "60", "stop")
	n.running = false
}

// Promote ends recovery on a standby and waits until it accepts writes.
func (n *testNode) Promote(t *testing.T) {
	t.Helper()
	n.cluster.run(t, "pg_ctl", "-D", n.dataDir, "-w", "-t", "60", "promote")
}

func (n *testNode) connect(ctx context.Context) (*pgx.Conn, error) {
	config, err := pgx.ParseConfig(fmt.Sprintf("host=127.0.0.1 port=%d user=postgres dbname=postgres sslmode=disable", n.port))
	if err != nil {
		return nil, err
	}
	config.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	return pgx.ConnectConfig(ctx, config)
}

// Exec runs sql on the node through a fresh connection.
func (n *testNode) Exec(t *testing.T, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	conn, err := n.connect(ctx)
	if err != nil {
		t.Fatalf("%s: connect: %v", n.Name, err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %s: %v", n.Name, sql, err)
	}
}

// QueryString runs a one-value query through a fresh connection.
func (n *testNode) QueryString(t *testing.T, sql string) string {
	t.Helper()
	value, err := n.queryString(sql)
	if err != nil {
		t.Fatalf("%s: %s: %v", n.Name, sql, err)
	}
	return value
}

func (n *testNode) queryString(sql string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := n.connect(ctx)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	var value string
	err = conn.QueryRow(ctx, sql).Scan(&value)
	return value, err
}

// WaitCaughtUp waits until the standby has replayed the primary's current WAL position.
func (n *testNode) WaitCaughtUp(t *testing.T, primary *testNode) {
	t.Helper()
	target := primary.QueryString(t, "SELECT pg_current_wal_lsn()::text")
	deadline := time.Now().Add(waitTimeout)
	var last string
	var lastErr error
	for time.Now().Before(deadline) {
		replayed, err := n.queryString("SELECT (pg_last_wal_replay_lsn() >= '" + target + "'::pg_lsn)::text")
		if err == nil && replayed == "true" {
			return
		}
		last, lastErr = replayed, err
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s did not replay %s within %s (last answer %q, error %v)\n%s", n.Name, target, waitTimeout, last, lastErr, n.logTail())
}

func (n *testNode) logTail() string {
	data, _ := os.ReadFile(filepath.Join(n.cluster.dir, n.Name+".log"))
	if len(data) > 3000 {
		data = data[len(data)-3000:]
	}
	return string(data)
}

// run runs a PostgreSQL tool as the postgres user.
func (c *testCluster) run(t *testing.T, tool string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, tool), args...)
	cmd.Dir = c.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", tool, strings.Join(args, " "), err, out)
	}
}

func (c *testCluster) chown(t *testing.T, path string) {
	t.Helper()
	if c.cred == nil {
		return
	}
	if err := os.Chown(path, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
		t.Fatal(err)
	}
}

// close stops every running node immediately and removes the directory.
func (c *testCluster) close(t *testing.T) {
	var errs []error
	for _, n := range c.Nodes {
		if !n.running {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
		cmd := exec.CommandContext(ctx, filepath.Join(c.bin, "pg_ctl"), "-D", n.dataDir, "-m", "immediate", "-w", "stop")
		if c.cred != nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %v: %s", n.Name, err, out))
		}
		cancel()
		n.running = false
	}
	if t.Failed() {
		for _, n := range c.Nodes {
			t.Logf("server log of %s:\n%s", n.Name, n.logTail())
		}
	}
	if err := os.RemoveAll(c.dir); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		t.Errorf("close test cluster: %v", err)
	}
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
