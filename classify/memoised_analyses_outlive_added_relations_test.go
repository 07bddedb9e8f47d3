package classify

import (
	"slices"
	"testing"
)

// addedStatements use, by name, a view and a type that the catalogue does not hold yet, and
// functions that do not use them.
var addedStatements = []string{
	"SELECT reads_later()", "SELECT casts_later()", "SELECT * FROM later_v", "SELECT (ROW(1))::later_t",
	"SELECT f_report()", "SELECT pure_sql(1)", "SELECT deep14()", "SELECT * FROM v_plain",
}

// addedCatalogueData is testCatalogue's data with reads_later (reads the view later_v, not there
// yet), casts_later (casts to the type later_t, not there yet) and a cast to a type 5000 that
// runs audit_log, which writes.
func addedCatalogueData() CatalogueData {
	d := testCatalogue().data
	d.Functions = append(slices.Clone(d.Functions),
		Function{OID: 410, Schema: "public", Name: "reads_later", Language: "sql", Volatility: 'v', Kind: 'f', Result: "bigint",
			Source: "SELECT count(*) FROM later_v"},
		Function{OID: 411, Schema: "public", Name: "casts_later", Language: "plpgsql", Volatility: 'v', Kind: 'f', Result: "integer",
			Source: "BEGIN PERFORM (ROW(1))::later_t; RETURN 1; END"})
	d.Casts = append(slices.Clone(d.Casts), Cast{Source: 25, Target: 5000, Function: 100})
	d.Types = append(slices.Clone(d.Types), Type{OID: 5000, Schema: "public", Name: "logged_text", Kind: 'b'})
	return d
}

// verdictsOf classifies statements alone with a catalogue of data and nothing memoised.
func verdictsOf(data CatalogueData, statements []string) map[string]verdictOf {
	out := map[string]verdictOf{}
	for _, sql := range statements {
		e := New(Options{}).ClassifyWith(sql, &Context{Database: "test"}, NewCatalogue(data))
		out[sql] = verdictOf{e.Access, e.Reason}
	}
	return out
}

// A catalogue derived after a view and a composite type were added under new names keeps the
// analyses that do not rest on those names, and drops those that looked the names up (in vain):
// a function reading the view, and one casting to the type, get the verdict a fresh catalogue
// gives, while unrelated analyses are carried.
func TestMemoisedAnalysesOutliveAddedViewsAndTypes(t *testing.T) {
	before := addedCatalogueData()
	cat := NewCatalogue(before)
	for _, sql := range addedStatements {
		New(Options{}).ClassifyWith(sql, &Context{Database: "test"}, cat)
	}
	after := before
	after.Views = append(slices.Clone(before.Views), View{OID: 303, Schema: "public", Name: "later_v", Definition: "SELECT nextval('public.s'::regclass) AS n"})
	after.Relations = append(slices.Clone(before.Relations), Relation{Schema: "public", Name: "later_v", Kind: 'v', OID: 303})
	after.Types = append(slices.Clone(before.Types), Type{OID: 6000, Schema: "public", Name: "later_t", Kind: 'c'}, Type{OID: 6001, Schema: "public", Name: "_later_t", Kind: 'b'})
	after.FieldCasts = append(slices.Clone(before.FieldCasts), FieldCast{Composite: 6000, Target: 5000})
	derived := DeriveCatalogue(cat, after, deltaBetween(cat.Data(), &after))
	if kept := derived.KeepAnalysesFrom(cat, []string{"later_v", "later_t", "_later_t"}); kept == 0 {
		t.Fatal("no analysis was carried past the addition of a view and a type")
	}
	was, want := verdictsOf(before, addedStatements), verdictsOf(after, addedStatements)
	for _, sql := range []string{"SELECT reads_later()", "SELECT casts_later()"} {
		if was[sql] == want[sql] || want[sql].access != Write {
			t.Fatalf("%s: %v before the addition and %v after: the case no longer tells a stale analysis from a fresh one", sql, was[sql], want[sql])
		}
	}
	for _, sql := range addedStatements {
		e := New(Options{}).ClassifyWith(sql, &Context{Database: "test"}, derived)
		if got := (verdictOf{e.Access, e.Reason}); got != want[sql] {
			t.Errorf("%s after the addition is %v/%v, a fresh catalogue says %v/%v (%s)", sql, got.access, got.reason, want[sql].access, want[sql].reason, e.Subject)
		}
	}
}

// A view added under the name of another schema's view, earlier in the search_path, drops the
// analyses that resolved the name to the other view: the catalogue keeps analyses past a name
// that objects of other schemas hold unchanged (catalog's keepsAnalyses), which holds only
// because an analysis depends on every name it resolved, found in any schema.
func TestMemoisedAnalysesDropWhenAnAddedViewShadowsAnotherSchemas(t *testing.T) {
	before := addedCatalogueData()
	before.Views = append(slices.Clone(before.Views), View{OID: 304, Schema: "public", Name: "shadowed", Definition: "SELECT 1 AS n"})
	before.Relations = append(slices.Clone(before.Relations), Relation{Schema: "public", Name: "shadowed", Kind: 'v', OID: 304})
	before.Functions = append(slices.Clone(before.Functions), Function{OID: 412, Schema: "public", Name: "reads_shadowed", Language: "sql",
		Volatility: 'v', Kind: 'f', Result: "bigint", Source: "SELECT count(*) FROM shadowed"})
	ctx := &Context{Database: "test", SearchPath: []string{"app", "public"}}
	statements := []string{"SELECT reads_shadowed()", "SELECT pure_sql(1)"}
	cat := NewCatalogue(before)
	for _, sql := range statements {
		New(Options{}).ClassifyWith(sql, ctx, cat)
	}
	after := before
	after.Views = append(slices.Clone(before.Views), View{OID: 305, Schema: "app", Name: "shadowed", Definition: "SELECT nextval('public.s'::regclass) AS n"})
	after.Relations = append(slices.Clone(before.Relations), Relation{Schema: "app", Name: "shadowed", Kind: 'v', OID: 305})
	derived := DeriveCatalogue(cat, after, deltaBetween(cat.Data(), &after))
	if kept := derived.KeepAnalysesFrom(cat, []string{"shadowed", "_shadowed"}); kept == 0 {
		t.Fatal("no analysis was carried past the addition of a view")
	}
	for _, sql := range statements {
		fresh := New(Options{}).ClassifyWith(sql, ctx, NewCatalogue(after))
		got := New(Options{}).ClassifyWith(sql, ctx, derived)
		if got.Access != fresh.Access || got.Reason != fresh.Reason {
			t.Errorf("%s after the addition is %v/%v, a fresh catalogue says %v/%v (%s)", sql, got.Access, got.Reason, fresh.Access, fresh.Reason, got.Subject)
		}
	}
	if was := New(Options{}).ClassifyWith("SELECT reads_shadowed()", ctx, cat); was.Access != Read {
		t.Fatalf("before the addition reads_shadowed() is %v: the case no longer tells a stale analysis from a fresh one", was.Access)
	}
	if now := New(Options{}).ClassifyWith("SELECT reads_shadowed()", ctx, NewCatalogue(after)); now.Access != Write {
		t.Fatalf("a fresh catalogue says reads_shadowed() is %v after the addition: the case no longer tells a stale analysis from a fresh one", now.Access)
	}
}
