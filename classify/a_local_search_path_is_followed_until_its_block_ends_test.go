package classify

import (
	"slices"
	"testing"
)

// TestALocalSearchPathIsFollowedUntilItsBlockEnds: SET LOCAL search_path and set_config(...,
// true) report the path they set, marked local (the proxy follows it for the rest of the
// transaction block and never carries it), and the statements after them in the same string
// resolve and create names on it: an unqualified CREATE TABLE after SET LOCAL search_path =
// pg_temp, public makes a temporary table, which pins the session.
func TestALocalSearchPathIsFollowedUntilItsBlockEnds(t *testing.T) {
	c := New(Options{})
	ctx := &Context{Database: "test", User: "app", SearchPath: []string{"public"}}
	for _, tc := range []struct {
		sql    string
		want   SearchPathChange
		notSet bool // no session-level change: nothing to carry to other backends
	}{
		{sql: "SET LOCAL search_path = pg_temp, public", want: SearchPathChange{Known: true, Local: true, Schemas: []string{"pg_temp", "public"}}},
		{sql: "SET LOCAL search_path TO DEFAULT", want: SearchPathChange{Known: true, Local: true, Reset: true}},
		{sql: "SELECT set_config('search_path', 'app, public', true)", want: SearchPathChange{Known: true, Local: true, Schemas: []string{"app", "public"}}},
		{sql: "SELECT set_config('search_path', $1, true)", want: SearchPathChange{Known: false, Local: true}},
	} {
		got := c.ClassifyIn(tc.sql, ctx)
		if got.SearchPath == nil {
			t.Errorf("%s: no search_path change", tc.sql)
			continue
		}
		if change := *got.SearchPath; change.Known != tc.want.Known || change.Local != tc.want.Local ||
			change.Reset != tc.want.Reset || !slices.Equal(change.Schemas, tc.want.Schemas) {
			t.Errorf("%s: search_path change %+v, want %+v", tc.sql, change, tc.want)
		}
		if got.Session&SessionSet != 0 {
			t.Errorf("%s: session effects %v: a local change is no session-level SET", tc.sql, got.Session)
		}
	}
	if got := c.ClassifyIn("SELECT set_config('work_mem', '8MB', true)", ctx); got.SearchPath != nil {
		t.Errorf("a local change of another setting reports a search_path change %+v", *got.SearchPath)
	}
	sql := "BEGIN; SET LOCAL search_path = pg_temp, public; CREATE TABLE scratch_local (id int); COMMIT"
	if got := c.ClassifyIn(sql, ctx); got.Session&SessionTempTable == 0 {
		t.Errorf("%s: session effects %v, want the temporary-object pin", sql, got.Session)
	}
	// The local path ends with its block: a CREATE after the COMMIT is back on the session's
	// path, here one that creates in pg_temp.
	onTemp := &Context{Database: "test", User: "app", SearchPath: []string{"pg_temp", "public"}}
	for _, end := range []string{"COMMIT", "ROLLBACK", "COMMIT AND CHAIN", "PREPARE TRANSACTION 'x'"} {
		sql := "BEGIN; SET LOCAL search_path = public; " + end + "; CREATE TABLE scratch_after (id int)"
		if got := c.ClassifyIn(sql, onTemp); got.Session&SessionTempTable == 0 {
			t.Errorf("%s: session effects %v, want the temporary-object pin of the session's path", sql, got.Session)
		}
	}
	// A session-level SET after the local one is what the block leaves.
	sql = "BEGIN; SET LOCAL search_path = public; SET search_path = pg_temp, public; COMMIT; CREATE TABLE scratch_set (id int)"
	if got := c.ClassifyIn(sql, ctx); got.Session&SessionTempTable == 0 {
		t.Errorf("%s: session effects %v, want the temporary-object pin", sql, got.Session)
	}
	// SET search_path FROM CURRENT keeps the path in force.
	sql = "SET LOCAL search_path FROM CURRENT; CREATE TABLE scratch_current (id int)"
	if got := c.ClassifyIn(sql, onTemp); got.Session&SessionTempTable == 0 || got.SearchPath != nil {
		t.Errorf("%s: session effects %v, search_path change %v: want the pin of the path in force, and no change", sql, got.Session, got.SearchPath)
	}
	if got := c.ClassifyIn("SET search_path FROM CURRENT", ctx); got.SearchPath != nil {
		t.Errorf("SET search_path FROM CURRENT reports a search_path change %+v", *got.SearchPath)
	}
}
