package integration

import (
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestAGuardedQueryInParenthesesIsChecked: "(SELECT ...)" is a query like
// any other (PostgreSQL's grammar takes a parenthesized SELECT as a
// statement, and EXPLAIN plans it). The AI-commented sequential scan of
// guard_big is refused as QUERY_COST_EXCEEDED when written plainly; written
// in parentheses it must be refused too. pgowl decides whether a statement
// is "a query EXPLAIN can plan" from its first keyword, and "(" is none, so
// the statement is no guard's at all: it runs unchecked, without its cost
// check and outside the guard's busy limits.
func TestAGuardedQueryInParenthesesIsChecked(t *testing.T) {
	o, ai := startCostGuardOwl(t)
	conn := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
	ctx := timeoutCtx(t, statementTimeout)

	_, err := conn.Exec(ctx, ai("SELECT count(*) FROM guard_big WHERE v LIKE '%7%'"))
	wantCostRefusal(t, "control: the plain statement", err)
	conn.routes(t)

	sql := ai("(SELECT count(*) FROM guard_big WHERE v LIKE '%7%')")
	_, err = conn.Exec(ctx, sql)
	rs := conn.routes(t)
	if err == nil {
		detail := ""
		if len(rs) == 1 {
			detail = rs[0].Raw.Detail
		}
		t.Fatalf("%s ran (NOTICE DETAIL %q): the same sequential scan in parentheses escapes guard analytics; want QUERY_COST_EXCEEDED", sql, detail)
	}
	wantCostRefusal(t, "the statement in parentheses", err)
}

// TestAGuardedExecuteOfAPreparedQueryIsChecked: a session of the guarded
// class prepares the heavy query with SQL PREPARE and runs it with EXECUTE
// (EXPLAIN EXECUTE plans it as the statement would run). Running the
// query's text is refused; running it by EXECUTE is no guard's statement
// (explainable looks for SELECT, WITH, ... as the first keyword), so the
// class's heavy query runs unchecked.
func TestAGuardedExecuteOfAPreparedQueryIsChecked(t *testing.T) {
	o, _ := startCostGuardOwl(t)
	conn := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
	ctx := timeoutCtx(t, statementTimeout)
	prefix := o.cfg.Routing.AICommentPrefix
	if _, err := conn.Exec(ctx, "PREPARE guard_heavy AS SELECT count(*) FROM guard_big WHERE v LIKE '%7%'"); err != nil {
		t.Fatal(err)
	}
	conn.routes(t)
	sql := prefix + " EXECUTE guard_heavy"
	_, err := conn.Exec(ctx, sql)
	rs := conn.routes(t)
	if err == nil {
		detail := ""
		if len(rs) == 1 {
			detail = rs[0].Raw.Detail
		}
		t.Fatalf("%q ran (NOTICE DETAIL %q): the AI-commented run of a prepared sequential scan of guard_big (cost about 2 000, limit %d) "+
			"escapes guard analytics; want QUERY_COST_EXCEEDED", sql, detail, guardCostLimit)
	}
	wantSQLState(t, "EXECUTE of the prepared heavy query", err, "54001")
}

// TestAGuardedCursorOverAHeavyQueryIsChecked: psql with FETCH_COUNT set, and
// other tools that page through results, wrap the query in DECLARE ...
// CURSOR FOR <query> and FETCH from it; the query runs at the FETCHes
// (EXPLAIN DECLARE plans it). The class's heavy query, refused when sent
// plainly, is no guard's statement when declared as a cursor, and its rows
// are fetched unchecked.
func TestAGuardedCursorOverAHeavyQueryIsChecked(t *testing.T) {
	o, ai := startCostGuardOwl(t)
	conn := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
	ctx := timeoutCtx(t, statementTimeout)
	if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(ctx, "ROLLBACK")
	sql := ai("DECLARE guard_cur NO SCROLL CURSOR FOR SELECT count(*) FROM guard_big WHERE v LIKE '%7%'")
	_, err := conn.Exec(ctx, sql)
	if err == nil {
		_, err = conn.Exec(ctx, ai("FETCH FORWARD 100 FROM guard_cur"))
	}
	rs := conn.routes(t)
	if err == nil {
		t.Fatalf("%s and FETCH ran (routes %v): the AI-commented sequential scan of guard_big (cost about 2 000, limit %d) "+
			"escapes guard analytics when declared as a cursor; want QUERY_COST_EXCEEDED", sql, rs, guardCostLimit)
	}
	wantSQLState(t, "the heavy query declared as a cursor", err, "54001")
}
