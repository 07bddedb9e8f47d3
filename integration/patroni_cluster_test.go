package integration

// The Patroni harness: one etcd and a few Patroni-managed PostgreSQL 15
// members on loopback ports, for the tests that check pgowl following
// Patroni (patroni_switchover_test.go).
//
// Layout: one temporary directory under /tmp holds etcd's data directory and
// log, and a directory per member ("p1", "p2", ...) with its Patroni
// configuration (patroni.yaml), its log (patroni.log), its data directory and
// its Unix socket. Patroni runs as the operating-system user postgres when the
// test runs as root (PostgreSQL refuses root), as the current user otherwise.
//
// Lifecycle: etcd starts first (v3 API, Patroni's etcd3 section); the first
// member bootstraps the cluster (initdb) and becomes leader; the others clone
// it with pg_basebackup and stream from it. The test then creates the app
// login on the leader. Cleanup, registered before anything starts, runs
// even when the test fails: every Patroni gets SIGTERM (it stops its
// PostgreSQL), then anything left (Patroni, postmasters found through
// postmaster.pid, etcd) gets SIGKILL, and the directory is removed. A
// detached watchdog does the same if the test binary dies without cleaning
// up (killed by -timeout).
//
// The Patroni and etcd programs are required: when they are missing the test
// fails and says which package to install; it does not skip.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pgowl/pgowl/internal/cluster"
)

// Bounds of the Patroni harness.
const (
	patroniStartTimeout = 90 * time.Second
	patroniStopTimeout  = 15 * time.Second
	// patroniLoopWait is Patroni's loop_wait in seconds: short, so that the test's
	// switchovers and the members' rejoining do not wait on it.
	patroniLoopWait = 1
)

// patroniPrograms maps each program the harness needs to the Debian package that holds it.
var patroniPrograms = map[string]string{
	"patroni":    "patroni",
	"patronictl": "patroni",
	"etcd":       "etcd-server",
}

// requirePatroniPrograms fails t (it does not skip) when a program the harness needs is missing.
func requirePatroniPrograms(t *testing.T) {
	t.Helper()
	var missing []string
	for program, pkg := range patroniPrograms {
		if _, err := exec.LookPath(program); err != nil {
			missing = append(missing, program+" (Debian package "+pkg+")")
		}
	}
	if len(missing) > 0 {
		t.Fatalf("the Patroni tests need %s: install them (apt-get install -y patroni etcd-server etcd-client); .ci/run does", strings.Join(missing, ", "))
	}
	if err := cluster.CheckBinaries(cluster.Options{}); err != nil {
		t.Skipf("skipping: PostgreSQL binaries not available: %v", err)
	}
}

// patroniMember is one Patroni-managed PostgreSQL server.
type patroniMember struct {
	// Node is the member's PostgreSQL (Name, Host, Port) for the harness's query helpers.
	Node *cluster.Node
	// APIURL is the member's Patroni REST API base URL.
	APIURL string
	// ConfigPath is the member's Patroni configuration, for patronictl -c.
	ConfigPath string
	dir        string
	proc       *harnessProcess
}

// Name is the member's Patroni name, also its pgowl node name.
func (m *patroniMember) Name() string { return m.Node.Name }

// patroniCluster is one etcd and the Patroni members that use it.
type patroniCluster struct {
	Members []*patroniMember
	// Nodes holds the members' PostgreSQL servers, in member order, for owltest.Start.
	Nodes *cluster.Cluster
	dir   string
	etcd  *harnessProcess
	owner *syscall.Credential
	scope string
	// stopWatchdog stops the watchdog; closeOnce guards close.
	stopWatchdog func()
	closeOnce    sync.Once
}

// harnessProcess is one long-running program the harness started in its own process group.
type harnessProcess struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{}
}

// patroniStartAttempts bounds the starts of the harness: a port found free
// may be taken by another program before etcd or PostgreSQL binds it.
const patroniStartAttempts = 3

// portTakenMarkers are the log lines of etcd, Patroni and PostgreSQL that
// say a port was taken.
var portTakenMarkers = []string{"address already in use", "could not bind", "could not create any tcp/ip sockets"}

// startPatroniCluster starts etcd and members Patroni members, waits until
// the first is leader and every other one streams from it with no lag, and
// creates the app login. Everything stops when t ends. A start that fails
// because a port was taken is retried on new ports.
func startPatroniCluster(t *testing.T, members int) *patroniCluster {
	t.Helper()
	requirePatroniPrograms(t)
	for attempt := 1; ; attempt++ {
		pc, err := tryStartPatroniCluster(t, members)
		if err == nil {
			return pc
		}
		logs := strings.ToLower(pc.logText())
		taken := slices.ContainsFunc(portTakenMarkers, func(marker string) bool { return strings.Contains(logs, marker) })
		if !taken || attempt == patroniStartAttempts {
			t.Fatalf("start the Patroni cluster (attempt %d): %v", attempt, err)
		}
		t.Logf("patroni: attempt %d failed because a port was taken (%v); retrying on new ports", attempt, err)
		pc.logTails(t)
		pc.close(t)
	}
}

// tryStartPatroniCluster is one attempt of startPatroniCluster. It fails t on
// setup errors and returns the errors of the waits, which a taken port explains.
func tryStartPatroniCluster(t *testing.T, members int) (*patroniCluster, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patroniStartTimeout)
	defer cancel()
	pc := &patroniCluster{scope: "pgowl-patroni-test"}
	if os.Geteuid() == 0 {
		account, err := user.Lookup(cluster.Superuser)
		if err != nil {
			t.Fatalf("running as root needs an operating-system user postgres to run Patroni: %v", err)
		}
		uid, _ := strconv.ParseUint(account.Uid, 10, 32)
		gid, _ := strconv.ParseUint(account.Gid, 10, 32)
		pc.owner = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
	}
	dir, err := os.MkdirTemp("/tmp", "pgowl-patroni-")
	if err != nil {
		t.Fatalf("create the Patroni cluster directory: %v", err)
	}
	pc.dir = dir
	pc.chown(t, dir)
	pc.stopWatchdog = startPatroniWatchdog(t, dir)
	t.Cleanup(func() {
		if t.Failed() {
			pc.logTails(t)
		}
		pc.close(t)
	})

	ports := freeLoopbackPorts(t, 2+2*members)
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	pc.etcd = pc.start(t, "etcd", filepath.Join(dir, "etcd.log"), nil, "etcd",
		"--name", "e1", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "e1="+peerURL, "--initial-cluster-state", "new")
	if err := pc.waitHTTP(ctx, "etcd answers /health", etcdURL+"/health", func(body []byte) bool {
		return strings.Contains(string(body), `"health":"true"`)
	}); err != nil {
		return pc, err
	}

	var nodes []*cluster.Node
	for i := range members {
		name := fmt.Sprintf("p%d", i+1)
		memberDir := filepath.Join(dir, name)
		if err := os.Mkdir(memberDir, 0o700); err != nil {
			t.Fatalf("create %s: %v", memberDir, err)
		}
		pc.chown(t, memberDir)
		m := &patroniMember{
			Node:       &cluster.Node{Name: name, Host: "127.0.0.1", Port: ports[2+2*i], Dir: memberDir, DataDir: filepath.Join(memberDir, "data")},
			APIURL:     fmt.Sprintf("http://127.0.0.1:%d", ports[3+2*i]),
			ConfigPath: filepath.Join(memberDir, "patroni.yaml"),
			dir:        memberDir,
		}
		if err := os.WriteFile(m.ConfigPath, []byte(pc.memberConfig(m, ports[0])), 0o600); err != nil {
			t.Fatalf("write %s: %v", m.ConfigPath, err)
		}
		pc.chown(t, m.ConfigPath)
		pc.Members = append(pc.Members, m)
		nodes = append(nodes, m.Node)
	}
	pc.Nodes = &cluster.Cluster{Nodes: nodes, Dir: dir}

	// The first member bootstraps alone, so that it is the leader; the others clone it.
	began := time.Now()
	first := pc.Members[0]
	first.proc = pc.start(t, first.Name(), filepath.Join(first.dir, "patroni.log"), pc.owner, "patroni", first.ConfigPath)
	if err := pc.waitHTTP(ctx, first.Name()+" is the leader", first.APIURL+"/primary", func([]byte) bool { return true }); err != nil {
		return pc, err
	}
	for _, m := range pc.Members[1:] {
		m.proc = pc.start(t, m.Name(), filepath.Join(m.dir, "patroni.log"), pc.owner, "patroni", m.ConfigPath)
	}
	if err := pc.awaitStreaming(ctx, first.Name()); err != nil {
		return pc, err
	}
	if err := first.Node.Exec(ctx, fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", appUser, appPassword)); err != nil {
		t.Fatalf("create the app login on %s: %v", first.Name(), err)
	}
	t.Logf("patroni: etcd and %d members ready in %s under %s", members, time.Since(began).Round(time.Millisecond), dir)
	return pc, nil
}

// close stops every process, the watchdog, and removes the directory; it runs once.
func (pc *patroniCluster) close(t *testing.T) {
	pc.closeOnce.Do(func() {
		pc.stop(t)
		if pc.stopWatchdog != nil {
			pc.stopWatchdog()
		}
		if err := os.RemoveAll(pc.dir); err != nil {
			t.Errorf("remove %s: %v", pc.dir, err)
		}
	})
}

// memberConfig is m's Patroni configuration: etcd3 on loopback, PostgreSQL 15
// on m's port with the app login authenticated by SCRAM and the superuser and
// replication trusted on loopback (the harness and pgowl's monitor log in as postgres).
func (pc *patroniCluster) memberConfig(m *patroniMember, etcdPort int) string {
	return fmt.Sprintf(`scope: %[1]s
name: %[2]s
log:
  level: INFO
restapi:
  listen: %[3]s
  connect_address: %[3]s
etcd3:
  hosts: 127.0.0.1:%[4]d
bootstrap:
  dcs:
    ttl: 20
    loop_wait: %[5]d
    retry_timeout: 5
    maximum_lag_on_failover: 16777216
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        wal_level: replica
        hot_standby: "on"
        wal_log_hints: "on"
        max_wal_senders: 10
        max_replication_slots: 10
        max_connections: 100
        wal_keep_size: 128MB
  initdb:
  - encoding: UTF8
  - locale: C
postgresql:
  listen: 127.0.0.1:%[6]d
  connect_address: 127.0.0.1:%[6]d
  data_dir: %[7]s
  bin_dir: %[8]s
  pgpass: %[9]s
  authentication:
    superuser:
      username: postgres
      password: postgres
    replication:
      username: replicator
      password: replicator
    rewind:
      username: postgres
      password: postgres
  parameters:
    unix_socket_directories: %[10]s
    fsync: "off"
    synchronous_commit: "off"
    shared_buffers: 32MB
    log_min_messages: warning
  pg_hba:
  - local all all trust
  - host all postgres 127.0.0.1/32 trust
  - host replication replicator 127.0.0.1/32 trust
  - host all all 127.0.0.1/32 scram-sha-256
watchdog:
  mode: "off"
`, pc.scope, m.Name(), strings.TrimPrefix(m.APIURL, "http://"), etcdPort, patroniLoopWait,
		m.Node.Port, m.Node.DataDir, cluster.Options{}.ResolvedBinDir(), filepath.Join(m.dir, "pgpass"), m.dir)
}

// chown gives path to the postgres account when the test runs as root.
func (pc *patroniCluster) chown(t *testing.T, path string) {
	t.Helper()
	if pc.owner == nil {
		return
	}
	if err := os.Lchown(path, int(pc.owner.Uid), int(pc.owner.Gid)); err != nil {
		t.Fatalf("chown %s to postgres: %v", path, err)
	}
}

// start runs program in its own process group as owner (nil: the current
// user), with its output in logPath.
func (pc *patroniCluster) start(t *testing.T, name, logPath string, owner *syscall.Credential, program string, args ...string) *harnessProcess {
	t.Helper()
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatalf("create %s: %v", logPath, err)
	}
	defer logFile.Close()
	cmd := exec.Command(program, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: owner}
	cmd.Dir = pc.dir
	cmd.Env = patroniEnvironment(pc.dir)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s (%s): %v", name, program, err)
	}
	p := &harnessProcess{name: name, cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	return p
}

// patroniEnvironment is the environment of etcd, Patroni and patronictl:
// ours without libpq, locale, proxy and etcd variables that would redirect them.
func patroniEnvironment(home string) []string {
	var env []string
	for _, entry := range os.Environ() {
		name, _, _ := strings.Cut(entry, "=")
		if strings.HasPrefix(name, "PG") || strings.HasPrefix(name, "ETCD") || strings.HasPrefix(name, "PATRONI") ||
			strings.HasPrefix(name, "LC_") || name == "LANG" || name == "HOME" || strings.HasSuffix(strings.ToLower(name), "_proxy") {
			continue
		}
		env = append(env, entry)
	}
	return append(env, "HOME="+home, "LC_ALL=C.UTF-8", "LANG=C.UTF-8")
}

// running reports whether p has not exited.
func (p *harnessProcess) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// waitHTTP polls url until it answers 200 with a body accepted by ok, and
// returns an error when ctx ends or a started process has exited.
func (pc *patroniCluster) waitHTTP(ctx context.Context, what, url string, ok func([]byte) bool) error {
	client := &http.Client{Timeout: time.Second}
	var last string
	for {
		status, body, err := httpGet(ctx, client, url)
		switch {
		case err != nil:
			last = err.Error()
		case status == http.StatusOK && ok(body):
			return nil
		default:
			last = fmt.Sprintf("status %d: %s", status, truncateText(string(body), 300))
		}
		if exited := pc.exitedProcess(); exited != "" {
			return fmt.Errorf("waiting until %s: %s", what, exited)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting until %s: not within the start timeout; last answer of %s: %s", what, url, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// exitedProcess names a harness process that has exited, or is "".
func (pc *patroniCluster) exitedProcess() string {
	procs := []*harnessProcess{pc.etcd}
	for _, m := range pc.Members {
		procs = append(procs, m.proc)
	}
	for _, p := range procs {
		if p != nil && !p.running() {
			return fmt.Sprintf("%s exited (%v); see its log %s", p.name, p.cmd.ProcessState, p.logPath)
		}
	}
	return ""
}

func httpGet(ctx context.Context, client *http.Client, url string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, body, err
}

func truncateText(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// patroniView is the part of Patroni's GET /cluster answer the tests read.
type patroniView struct {
	Members []struct {
		Name  string `json:"name"`
		Role  string `json:"role"`
		State string `json:"state"`
		Lag   any    `json:"lag"`
	} `json:"members"`
}

// leader returns the member Patroni names leader, or "".
func (v patroniView) leader() string {
	for _, m := range v.Members {
		if m.Role == "leader" {
			return m.Name
		}
	}
	return ""
}

// String lists the members as name:role:state:lag.
func (v patroniView) String() string {
	var parts []string
	for _, m := range v.Members {
		parts = append(parts, fmt.Sprintf("%s:%s:%s:%v", m.Name, m.Role, m.State, m.Lag))
	}
	return strings.Join(parts, " ")
}

// view reads GET /cluster from the first member that answers.
func (pc *patroniCluster) view(ctx context.Context, client *http.Client) (patroniView, error) {
	var errs []error
	for _, m := range pc.Members {
		status, body, err := httpGet(ctx, client, m.APIURL+"/cluster")
		if err == nil && status != http.StatusOK {
			err = fmt.Errorf("status %d", status)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m.Name(), err))
			continue
		}
		var v patroniView
		if err := json.Unmarshal(body, &v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m.Name(), err))
			continue
		}
		return v, nil
	}
	return patroniView{}, errors.Join(errs...)
}

// waitMembersStreaming waits until Patroni lists every member, leader as
// leader and the others as replicas that are running with lag 0, failing t if not.
func (pc *patroniCluster) waitMembersStreaming(ctx context.Context, t *testing.T, leader string) {
	t.Helper()
	if err := pc.awaitStreaming(ctx, leader); err != nil {
		t.Fatal(err)
	}
}

// awaitStreaming is waitMembersStreaming returning an error.
func (pc *patroniCluster) awaitStreaming(ctx context.Context, leader string) error {
	client := &http.Client{Timeout: time.Second}
	var last string
	for {
		v, err := pc.view(ctx, client)
		if err != nil {
			last = err.Error()
		} else {
			last = v.String()
			ready := len(v.Members) == len(pc.Members) && v.leader() == leader
			for _, m := range v.Members {
				if m.Name != leader && (m.Role != "replica" || (m.State != "running" && m.State != "streaming") || fmt.Sprint(m.Lag) != "0") {
					ready = false
				}
			}
			if ready {
				return nil
			}
		}
		if exited := pc.exitedProcess(); exited != "" {
			return fmt.Errorf("waiting for the Patroni members to stream from %s: %s", leader, exited)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the Patroni members did not all stream from %s in time; last /cluster: %s", leader, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// patronictl runs patronictl with the first member's configuration and returns its output, failing t on error.
func (pc *patroniCluster) patronictl(t *testing.T, timeout time.Duration, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "patronictl", append([]string{"-c", pc.Members[0].ConfigPath}, args...)...)
	cmd.Env = patroniEnvironment(pc.dir)
	cmd.Dir = pc.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("patronictl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// stop ends every process the harness started: Patroni first (SIGTERM, which
// stops its PostgreSQL), then whatever is left with SIGKILL, then etcd.
func (pc *patroniCluster) stop(t *testing.T) {
	var wg sync.WaitGroup
	for _, m := range pc.Members {
		if m.proc == nil {
			continue
		}
		wg.Add(1)
		go func(p *harnessProcess) {
			defer wg.Done()
			p.terminate(t, patroniStopTimeout)
		}(m.proc)
	}
	wg.Wait()
	for _, m := range pc.Members {
		killPostmaster(t, m.Node.DataDir)
	}
	if pc.etcd != nil {
		pc.etcd.terminate(t, 5*time.Second)
	}
}

// terminate sends SIGTERM to p's process group and SIGKILL when it has not exited within grace.
func (p *harnessProcess) terminate(t *testing.T, grace time.Duration) {
	if !p.running() {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		t.Errorf("%s did not stop within %s of SIGTERM; killing it", p.name, grace)
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
	}
}

// killPostmaster stops a postmaster that outlived its Patroni (Patroni starts
// PostgreSQL in a session of its own): SIGQUIT, then SIGKILL.
func killPostmaster(t *testing.T, dataDir string) {
	content, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return
	}
	first, _, _ := strings.Cut(string(content), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 || !processCommandMentions(pid, dataDir) {
		return
	}
	t.Logf("patroni: the postmaster of %s (pid %d) outlived Patroni; stopping it", dataDir, pid)
	_ = syscall.Kill(pid, syscall.SIGQUIT)
	deadline := time.Now().Add(5 * time.Second)
	for processCommandMentions(pid, dataDir) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if processCommandMentions(pid, dataDir) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// processCommandMentions reports whether process pid runs with text in its command line.
func processCommandMentions(pid int, text string) bool {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && strings.Contains(string(cmdline), text)
}

// logPaths lists the harness's logs: etcd's and each member's Patroni log (which holds PostgreSQL's output).
func (pc *patroniCluster) logPaths() []string {
	paths := []string{filepath.Join(pc.dir, "etcd.log")}
	for _, m := range pc.Members {
		paths = append(paths, filepath.Join(m.dir, "patroni.log"))
	}
	return paths
}

// logText returns every harness log, concatenated.
func (pc *patroniCluster) logText() string {
	var text strings.Builder
	for _, path := range pc.logPaths() {
		content, _ := os.ReadFile(path)
		text.Write(content)
	}
	return text.String()
}

// logTails prints the end of every harness log, for a failed test.
func (pc *patroniCluster) logTails(t *testing.T) {
	for _, path := range pc.logPaths() {
		content, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		t.Logf("%s (tail):\n%s", path, tailOf(string(content), 4000))
	}
}

// patroniWatchdogScript runs detached and, if the test process ($1) dies
// while the harness directory ($2) still exists, kills every process whose
// command line mentions the directory (Patroni, PostgreSQL, etcd), then
// removes it. It exits once the directory is gone.
const patroniWatchdogScript = `
parent=$1
dir=$2
while kill -0 "$parent" 2>/dev/null && [ -d "$dir" ]; do sleep 1; done
[ -d "$dir" ] || exit 0
mentioning() {
	grep -laF "$dir/" /proc/[0-9]*/cmdline 2>/dev/null | while read -r file; do
		pid=${file#/proc/}
		pid=${pid%/cmdline}
		[ "$pid" = "$$" ] || echo "$pid"
	done
}
for pid in $(mentioning); do kill -TERM "$pid" 2>/dev/null; done
sleep 5
for pid in $(mentioning); do kill -KILL "$pid" 2>/dev/null; done
rm -rf "$dir"
`

// startPatroniWatchdog starts the watchdog for dir and returns a function that stops it.
func startPatroniWatchdog(t *testing.T, dir string) (stop func()) {
	cmd := exec.Command("/bin/sh", "-c", patroniWatchdogScript, "pgowl-patroni-watchdog", strconv.Itoa(os.Getpid()), dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Dir = "/"
	if err := cmd.Start(); err != nil {
		t.Logf("patroni: no watchdog for %s (its processes outlive a crash of this test): %v", dir, err)
		return func() {}
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	return func() {
		_ = cmd.Process.Kill()
		<-exited
	}
}
