package integration

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgowl/pgowl/integration/owltest"
	"github.com/pgowl/pgowl/internal/cluster"
)

// owlProcess is pgowl built from this tree and run as its own process, for
// tests that measure the proxy's memory apart from the test's own.
type owlProcess struct {
	pid  int
	addr string
	log  *owltest.LogBuffer
}

// startOwlProcess builds ./cmd/pgowl, starts `pgowl serve` in front of c
// with the app user and extraYAML appended to its configuration, and waits
// until a client can run a statement through it. It is stopped when t ends.
func startOwlProcess(t *testing.T, c *cluster.Cluster, extraYAML string) *owlProcess {
	t.Helper()
	binary := buildProgram(t, "./cmd/pgowl")
	dir := filepath.Dir(binary)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var nodes strings.Builder
	for _, n := range c.Nodes {
		fmt.Fprintf(&nodes, "  - {name: %s, host: %s, port: %d}\n", n.Name, n.Host, n.Port)
	}
	conf := fmt.Sprintf("listen: %s\nnodes:\n%susers:\n  - {name: %s, password: %q}\nmonitor: {interval: 100ms}\nrouting: {notice: false}\nlog: {level: info, format: json}\nadmin: {listen: \"\"}\n%s",
		addr, nodes.String(), appUser, appPassword, extraYAML)
	confPath := filepath.Join(dir, "pgowl.yaml")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &owlProcess{addr: addr, log: &owltest.LogBuffer{}}
	cmd := exec.Command(binary, "serve", "--config", confPath)
	cmd.Env = owltest.CleanEnv()
	cmd.Stdout, cmd.Stderr = p.log, p.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start pgowl: %v", err)
	}
	p.pid = cmd.Process.Pid
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		syscall.Kill(-p.pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			syscall.Kill(-p.pid, syscall.SIGKILL)
			<-done
		}
		if t.Failed() {
			t.Logf("pgowl process log (tail):\n%s", owltest.TailString(p.log.String(), 8<<10))
		}
	})
	deadline := time.Now().Add(proxyReadyTimeout)
	for {
		err := p.runSelect()
		if err == nil {
			return p
		}
		select {
		case <-done:
			t.Fatalf("pgowl exited before serving: %s", owltest.TailString(p.log.String(), 4<<10))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("pgowl did not serve a statement within %s: %v", proxyReadyTimeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// buildProgram compiles the main package pkg (a path from the module's
// root) from this tree into a temporary directory and returns the binary.
func buildProgram(t *testing.T, pkg string) string {
	t.Helper()
	binary := filepath.Join(t.TempDir(), filepath.Base(pkg))
	build := exec.Command("go", "build", "-o", binary, pkg)
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return binary
}

// runSelect logs in as the app user and runs SELECT 1.
func (p *owlProcess) runSelect() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	host, port, _ := net.SplitHostPort(p.addr)
	conn, err := pgconn.Connect(ctx, fmt.Sprintf("host=%s port=%s user=%s password=%s dbname=%s sslmode=disable", host, port, appUser, appPassword, appDatabase))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "SELECT 1").ReadAll()
	return err
}

// memory returns the process's resident set now and at its peak, in KiB (VmRSS and VmHWM).
func (p *owlProcess) memory(t *testing.T) (rssKiB, peakKiB int64) {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.pid))
	if err != nil {
		t.Fatalf("read pgowl's /proc status: %v", err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		switch {
		case err != nil:
		case name == "VmRSS":
			rssKiB = kib
		case name == "VmHWM":
			peakKiB = kib
		}
	}
	if rssKiB == 0 || peakKiB == 0 {
		t.Fatalf("no VmRSS/VmHWM in pgowl's /proc status")
	}
	return rssKiB, peakKiB
}
