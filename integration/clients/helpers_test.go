package clients

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/integration/owltest"
	"github.com/pgowl/pgowl/internal/cluster"
	"github.com/pgowl/pgowl/proxy"
	"github.com/pgowl/pgowl/route"
)

// The login every client uses.
const (
	appUser     = "app"
	appPassword = "secret"
	appDatabase = "postgres"
)

// Bounds used throughout the package.
const (
	proxyReadyTimeout = 20 * time.Second
	proxyStopTimeout  = owltest.StopTimeout
	statementTimeout  = owltest.StatementTimeout
)

// The large result every client streams: largeRows rows of largeWidth bytes
// of payload each, 112,640,000 bytes in all, more than 100 MiB.
const (
	largeRows  = 110000
	largeWidth = 1024
	// largeMinBytes is the least payload a client must report having received.
	largeMinBytes = 100 << 20
	// maxRSSGrowth bounds how much pgowl's peak resident set may exceed its
	// size before the stream: pgowl relays frames and must not hold the result.
	maxRSSGrowth = 48 << 20
)

// largeSQL is the statement that produces the large result (a read: it runs on a standby).
var largeSQL = fmt.Sprintf("SELECT g AS id, repeat('x', %d) AS v FROM generate_series(1, %d) g", largeWidth, largeRows)

// maxLagMS is the default routing.max_replica_lag in milliseconds.
var maxLagMS = config.Default().Routing.MaxReplicaLag.Milliseconds()

// shared is the package's one cluster (see sharedClusterFor).
var shared owltest.SharedCluster

var (
	binaryOnce sync.Once
	binaryDir  string
	binaryPath string
	binaryErr  error
)

// TestMain closes the package's cluster and removes the pgowl binary once every test has run.
func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if err := shared.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "close the cluster: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	if binaryDir != "" {
		os.RemoveAll(binaryDir)
	}
	os.Exit(code)
}

// clusterOptions are the options of the package's cluster: pg1 primary, pg2 and pg3 standbys.
func clusterOptions() cluster.Options {
	return owltest.ClusterOptions(2, appUser, appPassword)
}

// sharedClusterFor returns the package's cluster, starting it on first use;
// TestMain closes it. It skips t when the PostgreSQL binaries are missing.
// No test may stop, kill or promote its nodes.
func sharedClusterFor(t *testing.T) *cluster.Cluster {
	t.Helper()
	c, err := shared.Get(t, clusterOptions())
	if err != nil {
		t.Fatalf("start the cluster: %v", err)
	}
	return c
}

// timeoutCtx returns a context that ends after d or when t ends.
var timeoutCtx = owltest.TimeoutCtx

// ---------------------------------------------------------------------------
// pgowl in the test process

// logBuffer collects a pgowl instance's log or a process's output (see owltest.LogBuffer).
type logBuffer = owltest.LogBuffer

// endpoint is where a client reaches a pgowl instance.
type endpoint struct {
	host string
	port int
}

// addr returns host:port.
func (e endpoint) addr() string { return net.JoinHostPort(e.host, strconv.Itoa(e.port)) }

// dsn returns a postgres:// URL for the app user with sslmode=disable and any extra parameters.
func (e endpoint) dsn(password string, extra url.Values) string {
	q := url.Values{"sslmode": {"disable"}, "connect_timeout": {"10"}}
	for k, vs := range extra {
		q[k] = vs
	}
	return (&url.URL{Scheme: "postgres", User: url.UserPassword(appUser, password), Host: e.addr(),
		Path: "/" + appDatabase, RawQuery: q.Encode()}).String()
}

// libpqEnv is the environment that points libpq programs (psql, pgbench) at the endpoint.
func (e endpoint) libpqEnv() []string {
	return []string{
		"PGHOST=" + e.host,
		"PGPORT=" + strconv.Itoa(e.port),
		"PGUSER=" + appUser,
		"PGPASSWORD=" + appPassword,
		"PGDATABASE=" + appDatabase,
		"PGCONNECT_TIMEOUT=10",
		"PGSSLMODE=disable",
		"PSQLRC=/dev/null",
	}
}

// owl is a pgowl instance running inside the test process.
type owl struct {
	endpoint
	inst *proxy.Instance
	logs *logBuffer
}

// startOwl builds and runs a pgowl instance in front of c on a loopback port,
// after mutate (which may be nil) has adjusted the configuration, and returns
// once its monitor sees pg1 as the primary and the others as standbys with a
// known lag. The instance stops when t ends; if t failed, the tail of its log
// is printed.
func startOwl(t *testing.T, c *cluster.Cluster, mutate func(*config.Config)) *owl {
	t.Helper()
	in := owltest.Start(t, c, appUser, appPassword, mutate)
	tcp, inst, logs := in.Addr, in.Instance, in.Logs
	o := &owl{endpoint: endpoint{host: tcp.IP.String(), port: tcp.Port}, inst: inst, logs: logs}
	o.waitReady(t, c)
	return o
}

// waitReady waits until the monitor reports pg1 up as the primary and every
// other node up as a standby with a known lag.
func (o *owl) waitReady(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	deadline := time.Now().Add(proxyReadyTimeout)
	for {
		snap := o.inst.Monitor.Snapshot()
		if snapshotReady(snap, c) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pgowl's monitor did not see the cluster's roles within %s; last snapshot: %+v", proxyReadyTimeout, snap)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// snapshotReady reports whether s shows pg1 up as the primary and every other node up as a standby with a known lag.
func snapshotReady(s *route.Snapshot, c *cluster.Cluster) bool {
	if s == nil {
		return false
	}
	for i, n := range c.Nodes {
		found := false
		for _, st := range s.Nodes {
			if st.Name != n.Name {
				continue
			}
			found = st.Up && ((i == 0 && st.Role == route.RolePrimary) || (i > 0 && st.Role == route.RoleStandby && st.LagKnown))
		}
		if !found {
			return false
		}
	}
	return true
}

// ---------------------------------------------------------------------------
// pgowl as a separate process, for memory measurements

// pgowlBinary builds cmd/pgowl once per test binary and returns its path.
func pgowlBinary(t *testing.T) string {
	t.Helper()
	binaryOnce.Do(func() {
		goTool, err := exec.LookPath("go")
		if err != nil {
			binaryErr = fmt.Errorf("the go command is not on PATH: %w", err)
			return
		}
		binaryDir, binaryErr = os.MkdirTemp("", "pgowl-clients-bin-")
		if binaryErr != nil {
			return
		}
		binaryPath = filepath.Join(binaryDir, "pgowl")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, goTool, "build", "-o", binaryPath, "github.com/pgowl/pgowl/cmd/pgowl")
		cmd.Dir = filepath.Join("..", "..")
		if out, err := cmd.CombinedOutput(); err != nil {
			binaryErr = fmt.Errorf("go build ./cmd/pgowl: %v\n%s", err, out)
		}
	})
	if binaryErr != nil {
		t.Fatalf("build pgowl: %v", binaryErr)
	}
	return binaryPath
}

// owlProcess is pgowl running as its own process (pgowl serve).
type owlProcess struct {
	endpoint
	cmd  *exec.Cmd
	logs *logBuffer
	done chan struct{}
}

// startOwlProcess runs the built pgowl in front of c on a free loopback port,
// configured through PGOWL_* variables, and returns once it routes reads to
// the standbys. It is stopped with SIGTERM when t ends.
func startOwlProcess(t *testing.T, c *cluster.Cluster) *owlProcess {
	t.Helper()
	bin := pgowlBinary(t)
	type node struct {
		Name string `json:"name"`
		Host string `json:"host"`
		Port int    `json:"port"`
	}
	var nodes []node
	for _, n := range c.Nodes {
		nodes = append(nodes, node{n.Name, n.Host, n.Port})
	}
	nodesJSON, _ := json.Marshal(nodes)
	usersJSON, _ := json.Marshal([]map[string]string{{"name": appUser, "password": appPassword, "auth": "scram-sha-256"}})
	const attempts = 3
	for attempt := 1; ; attempt++ {
		port := freePort(t)
		logs := &logBuffer{}
		cmd := exec.Command(bin, "serve")
		cmd.Env = append(cleanEnv(),
			"PGOWL_LISTEN=127.0.0.1:"+strconv.Itoa(port),
			"PGOWL_NODES="+string(nodesJSON),
			"PGOWL_USERS="+string(usersJSON),
			"PGOWL_MONITOR_INTERVAL=100ms",
			// No admin listener: its default port (6480) would collide
			// with any other pgowl running on this machine.
			"PGOWL_ADMIN_LISTEN=",
		)
		cmd.Stdout, cmd.Stderr = logs, logs
		if err := cmd.Start(); err != nil {
			t.Fatalf("start %s serve: %v", bin, err)
		}
		p := &owlProcess{endpoint: endpoint{host: "127.0.0.1", port: port}, cmd: cmd, logs: logs, done: make(chan struct{})}
		go func() { cmd.Wait(); close(p.done) }()
		err := p.waitReady(c)
		if err == nil {
			t.Cleanup(func() { p.stop(t) })
			return p
		}
		p.stop(t)
		if attempt == attempts || !strings.Contains(logs.String(), "address already in use") {
			t.Fatalf("pgowl serve (pid %d) did not become ready: %v\nlog:\n%s", cmd.Process.Pid, err, logs.Tail(8<<10))
		}
	}
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// waitReady polls SHOW pgowl.nodes until pg1 is up as the primary and every
// other node is up as a standby with a known lag.
func (p *owlProcess) waitReady(c *cluster.Cluster) error {
	deadline := time.Now().Add(proxyReadyTimeout)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return fmt.Errorf("the process exited: %v", p.cmd.ProcessState)
		default:
		}
		last = p.checkRoles(c)
		if last == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("not ready within %s: %v", proxyReadyTimeout, last)
}

func (p *owlProcess) checkRoles(c *cluster.Cluster) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.dsn(appPassword, nil))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SHOW pgowl.nodes", pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		return err
	}
	defer rows.Close()
	ready := map[string]bool{}
	for rows.Next() {
		v, err := rows.Values()
		if err != nil {
			return err
		}
		m := map[string]string{}
		for i, f := range rows.FieldDescriptions() {
			s, _ := v[i].(string)
			m[f.Name] = s
		}
		want := "standby"
		if m["name"] == c.Nodes[0].Name {
			want = "primary"
		}
		ready[m["name"]] = m["state"] == "up" && m["role"] == want && (want == "primary" || m["lag_ms"] != "")
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, n := range c.Nodes {
		if !ready[n.Name] {
			return fmt.Errorf("SHOW pgowl.nodes does not show %s ready yet: %v", n.Name, ready)
		}
	}
	return nil
}

// stop ends the process with SIGTERM, or SIGKILL after proxyStopTimeout.
func (p *owlProcess) stop(t *testing.T) {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(proxyStopTimeout):
		t.Errorf("pgowl serve (pid %d) did not stop within %s of SIGTERM", p.cmd.Process.Pid, proxyStopTimeout)
		p.cmd.Process.Kill()
		<-p.done
	}
	if t.Failed() {
		t.Logf("pgowl serve log (tail):\n%s", p.logs.Tail(16<<10))
	}
}

// procStatusKB reads a "Name:   1234 kB" field of /proc/<pid>/status in bytes.
func (p *owlProcess) procStatusKB(t *testing.T, field string) int64 {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Fatalf("read pgowl's /proc status: %v", err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("parse %s in /proc/%d/status: %q", field, p.cmd.Process.Pid, line)
			}
			return kb << 10
		}
	}
	t.Fatalf("/proc/%d/status has no %s line", p.cmd.Process.Pid, field)
	return 0
}

// memoryBaseline resets the process's peak resident set (where the kernel
// allows it) and returns its current resident set.
func (p *owlProcess) memoryBaseline(t *testing.T) int64 {
	t.Helper()
	// Writing 5 to clear_refs resets VmHWM to the current VmRSS.
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", p.cmd.Process.Pid), []byte("5"), 0); err != nil {
		t.Logf("could not reset pgowl's peak RSS (%v); the peak includes its start-up", err)
	}
	return p.procStatusKB(t, "VmRSS")
}

// checkFlatMemory requires that pgowl's peak resident set after a stream of
// streamed bytes stayed within maxRSSGrowth of baseline.
func (p *owlProcess) checkFlatMemory(t *testing.T, what string, baseline, streamed int64) {
	t.Helper()
	peak := p.procStatusKB(t, "VmHWM")
	rss := p.procStatusKB(t, "VmRSS")
	t.Logf("%s: pgowl RSS before %.1f MiB, peak %.1f MiB, after %.1f MiB, streamed %.1f MiB", what,
		mib(baseline), mib(peak), mib(rss), mib(streamed))
	if streamed < largeMinBytes {
		t.Errorf("%s: the client received %d bytes, want at least %d", what, streamed, largeMinBytes)
	}
	if peak-baseline > maxRSSGrowth {
		t.Errorf("%s: pgowl's peak RSS grew by %.1f MiB while streaming %.1f MiB, want at most %.1f MiB: it holds the result instead of relaying it",
			what, mib(peak-baseline), mib(streamed), mib(maxRSSGrowth))
	}
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// ---------------------------------------------------------------------------
// Routing NOTICEs

// notice is a NOTICE as a client received it, whatever the client library.
type notice struct {
	Conn     string `json:"conn"` // which of the driver's connections received it
	Severity string `json:"severity"`
	Code     string `json:"code"`
	Message  string `json:"message"`
	Detail   string `json:"detail"`
}

// fromPgconn converts a pgx notice.
func fromPgconn(conn string, n *pgconn.Notice) notice {
	return notice{Conn: conn, Severity: n.Severity, Code: n.Code, Message: n.Message, Detail: n.Detail}
}

// routeNotice is a parsed routing NOTICE.
type routeNotice struct {
	owltest.Route
	Conn string
}

func (r routeNotice) String() string {
	return fmt.Sprintf("{%s %s %s lag_ms=%d conn=%s}", r.Node, r.Role, r.Reason, r.LagMS, r.Conn)
}

// routesOf returns the pgowl NOTICEs among ns received on conn ("" for any),
// checking each one's shape.
func routesOf(t *testing.T, ns []notice, conn string) []routeNotice {
	t.Helper()
	var out []routeNotice
	for _, n := range ns {
		if !owltest.IsRouteNotice(n.Message) || (conn != "" && n.Conn != conn) {
			continue
		}
		if n.Severity != "" && n.Severity != "NOTICE" {
			t.Errorf("pgowl NOTICE %q has severity %q, want NOTICE", n.Message, n.Severity)
		}
		if n.Code != "" && n.Code != "00000" {
			t.Errorf("pgowl NOTICE %q has SQLSTATE %q, want 00000", n.Message, n.Code)
		}
		route, ok := owltest.ParseRoute(t, n.Message, n.Detail)
		if !ok {
			continue
		}
		r := routeNotice{Route: route, Conn: n.Conn}
		if r.Role == "primary" && r.LagMS != 0 {
			t.Errorf("NOTICE %v: a primary's lag_ms must be 0", r)
		}
		if r.Role == "standby" && (r.LagMS < 0 || r.LagMS > maxLagMS) {
			t.Errorf("NOTICE %v: a standby's lag_ms must be within %dms", r, maxLagMS)
		}
		out = append(out, r)
	}
	return out
}

// wantRoutes requires count routing NOTICEs on conn, each with role and, when
// reason is not empty, reason; it returns them. A count below 0 means "at least one".
func wantRoutes(t *testing.T, what string, ns []notice, conn string, count int, role, reason string) []routeNotice {
	t.Helper()
	rs := routesOf(t, ns, conn)
	if (count < 0 && len(rs) == 0) || (count >= 0 && len(rs) != count) {
		want := strconv.Itoa(count)
		if count < 0 {
			want = "at least 1"
		}
		t.Errorf("%s: got %d pgowl NOTICEs %v, want %s (one per routed unit)", what, len(rs), rs, want)
	}
	for _, r := range rs {
		if r.Role != role || (reason != "" && r.Reason != reason) {
			t.Errorf("%s: NOTICE %v, want role=%s reason=%s", what, r, role, owltest.OrAny(reason))
		}
	}
	return rs
}

// ---------------------------------------------------------------------------
// Evidence from the nodes

// The evidence helpers are shared with the integration package (see owltest).
var (
	marker       = owltest.Marker
	resetStats   = owltest.ResetStats
	evidence     = owltest.Evidence
	evidenceLike = owltest.EvidenceLike
)

// onPrimary requires that the primary ran tagged statements want times and no standby ran any.
func onPrimary(t *testing.T, c *cluster.Cluster, what, tag string, want int64) {
	t.Helper()
	owltest.RequireOnPrimary(t, c, what, evidence(t, c, tag), want)
}

// onStandbys requires that the standbys ran tagged statements want times in all and the
// primary never; it returns the standbys that ran any.
func onStandbys(t *testing.T, c *cluster.Cluster, what, tag string, want int64) []string {
	t.Helper()
	return owltest.RequireOnStandbys(t, c, what, evidence(t, c, tag), want)
}

// onOneStandby requires that exactly one standby ran the tagged statement, once,
// and, when notices is not empty, that the last NOTICE names that standby.
func onOneStandby(t *testing.T, c *cluster.Cluster, what, tag string, notices []routeNotice) {
	t.Helper()
	ran := onStandbys(t, c, what, tag, 1)
	if len(ran) == 1 && len(notices) > 0 && notices[len(notices)-1].Node != ran[0] {
		t.Errorf("%s: the NOTICE names %s, pg_stat_statements says %s ran it", what, notices[len(notices)-1].Node, ran[0])
	}
}

// catchUp waits until every standby has replayed everything the primary wrote so far.
var catchUp = owltest.CatchUp

// clientTables are the tables one client's test works on; the app user owns them.
type clientTables struct {
	// items is (id serial PRIMARY KEY, v text NOT NULL) with rows 1..10 ("item 1".."item 10").
	items string
	// copy is (id int PRIMARY KEY, v text NOT NULL), empty.
	copy string
}

// seedItems is how many rows the items table starts with.
const seedItems = 10

// createTables (re)creates a client's tables on the primary as the app user and waits for the standbys.
func createTables(t *testing.T, c *cluster.Cluster, client string) clientTables {
	t.Helper()
	tb := clientTables{items: client + "_items", copy: client + "_copy"}
	sql := fmt.Sprintf(`SET ROLE %[1]s;
DROP TABLE IF EXISTS %[2]s, %[3]s;
CREATE TABLE %[2]s (id serial PRIMARY KEY, v text NOT NULL);
INSERT INTO %[2]s (v) SELECT 'item ' || g FROM generate_series(1, %[4]d) g;
CREATE TABLE %[3]s (id int PRIMARY KEY, v text NOT NULL)`, appUser, tb.items, tb.copy, seedItems)
	ctx := timeoutCtx(t, statementTimeout)
	if err := c.Nodes[0].Exec(ctx, sql); err != nil {
		t.Fatalf("create %s's tables on the primary: %v", client, err)
	}
	catchUp(t, c)
	return tb
}

// primaryInt runs a one-value integer query as the superuser on the primary.
var primaryInt = owltest.PrimaryInt

// ---------------------------------------------------------------------------
// Programs

// cmdResult is what a finished command produced.
type cmdResult struct {
	stdout, stderr string
	exitCode       int
}

// runCmd runs a program in dir (empty: the current directory) with a time limit and extra environment variables.
func runCmd(t *testing.T, timeout time.Duration, dir string, env []string, name string, args ...string) cmdResult {
	t.Helper()
	res := owltest.RunCmd(t, timeout, dir, env, name, args...)
	if res.TimedOut {
		t.Fatalf("%s %s did not finish within %s\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), timeout, owltest.TailString(res.Stdout, 8<<10), owltest.TailString(res.Stderr, 8<<10))
	}
	return cmdResult{stdout: res.Stdout, stderr: res.Stderr, exitCode: res.ExitCode}
}

// cleanEnv is the process environment without libpq, psql and pgowl settings.
var cleanEnv = owltest.CleanEnv

// pgBinary returns the path of a PostgreSQL client program, or skips t.
var pgBinary = owltest.PGBinary

// lines splits text into its non-empty lines.
func lines(text string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		if l := strings.TrimRight(sc.Text(), "\r"); l != "" {
			out = append(out, l)
		}
	}
	return out
}
