package integration

import (
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/internal/cluster"
)

// guardCostLimit is the analytics guard's max_cost in these tests: a
// sequential scan of guard_big (100 000 rows) costs about 2 000, an index
// lookup about 8.
const guardCostLimit = 500

// createGuardBig makes guard_big on c: 100 000 rows, analysed, so that a sequential scan of it
// costs over guardCostLimit and an index lookup does not.
func createGuardBig(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	createTable(t, c, "guard_big", `CREATE TABLE guard_big (id int PRIMARY KEY, v text);
		INSERT INTO guard_big SELECT g, 'value ' || g FROM generate_series(1, 100000) g;
		ANALYZE guard_big;`)
}

// startCostGuardOwl starts pgowl on the shared cluster with a guard on
// statements that carry the AI comment, and a table large enough that a
// sequential scan is over the limit and an index lookup is not.
func startCostGuardOwl(t *testing.T) (*owl, func(string) string) {
	t.Helper()
	c := sharedClusterFor(t)
	createGuardBig(t, c)
	o := startOwl(t, c, func(cfg *config.Config) {
		cfg.Admin.Users = nil
		cfg.Guards = []config.Guard{{Name: "analytics", Match: config.GuardMatch{AIComment: true}, MaxCost: guardCostLimit,
			VerdictCacheTTL: config.DefaultVerdictCacheTTL}}
	})
	prefix := o.cfg.Routing.AICommentPrefix
	return o, func(sql string) string { return prefix + " " + sql }
}

var (
	costMessage    = regexp.MustCompile(`^pgowl: QUERY_COST_EXCEEDED: estimated cost [0-9]+ exceeds the limit 500$`)
	costFirstLine  = regexp.MustCompile(`^guard=analytics node=pg[0-9] estimated_cost=[0-9]+\.[0-9]{2} limit=500\.00$`)
	costPlanLine   = regexp.MustCompile(`^plan_node=("[^"]*"|\S+) relation=\S+ index=\S+ rows=[0-9]+ own_cost=[0-9]+\.[0-9]{2} share_pct=[0-9]+\.[0-9]$`)
	seqScanOfTable = regexp.MustCompile(`(?m)^plan_node="Seq Scan" relation=public\.guard_big index=- rows=[0-9]+ `)
	guardedNotice  = regexp.MustCompile(` guard=analytics cost=[0-9]+\.[0-9]{2}$`)
)

// wantCostRefusal checks a QUERY_COST_EXCEEDED refusal: SQLSTATE 54001, the
// message, a DETAIL in the documented line format naming the sequential
// scan of guard_big, and the HINT.
func wantCostRefusal(t *testing.T, what string, err error) {
	t.Helper()
	pgErr := wantSQLState(t, what, err, "54001")
	if pgErr == nil {
		return
	}
	if !costMessage.MatchString(pgErr.Message) {
		t.Errorf("%s: message %q", what, pgErr.Message)
	}
	lines := strings.Split(pgErr.Detail, "\n")
	if !costFirstLine.MatchString(lines[0]) {
		t.Errorf("%s: DETAIL first line %q", what, lines[0])
	}
	if len(lines) < 2 || len(lines) > 6 {
		t.Errorf("%s: DETAIL has %d plan node lines, want 1..5:\n%s", what, len(lines)-1, pgErr.Detail)
	}
	for _, l := range lines[1:] {
		if !costPlanLine.MatchString(l) {
			t.Errorf("%s: DETAIL plan line %q", what, l)
		}
	}
	if !seqScanOfTable.MatchString(pgErr.Detail) {
		t.Errorf("%s: DETAIL does not name the sequential scan of public.guard_big:\n%s", what, pgErr.Detail)
	}
	if !strings.Contains(pgErr.Hint, "Retrying the same SQL fails again") {
		t.Errorf("%s: HINT %q", what, pgErr.Hint)
	}
	t.Logf("%s: the client sees:\nERROR: %s\nDETAIL: %s\nHINT: %s", what, pgErr.Message, pgErr.Detail, pgErr.Hint)
}

// wantGuardedRun checks that a guarded statement ran and its NOTICE names the guard and the cost.
func wantGuardedRun(t *testing.T, what string, conn *client, err error) {
	t.Helper()
	if err != nil {
		t.Errorf("%s: %v, want it to run (cost under the limit)", what, err)
		return
	}
	r := conn.oneRoute(t, what)
	if r.Raw != nil && !guardedNotice.MatchString(r.Raw.Detail) {
		t.Errorf("%s: NOTICE DETAIL %q does not end with guard=analytics cost=<cost>", what, r.Raw.Detail)
	}
}

// TestGuardCostSimpleProtocol: a guarded sequential scan is refused before it
// runs, an index lookup runs with its cost in the NOTICE, the same statement
// without the AI comment (business traffic) runs, and a refusal inside a
// transaction fails the transaction as a node's error would.
func TestGuardCostSimpleProtocol(t *testing.T) {
	o, ai := startCostGuardOwl(t)
	conn := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
	ctx := timeoutCtx(t, statementTimeout)

	heavy := "SELECT count(*) FROM guard_big WHERE v LIKE '%7%'"
	resetStats(t, o.nodes)
	_, err := conn.Exec(ctx, ai(heavy))
	wantCostRefusal(t, "guarded sequential scan", err)
	conn.routes(t)
	if ev := evidenceLike(t, o.nodes, ai("SELECT count(*) FROM guard_big WHERE v LIKE")+"%"); sumCalls(ev) != 0 {
		t.Errorf("the refused statement ran: pg_stat_statements %v", ev)
	}

	var v string
	err = conn.QueryRow(ctx, ai("SELECT v FROM guard_big WHERE id = 42")).Scan(&v)
	wantGuardedRun(t, "guarded index lookup", conn, err)

	var n int64
	if err := conn.QueryRow(ctx, heavy).Scan(&n); err != nil {
		t.Errorf("business traffic (no AI comment) was refused: %v", err)
	}
	conn.routes(t)

	// SHOW pgowl.explain tells the verdict, machine-readable. Verdicts are
	// cached per node, and the read may go to the other standby than the
	// first refusal's: after one refusal on each, the next one is cached.
	var explain string
	for attempt := 1; attempt <= 3; attempt++ {
		_, err = conn.Exec(ctx, ai(heavy))
		wantCostRefusal(t, "the same statement again (verdict cache)", err)
		if err := conn.QueryRow(ctx, "SHOW pgowl.explain").Scan(&explain); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(explain, "verdict=refused cached=true") {
			break
		}
	}
	if !strings.Contains(explain, "verdict=refused cached=true") || !seqScanOfTable.MatchString(explain) {
		t.Errorf("SHOW pgowl.explain after a cached refusal:\n%s", explain)
	}
	if !strings.Contains(o.logs.String(), `"plan_nodes":[{"node_type":`) {
		t.Errorf("the routing log has no plan_nodes for the refusal")
	}

	// Inside a transaction: the refusal aborts it, as a node's error does.
	if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec(ctx, ai("SELECT count(*) FROM guard_big WHERE v LIKE '%8%'"))
	wantCostRefusal(t, "guarded sequential scan in a transaction", err)
	_, err = conn.Exec(ctx, "SELECT 1")
	wantSQLState(t, "a statement after the refusal in the transaction", err, "25P02")
	if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	conn.routes(t)
	err = conn.QueryRow(ctx, ai("SELECT v FROM guard_big WHERE id = 43")).Scan(&v)
	if err != nil {
		t.Errorf("a cheap guarded read in a transaction: %v", err)
	}
	if _, err := conn.Exec(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
}

// TestGuardCostExtendedProtocol: with the extended protocol the plan is
// asked for the client's own parameter values, so one prepared statement is
// run for a selective value and refused for one that makes it a sequential
// scan; in every exec mode pgx has.
func TestGuardCostExtendedProtocol(t *testing.T) {
	o, ai := startCostGuardOwl(t)
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeCacheDescribe,
		pgx.QueryExecModeDescribeExec, pgx.QueryExecModeExec} {
		t.Run(mode.String(), func(t *testing.T) {
			conn := o.connect(t, withMode(mode))
			ctx := timeoutCtx(t, statementTimeout)
			sql := ai("SELECT count(*) FROM guard_big WHERE id < $1")
			for round := 0; round < 2; round++ { // the second round may come from the verdict cache
				var n int64
				err := conn.QueryRow(ctx, sql, 10).Scan(&n)
				wantGuardedRun(t, "id < 10 (index range scan)", conn, err)
				if err == nil && n != 9 {
					t.Errorf("id < 10 counted %d", n)
				}
				err = conn.QueryRow(ctx, sql, 100000).Scan(&n)
				wantCostRefusal(t, "id < 100000 (sequential scan)", err)
				conn.routes(t)
			}
			// A text parameter, an explicitly typed one.
			var v string
			err := conn.QueryRow(ctx, ai("SELECT v FROM guard_big WHERE id = $1::int AND v = $2::text"), 5, "value 5").Scan(&v)
			wantGuardedRun(t, "two parameters", conn, err)
		})
	}
	// Parse with no parameter types at all, text values: the node infers
	// the type in the EXPLAIN as in the statement, and plans for the value.
	t.Run("unspecified parameter types", func(t *testing.T) {
		conn := o.connect(t, nil)
		ctx := timeoutCtx(t, statementTimeout)
		sql := ai("SELECT count(*) FROM guard_big WHERE id < $1")
		res := conn.PgConn().ExecParams(ctx, sql, [][]byte{[]byte("10")}, nil, nil, nil).Read()
		wantGuardedRun(t, "id < '10' (index range scan)", conn, res.Err)
		if res.Err == nil && (len(res.Rows) != 1 || string(res.Rows[0][0]) != "9") {
			t.Errorf("id < '10' returned %q", res.Rows)
		}
		res = conn.PgConn().ExecParams(ctx, sql, [][]byte{[]byte("100000")}, nil, nil, nil).Read()
		wantCostRefusal(t, "id < '100000' (sequential scan)", res.Err)
		conn.routes(t)
	})
}

// TestGuardCostSessionLimitOnlyTightens: SET pgowl.max_cost tightens the
// guard's limit for the session and cannot loosen it.
func TestGuardCostSessionLimitOnlyTightens(t *testing.T) {
	o, ai := startCostGuardOwl(t)
	conn := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
	ctx := timeoutCtx(t, statementTimeout)
	if _, err := conn.Exec(ctx, "SET pgowl.max_cost = 1"); err != nil {
		t.Fatal(err)
	}
	_, err := conn.Exec(ctx, ai("SELECT v FROM guard_big WHERE id = 42"))
	if pgErr := wantSQLState(t, "index lookup over a session limit of 1", err, "54001"); pgErr != nil &&
		!strings.HasSuffix(pgErr.Message, "exceeds the limit 1") {
		t.Errorf("message %q", pgErr.Message)
	}
	if _, err := conn.Exec(ctx, "RESET pgowl.max_cost"); err != nil {
		t.Fatal(err)
	}
	conn.routes(t)
	_, err = conn.Exec(ctx, ai("SELECT v FROM guard_big WHERE id = 42"))
	wantGuardedRun(t, "index lookup after RESET", conn, err)
}

// sumCalls adds up pg_stat_statements calls over the nodes.
func sumCalls(ev map[string]int64) int64 {
	var n int64
	for _, c := range ev {
		n += c
	}
	return n
}

// TestGuardCostWrites: a guard with guard_writes explains its class's writes
// too, on the primary; a guard without it lets them through, and so does a
// session no guard matches.
func TestGuardCostWrites(t *testing.T) {
	c := sharedClusterFor(t)
	createGuardBig(t, c)
	o := startOwl(t, c, func(cfg *config.Config) {
		cfg.Guards = []config.Guard{
			{Name: "etl", Match: config.GuardMatch{ApplicationNames: []string{"etl-*"}}, MaxCost: guardCostLimit, GuardWrites: true},
			{Name: "reads_only", Match: config.GuardMatch{ApplicationNames: []string{"report-*"}}, MaxCost: guardCostLimit},
		}
	})
	ctx := timeoutCtx(t, statementTimeout)
	update := "UPDATE guard_big SET v = v WHERE v LIKE '%x%'" // a sequential scan that changes no row
	etl := o.connect(t, withParams(map[string]string{"application_name": "etl-nightly"}))
	_, err := etl.Exec(ctx, update)
	if pgErr := wantSQLState(t, "a guarded write", err, "54001"); pgErr != nil {
		if !strings.HasPrefix(pgErr.Detail, "guard=etl node="+primaryName(c)+" ") || !seqScanOfTable.MatchString(pgErr.Detail) {
			t.Errorf("DETAIL:\n%s", pgErr.Detail)
		}
	}
	for _, app := range []string{"report-daily", "shop"} {
		conn := o.connect(t, withParams(map[string]string{"application_name": app}))
		if _, err := conn.Exec(ctx, update); err != nil {
			t.Errorf("application %s: the write was refused: %v", app, err)
		}
	}
}
