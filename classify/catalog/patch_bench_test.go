package catalog

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/pgowl/pgowl/classify"
)

// BenchmarkPatchAddition measures what a session's read of an added object costs to patch in, on
// a real server's catalogue with 200 user functions: replacing the named objects, deriving the
// catalogue and carrying its analyses, as applySessionRead does, for a function, a composite type
// (with its array type) and a view.
func BenchmarkPatchAddition(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, conn := primaryWithFunctions(b, ctx, "f", 200)
	data, _, err := loadData(ctx, conn, "postgres", Overrides{})
	if err != nil {
		b.Fatal(err)
	}
	old := classify.NewCatalogue(*data)
	additions := []struct {
		name   string
		wanted namedReads
		fresh  classify.CatalogueData
	}{
		{"function", namedReads{functions: []string{"added"}}, classify.CatalogueData{Functions: []classify.Function{{OID: 900000, Schema: "public",
			Name: "added", Language: "sql", Volatility: 'v', Kind: 'f', Source: "SELECT 1", Result: "integer"}}}},
		{"type", namedReads{types: []string{"added", "_added"}}, classify.CatalogueData{Types: []classify.Type{
			{OID: 900000, Schema: "public", Name: "added", Kind: 'c'}, {OID: 900001, Schema: "public", Name: "_added", Kind: 'b'}}}},
		{"view", namedReads{relations: []string{"added"}, types: []string{"added", "_added"}}, classify.CatalogueData{
			Views:     []classify.View{{OID: 900000, Schema: "public", Name: "added", Definition: "SELECT 1"}},
			Relations: []classify.Relation{{OID: 900000, Schema: "public", Name: "added", Kind: 'v'}},
			Types:     []classify.Type{{OID: 900001, Schema: "public", Name: "added", Kind: 'c'}, {OID: 900002, Schema: "public", Name: "_added", Kind: 'b'}}}},
	}
	for _, a := range additions {
		b.Run(a.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				patched, delta := patch(old, &a.fresh, a.wanted)
				cat := classify.DeriveCatalogue(old, *patched, delta)
				if keepsAnalyses(old.Data(), &a.fresh, a.wanted, delta) {
					cat.KeepAnalysesFrom(old, a.wanted.names())
				}
			}
		})
	}
}

// BenchmarkPatchAdditionChained measures the same patches as a migration makes them: each adds a
// new object (a new name, a higher OID) to the catalogue the last one derived, on the same real
// server's catalogue with 200 user functions.
func BenchmarkPatchAdditionChained(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, conn := primaryWithFunctions(b, ctx, "f", 200)
	data, _, err := loadData(ctx, conn, "postgres", Overrides{})
	if err != nil {
		b.Fatal(err)
	}
	type addition struct {
		wanted namedReads
		fresh  classify.CatalogueData
	}
	kinds := []struct {
		name string
		make func(i int) addition
	}{
		{"function", func(i int) addition {
			name := fmt.Sprintf("added_%d", i)
			return addition{namedReads{functions: []string{name}}, classify.CatalogueData{Functions: []classify.Function{{OID: uint32(900000 + i),
				Schema: "public", Name: name, Language: "sql", Volatility: 'v', Kind: 'f', Source: "SELECT 1", Result: "integer"}}}}
		}},
		{"type", func(i int) addition {
			name, oid := fmt.Sprintf("added_%d", i), uint32(900000+3*i)
			return addition{namedReads{types: []string{name, "_" + name}}, classify.CatalogueData{Types: []classify.Type{
				{OID: oid, Schema: "public", Name: name, Kind: 'c'}, {OID: oid + 1, Schema: "public", Name: "_" + name, Kind: 'b'}}}}
		}},
		{"view", func(i int) addition {
			name, oid := fmt.Sprintf("added_%d", i), uint32(900000+3*i)
			return addition{namedReads{relations: []string{name}, types: []string{name, "_" + name}}, classify.CatalogueData{
				Views:     []classify.View{{OID: oid, Schema: "public", Name: name, Definition: "SELECT 1"}},
				Relations: []classify.Relation{{OID: oid, Schema: "public", Name: name, Kind: 'v'}},
				Types:     []classify.Type{{OID: oid + 1, Schema: "public", Name: name, Kind: 'c'}, {OID: oid + 2, Schema: "public", Name: "_" + name, Kind: 'b'}}}}
		}},
	}
	for _, kind := range kinds {
		b.Run(kind.name, func(b *testing.B) {
			additions := make([]addition, b.N)
			for i := range additions {
				additions[i] = kind.make(i)
			}
			cat := classify.NewCatalogue(*data)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range additions {
				a := &additions[i]
				patched, delta := patch(cat, &a.fresh, a.wanted)
				next := classify.DeriveCatalogue(cat, *patched, delta)
				if keepsAnalyses(cat.Data(), &a.fresh, a.wanted, delta) {
					next.KeepAnalysesFrom(cat, a.wanted.names())
				}
				cat = next
			}
		})
	}
}
