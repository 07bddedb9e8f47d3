package proxy

import (
	"testing"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/config"
)

// TestWhichStatementsAGuardChecks: a guard's limits apply to its class's queries, counted by what a
// unit runs. A multi-statement string keeps the busy limits (only its cost is not checked); a
// batch's executed statements count each by itself, a BEGIN before them included, but a batch that
// changes settings or ends a transaction before its query is not checked, as the EXPLAIN would run
// before any of it; a statement only parsed in the batch does not make it guarded.
func TestWhichStatementsAGuardChecks(t *testing.T) {
	readsOnly := &config.Guard{Name: "analytics"}
	read := classify.Effects{Access: classify.Read, Reason: classify.ReasonReadOnly, Statements: 1}
	update := classify.Effects{Access: classify.Write, Reason: classify.ReasonWrite, Statements: 1}
	begin := classify.Effects{Access: classify.Write, Reason: classify.ReasonWrite, Statements: 1, Tx: classify.TxBegin}
	commit := classify.Effects{Access: classify.Read, Reason: classify.ReasonReadOnly, Statements: 1, Tx: classify.TxEnd}
	setPath := classify.Effects{Access: classify.Read, Reason: classify.ReasonReadOnly, Statements: 1, Session: classify.SessionSet,
		Settings: []classify.SettingChange{{}}}
	stmt := func(sql string, eff classify.Effects) *preparedStmt { return &preparedStmt{sql: sql, effects: eff} }
	heavy := stmt("SELECT count(*) FROM big", read)
	batch := &unit{stmts: []*preparedStmt{heavy}}

	twoStatements := classify.Effects{Access: classify.Read, Reason: classify.ReasonReadOnly, Statements: 2}
	cases := []struct {
		name     string
		u        *unit
		executed []*preparedStmt
		want     bool
	}{
		{"one query", &unit{sql: "SELECT count(*) FROM big", effects: read}, nil, true},
		{"a multi-statement string keeps the busy limits", &unit{sql: "SELECT count(*) FROM big; SELECT 1", effects: twoStatements}, nil, true},
		{"a query in parentheses", &unit{sql: "/* c */ (SELECT 1)", effects: read}, nil, true},
		{"a write, without guard_writes", &unit{sql: "UPDATE t SET v = 1", effects: update}, nil, false},
		{"SET", &unit{sql: "SET work_mem = '1GB'", effects: setPath}, nil, false},
		{"batch: the query alone", batch, []*preparedStmt{heavy}, true},
		{"batch: BEGIN, then the query", batch, []*preparedStmt{stmt("BEGIN", begin), heavy}, true},
		{"batch: a write, then the query", batch, []*preparedStmt{stmt("UPDATE t SET v = 1", update), heavy}, true},
		{"batch: SET search_path, then the query", batch, []*preparedStmt{stmt("SET search_path = dwh", setPath), heavy}, false},
		{"batch: COMMIT, then the query", batch, []*preparedStmt{stmt("COMMIT", commit), heavy}, false},
		{"batch: the query only parsed, an UPDATE executed", batch, []*preparedStmt{stmt("UPDATE t SET v = 1", update)}, false},
	}
	for _, tc := range cases {
		if got := unitHasGuardedStatement(tc.u, tc.executed, readsOnly); got != tc.want {
			t.Errorf("%s: guarded %v, want %v", tc.name, got, tc.want)
		}
	}
	for sql, want := range map[string]string{"EXECUTE p": "execute", " /* x */ ( ( select 1))": "select", "-- c\nDECLARE c CURSOR FOR SELECT 1": "declare"} {
		if got := firstKeyword(sql); got != want {
			t.Errorf("firstKeyword(%q) = %q, want %q", sql, got, want)
		}
	}
}
