package classify

import (
	"slices"
	"testing"
)

// A read verdict names the catalogue names it rests on, through nested calls and views and
// whether or not the analyses were memoised, so that a proxy knows which definition changes a
// standby must have replayed before it runs the read. A write names none.
func TestReadVerdictsNameWhatTheyRestOn(t *testing.T) {
	cat := testCatalogue()
	ctx := &Context{Database: "test", User: "app", SearchPath: []string{"$user", "public", "app"}}
	for _, tc := range []struct {
		sql      string
		include  []string
		write    bool
		restsAll bool
	}{
		{sql: "SELECT ping(3)", include: []string{"ping", "pong"}},
		{sql: "SELECT pure_sql(1)", include: []string{"pure_sql"}},
		{sql: "SELECT * FROM v_plain", include: []string{"v_plain", "t"}},
		{sql: "SELECT 1 FROM t WHERE id = 1", include: []string{"t"}},
		{sql: "SELECT pure_sql(1); SELECT * FROM v_plain", include: []string{"pure_sql", "v_plain", "t"}},
		{sql: "SELECT deep20()", include: []string{"deep20", "deep21", "deep29"}},
		{sql: "/*pgowl:readonly*/ SELECT cfunc(1)", include: []string{"cfunc"}},
		{sql: "SELECT f_report()", write: true},
		{sql: "SELECT pure_sql(1); SELECT f_report()", write: true},
		{sql: "/*pgowl:primary*/ SELECT pure_sql(1)", write: true},
	} {
		// Twice with one classifier: the second finds the function analyses memoised.
		classifier := New(Options{CacheSize: -1})
		for round := range 2 {
			got := classifier.ClassifyWith(tc.sql, ctx, cat)
			if tc.write {
				if got.Access != Write || len(got.RestsOn) != 0 || got.RestsOnAll {
					t.Errorf("%s (round %d): %v resting on %q (all %v); want a write resting on nothing", tc.sql, round, got.Access, got.RestsOn, got.RestsOnAll)
				}
				continue
			}
			if got.Access != Read {
				t.Fatalf("%s (round %d): %v %v %q; want a read", tc.sql, round, got.Access, got.Reason, got.Subject)
			}
			for _, name := range tc.include {
				if !got.RestsOnAll && !slices.Contains(got.RestsOn, name) {
					t.Errorf("%s (round %d): rests on %q; want %q among them", tc.sql, round, got.RestsOn, name)
				}
			}
		}
	}
}

// A read that reaches more names than a verdict lists rests on every name, not on the first few.
func TestReadVerdictOfManyNamesRestsOnEverything(t *testing.T) {
	ctx := &Context{Database: "test", User: "app", SearchPath: []string{"public"}}
	sql := "SELECT 1"
	var functions []Function
	for i := range maxRestsOn + 1 {
		name := "reads_" + itoa(i)
		sql += ", " + name + "()"
		functions = append(functions, Function{OID: uint32(1000 + i), Schema: "public", Name: name, Language: "sql",
			Volatility: 'v', Kind: 'f', Result: "integer", Source: "SELECT 1"})
	}
	cat := NewCatalogue(CatalogueData{Database: "test", Functions: functions})
	got := New(Options{CacheSize: -1}).ClassifyWith(sql, ctx, cat)
	if got.Access != Read || !got.RestsOnAll || len(got.RestsOn) != 0 {
		t.Errorf("a read of %d names: %v, rests on all %v, names %d; want a read resting on all", maxRestsOn+1, got.Access, got.RestsOnAll, len(got.RestsOn))
	}
	merged := Merge([]Effects{{Access: Read, RestsOn: []string{"a"}}, {Access: Read, RestsOnAll: true}})
	if !merged.RestsOnAll || len(merged.RestsOn) != 0 {
		t.Errorf("a unit of a read on a and a read on everything rests on %q (all %v); want all", merged.RestsOn, merged.RestsOnAll)
	}
	merged = Merge([]Effects{{Access: Read, RestsOn: []string{"a"}}, {Access: Read, RestsOn: []string{"b", "a"}}})
	if !slices.Contains(merged.RestsOn, "a") || !slices.Contains(merged.RestsOn, "b") {
		t.Errorf("a unit of reads on a and on b, a rests on %q; want a and b", merged.RestsOn)
	}
}
