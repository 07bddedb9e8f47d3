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
}
