package classify

import (
	"slices"
	"testing"

	pg_query "github.com/pganalyze/pg_query_go/v5"
)

// The search path's mark for CREATEs that make temporary objects is an element of its own: a
// schema whose name ends in pg_temp is neither cut short nor taken for it.
func TestTempCreationMarkIsAnElementOfItsOwn(t *testing.T) {
	for _, tc := range []struct {
		schemas   []string
		wantPath  []string
		wantsTemp bool
	}{
		{[]string{"pg_temp", "public"}, []string{"pg_catalog", "public"}, true},
		{[]string{"$user", "pg_temp", "public"}, []string{"pg_catalog", "app", "public"}, true},
		{[]string{"nosuch", "pg_temp"}, []string{"pg_catalog", "nosuch"}, true}, // nosuch may not exist
		{[]string{"public", "pg_temp"}, []string{"pg_catalog", "public"}, false},
		{[]string{"pg_catalog", "pg_temp"}, []string{"pg_catalog"}, false},
		{[]string{"app_pg_temp"}, []string{"pg_catalog", "app_pg_temp"}, false},
		{[]string{"public", "xpg_temp"}, []string{"pg_catalog", "public", "xpg_temp"}, false},
		{[]string{"pg_temp", "app_pg_temp"}, []string{"pg_catalog", "app_pg_temp"}, true},
	} {
		e := pathEnv("db", "app", nil, tc.schemas)
		if !slices.Equal(e.path, tc.wantPath) || e.createsInTemp != tc.wantsTemp {
			t.Errorf("search_path %q: lookup path %q, creates in pg_temp %v; want %q, %v", tc.schemas, e.path, e.createsInTemp, tc.wantPath, tc.wantsTemp)
		}
		again := e.withPath(tc.schemas) // a view's stored path goes through setPath once more
		if !slices.Equal(again.path, tc.wantPath) {
			t.Errorf("search_path %q set again: lookup path %q; want %q", tc.schemas, again.path, tc.wantPath)
		}
	}
}

// CatalogueChanges.Definitions tells a change of what verdicts read (functions, views, types) from
// tables and sequences created or dropped, in one statement and in a string or transaction of
// several (where Created, one statement's, is gone).
func TestDefinitionChangesAreToldFromTableChanges(t *testing.T) {
	c := New(Options{})
	for _, tc := range []struct {
		sql  string
		want bool
	}{
		{"CREATE TABLE t_def (a int)", false},
		{"DROP TABLE t_def", false},
		{"CREATE SEQUENCE s_def", false},
		{"CREATE TABLE t_def (a int); DROP TABLE t_def", false},
		{"CREATE OR REPLACE VIEW v_def AS SELECT 1", true},
		{"BEGIN; CREATE OR REPLACE VIEW v_def AS SELECT 1; COMMIT", true},
		{"CREATE OR REPLACE VIEW v_def AS SELECT 1; SELECT 1", true},
		{"CREATE FUNCTION f_def() RETURNS int LANGUAGE sql AS 'SELECT 1'", true},
		{"CREATE TYPE ty_def AS (a int)", true},
		{"DROP VIEW v_def", true},
		{"CREATE TABLE t_def (a int); CREATE TYPE ty_def AS (a int)", true},
	} {
		e := c.Classify(tc.sql)
		if !e.CatalogueChange || e.CatalogueChanges == nil {
			t.Errorf("%s: no catalogue change", tc.sql)
			continue
		}
		if got := e.CatalogueChanges.Definitions || e.CatalogueChanges.Everything; got != tc.want {
			t.Errorf("%s: changes definitions %v; want %v (%+v)", tc.sql, got, tc.want, e.CatalogueChanges)
		}
	}
}

// In a body, an unknown effect reached through a call wins over one of the body's own of the same
// rank, whichever comes first: runEffect takes only the body's own at a STABLE declaration's word,
// so the order of two statements must not decide whether a VOLATILE callee is seen.
func TestBodyKeepsTheVisibleCallsUnknownOverItsOwn(t *testing.T) {
	own := verdict{access: Write, reason: ReasonUnknownEffect, subject: "a statement the analysis cannot read"}
	call := verdict{access: Write, reason: ReasonUnknownEffect, subject: "c() (effect unknown)", chain: []string{"c()"}, detail: "internal function, VOLATILE"}
	stmts := []*pg_query.Node{{}, {}}
	for _, order := range [][]verdict{{own, call}, {call, own}} {
		r := bodyResult(stmts, order)
		if r.reason != ReasonUnknownEffect || !slices.Equal(r.chain, []string{"c()"}) {
			t.Errorf("body of %q then %q: reason %v, chain %q; want UNKNOWN_EFFECT through c()", order[0].subject, order[1].subject, r.reason, r.chain)
		}
	}
}
