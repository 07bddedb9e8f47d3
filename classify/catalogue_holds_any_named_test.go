package classify

import "testing"

// HoldsAnyNamed finds an object of a name in any schema, of the catalogue it was built from and of
// the objects patches added since, in schemas new to the catalogue too, and no longer once the
// last object of the name was taken out; a patch skips looking through a part when it says no.
func TestHoldsAnyNamedFollowsPatchesIntoNewSchemas(t *testing.T) {
	base := NewCatalogue(CatalogueData{
		Functions: []Function{{OID: 100, Schema: "public", Name: "total", Language: "sql", Kind: 'f'}},
		Relations: []Relation{{OID: 200, Schema: "public", Name: "orders", Kind: 'r'}, {OID: 201, Schema: "public", Name: "recent", Kind: 'v'}},
		Views:     []View{{OID: 201, Schema: "public", Name: "recent", Definition: "SELECT 1"}},
		Types:     []Type{{OID: 300, Schema: "public", Name: "money_amount", Kind: 'd', Base: 23}},
	})
	expect := func(cat *Catalogue, part NamedPart, name string, want bool) {
		t.Helper()
		if got := cat.HoldsAnyNamed(part, []string{"unrelated", name}); got != want {
			t.Errorf("HoldsAnyNamed(%d, %q) = %v, want %v", part, name, got, want)
		}
	}
	expect(base, FunctionNames, "total", true)
	expect(base, FunctionNames, "orders", false)
	expect(base, RelationNames, "orders", true)
	expect(base, ViewNames, "recent", true)
	expect(base, ViewNames, "orders", false)
	expect(base, TypeNames, "money_amount", true)
	expect(base, TypeNames, "total", false)

	added := &CatalogueDelta{Parts: CatalogueParts{Functions: true, Relations: true, Types: true},
		AddedFunctions: []Function{{OID: 400, Schema: "billing", Name: "invoice_total", Language: "sql", Kind: 'f'}},
		AddedViews:     []View{{OID: 401, Schema: "billing", Name: "open_invoices", Definition: "SELECT 1"}},
		AddedRelations: []Relation{{OID: 401, Schema: "billing", Name: "open_invoices", Kind: 'v'}},
		AddedTypes:     []Type{{OID: 402, Schema: "billing", Name: "invoice_state", Kind: 'e'}},
	}
	data := *base.Data()
	data.Functions = append(append([]Function(nil), data.Functions...), added.AddedFunctions...)
	data.Views = append(append([]View(nil), data.Views...), added.AddedViews...)
	data.Relations = append(append([]Relation(nil), data.Relations...), added.AddedRelations...)
	data.Types = append(append([]Type(nil), data.Types...), added.AddedTypes...)
	withBilling := DeriveCatalogue(base, data, added)
	expect(withBilling, FunctionNames, "invoice_total", true)
	expect(withBilling, ViewNames, "open_invoices", true)
	expect(withBilling, RelationNames, "open_invoices", true)
	expect(withBilling, TypeNames, "invoice_state", true)
	expect(withBilling, FunctionNames, "total", true)
	expect(base, FunctionNames, "invoice_total", false) // the catalogue derived from is not changed

	removed := &CatalogueDelta{Parts: CatalogueParts{Functions: true}, RemovedFunctions: added.AddedFunctions}
	data.Functions = data.Functions[:1]
	withoutInvoiceTotal := DeriveCatalogue(withBilling, data, removed)
	expect(withoutInvoiceTotal, FunctionNames, "invoice_total", false)
	expect(withoutInvoiceTotal, TypeNames, "invoice_state", true)
}
