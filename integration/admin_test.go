package integration

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/lib/pq"

	"github.com/pgowl/pgowl/config"
)

// The admin console login of the admin tests.
const (
	adminUser     = "ops"
	adminPassword = "ops-secret"
)

// adminLiteral is a literal the admin tests' statements carry: it must never
// appear in /metrics, /history or SHOW HISTORY.
const adminLiteral = "owl-literal-7731"

// withAdmin adds the admin console user ops to the configuration.
func withAdmin(cfg *config.Config) {
	cfg.Users = append(cfg.Users, config.User{Name: adminUser, Password: adminPassword, Auth: config.AuthSCRAM})
	cfg.Admin.Users = []string{adminUser}
}

// adminGet fetches path from the instance's admin listener.
func (o *owl) adminGet(t *testing.T, path string) (int, string) {
	t.Helper()
	addr := o.inst.AdminAddr()
	if addr == nil {
		t.Fatal("the admin listener is off")
	}
	client := http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get("http://" + addr.String() + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: read body: %v", path, err)
	}
	return resp.StatusCode, string(body)
}

// historyUnit is the part of a /history entry the tests read.
type historyUnit struct {
	Node, Role, Reason, Outcome, User, Statement, Fingerprint, Refusal string
	AI                                                                 bool
	ConnID                                                             uint64 `json:"conn_id"`
}

func (o *owl) history(t *testing.T, query url.Values) []historyUnit {
	t.Helper()
	status, body := o.adminGet(t, "/history?"+query.Encode())
	if status != http.StatusOK {
		t.Fatalf("/history?%s: status %d: %s", query.Encode(), status, body)
	}
	var page struct {
		Size  int           `json:"size"`
		Units []historyUnit `json:"units"`
	}
	if err := json.Unmarshal([]byte(body), &page); err != nil {
		t.Fatalf("/history is not JSON: %v\n%s", err, body)
	}
	if page.Size != config.Default().Admin.HistorySize {
		t.Errorf("/history size = %d, want the default %d", page.Size, config.Default().Admin.HistorySize)
	}
	return page.Units
}

// runAdminStatements runs reads, writes and an AI-marked read that carry adminLiteral.
func runAdminStatements(t *testing.T, o *owl) {
	t.Helper()
	conn := o.connect(t, nil)
	ctx := timeoutCtx(t, 30*time.Second)
	for _, sql := range []string{
		"CREATE TABLE IF NOT EXISTS t20_admin (id int, v text)",
		"INSERT INTO t20_admin VALUES (1, '" + adminLiteral + "')",
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	catchUp(t, o.nodes)
	// Read your writes: until the monitor has seen the primary flush past the session's write
	// position (its next poll), the session's reads go to the primary. The test wants reads on a
	// standby too: read until one runs there, within a few monitor intervals.
	conn.routes(t)
	deadline := time.Now().Add(5 * time.Second)
	for onStandby := false; !onStandby; {
		var n int64
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM t20_admin WHERE v = $1", adminLiteral).Scan(&n); err != nil {
			t.Fatalf("read: %v", err)
		}
		for _, r := range conn.routes(t) {
			onStandby = onStandby || r.Role == "standby"
		}
		if !onStandby && time.Now().After(deadline) {
			t.Fatal("no read of the session reached a standby within 5s of the standbys replaying its write")
		}
		if !onStandby {
			time.Sleep(50 * time.Millisecond)
		}
	}
	for range 5 {
		var n int64
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM t20_admin WHERE v = '"+adminLiteral+"'", pgx.QueryExecModeSimpleProtocol).Scan(&n); err != nil {
			t.Fatalf("read: %v", err)
		}
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM t20_admin WHERE v = $1", adminLiteral).Scan(&n); err != nil {
			t.Fatalf("extended read: %v", err)
		}
	}
	var n int64
	if err := conn.QueryRow(ctx, "/* owlai */ SELECT count(*) FROM t20_admin WHERE id > 0 AND v <> '"+adminLiteral+"'", pgx.QueryExecModeSimpleProtocol).Scan(&n); err != nil {
		t.Fatalf("AI read: %v", err)
	}
}

// TestAdminHTTPEndpoints: /healthz, /readyz, /metrics and /history answer
// with what routed, filter the history, and never show a literal.
func TestAdminHTTPEndpoints(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, withAdmin)
	runAdminStatements(t, o)

	if status, body := o.adminGet(t, "/healthz"); status != http.StatusOK || strings.TrimSpace(body) != "ok" {
		t.Errorf("/healthz = %d %q, want 200 ok", status, body)
	}
	status, body := o.adminGet(t, "/readyz")
	var ready struct {
		Ready          bool
		Primary, Reads string
	}
	if err := json.Unmarshal([]byte(body), &ready); err != nil || status != http.StatusOK || !ready.Ready || ready.Primary != "pg1" || (ready.Reads != "pg2" && ready.Reads != "pg3") {
		t.Errorf("/readyz = %d %s, want 200 and ready with primary pg1 and reads on a standby", status, body)
	}

	status, metrics := o.adminGet(t, "/metrics")
	if status != http.StatusOK {
		t.Fatalf("/metrics: status %d", status)
	}
	for _, want := range []string{
		`pgowl_routed_units_total{node="pg1",outcome="ok",reason="WRITE",role="primary"}`,
		`pgowl_statement_duration_seconds_bucket{node="pg1"`,
		`pgowl_routing_decision_seconds_count `,
		`pgowl_node_up{node="pg1"} 1`, `pgowl_node_up{node="pg2"} 1`, `pgowl_node_up{node="pg3"} 1`,
		`pgowl_node_role{node="pg1",role="primary"} 1`, `pgowl_node_role{node="pg2",role="standby"} 1`,
		`pgowl_node_lag_seconds{node="pg1"} 0`, `pgowl_node_lag_seconds{node="pg2"} `, `pgowl_node_lag_seconds{node="pg3"} `,
		`pgowl_node_lag_bytes{node="pg3"} `, `pgowl_node_sample_age_seconds{node="pg2"} `, `pgowl_node_timeline{node="pg1"} 1`,
		`pgowl_promotions_total{node="pg2"} 0`, `pgowl_timeline_changes_total{node="pg1"} 0`,
		`pgowl_backends{node="pg1",state="idle"} `, `pgowl_clients{state="idle"} `, `pgowl_clients_waiting{node="pg2"} 0`,
		`pgowl_backend_waits_total{node="pg1"} `, `pgowl_classify_cache_hits_total `, `pgowl_classify_cache_misses_total `, `pgowl_ready 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if !strings.Contains(metrics, `reason="READ_ONLY",role="standby"}`) {
		t.Errorf("/metrics counts no READ_ONLY unit on a standby")
	}
	if strings.Contains(metrics, adminLiteral) || strings.Contains(metrics, "127.0.0.1:") {
		t.Errorf("/metrics shows a literal or a client address")
	}
	if hits := metricValue(t, metrics, "pgowl_classify_cache_hits_total"); hits < 1 {
		t.Errorf("pgowl_classify_cache_hits_total = %v after repeated statements, want > 0", hits)
	}

	all := o.history(t, nil)
	if len(all) < 13 {
		t.Fatalf("/history has %d units, want at least the 13 this test ran", len(all))
	}
	for _, f := range []struct {
		query url.Values
		match func(historyUnit) bool
	}{
		{url.Values{"node": {"pg1"}}, func(u historyUnit) bool { return u.Node == "pg1" }},
		{url.Values{"reason": {"READ_ONLY"}}, func(u historyUnit) bool { return u.Reason == "READ_ONLY" && u.Role == "standby" }},
		{url.Values{"outcome": {"ok"}}, func(u historyUnit) bool { return u.Outcome == "ok" }},
		{url.Values{"user": {appUser}}, func(u historyUnit) bool { return u.User == appUser }},
		{url.Values{"ai": {"true"}}, func(u historyUnit) bool { return u.AI && strings.Contains(u.Statement, "t20_admin") }},
		{url.Values{"ai": {"false"}, "node": {"pg1"}, "reason": {"WRITE"}}, func(u historyUnit) bool { return !u.AI && u.Node == "pg1" && u.Reason == "WRITE" }},
	} {
		units := o.history(t, f.query)
		if len(units) == 0 {
			t.Errorf("/history?%s is empty", f.query.Encode())
		}
		for _, u := range units {
			if !f.match(u) {
				t.Errorf("/history?%s returned %+v", f.query.Encode(), u)
			}
		}
	}
	if units := o.history(t, url.Values{"ai": {"true"}}); len(units) != 1 {
		t.Errorf("/history?ai=true has %d units, want the one AI-marked read", len(units))
	}
	if _, body := o.adminGet(t, "/history"); strings.Contains(body, adminLiteral) {
		t.Errorf("/history shows the literal %q", adminLiteral)
	}
	if status, page := o.adminGet(t, "/"); status != http.StatusOK || !strings.Contains(page, "<svg") || !strings.Contains(page, `data-node="pg3"`) {
		t.Errorf("status page: %d, want 200 with SVG charts and a row per node\n%s", status, page)
	}
}

// metricValue returns the value of an unlabelled sample in an exposition.
func metricValue(t *testing.T, exposition, name string) float64 {
	t.Helper()
	for _, line := range strings.Split(exposition, "\n") {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			var v float64
			if _, err := fmt.Sscan(rest, &v); err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return v
		}
	}
	t.Fatalf("no sample %s", name)
	return 0
}

// TestAdminConsoleRefusesOthers: the database pgowl admits the admin users
// only; a wrong password, a user not configured at all and a configured
// user who is not an admin get the same 28P01.
func TestAdminConsoleRefusesOthers(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, withAdmin)
	for _, tc := range []struct{ name, user, password string }{
		{"wrong password", adminUser, "not-" + adminPassword},
		{"unlisted user", "nobody", "whatever"},
		{"user who is not an admin", appUser, appPassword},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := timeoutCtx(t, 15*time.Second)
			conn, err := pgx.Connect(ctx, o.dsn(tc.user, tc.password, config.AdminDatabase, nil))
			if err == nil {
				conn.Close(ctx)
				t.Fatalf("%s logged in to the admin console", tc.user)
			}
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "28P01" {
				t.Fatalf("%s: got %v, want SQLSTATE 28P01", tc.user, err)
			}
			if want := fmt.Sprintf("password authentication failed for user %q", tc.user); pgErr.Message != want {
				t.Errorf("message %q, want %q (the same for every refusal)", pgErr.Message, want)
			}
		})
	}
	// The admin user gets in, and the non-admin user still reaches the nodes.
	ctx := timeoutCtx(t, 15*time.Second)
	conn, err := pgx.Connect(ctx, o.dsn(adminUser, adminPassword, config.AdminDatabase, url.Values{"default_query_exec_mode": {"simple_protocol"}}))
	if err != nil {
		t.Fatalf("admin login: %v", err)
	}
	defer conn.Close(ctx)
	var version string
	if err := conn.QueryRow(ctx, "SHOW VERSION").Scan(&version); err != nil || !strings.HasPrefix(version, "pgowl ") {
		t.Errorf("SHOW VERSION = %q, %v", version, err)
	}
	// psql, as operators use PgBouncer's console.
	psql := pgBinary(t, "psql")
	env := []string{"PGHOST=" + o.host, "PGPORT=" + fmt.Sprint(o.port), "PGUSER=" + adminUser, "PGPASSWORD=" + adminPassword,
		"PGDATABASE=" + config.AdminDatabase, "PGSSLMODE=disable", "PSQLRC=/dev/null", "PGCONNECT_TIMEOUT=10"}
	res := runCmd(t, 30*time.Second, env, psql, "-X", "-A", "-c", "SHOW NODES", "-c", "SHOW POOLS", "-c", "SHOW HELP")
	if res.exitCode != 0 || !strings.Contains(res.stdout, "pg1|") || !strings.Contains(res.stdout, "cl_active") || !strings.Contains(res.stderr+res.stdout, "SHOW HISTORY") {
		t.Errorf("psql on the console: exit %d\nstdout:\n%s\nstderr:\n%s", res.exitCode, res.stdout, res.stderr)
	}
	app := o.connect(t, nil)
	if got := queryInt(t, app, "app still routes", "SELECT 1"); got != 1 {
		t.Errorf("SELECT 1 = %d", got)
	}
}

// exporterColumns are the columns pgbouncer_exporter (collector.go) reads
// from each command, and whether it reads them as a label (text) or a number.
var exporterColumns = map[string]map[string]string{
	"SHOW DATABASES;": {"name": "label", "host": "label", "port": "label", "database": "label", "force_user": "label",
		"pool_size": "number", "reserve_pool_size": "number", "pool_mode": "label", "max_connections": "number",
		"current_connections": "number", "paused": "number", "disabled": "number"},
	"SHOW STATS_TOTALS;": {"database": "label", "query_count": "number", "query_time": "number", "bytes_received": "number",
		"requests": "", "bytes_sent": "number", "wait_time": "number", "xact_count": "number", "xact_time": "number",
		"client_parse_count": "number", "server_parse_count": "number", "bind_count": "number", "server_assignment_count": "number"},
	"SHOW POOLS;": {"database": "label", "user": "label", "cl_active": "number", "cl_waiting": "number",
		"cl_active_cancel_req": "number", "cl_waiting_cancel_req": "number", "sv_active": "number", "sv_active_cancel": "number",
		"sv_being_canceled": "number", "sv_idle": "number", "sv_used": "number", "sv_tested": "number", "sv_login": "number", "maxwait": "number"},
	"SHOW CLIENTS;": {"database": "label", "user": "label", "state": "label", "application_name": "label"},
	"SHOW STATS":    {"database": "label", "total_query_count": "number", "total_xact_count": "number", "total_query_time": "number"},
}

// queryTable runs a console command with lib/pq (pgbouncer_exporter's
// driver: a query without arguments goes over the simple protocol) and
// returns its rows as column name → value, scanned as the exporter does.
func queryTable(t *testing.T, db *sql.DB, command string) ([]string, []map[string]any) {
	t.Helper()
	rows, err := db.Query(command)
	if err != nil {
		t.Fatalf("%s: %v", command, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatalf("%s: columns: %v", command, err)
	}
	var out []map[string]any
	for rows.Next() {
		values := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range values {
			ptrs[i] = &values[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatalf("%s: scan: %v", command, err)
		}
		row := map[string]any{}
		for i, c := range cols {
			row[c] = values[i]
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", command, err)
	}
	return cols, out
}

// TestAdminConsoleAsPgbouncerExporter reads the console the way
// pgbouncer_exporter does, during a pgbench run: the same commands over the
// simple protocol (lib/pq), the columns it reads with the types it converts
// (labels text, figures integers), and non-zero pool and stats figures.
func TestAdminConsoleAsPgbouncerExporter(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, withAdmin)
	runAdminStatements(t, o)
	pgbench := pgBinary(t, "pgbench")
	if res := runCmd(t, 2*time.Minute, o.clientEnv(), pgbench, "-i", "-s", "1", "--quiet"); res.exitCode != 0 {
		t.Fatalf("pgbench -i: %d\n%s", res.exitCode, res.stderr)
	}
	catchUp(t, c)
	load := make(chan cmdResult, 1)
	go func() {
		load <- runCmd(t, time.Minute, o.clientEnv(), pgbench, "-S", "-M", "simple", "-c", "8", "-j", "2", "-T", "6")
	}()

	db, err := sql.Open("postgres", o.dsn(adminUser, adminPassword, config.AdminDatabase, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if err := db.Ping(); err != nil {
		t.Fatalf("lib/pq ping of the console: %v", err)
	}
	var maxActive, maxSvActive, maxQueries int64
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		for command, want := range exporterColumns {
			cols, rows := queryTable(t, db, command)
			for name, kind := range want {
				if kind == "" {
					continue // read by older exporters only
				}
				found := false
				for _, c := range cols {
					found = found || c == name
				}
				if !found {
					t.Fatalf("%s has no column %q (columns %v)", command, name, cols)
				}
				for _, row := range rows {
					switch v := row[name].(type) {
					case string:
						if kind == "number" {
							t.Fatalf("%s.%s is text %q; the exporter reads a number", command, name, v)
						}
					case int64:
						// a label the exporter formats with strconv (port), or a figure
					case nil:
						if kind == "number" {
							t.Fatalf("%s.%s is NULL; the exporter reads a number", command, name)
						}
					default:
						t.Fatalf("%s.%s is %T; the exporter reads labels as text and figures as integers", command, name, v)
					}
				}
			}
			switch command {
			case "SHOW POOLS;":
				for _, row := range rows {
					if row["database"] == appDatabase && row["user"] == appUser {
						maxActive = max(maxActive, row["cl_active"].(int64))
						maxSvActive = max(maxSvActive, row["sv_active"].(int64))
					}
				}
			case "SHOW STATS_TOTALS;":
				for _, row := range rows {
					if row["database"] == appDatabase {
						maxQueries = max(maxQueries, row["query_count"].(int64))
					}
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("during pgbench -c 8: SHOW POOLS cl_active up to %d, sv_active up to %d; SHOW STATS_TOTALS query_count up to %d", maxActive, maxSvActive, maxQueries)
	if maxActive < 8 || maxSvActive < 1 || maxQueries < 100 {
		t.Errorf("during pgbench -c 8: cl_active reached %d (want 8), sv_active %d (want > 0), query_count %d (want > 100)", maxActive, maxSvActive, maxQueries)
	}
	if res := <-load; res.exitCode != 0 {
		t.Fatalf("pgbench: %d\n%s\n%s", res.exitCode, res.stdout, res.stderr)
	}

	// SHOW LISTS and SHOW CONFIG as the exporter scans them.
	rows, err := db.Query("SHOW LISTS;")
	if err != nil {
		t.Fatal(err)
	}
	lists := map[string]string{}
	for rows.Next() {
		var list string
		var items sql.RawBytes
		if err := rows.Scan(&list, &items); err != nil {
			t.Fatalf("SHOW LISTS scan: %v", err)
		}
		lists[list] = string(items)
	}
	rows.Close()
	if lists["databases"] != "3" || lists["used_clients"] == "" {
		t.Errorf("SHOW LISTS = %v", lists)
	}
	rows, err = db.Query("SHOW CONFIG;")
	if err != nil {
		t.Fatal(err)
	}
	configValues := map[string]string{}
	for rows.Next() {
		var key, changeable string
		var value, def sql.RawBytes
		if err := rows.Scan(&key, &value, &def, &changeable); err != nil {
			t.Fatalf("SHOW CONFIG scan: %v", err)
		}
		configValues[key] = string(value)
	}
	rows.Close()
	if configValues["max_client_conn"] != "10000" || configValues["max_user_connections"] != "0" || configValues["admin.history_size"] != "10000" {
		t.Errorf("SHOW CONFIG: max_client_conn=%q max_user_connections=%q admin.history_size=%q", configValues["max_client_conn"], configValues["max_user_connections"], configValues["admin.history_size"])
	}
	for key, value := range configValues {
		if strings.Contains(key, "password") || (value != "" && value == appPassword) {
			t.Errorf("SHOW CONFIG shows a password: %s", key)
		}
	}
	var version string
	if err := db.QueryRow("SHOW VERSION;").Scan(&version); err != nil || !strings.HasPrefix(version, "pgowl") {
		t.Errorf("SHOW VERSION = %q, %v", version, err)
	}

	// pgowl's own commands, and no literal in SHOW HISTORY.
	runAdminStatements(t, o)
	cols, nodes := queryTable(t, db, "SHOW NODES")
	if len(nodes) != 3 || cols[0] != "name" {
		t.Errorf("SHOW NODES: %v %v", cols, nodes)
	}
	_, history := queryTable(t, db, "SHOW HISTORY")
	if len(history) < 100 {
		t.Errorf("SHOW HISTORY has %d rows after a pgbench run", len(history))
	}
	for _, row := range history {
		if s, _ := row["statement"].(string); strings.Contains(s, adminLiteral) {
			t.Fatalf("SHOW HISTORY shows the literal: %v", row)
		}
	}
	foundLiteralShape := false
	for _, row := range history {
		s, _ := row["statement"].(string)
		foundLiteralShape = foundLiteralShape || strings.Contains(s, "t20_admin WHERE v = $1")
	}
	if !foundLiteralShape {
		t.Errorf("SHOW HISTORY lacks the normalised statement of the literal read")
	}
	// This pgowl runs in the test process without a configuration file: RELOAD says so.
	_, err = db.Exec("RELOAD")
	var pqErr interface{ SQLState() string }
	if err == nil || !errors.As(err, &pqErr) || pqErr.SQLState() != "F0000" || !strings.Contains(err.Error(), "no configuration file") {
		t.Errorf("RELOAD without a configuration file: %v, want F0000 saying there is no file", err)
	}
	if _, err := db.Exec("PAUSE"); err != nil {
		t.Errorf("PAUSE: %v", err)
	}
	if _, err := db.Exec("RESUME"); err != nil {
		t.Errorf("RESUME: %v", err)
	}
	if _, err := db.Exec("RESUME"); err == nil || !errors.As(err, &pqErr) || pqErr.SQLState() != "55000" {
		t.Errorf("RESUME when not paused: %v, want 55000", err)
	}
	if _, err := db.Exec("SHOW NONSENSE"); err == nil {
		t.Error("SHOW NONSENSE succeeded")
	}
}

// TestAdminReadyzFollowsNodes: /readyz turns unready within two monitor
// intervals of every node going down, and ready again when the primary is
// back (reads then fall back to it: routing.when_no_standby: primary).
func TestAdminReadyzFollowsNodes(t *testing.T) {
	c := ownCluster(t, 1)
	const interval = 250 * time.Millisecond
	o := startOwl(t, c, func(cfg *config.Config) {
		cfg.Monitor.Interval = interval
		cfg.Routing.WhenNoStandby = config.WhenNoStandbyPrimary
	})
	if status, body := o.adminGet(t, "/readyz"); status != http.StatusOK {
		t.Fatalf("/readyz before = %d %s, want 200", status, body)
	}
	ctx := timeoutCtx(t, 2*time.Minute)
	if err := c.Nodes[1].Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Nodes[0].Stop(ctx); err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	var body string
	for {
		var status int
		status, body = o.adminGet(t, "/readyz")
		if status == http.StatusServiceUnavailable {
			break
		}
		if time.Since(down) > 10*time.Second {
			t.Fatalf("/readyz still %d 10s after every node stopped: %s", status, body)
		}
		time.Sleep(10 * time.Millisecond)
	}
	took := time.Since(down)
	t.Logf("/readyz unready %s after the last node stopped: %s", took.Round(time.Millisecond), strings.TrimSpace(body))
	if took > 2*interval {
		t.Errorf("/readyz took %s to turn unready, more than two monitor intervals (%s)", took, 2*interval)
	}
	if err := c.Nodes[0].Start(ctx); err != nil {
		t.Fatal(err)
	}
	up := time.Now()
	for {
		status, body := o.adminGet(t, "/readyz")
		if status == http.StatusOK {
			if !strings.Contains(body, `"primary":"pg1"`) || !strings.Contains(body, `"reads":"pg1"`) {
				t.Errorf("/readyz = %s, want primary pg1 serving reads too", body)
			}
			break
		}
		if time.Since(up) > 20*time.Second {
			t.Fatalf("/readyz still %d 20s after the primary started: %s", status, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("/readyz ready %s after the primary started", time.Since(up).Round(time.Millisecond))
}
