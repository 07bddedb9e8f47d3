package classify

import "testing"

// PostgreSQL refuses SELECT ... FOR UPDATE in a STABLE function only when the locking clause
// reaches a table (the plan has row marks): FOR UPDATE over no FROM, a function, VALUES, or an
// unreferenced CTE locks nothing, and the statement runs, nextval() and advisory locks included
// (checked on PostgreSQL 15: each of these bodies runs and takes its lock or advances s).
func TestARowLockWithNothingToLockIsNotRefusedInAStableFunction(t *testing.T) {
	bodies := map[string]string{
		"no_from":        "SELECT pg_try_advisory_lock(101) FOR UPDATE",
		"function_scan":  "SELECT pg_try_advisory_lock(102) FROM generate_series(1, 1) g FOR UPDATE",
		"unreferenced":   "WITH x AS (SELECT id FROM t FOR UPDATE) SELECT pg_try_advisory_lock(103)",
		"values_nextval": "SELECT nextval('s') > 0 FROM (VALUES (1)) v FOR UPDATE",
	}
	cat := catalogueWithStableFunctions("lk_", "sql", "boolean", 48000, bodies)
	ctx := &Context{Database: "test", User: "app", SearchPath: []string{"public"}}
	for name, body := range bodies {
		got := New(Options{CacheSize: -1}).ClassifyWith("SELECT lk_"+name+"()", ctx, cat)
		if got.Access != Write || got.Reason != ReasonWritingFunction {
			t.Errorf("STABLE %s: %v %v %q, assumptions %q; want WRITING_FUNCTION", body, got.Access, got.Reason, got.Subject, got.Assumptions)
		}
	}
	// A lock that reaches a table is refused: nothing runs, taken as a read.
	table := catalogueWithStableFunctions("lk_", "sql", "integer", 48099, map[string]string{"table": "SELECT id FROM t FOR UPDATE"})
	if got := New(Options{CacheSize: -1}).ClassifyWith("SELECT lk_table()", ctx, table); got.Access != Read {
		t.Errorf("STABLE SELECT id FROM t FOR UPDATE: %v %v %q; want a read", got.Access, got.Reason, got.Subject)
	}
}
