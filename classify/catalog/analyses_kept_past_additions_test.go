package catalog

import (
	"testing"

	"github.com/pgowl/pgowl/classify"
)

// Memoised analyses are carried past a read of changed names only when the relations and types it
// reads were added or dropped, not changed: never past a change to something held under such a
// name (in any schema: its row, or a composite type's fields that casts convert; a drop and create
// under the same schema and name), an unlogged or
// row-secured relation, a domain, or anything in pg_catalog (whose qualified names analyses do not
// record). A name that objects of other schemas hold, unchanged or dropped since, keeps them: a
// migration that repeats in a new schema the names of another.
func TestAnalysesAreKeptOnlyPastPlainAdditions(t *testing.T) {
	old := &classify.CatalogueData{
		Relations: []classify.Relation{{Schema: "app", Name: "t", Kind: 'r', OID: 10}, {Schema: "app", Name: "v", Kind: 'v', OID: 11}},
		Views:     []classify.View{{Schema: "app", Name: "v", OID: 11}},
		Types:     []classify.Type{{Schema: "app", Name: "t", Kind: 'c', OID: 12}, {Schema: "other", Name: "mood", Kind: 'e', OID: 13}},
	}
	view := func(name string) *classify.CatalogueData {
		return &classify.CatalogueData{Relations: []classify.Relation{{Schema: "app", Name: name, Kind: 'v', OID: 20}},
			Views: []classify.View{{Schema: "app", Name: name, OID: 20}}}
	}
	tests := []struct {
		what   string
		wanted namedReads
		fresh  *classify.CatalogueData
		keep   bool
	}{
		{"functions only", namedReads{functions: []string{"f"}}, &classify.CatalogueData{}, true},
		{"a new view", namedReads{relations: []string{"w"}, types: []string{"w", "_w"}}, view("w"), true},
		{"a new composite type", namedReads{types: []string{"c", "_c"}},
			&classify.CatalogueData{Types: []classify.Type{{Schema: "app", Name: "c", Kind: 'c', OID: 21}, {Schema: "app", Name: "_c", Kind: 'b', OID: 22}}}, true},
		{"a view replaced", namedReads{relations: []string{"v"}, types: []string{"v", "_v"}}, view("v"), false},
		{"a table dropped and a view made under its name", namedReads{relations: []string{"t"}}, view("t"), false},
		{"a view named as an unchanged table of another schema", namedReads{relations: []string{"t"}},
			&classify.CatalogueData{Relations: []classify.Relation{{Schema: "app", Name: "t", Kind: 'r', OID: 10}, {Schema: "next", Name: "t", Kind: 'v', OID: 20}},
				Views: []classify.View{{Schema: "next", Name: "t", OID: 20}}}, true},
		{"a type dropped and another made under its name", namedReads{types: []string{"mood"}},
			&classify.CatalogueData{Types: []classify.Type{{Schema: "app", Name: "mood", Kind: 'e', OID: 23}}}, true},
		{"a type named as an unchanged type of another schema", namedReads{types: []string{"mood"}},
			&classify.CatalogueData{Types: []classify.Type{{Schema: "other", Name: "mood", Kind: 'e', OID: 13}, {Schema: "app", Name: "mood", Kind: 'e', OID: 23}}}, true},
		{"a type of another schema changed under its OID", namedReads{types: []string{"mood"}},
			&classify.CatalogueData{Types: []classify.Type{{Schema: "other", Name: "mood", Kind: 'd', Base: 25, OID: 13}}}, false},
		{"a composite type of another schema whose fields casts convert changed", namedReads{types: []string{"t"}, fieldCasts: []string{"t"}},
			&classify.CatalogueData{Types: []classify.Type{{Schema: "app", Name: "t", Kind: 'c', OID: 12}, {Schema: "next", Name: "t", Kind: 'c', OID: 28}},
				FieldCasts: []classify.FieldCast{{Composite: 12, Target: 30}}}, false},
		{"a composite type named as an unchanged one of another schema", namedReads{types: []string{"t"}, fieldCasts: []string{"t"}},
			&classify.CatalogueData{Types: []classify.Type{{Schema: "app", Name: "t", Kind: 'c', OID: 12}, {Schema: "next", Name: "t", Kind: 'c', OID: 28}}}, true},
		{"a policy on a held table", namedReads{relations: []string{"t"}, types: []string{"t", "_t"}},
			&classify.CatalogueData{Relations: []classify.Relation{{Schema: "app", Name: "t", Kind: 'r', OID: 10, ReadPolicy: "(true)"}}}, false},
		{"a new unlogged table", namedReads{relations: []string{"u"}},
			&classify.CatalogueData{Relations: []classify.Relation{{Schema: "app", Name: "u", Kind: 'r', OID: 24, Unlogged: true}}}, false},
		{"a new row-secured table", namedReads{relations: []string{"r"}},
			&classify.CatalogueData{Relations: []classify.Relation{{Schema: "app", Name: "r", Kind: 'r', OID: 25, ReadPolicy: "(true)"}}}, false},
		{"a new type in pg_catalog", namedReads{types: []string{"fresh"}},
			&classify.CatalogueData{Types: []classify.Type{{Schema: "pg_catalog", Name: "fresh", Kind: 'c', OID: 27}}}, false},
		{"a new domain", namedReads{types: []string{"pos", "_pos"}},
			&classify.CatalogueData{Types: []classify.Type{{Schema: "app", Name: "pos", Kind: 'd', Base: 23, OID: 26}}}, false},
	}
	for _, tc := range tests {
		_, delta := patch(classify.NewCatalogue(*old), tc.fresh, tc.wanted)
		if got := keepsAnalyses(old, tc.fresh, tc.wanted, delta); got != tc.keep {
			t.Errorf("%s: keeps analyses %v, want %v", tc.what, got, tc.keep)
		}
	}
}
