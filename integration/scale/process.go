package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgowl/pgowl/internal/cluster"
)

// stopGrace is how long pgowl gets to exit after SIGTERM before SIGKILL.
const stopGrace = 10 * time.Second

// clockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat times (100 on Linux).
const clockTicks = 100

// raiseFileLimit sets the RLIMIT_NOFILE soft limit to the hard limit and returns it. Setting it
// explicitly (rather than relying on Go's automatic raise) makes children inherit it.
func raiseFileLimit() (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("getrlimit NOFILE: %w", err)
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("setrlimit NOFILE to %d: %w", lim.Max, err)
	}
	return lim.Max, nil
}

// buildPgowl compiles ./cmd/pgowl from the working tree into dir.
func buildPgowl(ctx context.Context, moduleDir, dir string) (string, error) {
	binary := filepath.Join(dir, "pgowl")
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", binary, "./cmd/pgowl")
	cmd.Dir = moduleDir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/pgowl: %w\n%s", err, out)
	}
	return binary, nil
}

// pgowlConfig is what varies in pgowl's configuration file.
type pgowlConfig struct {
	maxClients int
	sets       []string // key=value, passed as flags
}

// pgowlProcess is a running `pgowl serve`.
type pgowlProcess struct {
	cmd       *exec.Cmd
	pid       int
	addr      string // host:port clients connect to
	pprofAddr string
	logPath   string
	confText  string
	flags     []string
	fileLimit string // "Max open files" from /proc/<pid>/limits
	logFile   *os.File
	done      chan struct{}
	waitErr   error
}

// startPgowl writes pgowl's configuration for the cluster, starts it and waits until a client
// can run a read through it.
func startPgowl(ctx context.Context, binary, dir string, cl *cluster.Cluster, cfg pgowlConfig) (*pgowlProcess, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	var nodes strings.Builder
	for _, n := range cl.Nodes {
		fmt.Fprintf(&nodes, "  - {name: %s, host: %s, port: %d}\n", n.Name, n.Host, n.Port)
	}
	conf := fmt.Sprintf(`# Written by pgowl's integration/scale.
listen: 127.0.0.1:%d
nodes:
%susers:
  - {name: %s, password: %q}
monitor: {user: postgres, password: "", database: postgres}
routing:
  notice: false
log:
  level: warn
  format: json
limits:
  max_client_connections: %d
pool:
  max_per_node: %d
admin:
  listen: 127.0.0.1:0
`, ports[0], nodes.String(), appUser, appPassword, cfg.maxClients, poolMaxPerNode)
	confPath := filepath.Join(dir, "pgowl.yaml")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "pgowl.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	p := &pgowlProcess{
		addr:      fmt.Sprintf("127.0.0.1:%d", ports[0]),
		pprofAddr: fmt.Sprintf("127.0.0.1:%d", ports[1]),
		logPath:   logPath,
		confText:  conf,
		logFile:   logFile,
		done:      make(chan struct{}),
	}
	args := []string{"serve", "--config", confPath, "--pprof-addr", p.pprofAddr}
	for _, kv := range cfg.sets {
		p.flags = append(p.flags, "--"+kv)
	}
	args = append(args, p.flags...)
	p.cmd = exec.Command(binary, args...)
	p.cmd.Dir = dir
	p.cmd.Stdout = logFile
	p.cmd.Stderr = logFile
	// Its own process group, killed with us if we die without cleaning up.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start pgowl: %w", err)
	}
	p.pid = p.cmd.Process.Pid
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.done)
	}()
	logf("pgowl started (pid %d) on %s", p.pid, p.addr)
	if err := p.waitReady(ctx); err != nil {
		p.stop()
		return nil, err
	}
	p.fileLimit = procLimit(p.pid, "Max open files")
	return p, nil
}

// waitReady retries a connection and a read through pgowl until both work: the monitor must
// have found the primary and a standby first.
func (p *pgowlProcess) waitReady(ctx context.Context) error {
	cfg, err := p.connConfig()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		if err := p.checkAlive(); err != nil {
			return err
		}
		last = func() error {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			conn, err := pgconn.ConnectConfig(cctx, cfg)
			if err != nil {
				return err
			}
			defer conn.Close(cctx)
			_, err = conn.Exec(cctx, "SELECT 1").ReadAll()
			return err
		}()
		if last == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("pgowl did not serve a read within 30s: %v\n%s", last, p.logTail(20))
}

// connConfig returns the pgconn configuration of a client of pgowl.
func (p *pgowlProcess) connConfig() (*pgconn.Config, error) {
	host, port, _ := net.SplitHostPort(p.addr)
	return pgconn.ParseConfig(fmt.Sprintf("host=%s port=%s user=%s password=%s dbname=%s sslmode=disable connect_timeout=15",
		host, port, appUser, appPassword, appDatabase))
}

// checkAlive returns an error with the log's tail if pgowl has exited.
func (p *pgowlProcess) checkAlive() error {
	select {
	case <-p.done:
		return fmt.Errorf("pgowl exited (%v); its log ends:\n%s", p.waitErr, p.logTail(20))
	default:
		return nil
	}
}

// stop sends SIGTERM, then SIGKILL after stopGrace, and waits. It is safe to call twice.
func (p *pgowlProcess) stop() {
	select {
	case <-p.done:
	default:
		_ = syscall.Kill(-p.pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(stopGrace):
			logf("pgowl did not exit within %s of SIGTERM; killing it", stopGrace)
			_ = syscall.Kill(-p.pid, syscall.SIGKILL)
			<-p.done
		}
	}
	_ = p.logFile.Close()
}

// logTail returns the last lines of pgowl's log.
func (p *pgowlProcess) logTail(lines int) string {
	content, err := os.ReadFile(p.logPath)
	if err != nil {
		return ""
	}
	all := strings.Split(strings.TrimRight(string(content), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// describe states how pgowl runs, for the report.
func (p *pgowlProcess) describe() string {
	var b strings.Builder
	b.WriteString("```yaml\n")
	b.WriteString(p.confText)
	b.WriteString("```\n")
	if len(p.flags) > 0 {
		fmt.Fprintf(&b, "\nExtra flags: `%s`.\n", strings.Join(p.flags, " "))
	}
	fmt.Fprintf(&b, "\nThe hidden `--pprof-addr` is set (loopback) so that the report can show the Go runtime's memory view. "+
		"pgowl's open-file limit (/proc/<pid>/limits): %s.\n", p.fileLimit)
	return b.String()
}

// procSample is what /proc says about a process at one moment.
type procSample struct {
	rssKiB  int64 // VmRSS
	hwmKiB  int64 // VmHWM, the peak
	threads int
	fds     int
}

// sampleProc reads pid's memory, threads and descriptors.
func sampleProc(pid int) (procSample, error) {
	var s procSample
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	defer f.Close()
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		key, value, ok := strings.Cut(scanner.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(value)
		if len(fields) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(fields[0], 10, 64)
		switch key {
		case "VmRSS":
			s.rssKiB = n
		case "VmHWM":
			s.hwmKiB = n
		case "Threads":
			s.threads = int(n)
		}
	}
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return s, err
	}
	s.fds = len(entries)
	return s, nil
}

// procLimit returns the soft and hard values of one line of /proc/<pid>/limits.
func procLimit(pid int, name string) string {
	content, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(content), "\n") {
		if rest, ok := strings.CutPrefix(line, name); ok {
			fields := strings.Fields(rest)
			if len(fields) >= 2 {
				return "soft " + fields[0] + ", hard " + fields[1]
			}
		}
	}
	return "unknown"
}

// runtimeStats is the Go runtime's view of pgowl's memory, from its heap profile.
type runtimeStats struct {
	heapAlloc  int64 // bytes of live objects (just after a GC)
	heapInuse  int64
	stackInuse int64
	sys        int64
	goroutines int
}

// fetchRuntimeStats asks pgowl's pprof endpoint for a heap profile after a GC, and for the
// goroutine count.
func (p *pgowlProcess) fetchRuntimeStats(ctx context.Context) (runtimeStats, error) {
	var rs runtimeStats
	get := func(path string) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.pprofAddr+path, nil)
		if err != nil {
			return "", err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("GET %s: %s", path, resp.Status)
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
		return string(body), err
	}
	heap, err := get("/debug/pprof/heap?debug=1&gc=1")
	if err != nil {
		return rs, err
	}
	for _, line := range strings.Split(heap, "\n") {
		key, value, ok := strings.Cut(strings.TrimPrefix(line, "# "), " = ")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.Fields(value + " x")[0], 10, 64)
		if err != nil {
			continue
		}
		switch key {
		case "HeapAlloc":
			rs.heapAlloc = n
		case "HeapInuse":
			rs.heapInuse = n
		case "Stack": // "# Stack = StackInuse / StackSys"
			rs.stackInuse = n
		case "Sys":
			rs.sys = n
		}
	}
	goroutines, err := get("/debug/pprof/goroutine?debug=1")
	if err != nil {
		return rs, err
	}
	first, _, _ := strings.Cut(goroutines, "\n")
	if rest, ok := strings.CutPrefix(first, "goroutine profile: total "); ok {
		rs.goroutines, _ = strconv.Atoi(strings.TrimSpace(rest))
	}
	return rs, nil
}

// freePorts returns count distinct loopback ports that were free a moment ago.
func freePorts(count int) ([]int, error) {
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	ports := make([]int, 0, count)
	for range count {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
