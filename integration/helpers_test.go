package integration

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
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

// The login every test uses unless it says otherwise.
const (
	appUser     = "app"
	appPassword = "secret"
	appDatabase = "postgres"
)

// Bounds used throughout the suite.
const (
	proxyReadyTimeout = 20 * time.Second
	statementTimeout  = owltest.StatementTimeout
)

// maxLagMS is the default routing.max_replica_lag in milliseconds; a routed
// standby's lag_ms must never exceed it.
var maxLagMS = config.Default().Routing.MaxReplicaLag.Milliseconds()

// shared is the cluster of the non-destructive tests (see sharedClusterFor).
var shared owltest.SharedCluster

// TestMain closes the shared cluster after every test has run.
func TestMain(m *testing.M) {
	code := m.Run()
	if builtPgowl.dir != "" {
		os.RemoveAll(builtPgowl.dir)
	}
	if err := shared.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "close shared cluster: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// clusterOptions are the options of every cluster the suite starts.
func clusterOptions(standbys int) cluster.Options {
	return owltest.ClusterOptions(standbys, appUser, appPassword)
}

// sharedClusterFor returns the cluster shared by the non-destructive tests:
// pg1 primary, pg2 and pg3 standbys. It is started on first use and closed by
// TestMain. Tests that use it must not stop, kill or promote its nodes.
func sharedClusterFor(t *testing.T) *cluster.Cluster {
	t.Helper()
	c, err := shared.Get(t, clusterOptions(2))
	if err != nil {
		t.Fatalf("start shared cluster: %v", err)
	}
	return c
}

// ownCluster starts a cluster for t alone, for tests that stop or kill nodes.
func ownCluster(t *testing.T, standbys int) *cluster.Cluster {
	t.Helper()
	opts := clusterOptions(standbys)
	opts.Logf = t.Logf
	return cluster.StartForTest(t, opts)
}

// timeoutCtx returns a context that ends after d or when t ends.
var timeoutCtx = owltest.TimeoutCtx

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
	o.waitRoles(t, initialRoles(c))
	return o
}

// initialRoles is the roles of c's nodes as started: pg1 primary, the others standbys.
func initialRoles(c *cluster.Cluster) map[string]route.Role {
	want := map[string]route.Role{}
	for i, n := range c.Nodes {
		if i == 0 {
			want[n.Name] = route.RolePrimary
		} else {
			want[n.Name] = route.RoleStandby
		}
	}
	return want
}

// console connects to o's admin console (the pgowl database) as the app user, who must be in
// admin.users; the connection is closed when t ends.
func (o *owl) console(t *testing.T) *pgx.Conn {
	t.Helper()
	ctx := timeoutCtx(t, statementTimeout)
	conn, err := pgx.Connect(ctx, o.dsn(appUser, appPassword, "pgowl", nil)+"&default_query_exec_mode=simple_protocol")
	if err != nil {
		t.Fatalf("connect to the admin console: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
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
		states: in.Nodes(),
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
	return o.connectAs(t, appUser, appPassword, adjust)
}

// connectAs is connect as another login.
func (o *owl) connectAs(t *testing.T, user, password string, adjust func(*pgx.ConnConfig)) *client {
	t.Helper()
	notices := &noticeLog{}
	cfg := o.connConfig(t, user, password, notices)
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

// queryProtocol is a protocol a test runs its statements in: pgx's simple protocol, or the
// extended one with statements prepared and cached.
type queryProtocol struct {
	name string
	mode pgx.QueryExecMode
}

// bothProtocols are the protocols a test that must hold for each runs in, in subtests named after them.
var bothProtocols = []queryProtocol{{"simple", pgx.QueryExecModeSimpleProtocol}, {"extended", pgx.QueryExecModeCacheStatement}}

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
var detailPattern = owltest.RouteDetailPattern

// routeNotice is a parsed routing NOTICE.
type routeNotice struct {
	owltest.Route
	Raw *pgconn.Notice
}

func (r routeNotice) String() string {
	return fmt.Sprintf("{%s %s %s lag_ms=%d: %q}", r.Node, r.Role, r.Reason, r.LagMS, r.Raw.Message)
}

// isRouteNotice reports whether a NOTICE comes from pgowl rather than from a node.
func isRouteNotice(n *pgconn.Notice) bool { return owltest.IsRouteNotice(n.Message) }

// parseRouteNotice checks a pgowl NOTICE's shape and parses its DETAIL.
func parseRouteNotice(t *testing.T, n *pgconn.Notice) routeNotice {
	t.Helper()
	if n.Severity != "NOTICE" {
		t.Errorf("pgowl NOTICE %q has severity %q, want NOTICE", n.Message, n.Severity)
	}
	if n.Code != "00000" {
		t.Errorf("pgowl NOTICE %q has SQLSTATE %q, want 00000", n.Message, n.Code)
	}
	route, ok := owltest.ParseRoute(t, n.Message, n.Detail)
	r := routeNotice{Route: route, Raw: n}
	if !ok {
		return r
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
		t.Errorf("%s: NOTICE %v, want role=%s reason=%s", what, r, role, owltest.OrAny(reason))
	}
}

// ---------------------------------------------------------------------------
// Evidence from the nodes

// The evidence helpers are shared with the clients package (see owltest).
var (
	marker       = owltest.Marker
	resetStats   = owltest.ResetStats
	evidence     = owltest.Evidence
	evidenceLike = owltest.EvidenceLike
)

// primaryName is the shared cluster's primary; tests on it never fail over.
func primaryName(c *cluster.Cluster) string { return c.Nodes[0].Name }

// requireOnPrimary checks that the primary ran a statement want times and no standby ran it.
var requireOnPrimary = owltest.RequireOnPrimary

// requireOnStandbys checks that standbys ran a statement want times in all and the primary never did.
var requireOnStandbys = owltest.RequireOnStandbys

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
var catchUp = owltest.CatchUp

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
var primaryInt = owltest.PrimaryInt

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
var pgBinary = owltest.PGBinary

// cmdResult is what a finished command produced.
type cmdResult struct {
	stdout, stderr string
	exitCode       int
}

// runCmd runs a program with a time limit and extra environment variables.
func runCmd(t *testing.T, timeout time.Duration, env []string, name string, args ...string) cmdResult {
	t.Helper()
	res := owltest.RunCmd(t, timeout, "", env, name, args...)
	if res.TimedOut {
		t.Fatalf("%s %s did not finish within %s\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), timeout, res.Stdout, res.Stderr)
	}
	return cmdResult{stdout: res.Stdout, stderr: res.Stderr, exitCode: res.ExitCode}
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

// runOnPrimary runs sql through pgowl; it must succeed, and every unit must
// have run on the primary.
func runOnPrimary(t *testing.T, conn *client, sql string) {
	t.Helper()
	ctx := timeoutCtx(t, statementTimeout)
	_, err := conn.PgConn().Exec(ctx, sql).ReadAll()
	rs := conn.routes(t)
	if err != nil {
		t.Errorf("%s: %v (routes %v); it works on the primary", sql, err, rs)
		return
	}
	for _, r := range rs {
		if r.Role != "primary" {
			t.Errorf("%s: ran on %v, want the primary", sql, r)
		}
	}
}

// runAndRoutes runs one statement through pgowl in the connection's mode (pgx's Query: the simple
// protocol, or Parse/Bind/Execute), reads it to the end, and returns the routing NOTICEs it got.
func runAndRoutes(t *testing.T, conn *client, sql string) ([]routeNotice, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), statementTimeout)
	defer cancel()
	err := runToEnd(ctx, conn, sql)
	return conn.routes(t), err
}
