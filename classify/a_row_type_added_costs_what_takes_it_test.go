package classify

import (
	"fmt"
	"testing"
)

// BenchmarkRowTypeAddedBesideManyFunctions derives, one after another, catalogues that each add a
// composite type (a table, view or type made by a migration) to a database of 200 or 20000
// functions that take integer: what finding the functions the new row type makes callable in
// attribute notation costs. It should not grow with the functions that do not take the type.
func BenchmarkRowTypeAddedBesideManyFunctions(b *testing.B) {
	for _, functions := range []int{200, 20000} {
		b.Run(fmt.Sprintf("functions=%d", functions), func(b *testing.B) {
			var data CatalogueData
			for i := range functions {
				data.Functions = append(data.Functions, Function{OID: uint32(20000 + i), Schema: "public", Name: "f_" + itoa(i),
					Language: "sql", Kind: 'f', ArgTypes: []uint32{23}})
			}
			cat := NewCatalogue(data)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				d := *cat.Data()
				t := Type{OID: uint32(900000 + i), Schema: "public", Name: "t_" + itoa(i), Kind: 'c'}
				d.Types = cat.AppendedTypes([]Type{t})
				cat = DeriveCatalogue(cat, d, &CatalogueDelta{Parts: CatalogueParts{Types: true}, AddedTypes: []Type{t}})
			}
		})
	}
}
