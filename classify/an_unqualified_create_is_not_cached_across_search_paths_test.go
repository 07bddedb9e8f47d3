package classify

import "testing"

// TestAnUnqualifiedCreateIsNotCachedAcrossSearchPaths: whether an unqualified CREATE makes a
// temporary object depends on the session's search path (pg_temp first), so a verdict taken in one
// session must not answer the same text in a session whose path differs. A CREATE TABLE first
// classified on the default path, then on a path that starts with pg_temp, was answered from the
// cache without its pin.
func TestAnUnqualifiedCreateIsNotCachedAcrossSearchPaths(t *testing.T) {
	plain := &Context{Database: "test", User: "app", SearchPath: []string{"public"}}
	temp := &Context{Database: "test", User: "app", SearchPath: []string{"pg_temp", "public"}}
	for _, sql := range []string{
		"CREATE TABLE scratch (id int)",
		"CREATE VIEW scratch_v AS SELECT 1",
		"CREATE SEQUENCE scratch_s",
		"CREATE TYPE scratch_t AS (a int)",
		"CREATE DOMAIN scratch_d AS int",
		"CREATE FUNCTION scratch_f() RETURNS int LANGUAGE sql AS 'SELECT 1'",
		"SELECT 1 AS n INTO scratch_into",
	} {
		c := New(Options{})
		for i, step := range []struct {
			ctx    *Context
			pinned bool
		}{{plain, false}, {temp, true}, {plain, false}, {temp, true}} {
			got := c.ClassifyIn(sql, step.ctx)
			if pinned := got.Session&SessionTempTable != 0; pinned != step.pinned {
				t.Errorf("%s, classification %d on search_path %v: session %v, want the temporary-object pin %v",
					sql, i+1, step.ctx.SearchPath, got.Session, step.pinned)
			}
		}
	}
	// A qualified name does not depend on the path: its verdict is still cached.
	c := New(Options{})
	c.ClassifyIn("CREATE TYPE pg_temp.kept AS (a int)", plain)
	_, misses := c.CacheStats()
	if got := c.ClassifyIn("CREATE TYPE pg_temp.kept AS (a int)", temp); got.Session&SessionTempTable == 0 {
		t.Errorf("CREATE TYPE pg_temp.kept: session %v, want the temporary-object pin", got.Session)
	}
	if _, after := c.CacheStats(); after != misses {
		t.Error("a CREATE of a qualified name was classified again: its verdict, which no search path changes, was not cached")
	}
}
