package classify

import (
	"strings"
	"testing"
)

// A PL/pgSQL body nested past what the analysis reads (its JSON past the decoder's depth, or past
// the walker's) goes to the primary as unknown, with a reason that says it was too deep; one
// nested a little is analysed as usual.
func TestPlpgsqlBodyNestedTooDeeplyIsUnknown(t *testing.T) {
	nested := func(levels int) string {
		return "BEGIN " + strings.Repeat("IF x > 0 THEN ", levels) + "PERFORM 1; " + strings.Repeat("END IF; ", levels) + "RETURN x; END"
	}
	for _, c := range []struct {
		levels int
		want   Access
		detail string
	}{
		{levels: 3, want: Read},
		{levels: 200, want: Write, detail: "PL/pgSQL body nested too deeply to analyse"},
	} {
		data := *testCatalogue().Data()
		data.Functions = append(data.Functions, Function{OID: 990001, Schema: "public", Name: "deep", Language: "plpgsql", Volatility: 'v', Kind: 'f',
			ArgTypes: []uint32{23}, ArgTypeNames: []string{"integer"}, ArgNames: []string{"x"}, Arguments: "x integer", Result: "integer", Source: nested(c.levels)})
		classifier := New(Options{Catalogues: &movingSource{cat: NewCatalogue(data)}})
		got := classifier.ClassifyIn("SELECT deep(1)", &Context{Database: "test", User: "app", SearchPath: []string{"public"}})
		if got.Access != c.want || (c.detail != "" && !strings.Contains(got.Subject+" "+strings.Join(got.Warnings, " "), c.detail)) {
			t.Errorf("%d levels: %v %s %q %v, want %v %q", c.levels, got.Access, got.Reason, got.Subject, got.Warnings, c.want, c.detail)
		}
	}
}
