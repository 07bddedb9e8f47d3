package classify

import (
	"testing"
)

// PrepareUses analyses a function or view taken into a catalogue as the statements that use it
// will, and memoises the result there: a use then finds it done. Its verdicts are those of the
// same use classified on the same catalogue without it, for a function that reads, one that writes
// and one that calls the writer.
func TestPreparedUsesAreMemoisedAndChangeNoVerdict(t *testing.T) {
	ctx := &Context{Database: "test", User: "app", SearchPath: []string{"public"}}
	added := []Function{
		{OID: 900001, Schema: "public", Name: "prep_reads", Kind: 'f', Language: "sql", Volatility: 's',
			ArgTypes: []uint32{23}, ArgTypeNames: []string{"integer"}, ArgNames: []string{"x"}, Arguments: "x integer", Result: "integer",
			Source: " SELECT x + 1 "},
		{OID: 900002, Schema: "public", Name: "prep_writes", Kind: 'f', Language: "plpgsql", Volatility: 'v',
			ArgTypes: []uint32{23}, ArgTypeNames: []string{"integer"}, ArgNames: []string{"x"}, Arguments: "x integer", Result: "integer",
			Source: "\nBEGIN\n  PERFORM nextval('s');\n  RETURN x;\nEND\n"},
		{OID: 900003, Schema: "public", Name: "prep_calls_writer", Kind: 'f', Language: "sql", Volatility: 'v',
			ArgTypes: []uint32{23}, ArgTypeNames: []string{"integer"}, ArgNames: []string{"x"}, Arguments: "x integer", Result: "integer",
			Source: " SELECT prep_writes(x) "},
	}
	derive := func() *Catalogue {
		base := testCatalogue()
		data := *base.Data()
		data.Functions = base.AppendedFunctions(added)
		return DeriveCatalogue(base, data, &CatalogueDelta{Parts: CatalogueParts{Functions: true}, AddedFunctions: added})
	}
	prepared, plain := derive(), derive()
	c := New(Options{})
	c.PrepareUses(prepared, &CatalogueData{Functions: added}, ctx)
	for _, f := range added {
		found := false
		prepared.memo.Range(func(key, _ any) bool {
			if key.(memoKey).oid == f.OID {
				found = true
			}
			return !found
		})
		if !found {
			t.Errorf("%s: no analysis memoised", f.Name)
		}
	}
	for _, sql := range []string{"SELECT prep_reads(1)", "SELECT prep_writes(1)", "SELECT prep_calls_writer(1)"} {
		got := New(Options{Catalogues: &movingSource{cat: prepared}}).ClassifyIn(sql, ctx)
		want := New(Options{Catalogues: &movingSource{cat: plain}}).ClassifyIn(sql, ctx)
		if got.Access != want.Access || got.Reason != want.Reason || got.Subject != want.Subject {
			t.Errorf("%s: %v %v (%s) with the uses prepared, %v %v (%s) without", sql, got.Access, got.Reason, got.Subject, want.Access, want.Reason, want.Subject)
		}
	}
	if got := New(Options{Catalogues: &movingSource{cat: prepared}}).ClassifyIn("SELECT prep_calls_writer(1)", ctx); got.Access != Write {
		t.Errorf("a call of a function that calls a writer: %v, want a write", got.Access)
	}
}
