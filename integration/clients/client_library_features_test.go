package clients

// Client-library features the matrix does not exercise yet.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/integration/owltest"
	"github.com/pgowl/pgowl/internal/cluster"
)

// featureConn opens a pgx connection to o (with extra runtime params) that
// records NOTICEs into *ns.
func featureConn(t *testing.T, ep endpoint, ns *[]notice, mode pgx.QueryExecMode) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(ep.dsn(appPassword, nil))
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["application_name"] = "review5"
	if mode != 0 {
		cfg.DefaultQueryExecMode = mode
	}
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		if ns != nil {
			*ns = append(*ns, fromPgconn("main", n))
		}
	}
	ctx := timeoutCtx(t, 20*time.Second)
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("connect through pgowl: %v", err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// featureDirect opens a pgx connection straight to a node, as the app user.
func featureDirect(t *testing.T, n *cluster.Node, mode pgx.QueryExecMode) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(n.DSN(appUser, appPassword, appDatabase))
	if err != nil {
		t.Fatal(err)
	}
	if mode != 0 {
		cfg.DefaultQueryExecMode = mode
	}
	c, err := pgx.ConnectConfig(timeoutCtx(t, 20*time.Second), cfg)
	if err != nil {
		t.Fatalf("connect to %s: %v", n.Name, err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func featurePrimary(t *testing.T, c *cluster.Cluster, sql string) {
	t.Helper()
	if err := c.Nodes[0].Exec(timeoutCtx(t, statementTimeout), "SET ROLE "+appUser+"; "+sql); err != nil {
		t.Fatalf("on the primary: %s: %v", sql, err)
	}
}

// selectStarUntilOK runs a SELECT * query with pgx's statement cache up to
// tries times and returns the errors seen before the first success (or all).
func selectStarUntilOK(ctx context.Context, conn *pgx.Conn, sql string, tries int) (errs []string, cols int, ok bool) {
	for i := 0; i < tries; i++ {
		rows, err := conn.Query(ctx, sql, 1)
		if err == nil {
			var n int
			for rows.Next() {
				n = len(rows.RawValues())
			}
			err = rows.Err()
			if err == nil {
				return errs, n, true
			}
		}
		errs = append(errs, err.Error())
	}
	return errs, 0, false
}

// TestPgxCachedPlanAfterAlterTable
//
// Steps: pgx (default QueryExecModeCacheStatement) runs
// `/*pgowl:primary*/ SELECT * FROM t WHERE id = $1` through pgowl
// (pool.max_per_node 1, so every session shares one primary backend). Then
// `ALTER TABLE t ADD COLUMN` runs on the primary. PostgreSQL answers the next
// execution of the old prepared statement with 0A000 "cached plan must not
// change result type"; pgx then drops its statement (Close) and prepares it
// again, and the next query works: the baseline below, straight against the
// primary, shows exactly that. A brand-new session, which never prepared
// anything, must not see the error at all.
//
// What pgowl does: a client's Close of a named statement is answered by
// pgowl and the backend keeps its pgowl_<hash> statement (proxy/batch.go
// writeBatch, case 'C'); the re-Parse of the same text has the same managed
// name, so writeClientParse answers ParseComplete itself without parsing
// again. The stale statement is never replaced: every later execution, by
// this client and by every other client that sends the same text to that
// backend, fails with 0A000 until the backend is closed (pool.max_lifetime).
// Nothing removes a statement from the connection's record of prepared names (proxy/server_statements.go) after 0A000.
func TestPgxCachedPlanAfterAlterTable(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, func(cfg *config.Config) { cfg.Pool.MaxPerNode = 1 })
	table := "review5_alter"
	featurePrimary(t, c, fmt.Sprintf("DROP TABLE IF EXISTS %[1]s; CREATE TABLE %[1]s (id int PRIMARY KEY, v text); INSERT INTO %[1]s VALUES (1, 'one')", table))
	catchUp(t, c)
	sql := fmt.Sprintf("/*pgowl:primary*/ SELECT * FROM %s WHERE id = $1", table)
	ctx := timeoutCtx(t, time.Minute)

	// Baseline, straight against the primary.
	direct := featureDirect(t, c.Nodes[0], 0)
	if errs, _, ok := selectStarUntilOK(ctx, direct, sql, 1); !ok {
		t.Fatalf("direct: first query failed: %v", errs)
	}
	a := featureConn(t, o.endpoint, nil, 0)
	if errs, cols, ok := selectStarUntilOK(ctx, a, sql, 1); !ok || cols != 2 {
		t.Fatalf("through pgowl: first query: ok=%v cols=%d errors %v", ok, cols, errs)
	}

	featurePrimary(t, c, fmt.Sprintf("ALTER TABLE %s ADD COLUMN w text DEFAULT 'w'", table))
	catchUp(t, c)

	errs, cols, ok := selectStarUntilOK(ctx, direct, sql, 3)
	t.Logf("direct after ALTER: errors %v, ok=%v, columns %d", errs, ok, cols)
	if !ok || len(errs) > 1 {
		t.Fatalf("baseline: straight against the primary pgx needs at most one failure, got %v (ok=%v)", errs, ok)
	}

	// A fresh session that never prepared the statement itself. pgowl plans
	// the statement afresh where the session's Parse runs, and a node's 0A000
	// moves the statement to a new server-side name for every later prepare;
	// a copy prepared before the change on another backend can still fail
	// once (README "Limits"), after which pgx prepares again and succeeds.
	// Before the fix every try failed, for every session, until the backend
	// was closed.
	b := featureConn(t, o.endpoint, nil, 0)
	errs, cols, ok = selectStarUntilOK(ctx, b, sql, 2)
	if !ok || cols != 3 || len(errs) > 1 {
		t.Errorf("a NEW session's first queries after ALTER TABLE: ok=%v columns=%d errors %v; want 3 columns by the second try", ok, cols, errs)
	}
	// The session that prepared it: pgx retries after invalidating its cache.
	errs, cols, ok = selectStarUntilOK(ctx, a, sql, 3)
	if !ok || cols != 3 || len(errs) > 1 {
		t.Errorf("the preparing session after ALTER TABLE: ok=%v columns=%d errors %v; want success by the second try as straight against PostgreSQL", ok, cols, errs)
	}
}

// TestPreparedStatementsVisibleToOtherSession
//
// Steps: with pool.max_per_node 1 (one shared primary backend), session A
// runs a pgx prepared statement whose text names a secret-looking literal;
// session B, on the same backend afterwards, reads pg_prepared_statements.
//
// What pgowl does: A's statement stays prepared on the shared backend under
// pgowl's name, so B sees A's SQL text, literals included (pgowl does
// survive B deallocating it: TestDeallocateByNameFromOtherSession
// passes). Suspected cause: managed statements are left on the pooled
// backend and shared by text hash (proxy/batch.go writeClientParse,
// releaseIdle keeps the connection's record of prepared names). Another session must see nothing of A's (README: session state
// "never reaches another client"). By design, for now (README "Limits"): the test reports it.
func TestPreparedStatementsVisibleToOtherSession(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, func(cfg *config.Config) { cfg.Pool.MaxPerNode = 1 })
	ctx := timeoutCtx(t, time.Minute)
	secret := marker("review5-secret")
	a := featureConn(t, o.endpoint, nil, 0)
	var got string
	if err := a.QueryRow(ctx, fmt.Sprintf("/*pgowl:primary*/ SELECT $1::text || '%s'", secret), "x").Scan(&got); err != nil {
		t.Fatal(err)
	}
	b := featureConn(t, o.endpoint, nil, pgx.QueryExecModeSimpleProtocol)
	var seen []string
	rows, err := b.Query(ctx, "/*pgowl:primary*/ SELECT name || ': ' || statement FROM pg_prepared_statements")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		rows.Scan(&s)
		seen = append(seen, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var visible []string
	for _, s := range seen {
		if strings.Contains(s, secret) {
			visible = append(visible, s)
		}
	}
	owltest.KnownGap(t, len(visible) > 0, fmt.Sprintf(`by design (issue 5: a backend is returned clean, "DEALLOCATE only pgowl-unmanaged statements"; README "Limits"): pgowl-managed statements stay prepared on pooled backends for reuse and are visible in pg_prepared_statements to whoever uses the backend next: session B sees session A's %q`, visible))
}

// TestDeallocateByNameFromOtherSession
//
// Steps: pool.max_per_node 1. Session A runs a pgx cached statement on the
// primary. Session B reads its managed name from pg_prepared_statements and
// runs `DEALLOCATE <name>` (a single statement, simple protocol). A runs its
// statement again.
//
// A never deallocated anything and must keep working. (This passes: pgowl
// copes with the DEALLOCATE.)
func TestDeallocateByNameFromOtherSession(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, func(cfg *config.Config) { cfg.Pool.MaxPerNode = 1 })
	ctx := timeoutCtx(t, time.Minute)
	tag := marker("review5-dealloc")
	sql := fmt.Sprintf("/*pgowl:primary*/ SELECT $1::int + 1 /* %s */", tag)
	a := featureConn(t, o.endpoint, nil, 0)
	var n int
	if err := a.QueryRow(ctx, sql, 41).Scan(&n); err != nil || n != 42 {
		t.Fatalf("first run: %v %d", err, n)
	}
	b := featureConn(t, o.endpoint, nil, pgx.QueryExecModeSimpleProtocol)
	var name string
	err := b.QueryRow(ctx, fmt.Sprintf("/*pgowl:primary*/ SELECT name FROM pg_prepared_statements WHERE statement LIKE '%%%s%%' LIMIT 1", tag)).Scan(&name)
	if err != nil {
		t.Logf("B cannot find A's statement (%v): nothing to deallocate", err)
		return
	}
	if _, err := b.Exec(ctx, fmt.Sprintf("DEALLOCATE %s", pgx.Identifier{name}.Sanitize())); err != nil {
		t.Logf("B's DEALLOCATE %s failed: %v", name, err)
	}
	if err := a.QueryRow(ctx, sql, 41).Scan(&n); err != nil || n != 42 {
		t.Errorf("session A's prepared statement after another session's DEALLOCATE %s: %v (got %d), want 42", name, err, n)
	}
}

// TestPortalSuspendedAcrossFlush: pg-cursor style reads, outside a
// transaction: Parse/Bind/Execute(3)/Flush, Execute(3)/Flush, then
// Execute(0)/Sync on the unnamed portal; the rows must come in order, with
// PortalSuspended after each limited Execute, on a standby.
func TestPortalSuspendedAcrossFlush(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, nil)
	var ns []notice
	conn := featureConn(t, o.endpoint, &ns, 0)
	pc := conn.PgConn()
	fe := pc.Frontend()
	tag := marker("review5-portal")
	deadline := time.Now().Add(20 * time.Second)
	pc.Conn().SetDeadline(deadline)
	defer pc.Conn().SetDeadline(time.Time{})

	resetStats(t, c)
	fe.Send(&pgproto3.Parse{Query: fmt.Sprintf("SELECT /* %s */ g FROM generate_series(1, 10) g", tag)})
	fe.Send(&pgproto3.Bind{})
	fe.Send(&pgproto3.Execute{MaxRows: 3})
	fe.Send(&pgproto3.Flush{})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	var rows []string
	var trail []string
	readUntil := func(stop func(pgproto3.BackendMessage) bool) {
		for {
			m, err := fe.Receive()
			if err != nil {
				t.Fatalf("receive: %v (so far rows %v, messages %v)", err, rows, trail)
			}
			switch m := m.(type) {
			case *pgproto3.DataRow:
				rows = append(rows, string(m.Values[0]))
			case *pgproto3.NoticeResponse:
				ns = append(ns, notice{Conn: "main", Severity: m.Severity, Code: m.Code, Message: m.Message, Detail: m.Detail})
			case *pgproto3.ErrorResponse:
				trail = append(trail, "Error:"+m.Code+":"+m.Message)
			default:
				trail = append(trail, fmt.Sprintf("%T", m))
			}
			if stop(m) {
				return
			}
		}
	}
	isSuspended := func(m pgproto3.BackendMessage) bool {
		_, s := m.(*pgproto3.PortalSuspended)
		_, e := m.(*pgproto3.ErrorResponse)
		return s || e
	}
	readUntil(isSuspended)
	fe.Send(&pgproto3.Execute{MaxRows: 3})
	fe.Send(&pgproto3.Flush{})
	fe.Flush()
	readUntil(isSuspended)
	fe.Send(&pgproto3.Execute{})
	fe.Send(&pgproto3.Sync{})
	fe.Flush()
	readUntil(func(m pgproto3.BackendMessage) bool { _, ok := m.(*pgproto3.ReadyForQuery); return ok })
	if got := strings.Join(rows, ","); got != "1,2,3,4,5,6,7,8,9,10" {
		t.Errorf("rows %s, want 1..10; messages %v", got, trail)
	}
	for _, m := range trail {
		if strings.HasPrefix(m, "Error:") {
			t.Errorf("error during portal reads: %s (messages %v)", m, trail)
		}
	}
	t.Logf("messages: %v; routes %v", trail, routesOf(t, ns, ""))
	onStandbys(t, c, "portal reads", tag, 1)
	var one int
	if err := conn.QueryRow(timeoutCtx(t, 10*time.Second), "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Errorf("a query after the portal reads: %v", err)
	}
}

// TestSetConfigParamAllModes: `SELECT set_config('review5.x', $1,
// false)` with a parameter is documented as carried to the session's other
// backends; check it in every pgx exec mode, reading the value back on a
// standby and on the primary.
func TestSetConfigParamAllModes(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, nil)
	modes := []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeCacheDescribe,
		pgx.QueryExecModeDescribeExec, pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol}
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			ctx := timeoutCtx(t, time.Minute)
			var ns []notice
			conn := featureConn(t, o.endpoint, &ns, mode)
			value := marker("v")
			var set string
			if err := conn.QueryRow(ctx, "SELECT set_config('review5.x', $1, false)", value).Scan(&set); err != nil {
				t.Fatal(err)
			}
			for _, q := range []string{"SELECT current_setting('review5.x', true)", "/*pgowl:primary*/ SELECT current_setting('review5.x', true)", "SELECT current_setting('review5.x', true) /* again */"} {
				var got *string
				if err := conn.QueryRow(ctx, q).Scan(&got); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
				if got == nil || *got != value {
					t.Errorf("%s: got %v, want %q; routes %v", q, deref(got), value, routesOf(t, ns, ""))
				}
			}
		})
	}
}

func deref(s *string) string {
	if s == nil {
		return "<NULL>"
	}
	return *s
}

// TestWithHoldCursorSimple: DECLARE ... WITH HOLD outside a
// transaction, FETCH in pieces, CLOSE; the cursor pins the session, the rows
// are right; another session on the same backend does not see the cursor;
// after CLOSE reads go to a standby again.
func TestWithHoldCursorSimple(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, func(cfg *config.Config) { cfg.Pool.MaxPerNode = 2 })
	ctx := timeoutCtx(t, time.Minute)
	var ns []notice
	a := featureConn(t, o.endpoint, &ns, pgx.QueryExecModeSimpleProtocol)
	if _, err := a.Exec(ctx, "DECLARE review5_c CURSOR WITH HOLD FOR SELECT g FROM generate_series(1, 10) g"); err != nil {
		t.Fatal(err)
	}
	var got []string
	for i := 0; i < 4; i++ {
		rows, err := a.Query(ctx, "FETCH 3 FROM review5_c")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var g int
			rows.Scan(&g)
			got = append(got, fmt.Sprint(g))
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("FETCH: %v; routes %v", err, routesOf(t, ns, ""))
		}
	}
	if s := strings.Join(got, ","); s != "1,2,3,4,5,6,7,8,9,10" {
		t.Errorf("fetched %s, want 1..10", s)
	}
	b := featureConn(t, o.endpoint, nil, pgx.QueryExecModeSimpleProtocol)
	for i := 0; i < 3; i++ {
		var n int
		if err := b.QueryRow(ctx, "/*pgowl:primary*/ SELECT count(*) FROM pg_cursors").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("another session sees %d cursors", n)
		}
	}
	if _, err := a.Exec(ctx, "CLOSE review5_c"); err != nil {
		t.Fatal(err)
	}
	ns = nil
	var one int
	if err := a.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		t.Fatal(err)
	}
	wantRoutes(t, "read after CLOSE", ns, "", 1, "standby", "READ_ONLY")
}

// ---------------------------------------------------------------------------
// Programs: psycopg2 and JDBC scenarios (integration/clients/python/library_feature_scenarios.py,
// integration/clients/java/library_feature_scenarios.java), each printing one JSON object.

type review5Out struct {
	Scenario string           `json:"scenario"`
	Error    *stepError       `json:"error"`
	Crash    string           `json:"crash"`
	Notices  []notice         `json:"notices"`
	Result   map[string]any   `json:"result"`
	Steps    []map[string]any `json:"steps"`
}

func featureRun(t *testing.T, ep endpoint, tb clientTables, dir string, prog string, args ...string) review5Out {
	t.Helper()
	env := append(ep.libpqEnv(),
		"MATRIX_HOST="+ep.host,
		fmt.Sprintf("MATRIX_PORT=%d", ep.port),
		"MATRIX_USER="+appUser,
		"MATRIX_PASSWORD="+appPassword,
		"MATRIX_DATABASE="+appDatabase,
		"MATRIX_ITEMS="+tb.items,
		"MATRIX_COPY="+tb.copy,
	)
	res := runCmd(t, 2*time.Minute, dir, env, prog, args...)
	var out review5Out
	line := strings.TrimSpace(res.stdout)
	if i := strings.LastIndex(line, "\n"); i >= 0 {
		line = line[i+1:]
	}
	if err := json.Unmarshal([]byte(line), &out); err != nil {
		t.Fatalf("%s %v: exit %d, output not JSON (%v)\nstdout:\n%s\nstderr:\n%s", prog, args, res.exitCode, err, res.stdout, owlTail(res.stderr))
	}
	if out.Crash != "" {
		t.Fatalf("%s %v crashed: %s", prog, args, out.Crash)
	}
	return out
}

func owlTail(s string) string {
	if len(s) > 8000 {
		return s[len(s)-8000:]
	}
	return s
}

func (o review5Out) resNum(key string) int64 {
	switch v := o.Result[key].(type) {
	case float64:
		return int64(v)
	}
	return -1
}

func (o review5Out) resStr(key string) string {
	s, _ := o.Result[key].(string)
	return s
}

func review5Python(t *testing.T) (string, string) {
	t.Helper()
	if _, err := os.Stat(debianPython); err != nil {
		t.Skip("no python3")
	}
	dir, _ := filepath.Abs("python")
	return debianPython, dir
}

func review5Java(t *testing.T) (string, string) {
	t.Helper()
	java, err := exec.LookPath("java")
	if err != nil {
		t.Skip("no java")
	}
	if _, err := os.Stat(jdbcJar); err != nil {
		t.Skip("no jdbc jar")
	}
	dir, _ := filepath.Abs("java")
	return java, dir
}

// TestPsycopg2LibraryFeatures runs psycopg2 scenarios the matrix lacks.
func TestPsycopg2LibraryFeatures(t *testing.T) {
	c := sharedClusterFor(t)
	py, dir := review5Python(t)
	o := startOwl(t, c, nil)
	tb := createTables(t, c, "review5py")
	run := func(t *testing.T, scenario string, args ...string) review5Out {
		return featureRun(t, o.endpoint, tb, dir, py, append([]string{"-u", "library_feature_scenarios.py", scenario}, args...)...)
	}

	t.Run("withhold_autocommit", func(t *testing.T) {
		out := run(t, "withhold_autocommit")
		if out.Error != nil {
			t.Fatalf("error %v; notices %v", out.Error, routesOf(t, out.Notices, ""))
		}
		if got := out.resStr("ids"); got != "1,2,3,4,5,6,7,8,9,10" {
			t.Errorf("named WITH HOLD cursor rows %q, want 1..10", got)
		}
		rs := routesOf(t, out.Notices, "after")
		if len(rs) != 1 || rs[0].Role != "standby" {
			t.Errorf("read after the cursor was closed: %v, want one standby NOTICE", rs)
		}
	})
	t.Run("withhold_in_tx", func(t *testing.T) {
		out := run(t, "withhold_in_tx")
		if out.Error != nil {
			t.Fatalf("error %v; notices %v", out.Error, routesOf(t, out.Notices, ""))
		}
		if got := out.resStr("ids"); got != "1,2,3,4,5,6,7,8,9,10" {
			t.Errorf("named WITH HOLD cursor rows across COMMIT %q, want 1..10", got)
		}
	})
	t.Run("withhold_readonly_tx", func(t *testing.T) {
		out := run(t, "withhold_readonly_tx")
		if out.Error != nil {
			t.Fatalf("error %v; notices %v", out.Error, routesOf(t, out.Notices, ""))
		}
		if got := out.resStr("ids"); got != "1,2,3,4,5,6,7,8,9,10" {
			t.Errorf("named WITH HOLD cursor rows across COMMIT %q, want 1..10", got)
		}
		t.Logf("routes %v", routesOf(t, out.Notices, ""))
	})
	t.Run("readonly_autocommit", func(t *testing.T) {
		tag := marker("review5py-ro")
		resetStats(t, c)
		out := run(t, "readonly_autocommit", tag)
		if out.Error != nil {
			t.Fatalf("error %v", out.Error)
		}
		if got := out.resStr("write_code"); got != "25006" {
			t.Errorf("a write after set_session(readonly=True, autocommit=True): SQLSTATE %q (%s), want 25006", got, out.resStr("write_msg"))
		}
		if got := out.resNum("count"); got < seedItems {
			t.Errorf("read count %d", got)
		}
		onStandbys(t, c, "read with default_transaction_read_only", tag, 1)
	})
	t.Run("serializable_autocommit", func(t *testing.T) {
		out := run(t, "serializable_autocommit")
		if out.Error != nil {
			t.Fatalf("error %v; routes %v", out.Error, routesOf(t, out.Notices, ""))
		}
		if got := out.resStr("iso"); got != "serializable" {
			t.Errorf("transaction_isolation %q", got)
		}
	})
	t.Run("execute_values_batch", func(t *testing.T) {
		value := marker("review5py-ev")
		out := run(t, "execute_values_batch", value)
		if out.Error != nil {
			t.Fatalf("error %v", out.Error)
		}
		if got := primaryInt(t, c, fmt.Sprintf("SELECT count(*) FROM %s WHERE v LIKE $1", tb.items), value+"%"); got != 200 {
			t.Errorf("execute_values + execute_batch wrote %d rows, want 200", got)
		}
	})
	t.Run("copy_expert_in_tx_then_read", func(t *testing.T) {
		out := run(t, "copy_expert_in_tx")
		if out.Error != nil {
			t.Fatalf("error %v", out.Error)
		}
		if got := out.resNum("seen"); got != 100 {
			t.Errorf("the transaction saw %d of the 100 rows it copied in", got)
		}
	})
}

// TestJDBCLibraryFeatures runs JDBC scenarios the matrix lacks.
func TestJDBCLibraryFeatures(t *testing.T) {
	c := sharedClusterFor(t)
	java, dir := review5Java(t)
	o := startOwl(t, c, nil)
	tb := createTables(t, c, "review5jdbc")
	run := func(t *testing.T, scenario string, args ...string) review5Out {
		return featureRun(t, o.endpoint, tb, dir, java, append([]string{"-cp", jdbcJar, "library_feature_scenarios.java", scenario}, args...)...)
	}
	t.Run("serializable_autocommit", func(t *testing.T) {
		out := run(t, "serializable_autocommit")
		if out.Error != nil {
			t.Fatalf("error %v; routes %v", out.Error, routesOf(t, out.Notices, ""))
		}
		t.Logf("result %v routes %v", out.Result, routesOf(t, out.Notices, ""))
	})
	t.Run("serializable_readonly_tx", func(t *testing.T) {
		out := run(t, "serializable_readonly_tx")
		if out.Error != nil {
			t.Fatalf("error %v; routes %v", out.Error, routesOf(t, out.Notices, ""))
		}
		t.Logf("result %v routes %v", out.Result, routesOf(t, out.Notices, ""))
	})
	t.Run("autosave_always", func(t *testing.T) {
		value := marker("review5jdbc-autosave")
		out := run(t, "autosave_always", value)
		if out.Error != nil {
			t.Fatalf("error %v; routes %v", out.Error, routesOf(t, out.Notices, ""))
		}
		if got := primaryInt(t, c, fmt.Sprintf("SELECT count(*) FROM %s WHERE v = $1", tb.items), value); got != 2 {
			t.Errorf("autosave=always: %d rows committed, want 2 (the failed statement is rolled back to its savepoint)", got)
		}
	})
	t.Run("prepare_threshold_search_path", func(t *testing.T) {
		out := run(t, "prepare_threshold")
		if out.Error != nil {
			t.Fatalf("error %v; routes %v", out.Error, routesOf(t, out.Notices, ""))
		}
		if got := out.resNum("ok"); got != 20 {
			t.Errorf("%d of 20 executions returned the right row: %v", got, out.Result)
		}
	})
	t.Run("batch_rewrite", func(t *testing.T) {
		value := marker("review5jdbc-batch")
		out := run(t, "batch_rewrite", value)
		if out.Error != nil {
			t.Fatalf("error %v", out.Error)
		}
		if got := primaryInt(t, c, fmt.Sprintf("SELECT count(*) FROM %s WHERE v LIKE $1", tb.items), value+"%"); got != 300 {
			t.Errorf("batches wrote %d rows, want 300", got)
		}
	})
	t.Run("readonly_mode_always", func(t *testing.T) {
		out := run(t, "readonly_always")
		if out.Error != nil {
			t.Fatalf("error %v; routes %v", out.Error, routesOf(t, out.Notices, ""))
		}
		if got := out.resStr("write_code"); got != "25006" {
			t.Errorf("write with readOnlyMode=always: %q (%s), want 25006", got, out.resStr("write_msg"))
		}
	})
	t.Run("fetch_size_rw_tx", func(t *testing.T) {
		out := run(t, "fetch_size_rw_tx")
		if out.Error != nil {
			t.Fatalf("error %v; routes %v", out.Error, routesOf(t, out.Notices, ""))
		}
		if got := out.resNum("rows"); got != 1000 {
			t.Errorf("fetched %d rows, want 1000", got)
		}
		if got := out.resNum("sum"); got != 500500 {
			t.Errorf("sum %d, want 500500", got)
		}
	})
}

// TestSharedStatementAcrossSearchPaths
//
// Steps: schemas review5_ta.t (id, v) and review5_tb.t (id, v, w), a common
// schema-per-tenant layout. pool.max_per_node 1. Session A runs
// `SET search_path = review5_ta`, then pgx (statement cache) runs
// `/*pgowl:primary*/ SELECT * FROM t WHERE id = $1`: 2 columns. Session B
// runs `SET search_path = review5_tb` and the same text.
//
// What pgowl does: both sessions map the text to one managed statement
// pgowl_<hash of text and parameter types>; B's Parse is answered by pgowl
// (writeClientParse: the backend already holds it), so B executes the
// statement A prepared. PostgreSQL re-plans it for B's search_path and
// refuses with 0A000 "cached plan must not change result type"; B retries as
// pgx does and fails forever. Straight against PostgreSQL B's own Parse
// succeeds and returns 3 columns. Suspected cause: the managed name does not
// depend on the session's search_path (proxy/batch.go newStatement /
// writeClientParse), and nothing forgets a statement after 0A000.
func TestSharedStatementAcrossSearchPaths(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, func(cfg *config.Config) { cfg.Pool.MaxPerNode = 1 })
	if err := c.Nodes[0].Exec(timeoutCtx(t, statementTimeout), `DROP SCHEMA IF EXISTS review5_ta CASCADE; DROP SCHEMA IF EXISTS review5_tb CASCADE;
CREATE SCHEMA review5_ta AUTHORIZATION `+appUser+`; CREATE SCHEMA review5_tb AUTHORIZATION `+appUser); err != nil {
		t.Fatal(err)
	}
	featurePrimary(t, c, `CREATE TABLE review5_ta.t (id int PRIMARY KEY, v text); INSERT INTO review5_ta.t VALUES (1, 'a');
CREATE TABLE review5_tb.t (id int PRIMARY KEY, v text, w text); INSERT INTO review5_tb.t VALUES (1, 'b', 'bw')`)
	catchUp(t, c)
	ctx := timeoutCtx(t, time.Minute)
	sql := "/*pgowl:primary*/ SELECT * FROM t WHERE id = $1"
	a := featureConn(t, o.endpoint, nil, 0)
	if _, err := a.Exec(ctx, "SET search_path = review5_ta", pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	if errs, cols, ok := selectStarUntilOK(ctx, a, sql, 1); !ok || cols != 2 {
		t.Fatalf("tenant A: ok=%v cols=%d errors %v", ok, cols, errs)
	}
	b := featureConn(t, o.endpoint, nil, 0)
	if _, err := b.Exec(ctx, "SET search_path = review5_tb", pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	errs, cols, ok := selectStarUntilOK(ctx, b, sql, 3)
	if !ok || cols != 3 || len(errs) > 0 {
		t.Errorf("tenant B (search_path review5_tb), same SQL text: ok=%v columns=%d errors %v; want 3 columns at the first try, as straight against PostgreSQL", ok, cols, errs)
	}
	// And A must still get its own 2 columns.
	errs, cols, ok = selectStarUntilOK(ctx, a, sql, 3)
	if !ok || cols != 2 || len(errs) > 0 {
		t.Errorf("tenant A again: ok=%v columns=%d errors %v; want 2 columns", ok, cols, errs)
	}
}
