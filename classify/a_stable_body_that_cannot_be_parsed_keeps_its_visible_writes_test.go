package classify

import "testing"

// pg_query's PL/pgSQL parser does not parse bodies with cursor variables, so the whole body of
// such a function is unseen. PostgreSQL runs a cursor's query in a STABLE function (checked on
// PostgreSQL 15: nextval() advances, pg_try_advisory_lock() takes its lock, pg_stat_activity is
// read), so a body pgowl cannot parse is not taken at the declaration's word: never read, it goes
// to the primary, as such a function declared VOLATILE does.
func TestAStableBodyThatCannotBeParsedKeepsItsVisibleWrites(t *testing.T) {
	bodies := map[string]string{
		"bound_nextval":  "DECLARE c CURSOR FOR SELECT nextval('s'); n bigint; BEGIN OPEN c; FETCH c INTO n; CLOSE c; RETURN n; END",
		"bound_stats":    "DECLARE c CURSOR FOR SELECT count(*) FROM pg_stat_activity; n bigint; BEGIN OPEN c; FETCH c INTO n; CLOSE c; RETURN n; END",
		"refcursor_lock": "DECLARE c refcursor; n bigint; BEGIN OPEN c FOR SELECT pg_try_advisory_lock(42)::int; FETCH c INTO n; RETURN n; END",
	}
	cat := catalogueWithStableFunctions("cur_", "plpgsql", "bigint", 47000, bodies)
	ctx := &Context{Database: "test", User: "app", SearchPath: []string{"public"}}
	for name, body := range bodies {
		got := New(Options{CacheSize: -1}).ClassifyWith("SELECT cur_"+name+"()", ctx, cat)
		if got.Access != Write {
			t.Errorf("STABLE %s:\n  %v %v %q, assumptions %q; want the primary", body, got.Access, got.Reason, got.Subject, got.Assumptions)
		}
	}
}
