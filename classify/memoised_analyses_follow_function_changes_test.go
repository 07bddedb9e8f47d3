package classify

import (
	"math/rand"
	"slices"
	"testing"
)

// memoStatements reach most of testCatalogue's functions and views, directly and through other
// functions, with calls resolved by name, by overload, and through a chain deeper than the limit.
var memoStatements = []string{
	"SELECT f_report()", "SELECT pure_sql(1)", "SELECT over(1)", "SELECT over('x'::text)",
	"SELECT stable_writer()", "SELECT cfunc(1)", "SELECT dyn()", "SELECT ping(3)", "SELECT vars()",
	"SELECT seq()", "SELECT audit_log('x')", "SELECT calls_later()", "SELECT calls_audit()",
	"SELECT deep0()", "SELECT deep5()", "SELECT deep13()", "SELECT deep14()", "SELECT deep15()", "SELECT deep20()",
	"SELECT * FROM v_plain", "SELECT * FROM v_of_v",
}

// memoCatalogueData is testCatalogue's data with two more functions: calls_later calls a function
// that does not exist yet, and calls_audit calls audit_log.
func memoCatalogueData() CatalogueData {
	d := testCatalogue().data
	d.Functions = append(slices.Clone(d.Functions),
		Function{OID: 400, Schema: "public", Name: "calls_later", Language: "sql", Volatility: 'v', Kind: 'f', Result: "integer", Source: "SELECT later(1)"},
		Function{OID: 401, Schema: "public", Name: "calls_audit", Language: "plpgsql", Volatility: 'v', Kind: 'f', Result: "integer",
			Source: "BEGIN PERFORM audit_log('x'); RETURN 1; END"})
	return d
}

// verdictOf is what must not depend on what was analysed before: the access and its reason.
type verdictOf struct {
	access Access
	reason Reason
}

// freshVerdicts classifies each statement alone, with a catalogue of data and nothing memoised.
func freshVerdicts(t *testing.T, data CatalogueData) map[string]verdictOf {
	t.Helper()
	want := map[string]verdictOf{}
	for _, sql := range memoStatements {
		e := New(Options{}).ClassifyWith(sql, &Context{Database: "test"}, NewCatalogue(data))
		want[sql] = verdictOf{e.Access, e.Reason}
	}
	return want
}

// A catalogue derived after a change to functions keeps only the analyses that do not rest on the
// changed names: every statement then gets the verdict a fresh catalogue gives, whichever order the
// statements ran in before and after, while analyses of unrelated functions are kept.
func TestMemoisedAnalysesFollowFunctionChanges(t *testing.T) {
	changes := []struct {
		name   string
		change func(*CatalogueData)
	}{
		{"audit_log", func(d *CatalogueData) { setSource(d, "audit_log", "SELECT 1") }},
		{"audit_log", func(d *CatalogueData) { setSource(d, "audit_log", "INSERT INTO audit VALUES ($1)") }},
		{"later", func(d *CatalogueData) {
			d.Functions = append(d.Functions, Function{OID: 500, Schema: "public", Name: "later", Language: "sql", Volatility: 'v',
				Kind: 'f', ArgTypes: []uint32{23}, ArgTypeNames: []string{"integer"}, Arguments: "x integer", Result: "integer", Source: "DELETE FROM t; SELECT 1"})
		}},
		{"over", func(d *CatalogueData) { setSource(d, "over", "SELECT 2") }}, // the first overload (integer) now; both named over
		{"deep10", func(d *CatalogueData) { setSource(d, "deep10", "SELECT 1") }},
		{"deep10", func(d *CatalogueData) { setSource(d, "deep10", "SELECT deep11()") }},
		{"pong", func(d *CatalogueData) { setSource(d, "pong", "DELETE FROM t; SELECT 1") }},
		{"pure_sql", func(d *CatalogueData) { setSource(d, "pure_sql", "SELECT $1 + 2") }},
	}
	rng := rand.New(rand.NewSource(7))
	for round := 0; round < 20; round++ {
		data := memoCatalogueData()
		cat := NewCatalogue(data)
		kept := 0
		for step, ch := range changes {
			order := slices.Clone(memoStatements)
			rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			for _, sql := range order[:rng.Intn(len(order)+1)] { // warm some of the memo, in some order
				New(Options{}).ClassifyWith(sql, &Context{Database: "test"}, cat)
			}
			next := data
			next.Functions = slices.Clone(data.Functions)
			ch.change(&next)
			derived := DeriveCatalogue(cat, next, deltaBetween(cat.Data(), &next))
			kept += derived.KeepAnalysesFrom(cat, []string{ch.name})
			want := freshVerdicts(t, next)
			rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			for _, sql := range order {
				e := New(Options{}).ClassifyWith(sql, &Context{Database: "test"}, derived)
				if got := (verdictOf{e.Access, e.Reason}); got != want[sql] {
					t.Fatalf("round %d, after changing %s (step %d): %s is %v/%v, a fresh catalogue says %v/%v (%s)",
						round, ch.name, step, sql, got.access, got.reason, want[sql].access, want[sql].reason, e.Subject)
				}
			}
			data, cat = next, derived
		}
		if kept == 0 {
			t.Fatalf("round %d: no memoised analysis was kept across %d unrelated changes", round, len(changes))
		}
	}
}

// The same statements, classified in any order on one catalogue, get the verdicts they get alone:
// in particular a function first reached too deep is not too deep from a shallower call.
func TestMemoisedDepthBoundsDoNotDependOnOrder(t *testing.T) {
	data := memoCatalogueData()
	want := freshVerdicts(t, data)
	rng := rand.New(rand.NewSource(11))
	for round := 0; round < 50; round++ {
		cat := NewCatalogue(data)
		order := slices.Clone(memoStatements)
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, sql := range order {
			e := New(Options{}).ClassifyWith(sql, &Context{Database: "test"}, cat)
			if got := (verdictOf{e.Access, e.Reason}); got != want[sql] {
				t.Fatalf("round %d, order %q: %s is %v/%v, alone %v/%v", round, order, sql, got.access, got.reason, want[sql].access, want[sql].reason)
			}
		}
	}
	if want["SELECT deep0()"].reason != ReasonNestingTooDeep || want["SELECT deep20()"].access != Read {
		t.Fatalf("the chain no longer spans the depth limit: deep0 %v, deep20 %v", want["SELECT deep0()"], want["SELECT deep20()"])
	}
}

func setSource(d *CatalogueData, name, source string) {
	for i := range d.Functions {
		if d.Functions[i].Name == name {
			d.Functions[i].Source = source
			return
		}
	}
	panic("no function " + name)
}
