package classify

import (
	"fmt"
	"slices"
	"testing"
)

// ChangedDefinitions names what a verdict reads that two catalogues hold differently, and leaves
// out what a standby within the lag limit may lack without running another definition: tables and
// sequences only added or dropped, with their row types, and OIDs.
func TestChangedDefinitionsLeaveOutPlainTablesAndOIDs(t *testing.T) {
	base := CatalogueData{
		Database: "app",
		Functions: []Function{
			{OID: 10, Schema: "public", Name: "f", Language: "sql", Volatility: 'v', Kind: 'f', Source: "SELECT 1", ArgTypeNames: []string{"integer"}},
			{OID: 11, Schema: "public", Name: "g", Language: "sql", Volatility: 's', Kind: 'f', Source: "SELECT 2"},
		},
		Views:     []View{{OID: 20, Schema: "public", Name: "v", Definition: "SELECT 1"}},
		Relations: []Relation{{Schema: "public", Name: "t", Kind: 'r', OID: 30}, {Schema: "public", Name: "v", Kind: 'v', OID: 20}},
		Types:     []Type{{OID: 31, Schema: "public", Name: "t", Kind: 'c'}, {OID: 32, Schema: "public", Name: "_t", Kind: 'b'}},
	}
	with := func(change func(d *CatalogueData)) *Catalogue {
		d := base
		d.Functions = slices.Clone(base.Functions)
		d.Views = slices.Clone(base.Views)
		d.Relations = slices.Clone(base.Relations)
		d.Types = slices.Clone(base.Types)
		change(&d)
		return NewCatalogue(d)
	}
	old := NewCatalogue(base)
	// functionsAdded adds n functions of new names, and added lists those names sorted.
	functionsAdded := func(n int) func(d *CatalogueData) {
		return func(d *CatalogueData) {
			for i := range n {
				d.Functions = append(d.Functions, Function{OID: uint32(500 + i), Schema: "public", Name: "m_" + itoa(i), Language: "sql", Kind: 'f'})
			}
		}
	}
	added := func(n int) []string {
		var names []string
		for i := range n {
			names = append(names, "m_"+itoa(i))
		}
		slices.Sort(names)
		return names
	}
	for _, tc := range []struct {
		name   string
		change func(d *CatalogueData)
		among  []string
		want   []string
		all    bool
	}{
		{name: "nothing", change: func(d *CatalogueData) {}},
		{name: "a stand-in OID replaced by the real one", change: func(d *CatalogueData) { d.Functions[0].OID = 99 }},
		{name: "a body replaced", change: func(d *CatalogueData) { d.Functions[1].Source = "SELECT 3" }, want: []string{"g"}},
		{name: "volatility", change: func(d *CatalogueData) { d.Functions[0].Volatility = 's' }, want: []string{"f"}},
		{name: "an overload added", change: func(d *CatalogueData) {
			d.Functions = append(d.Functions, Function{OID: 12, Schema: "public", Name: "f", Language: "sql", Kind: 'f', ArgTypeNames: []string{"text"}})
		}, want: []string{"f"}},
		{name: "a function dropped", change: func(d *CatalogueData) { d.Functions = d.Functions[:1] }, want: []string{"g"}},
		{name: "a view replaced", change: func(d *CatalogueData) { d.Views[0].Definition = "SELECT 2" }, want: []string{"v"}},
		{name: "a table added with its row types", change: func(d *CatalogueData) {
			d.Relations = append(d.Relations, Relation{Schema: "public", Name: "u", Kind: 'r'})
			d.Types = append(d.Types, Type{Schema: "public", Name: "u", Kind: 'c'}, Type{Schema: "public", Name: "_u", Kind: 'b'})
		}},
		{name: "a table dropped", change: func(d *CatalogueData) { d.Relations = d.Relations[1:]; d.Types = nil }},
		{name: "an unlogged table added", change: func(d *CatalogueData) {
			d.Relations = append(d.Relations, Relation{Schema: "public", Name: "u", Kind: 'r', Unlogged: true})
		}, want: []string{"u"}},
		{name: "a read policy on a table", change: func(d *CatalogueData) { d.Relations[0].ReadPolicy = "p" }, want: []string{"t"}},
		{name: "a table turned into a view", change: func(d *CatalogueData) {
			d.Relations[0].Kind = 'v'
			d.Views = append(d.Views, View{Schema: "public", Name: "t", Definition: "SELECT 1"})
		}, want: []string{"t"}},
		{name: "a domain added", change: func(d *CatalogueData) {
			d.Types = append(d.Types, Type{Schema: "public", Name: "positive", Kind: 'd', Base: 23, Check: "VALUE > 0"})
		}, want: []string{"positive"}},
		{name: "only the names read are compared", change: func(d *CatalogueData) {
			d.Functions[0].Source, d.Functions[1].Source = "SELECT 5", "SELECT 6"
		}, among: []string{"g"}, want: []string{"g"}},
		{name: "as many functions added as a change names", change: functionsAdded(maxChangedNames), want: added(maxChangedNames)},
		{name: "one more function added than a change names", change: functionsAdded(maxChangedNames + 1), all: true},
		{name: "an operator added", change: func(d *CatalogueData) {
			d.Operators = append(d.Operators, Operator{Schema: "public", Name: "+++", Function: 10})
		}, all: true},
	} {
		names, all := ChangedDefinitions(old, with(tc.change), tc.among)
		slices.Sort(names)
		if all != tc.all || !slices.Equal(names, tc.want) {
			t.Errorf("%s: names %q, all %v; want %q, %v", tc.name, names, all, tc.want, tc.all)
		}
		// The same comparison as a read of those names in a database large enough that they are
		// looked up in the indexes rather than the lists walked.
		padded := func(d CatalogueData) *Catalogue {
			for i := range 400 { // more objects than keys of the names read: the indexes are used
				d.Functions = append(slices.Clip(d.Functions), Function{OID: uint32(1000 + i), Schema: "pad", Name: "p_" + itoa(i), Language: "sql", Kind: 'f'})
			}
			return NewCatalogue(d)
		}
		changed := base
		changed.Functions, changed.Views = slices.Clone(base.Functions), slices.Clone(base.Views)
		changed.Relations, changed.Types = slices.Clone(base.Relations), slices.Clone(base.Types)
		tc.change(&changed)
		among := tc.among
		if among == nil {
			among = namesIn(base, changed)
		}
		names, all = ChangedDefinitions(padded(base), padded(changed), among)
		slices.Sort(names)
		if all != tc.all || !slices.Equal(names, tc.want) {
			t.Errorf("%s, read by name: names %q, all %v; want %q, %v", tc.name, names, all, tc.want, tc.all)
		}
	}
}

// namesIn lists the names of the objects either catalogue data holds.
func namesIn(datas ...CatalogueData) []string {
	var names []string
	for _, d := range datas {
		for i := range d.Functions {
			names = append(names, d.Functions[i].Name)
		}
		for i := range d.Relations {
			names = append(names, d.Relations[i].Name)
		}
		for i := range d.Types {
			names = append(names, d.Types[i].Name)
		}
	}
	return sortedOnce(names)
}

// BenchmarkChangedDefinitionsOfARead compares what a read of names finds: 450 names (a
// migration's batch of objects taken without a read) in a catalogue of 2000 functions and 500
// views, one name (a view or type read during a migration) in one of 20000 functions and 5000
// views, a database with PostGIS and a large application, the same spread over a schema per
// tenant, and 450 names all changed (another client's migration, found by a poll).
func BenchmarkChangedDefinitionsOfARead(b *testing.B) {
	for _, size := range []struct{ functions, read, changed, schemas int }{
		{2000, 450, 1, 1}, {20000, 1, 1, 1}, {20000, 1, 1, 2000}, {2000, 450, 450, 1},
	} {
		b.Run(fmt.Sprintf("functions=%d/names=%d/changed=%d/schemas=%d", size.functions, size.read, size.changed, size.schemas), func(b *testing.B) {
			benchmarkChangedDefinitions(b, size.functions, size.read, size.changed, size.schemas)
		})
	}
}

func benchmarkChangedDefinitions(b *testing.B, functions, read, changed, schemas int) {
	var data CatalogueData
	var among []string
	for i := range functions {
		name := "f_" + itoa(i)
		schema := "public"
		if schemas > 1 {
			schema = "tenant_" + itoa(i%schemas)
		}
		data.Functions = append(data.Functions, Function{OID: uint32(i), Schema: schema, Name: name, Language: "plpgsql", Kind: 'f',
			Volatility: 'v', Source: "BEGIN RETURN " + itoa(i) + "; END", ArgTypeNames: []string{"integer"}})
		if i%4 == 0 {
			data.Views = append(data.Views, View{OID: uint32(100000 + i), Schema: schema, Name: "v_" + itoa(i), Definition: "SELECT 1"})
			data.Relations = append(data.Relations, Relation{Schema: schema, Name: "v_" + itoa(i), Kind: 'v'})
		}
		if i >= functions-read {
			among = append(among, name)
		}
	}
	old := NewCatalogue(data)
	data.Functions = slices.Clone(data.Functions)
	for i := functions - changed; i < functions; i++ {
		data.Functions[i].Source = "BEGIN RETURN 0; END"
	}
	c := NewCatalogue(data)
	b.ReportAllocs()
	for b.Loop() {
		names, all := ChangedDefinitions(old, c, among)
		if changed > maxChangedNames && !all || changed <= maxChangedNames && len(names) != changed {
			b.Fatalf("changed %q, all %v", names, all)
		}
	}
}
