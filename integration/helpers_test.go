package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/integration/cluster"
	"github.com/pgowl/pgowl/integration/owltest"
	"github.com/pgowl/pgowl/proxy"
	"github.com/pgowl/pgowl/route"
)

// The login every test uses unless it says otherwise.
const (
	appUser     = "app"
	appPassword = "secret"
	appDatabase = "postgres"
)

// Bounds used throughout the suite.
const (
	clusterStartTimeout = 2 * time.Minute
	proxyReadyTimeout   = 20 * time.Second
	catchUpTimeout      = 30 * time.Second
	statementTimeout    = 30 * time.Second
)

// maxLagMS is the default routing.max_replica_lag in milliseconds; a routed
// standby's lag_ms must never exceed it.
var maxLagMS = config.Default().Routing.MaxReplicaLag.Milliseconds()

var (
	sharedOnce    sync.Once
	sharedCluster *cluster.Cluster
	sharedErr     error
)

// TestMain closes the shared cluster after every test has run.
func TestMain(m *testing.M) {
	code := m.Run()
	if sharedCluster != nil {
		if err := sharedCluster.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "close shared cluster: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	os.Exit(code)
}

// clusterOptions are the options of every cluster the suite starts.
func clusterOptions(standbys int) cluster.Options {
	opts := cluster.Options{
		Standbys: standbys,
		Users:    []cluster.User{{Name: appUser, Password: appPassword}},
	}
	if testing.Verbose() {
		opts.Logf = func(format string, args ...any) {
			fmt.Fprintf(os.Stderr, format+"\n", args...)
		}
	}
	return opts
}

// sharedClusterFor returns the cluster shared by the non-destructive tests:
// pg1 primary, pg2 and pg3 standbys. It is started on first use and closed by
// TestMain. Tests that use it must not stop, kill or promote its nodes.
func sharedClusterFor(t *testing.T) *cluster.Cluster {
	t.Helper()
	opts := clusterOptions(2)
	if err := cluster.CheckBinaries(opts); err != nil {
		t.Skipf("skipping: PostgreSQL binaries not available: %v", err)
	}
	sharedOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), clusterStartTimeout)
		defer cancel()
		sharedCluster, sharedErr = cluster.Start(ctx, opts)
	})
	if sharedErr != nil {
		t.Fatalf("start shared cluster: %v", sharedErr)
	}
	return sharedCluster
}

// ownCluster starts a cluster for t alone, for tests that stop or kill nodes.
func ownCluster(t *testing.T, standbys int) *cluster.Cluster {
	t.Helper()
	opts := clusterOptions(standbys)
	opts.Logf = t.Logf
	return cluster.StartForTest(t, opts)
}

// timeoutCtx returns a context that ends after d or when t ends.
func timeoutCtx(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// ---------------------------------------------------------------------------
// pgowl instances

// logBuffer collects a pgowl instance's JSON log (see owltest.LogBuffer).
type logBuffer = owltest.LogBuffer

// owl is one running pgowl instance.
type owl struct {
	addr   string
	host   string
	port   int
	cfg    config.Config
	inst   *proxy.Instance
	states proxy.NodeStates
	logs   *logBuffer
	nodes  *cluster.Cluster
}

// startOwl builds and runs a pgowl instance in front of c on a loopback port,
// after mutate (which may be nil) has adjusted the configuration. It returns
// once the instance's monitor sees pg1 as the primary and every other node as
// an up standby with a known lag. The instance stops when t ends; if t failed,
// the tail of its log is printed.
func startOwl(t *testing.T, c *cluster.Cluster, mutate func(*config.Config)) *owl {
	t.Helper()
	o := startOwlNoWait(t, c, mutate)
	want := map[string]route.Role{}
	for i, n := range c.Nodes {
		if i == 0 {
			want[n.Name] = route.RolePrimary
		} else {
			want[n.Name] = route.RoleStandby
		}
	}
	o.waitRoles(t, want)
	return o
}

// startOwlNoWait is startOwl without waiting for the monitor.
func startOwlNoWait(t *testing.T, c *cluster.Cluster, mutate func(*config.Config)) *owl {
	t.Helper()
	in := owltest.Start(t, c, appUser, appPassword, mutate)
	return &owl{
		addr:   in.Addr.String(),
		host:   in.Addr.IP.String(),
		port:   in.Addr.Port,
		cfg:    in.Config,
		inst:   in.Instance,
		states: in.Monitor,
		logs:   in.Logs,
		nodes:  c,
	}
}

// waitRoles waits until the monitor's snapshot shows every named node up with
// the given role, and every standby among them with a known lag.
func (o *owl) waitRoles(t *testing.T, want map[string]route.Role) {
	t.Helper()
	o.waitSnapshot(t, proxyReadyTimeout, fmt.Sprintf("nodes up with roles %v", want), func(s *route.Snapshot) bool {
		for name, role := range want {
			n := findNode(s, name)
			if n == nil || !n.Up || n.Role != role || (role == route.RoleStandby && !n.LagKnown) {
				return false
			}
		}
		return true
	})
}

// waitSnapshot polls the monitor until cond holds, failing t after timeout.
func (o *owl) waitSnapshot(t *testing.T, timeout time.Duration, what string, cond func(*route.Snapshot) bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last *route.Snapshot
	for {
		last = o.states.Snapshot()
		if last != nil && cond(last) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pgowl's monitor did not report %s within %s; last snapshot: %s", what, timeout, describeSnapshot(last))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func findNode(s *route.Snapshot, name string) *route.NodeState {
	if s == nil {
		return nil
	}
	for i := range s.Nodes {
		if s.Nodes[i].Name == name {
			return &s.Nodes[i]
		}
	}
	return nil
}

func describeSnapshot(s *route.Snapshot) string {
	if s == nil {
		return "<nil>"
	}
	var parts []string
	for _, n := range s.Nodes {
		parts = append(parts, fmt.Sprintf("%s{up=%t role=%s lag_known=%t lag=%s err=%q}", n.Name, n.Up, n.Role, n.LagKnown, n.Lag, n.LastError))
	}
	return strings.Join(parts, " ")
}

// dsn returns a postgres:// URL for the instance with sslmode=disable and any extra parameters.
func (o *owl) dsn(user, password, database string, extra url.Values) string {
	q := url.Values{"sslmode": {"disable"}, "connect_timeout": {"10"}}
	for k, vs := range extra {
		q[k] = vs
	}
	u := url.URL{Scheme: "postgres", Host: o.addr, Path: "/" + database, RawQuery: q.Encode()}
	if password == "" {
		u.User = url.User(user)
	} else {
		u.User = url.UserPassword(user, password)
	}
	return u.String()
}

// ---------------------------------------------------------------------------
// Clients

// noticeLog collects the NOTICEs a connection receives.
type noticeLog struct {
	mu   sync.Mutex
	list []*pgconn.Notice
}

func (n *noticeLog) add(_ *pgconn.PgConn, notice *pgconn.Notice) {
	n.mu.Lock()
	defer n.mu.Unlock()
	copied := *notice
	n.list = append(n.list, &copied)
}

// take returns the NOTICEs received since the last take and forgets them.
func (n *noticeLog) take() []*pgconn.Notice {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := n.list
	n.list = nil
	return out
}

// client is a pgx connection to pgowl that records its NOTICEs.
type client struct {
	*pgx.Conn
	notices *noticeLog
}

// connConfig returns a pgx configuration for the instance as user, with NOTICEs collected into notices.
func (o *owl) connConfig(t *testing.T, user, password string, notices *noticeLog) *pgx.ConnConfig {
	t.Helper()
	cfg, err := pgx.ParseConfig(o.dsn(user, password, appDatabase, nil))
	if err != nil {
		t.Fatalf("parse pgx config: %v", err)
	}
	cfg.OnNotice = notices.add
	return cfg
}

// connect opens a pgx connection to the instance as the app user; adjust may change the configuration.
// The connection is closed when t ends.
func (o *owl) connect(t *testing.T, adjust func(*pgx.ConnConfig)) *client {
	t.Helper()
	notices := &noticeLog{}
	cfg := o.connConfig(t, appUser, appPassword, notices)
	if adjust != nil {
		adjust(cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("connect to pgowl at %s: %v", o.addr, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn.Close(ctx)
	})
	return &client{Conn: conn, notices: notices}
}

// withMode sets the connection's default query exec mode.
func withMode(mode pgx.QueryExecMode) func(*pgx.ConnConfig) {
	return func(cfg *pgx.ConnConfig) { cfg.DefaultQueryExecMode = mode }
}

// withParams sets startup parameters.
func withParams(params map[string]string) func(*pgx.ConnConfig) {
	return func(cfg *pgx.ConnConfig) {
		for k, v := range params {
			cfg.RuntimeParams[k] = v
		}
	}
}

// ---------------------------------------------------------------------------
// Routing NOTICEs

// detailPattern is the exact start the routing NOTICE's DETAIL must have.
var detailPattern = regexp.MustCompile(`^node=([A-Za-z0-9_-]+) role=(primary|standby) reason=([A-Z_]+) lag_ms=(-?[0-9]+)(?: |$)`)

// routeNotice is a parsed routing NOTICE.
type routeNotice struct {
	Node   string
	Role   string
	Reason string
	LagMS  int64
	Raw    *pgconn.Notice
}

func (r routeNotice) String() string {
	return fmt.Sprintf("{%s %s %s lag_ms=%d: %q}", r.Node, r.Role, r.Reason, r.LagMS, r.Raw.Message)
}

// isRouteNotice reports whether a NOTICE comes from pgowl rather than from a node.
func isRouteNotice(n *pgconn.Notice) bool {
	return strings.HasPrefix(n.Message, "pgowl: ")
}

// parseRouteNotice checks a pgowl NOTICE's shape and parses its DETAIL.
func parseRouteNotice(t *testing.T, n *pgconn.Notice) routeNotice {
	t.Helper()
	if n.Severity != "NOTICE" {
		t.Errorf("pgowl NOTICE %q has severity %q, want NOTICE", n.Message, n.Severity)
	}
	if n.Code != "00000" {
		t.Errorf("pgowl NOTICE %q has SQLSTATE %q, want 00000", n.Message, n.Code)
	}
	m := detailPattern.FindStringSubmatch(n.Detail)
	if m == nil {
		t.Errorf("pgowl NOTICE %q has DETAIL %q, which does not start with node=<name> role=<primary|standby> reason=<CODE> lag_ms=<n>", n.Message, n.Detail)
		return routeNotice{Raw: n}
	}
	lag, _ := strconv.ParseInt(m[4], 10, 64)
	r := routeNotice{Node: m[1], Role: m[2], Reason: m[3], LagMS: lag, Raw: n}
	if want := "pgowl: " + r.Node + " (" + r.Role + ")"; !strings.HasPrefix(n.Message, want) {
		t.Errorf("pgowl NOTICE message %q does not start with %q (from its DETAIL)", n.Message, want)
	}
	switch r.Role {
	case "primary":
		if r.LagMS != 0 {
			t.Errorf("NOTICE %v: a primary's lag_ms must be 0", r)
		}
	case "standby":
		if r.LagMS < 0 || r.LagMS > maxLagMS {
			t.Errorf("NOTICE %v: a standby chosen for a read must have a known lag within %dms", r, maxLagMS)
		}
	}
	return r
}

// routes takes the connection's pgowl NOTICEs received so far, parsed.
func (c *client) routes(t *testing.T) []routeNotice {
	t.Helper()
	var out []routeNotice
	for _, n := range c.notices.take() {
		if isRouteNotice(n) {
			out = append(out, parseRouteNotice(t, n))
		}
	}
	return out
}

// oneRoute takes the connection's pgowl NOTICEs and requires exactly one.
func (c *client) oneRoute(t *testing.T, what string) routeNotice {
	t.Helper()
	rs := c.routes(t)
	if len(rs) != 1 {
		t.Errorf("%s: got %d pgowl NOTICEs %v, want exactly 1 (one per routed unit)", what, len(rs), rs)
		if len(rs) == 0 {
			return routeNotice{}
		}
	}
	return rs[len(rs)-1]
}

// wantRoute checks a NOTICE's role and, if reason is not empty, its reason.
func wantRoute(t *testing.T, what string, r routeNotice, role, reason string) {
	t.Helper()
	if r.Role != role || (reason != "" && r.Reason != reason) {
		t.Errorf("%s: NOTICE %v, want role=%s reason=%s", what, r, role, orAny(reason))
	}
}

func orAny(s string) string {
	if s == "" {
		return "<any>"
	}
	return s
}

// ---------------------------------------------------------------------------
// Evidence from the nodes

// marker returns a unique tag to put in a statement's comment.
func marker(prefix string) string {
	return fmt.Sprintf("%s-%08x", prefix, rand.Uint32())
}

// resetStats clears pg_stat_statements on every node.
func resetStats(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	if err := c.ResetStatementStats(timeoutCtx(t, statementTimeout)); err != nil {
		t.Fatal(err)
	}
}

// evidence returns, per node, how many times the node executed statements whose text contains tag.
//
// pg_stat_statements keys its entries on the statement's shape, which ignores
// comments and constant values, and keeps the text of the first statement of
// that shape. A tag in a comment is therefore only seen if no statement of the
// same shape ran on the node since the last resetStats: reset right before
// running the statement under test.
func evidence(t *testing.T, c *cluster.Cluster, tag string) map[string]int64 {
	t.Helper()
	return evidenceLike(t, c, "%"+tag+"%")
}

// evidenceLike returns, per node, pg_stat_statements calls of statements matching a LIKE pattern.
func evidenceLike(t *testing.T, c *cluster.Cluster, like string) map[string]int64 {
	t.Helper()
	out, err := c.StatementCalls(timeoutCtx(t, statementTimeout), like)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// primaryName is the shared cluster's primary; tests on it never fail over.
func primaryName(c *cluster.Cluster) string { return c.Nodes[0].Name }

// requireOnPrimary checks that the primary ran a statement want times and no standby ran it.
func requireOnPrimary(t *testing.T, c *cluster.Cluster, what string, ev map[string]int64, want int64) {
	t.Helper()
	for name, calls := range ev {
		expected := int64(0)
		if name == primaryName(c) {
			expected = want
		}
		if calls != expected {
			t.Errorf("%s: pg_stat_statements says it ran %d time(s) on %s, want %d (per node: %v)", what, calls, name, expected, ev)
		}
	}
}

// requireOnStandbys checks that standbys ran a statement want times in all and the primary never did.
func requireOnStandbys(t *testing.T, c *cluster.Cluster, what string, ev map[string]int64, want int64) {
	t.Helper()
	var sum int64
	for name, calls := range ev {
		if name == primaryName(c) {
			if calls != 0 {
				t.Errorf("%s: pg_stat_statements says it ran %d time(s) on the primary %s, want 0 (per node: %v)", what, calls, name, ev)
			}
			continue
		}
		sum += calls
	}
	if sum != want {
		t.Errorf("%s: pg_stat_statements says the standbys ran it %d time(s), want %d (per node: %v)", what, sum, want, ev)
	}
}

// requireOnOneStandby checks that exactly one standby ran a statement, exactly once, and returns its name.
func requireOnOneStandby(t *testing.T, c *cluster.Cluster, what string, ev map[string]int64) string {
	t.Helper()
	ran := ""
	for name, calls := range ev {
		if calls == 0 {
			continue
		}
		if name == primaryName(c) || calls != 1 || ran != "" {
			t.Errorf("%s: want exactly one standby to have run it once; pg_stat_statements per node: %v", what, ev)
			return ""
		}
		ran = name
	}
	if ran == "" {
		t.Errorf("%s: no node ran it; pg_stat_statements per node: %v", what, ev)
	}
	return ran
}

// catchUp waits until every standby has replayed everything the primary wrote so far.
func catchUp(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	ctx := timeoutCtx(t, catchUpTimeout)
	for _, n := range c.Nodes[1:] {
		if err := n.WaitCaughtUp(ctx, c.Nodes[0]); err != nil {
			t.Fatalf("wait for %s to catch up: %v", n.Name, err)
		}
	}
}

// createTable runs ddl as the app user directly on the primary after dropping
// the table, so the table is owned by app, then waits for the standbys.
func createTable(t *testing.T, c *cluster.Cluster, name, ddl string) {
	t.Helper()
	ctx := timeoutCtx(t, statementTimeout)
	sql := fmt.Sprintf("SET ROLE %s; DROP TABLE IF EXISTS %s; %s", appUser, name, ddl)
	if err := c.Nodes[0].Exec(ctx, sql); err != nil {
		t.Fatalf("create table %s on the primary: %v", name, err)
	}
	catchUp(t, c)
}

// primaryInt runs a one-value integer query as the superuser on the primary.
func primaryInt(t *testing.T, c *cluster.Cluster, sql string, args ...any) int64 {
	t.Helper()
	ctx := timeoutCtx(t, statementTimeout)
	var v int64
	if err := c.Nodes[0].QueryRow(ctx, sql, args...).Scan(&v); err != nil {
		t.Fatalf("query the primary: %s: %v", sql, err)
	}
	return v
}

// ---------------------------------------------------------------------------
// Errors and commands

// pgError returns err's *pgconn.PgError or fails t.
func pgError(t *testing.T, what string, err error) *pgconn.PgError {
	t.Helper()
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		t.Errorf("%s: got error %v (%T), want a PostgreSQL error", what, err, err)
		return nil
	}
	return pgErr
}

// wantSQLState checks that err is a PostgreSQL error with the given SQLSTATE.
func wantSQLState(t *testing.T, what string, err error, code string) *pgconn.PgError {
	t.Helper()
	if err == nil {
		t.Errorf("%s: succeeded, want SQLSTATE %s", what, code)
		return nil
	}
	pgErr := pgError(t, what, err)
	if pgErr != nil && pgErr.Code != code {
		t.Errorf("%s: got SQLSTATE %s (%s), want %s", what, pgErr.Code, pgErr.Message, code)
	}
	return pgErr
}

// pgBinary returns the path of a PostgreSQL client program, or skips t.
func pgBinary(t *testing.T, name string) string {
	t.Helper()
	candidate := cluster.Options{}.ResolvedBinDir() + "/" + name
	if info, err := os.Stat(candidate); err == nil && !info.IsDir() {
		return candidate
	}
	if path, err := exec.LookPath(name); err == nil {
		return path
	}
	t.Skipf("skipping: %s not found in %s or on PATH", name, cluster.Options{}.ResolvedBinDir())
	return ""
}

// cmdResult is what a finished command produced.
type cmdResult struct {
	stdout, stderr string
	exitCode       int
}

// runCmd runs a program with a time limit and extra environment variables.
func runCmd(t *testing.T, timeout time.Duration, env []string, name string, args ...string) cmdResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(cleanEnv(), env...)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := cmdResult{stdout: stdout.String(), stderr: stderr.String()}
	var exitErr *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("%s %s did not finish within %s\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), timeout, res.stdout, res.stderr)
	case errors.As(err, &exitErr):
		res.exitCode = exitErr.ExitCode()
	case err != nil:
		t.Fatalf("run %s: %v", name, err)
	}
	return res
}

// cleanEnv is the process environment without libpq and psql settings, so
// that only what a test sets reaches the client programs.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PG") || strings.HasPrefix(kv, "PSQL") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// clientEnv is the environment that points libpq programs at the instance as the app user.
func (o *owl) clientEnv() []string {
	return []string{
		"PGHOST=" + o.host,
		"PGPORT=" + strconv.Itoa(o.port),
		"PGUSER=" + appUser,
		"PGPASSWORD=" + appPassword,
		"PGDATABASE=" + appDatabase,
		"PGCONNECT_TIMEOUT=10",
		"PGSSLMODE=prefer",
		"PSQLRC=/dev/null",
	}
}

// queryInt runs a one-value integer query through a connection.
func queryInt(t *testing.T, conn *client, what, sql string, args ...any) int64 {
	t.Helper()
	ctx := timeoutCtx(t, statementTimeout)
	var v int64
	if err := conn.QueryRow(ctx, sql, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %s: %v", what, sql, err)
	}
	return v
}

// asPgError returns err's *pgconn.PgError, if it has one.
func asPgError(err error) (*pgconn.PgError, bool) {
	var pgErr *pgconn.PgError
	ok := errors.As(err, &pgErr)
	return pgErr, ok
}
