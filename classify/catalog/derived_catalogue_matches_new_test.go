package catalog

import (
	"cmp"
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pgowl/pgowl/classify"
)

// A catalogue patched with a read of the names a change touched, as a session's read or the
// Manager's refresh patches it (patch, then classify.DeriveCatalogue), answers every lookup as
// a catalogue built from scratch from the same data: random databases of overloaded functions
// (some in several schemas, some callable on a row), tables and views (unlogged, row-secured),
// composite types, domains with checks, arrays, operators, casts and composite fields, changed
// by random additions, replacements and drops of named objects, over chains of patches. The
// catalogue patched is never modified, while another goroutine reads it, nor is the data of
// another catalogue derived from it.
func TestDerivedCatalogueMatchesNewCatalogue(t *testing.T) {
	rng := rand.New(rand.NewSource(20261202))
	const databases, changesPerDatabase, longChains = 40, 30, 200
	for round := range databases {
		db := newModelDatabase(rng)
		cat := classify.NewCatalogue(db.data())
		if round%2 == 1 { // as a whole load makes it: the first patch may append in place
			cat = classify.NewCatalogueOwning(db.data())
		}
		changes := changesPerDatabase
		if round%8 == 0 { // long enough for the indexes to merge their changes into new bases
			changes = longChains
		}
		for step := range changes {
			wanted, describe := db.change(rng)
			fresh := db.read(wanted)
			old := cat
			oldData := cloneData(*old.Data())
			oldFresh := classify.NewCatalogue(oldData)
			var sibling *classify.Catalogue
			var siblingData classify.CatalogueData
			if rng.Intn(3) == 0 {
				// Another catalogue derived from old, adding an object after all others (never
				// done today, but nothing forbids it): both may not append to old's data in place.
				added := classify.Function{OID: db.nextOID + 1000, Schema: "public", Name: "sibling", Language: "sql", Kind: 'f'}
				data, delta := patch(old, &classify.CatalogueData{Functions: []classify.Function{added}}, namedReads{functions: []string{"sibling"}})
				sibling = classify.DeriveCatalogue(old, *data, delta)
				siblingData = cloneData(*sibling.Data())
			}
			var wg sync.WaitGroup
			var oldDiffs []string
			var oldDataErr error
			wg.Add(1)
			go func() { // other sessions read the old catalogue meanwhile
				defer wg.Done()
				oldDiffs = old.IndexDifferences(oldFresh)
				oldDataErr = sameData(oldData, *old.Data())
			}()
			data, delta := patch(old, fresh, wanted)
			if got, want := keepsAnalyses(old.Data(), fresh, wanted, delta), keepsAnalysesByScanning(old.Data(), fresh, wanted); got != want {
				t.Fatalf("database %d, change %d: keepsAnalyses from the patch's delta says %v, looking at every object old holds says %v", round, step, got, want)
			}
			derived := old
			if delta.Changed() {
				derived = classify.DeriveCatalogue(old, *data, delta)
			}
			wg.Wait()
			where := fmt.Sprintf("database %d, change %d (%s)", round, step, describe)
			if len(oldDiffs) > 0 {
				t.Fatalf("%s: the old catalogue changed while it was derived from: %s", where, strings.Join(oldDiffs, "; "))
			}
			if diffs := old.IndexDifferences(oldFresh); len(diffs) > 0 {
				t.Fatalf("%s: the old catalogue changed: %s", where, strings.Join(diffs, "; "))
			}
			if oldDataErr == nil {
				oldDataErr = sameData(oldData, *old.Data())
			}
			if oldDataErr != nil {
				t.Fatalf("%s: the old catalogue's data changed: %v", where, oldDataErr)
			}
			if sibling != nil {
				if err := sameData(siblingData, *sibling.Data()); err != nil {
					t.Fatalf("%s: the data of another catalogue derived from the same one changed: %v", where, err)
				}
			}
			if err := sameData(db.data(), *derived.Data()); err != nil {
				t.Fatalf("%s: the patched data is not the database's: %v", where, err)
			}
			if diffs := derived.IndexDifferences(classify.NewCatalogue(*derived.Data())); len(diffs) > 0 {
				t.Fatalf("%s: the derived catalogue differs from a new one:\n%s", where, strings.Join(diffs, "\n"))
			}
			cat = derived
		}
	}
}

// modelDatabase is what a database holds, as the loader would read it (each part ordered by OID).
type modelDatabase struct {
	nextOID    uint32
	functions  []classify.Function
	views      []classify.View
	relations  []classify.Relation
	types      []classify.Type
	operators  []classify.Operator
	casts      []classify.Cast
	fieldCasts []classify.FieldCast
}

var (
	modelSchemas       = []string{"public", "app", "audit"}
	modelFunctionNames = []string{"area", "total", "f", "g", "label"}
	modelObjectNames   = []string{"t", "u", "v", "w", "money_amount"}
	// modelArgTypes are the argument types functions take: integer, text, record, anyelement; the
	// composite types of the database are added to them.
	modelArgTypes = []uint32{23, 25, 2249, 2283}
)

// castTarget is a type a cast outside pg_catalog converts to (integer).
const castTarget = 23

func newModelDatabase(rng *rand.Rand) *modelDatabase {
	db := &modelDatabase{nextOID: 16384}
	for _, t := range []classify.Type{{OID: 23, Schema: "pg_catalog", Name: "int4", Kind: 'b'}, {OID: 25, Schema: "pg_catalog", Name: "text", Kind: 'b'},
		{OID: 1007, Schema: "pg_catalog", Name: "_int4", Kind: 'b'}, {OID: 2249, Schema: "pg_catalog", Name: "record", Kind: 'p'},
		{OID: 2283, Schema: "pg_catalog", Name: "anyelement", Kind: 'p'}} {
		db.types = append(db.types, t)
	}
	db.relations = append(db.relations, classify.Relation{Schema: "pg_catalog", Name: "pg_class", Kind: 'r', OID: 1259})
	for range 2 + rng.Intn(6) {
		db.createObject(rng, modelSchemas[rng.Intn(len(modelSchemas))], modelObjectNames[rng.Intn(len(modelObjectNames))])
	}
	for range 3 + rng.Intn(12) {
		db.createFunction(rng, modelSchemas[rng.Intn(len(modelSchemas))], modelFunctionNames[rng.Intn(len(modelFunctionNames))], 0)
	}
	if len(db.functions) > 0 && rng.Intn(3) > 0 {
		f := db.functions[rng.Intn(len(db.functions))].OID
		db.operators = append(db.operators, classify.Operator{Schema: "public", Name: "===", Function: f})
		db.casts = append(db.casts, classify.Cast{Source: 25, Target: castTarget, Function: f})
		for i := range db.types { // composite fields of the cast's target type
			if db.types[i].Kind == 'c' && rng.Intn(2) == 0 {
				db.fieldCasts = append(db.fieldCasts, classify.FieldCast{Composite: db.types[i].OID, Target: castTarget})
			}
		}
	}
	db.sort()
	return db
}

func (db *modelDatabase) oid() uint32 {
	db.nextOID++
	return db.nextOID
}

// createObject creates, unless schema holds one, a table, view or type (composite, domain or
// enum) named name, with its row type and array type.
func (db *modelDatabase) createObject(rng *rand.Rand, schema, name string) {
	if slices.ContainsFunc(db.types, func(t classify.Type) bool { return t.Schema == schema && t.Name == name }) ||
		slices.ContainsFunc(db.relations, func(r classify.Relation) bool { return r.Schema == schema && r.Name == name }) {
		return
	}
	rowType := func() uint32 {
		oid := db.oid()
		db.types = append(db.types, classify.Type{OID: oid, Schema: schema, Name: name, Kind: 'c'})
		if len(db.casts) > 0 && rng.Intn(2) == 0 {
			db.fieldCasts = append(db.fieldCasts, classify.FieldCast{Composite: oid, Target: castTarget})
		}
		return oid
	}
	switch kind := rng.Intn(5); kind {
	case 0, 1: // a table
		r := classify.Relation{Schema: schema, Name: name, Kind: 'r', OID: db.oid(), Unlogged: rng.Intn(3) == 0}
		if rng.Intn(3) == 0 {
			r.ReadPolicy = "(owner = CURRENT_USER)"
		}
		db.relations = append(db.relations, r)
		rowType()
	case 2: // a view
		oid := db.oid()
		db.relations = append(db.relations, classify.Relation{Schema: schema, Name: name, Kind: 'v', OID: oid})
		db.views = append(db.views, classify.View{OID: oid, Schema: schema, Name: name, Definition: fmt.Sprintf("SELECT %d AS n", rng.Intn(100))})
		rowType()
	case 3: // a composite type
		rowType()
		db.relations = append(db.relations, classify.Relation{Schema: schema, Name: name, Kind: 'c', OID: db.oid()})
	case 4: // a domain, with a check or not
		d := classify.Type{OID: db.oid(), Schema: schema, Name: name, Kind: 'd', Base: 23}
		if rng.Intn(2) == 0 {
			d.Check = fmt.Sprintf("(VALUE > %d)", rng.Intn(10))
		}
		db.types = append(db.types, d)
	}
	db.types = append(db.types, classify.Type{OID: db.oid(), Schema: schema, Name: "_" + name, Kind: 'b'})
}

// dropObject drops the relation and types named name in schema, with the composite fields of
// those types.
func (db *modelDatabase) dropObject(schema, name string) {
	db.relations = slices.DeleteFunc(db.relations, func(r classify.Relation) bool { return r.Schema == schema && r.Name == name })
	db.views = slices.DeleteFunc(db.views, func(v classify.View) bool { return v.Schema == schema && v.Name == name })
	dropped := map[uint32]bool{}
	db.types = slices.DeleteFunc(db.types, func(t classify.Type) bool {
		if t.Schema == schema && (t.Name == name || t.Name == "_"+name) {
			dropped[t.OID] = true
			return true
		}
		return false
	})
	db.fieldCasts = slices.DeleteFunc(db.fieldCasts, func(fc classify.FieldCast) bool { return dropped[fc.Composite] })
}

// createFunction creates a function named name in schema, with OID oid (a new one when 0).
func (db *modelDatabase) createFunction(rng *rand.Rand, schema, name string, oid uint32) {
	if oid == 0 {
		oid = db.oid()
	}
	argTypes := slices.Clone(modelArgTypes)
	for _, t := range db.types {
		if t.Kind == 'c' {
			argTypes = append(argTypes, t.OID)
		}
	}
	f := classify.Function{OID: oid, Schema: schema, Name: name, Language: "sql", Volatility: "ivs"[rng.Intn(3)],
		Kind: "ffffpa"[rng.Intn(6)], Source: fmt.Sprintf("SELECT %d", rng.Intn(1000)), Result: "integer"}
	for range rng.Intn(3) {
		f.ArgTypes = append(f.ArgTypes, argTypes[rng.Intn(len(argTypes))])
		f.ArgTypeNames = append(f.ArgTypeNames, "t")
	}
	if len(f.ArgTypes) > 1 && rng.Intn(2) == 0 {
		f.Defaults = len(f.ArgTypes) - 1
	}
	db.functions = append(db.functions, f)
}

// change makes a random change of named objects and returns the reads it needs, as the
// classifier names them (namedReadsFor), and what it did.
func (db *modelDatabase) change(rng *rand.Rand) (namedReads, string) {
	var changes classify.CatalogueChanges
	var did []string
	switch rng.Intn(3) {
	case 0: // functions: overloads added, replaced (same OID) and dropped, in several schemas
		for range 1 + rng.Intn(2) {
			name := modelFunctionNames[rng.Intn(len(modelFunctionNames))]
			changes.Functions = append(changes.Functions, name)
			var kept []classify.Function
			var replaced []classify.Function
			for _, f := range db.functions {
				switch {
				case f.Name != name:
					kept = append(kept, f)
				case rng.Intn(3) == 0:
					did = append(did, fmt.Sprintf("drop function %s.%s/%d", f.Schema, f.Name, f.OID))
				case rng.Intn(2) == 0:
					replaced = append(replaced, f)
				default:
					kept = append(kept, f)
				}
			}
			db.functions = kept
			for _, f := range replaced {
				db.createFunction(rng, f.Schema, f.Name, f.OID)
				did = append(did, fmt.Sprintf("replace function %s.%s/%d", f.Schema, f.Name, f.OID))
			}
			for range rng.Intn(3) {
				schema := modelSchemas[rng.Intn(len(modelSchemas))]
				db.createFunction(rng, schema, name, 0)
				did = append(did, fmt.Sprintf("create function %s.%s", schema, name))
			}
		}
	case 1, 2: // tables, views and types: dropped, made again, added in another schema
		for range 1 + rng.Intn(2) {
			name := modelObjectNames[rng.Intn(len(modelObjectNames))]
			changes.Relations = append(changes.Relations, name)
			changes.Types = append(changes.Types, name, "_"+name)
			for _, schema := range modelSchemas {
				switch rng.Intn(4) {
				case 0:
					db.dropObject(schema, name)
					did = append(did, fmt.Sprintf("drop %s.%s", schema, name))
				case 1:
					db.dropObject(schema, name)
					db.createObject(rng, schema, name)
					did = append(did, fmt.Sprintf("drop and create %s.%s", schema, name))
				case 2:
					db.createObject(rng, schema, name)
					did = append(did, fmt.Sprintf("create %s.%s", schema, name))
				}
			}
		}
	}
	db.sort()
	old := db.data()
	return namedReadsFor(&old, &changes), strings.Join(did, ", ")
}

// read returns what reading wanted finds: every object of each part named as wanted names for it.
func (db *modelDatabase) read(wanted namedReads) *classify.CatalogueData {
	named := func(names []string) func(string) bool {
		return func(name string) bool { return slices.Contains(names, name) }
	}
	fresh := &classify.CatalogueData{}
	functions, relations, types, fieldCasts := named(wanted.functions), named(wanted.relations), named(wanted.types), named(wanted.fieldCasts)
	for _, f := range db.functions {
		if functions(f.Name) {
			fresh.Functions = append(fresh.Functions, f)
		}
	}
	for _, v := range db.views {
		if relations(v.Name) {
			fresh.Views = append(fresh.Views, v)
		}
	}
	for _, r := range db.relations {
		if relations(r.Name) {
			fresh.Relations = append(fresh.Relations, r)
		}
	}
	typeNames := map[uint32]string{}
	for _, t := range db.types {
		typeNames[t.OID] = t.Name
		if types(t.Name) {
			fresh.Types = append(fresh.Types, t)
		}
	}
	for _, fc := range db.fieldCasts {
		if fieldCasts(typeNames[fc.Composite]) {
			fresh.FieldCasts = append(fresh.FieldCasts, fc)
		}
	}
	// A read returns its rows in an order of its own.
	rand.New(rand.NewSource(int64(len(fresh.Functions)))).Shuffle(len(fresh.Functions), func(i, j int) {
		fresh.Functions[i], fresh.Functions[j] = fresh.Functions[j], fresh.Functions[i]
	})
	return fresh
}

// sort orders each part as the loader reads it.
func (db *modelDatabase) sort() {
	slices.SortFunc(db.functions, func(a, b classify.Function) int { return cmp.Compare(a.OID, b.OID) })
	slices.SortFunc(db.views, func(a, b classify.View) int { return cmp.Compare(a.OID, b.OID) })
	slices.SortFunc(db.relations, func(a, b classify.Relation) int { return cmp.Compare(a.OID, b.OID) })
	slices.SortFunc(db.types, func(a, b classify.Type) int { return cmp.Compare(a.OID, b.OID) })
	slices.SortFunc(db.fieldCasts, func(a, b classify.FieldCast) int {
		return cmp.Or(cmp.Compare(a.Composite, b.Composite), cmp.Compare(a.Target, b.Target))
	})
}

// data is the database as CatalogueData, sharing nothing with the model.
func (db *modelDatabase) data() classify.CatalogueData {
	return classify.CatalogueData{Database: "model", Functions: slices.Clone(db.functions), Views: slices.Clone(db.views),
		Relations: slices.Clone(db.relations), Types: slices.Clone(db.types), Operators: slices.Clone(db.operators),
		Casts: slices.Clone(db.casts), FieldCasts: slices.Clone(db.fieldCasts)}
}

// keepsAnalysesByScanning is what keepsAnalyses reports, found by looking at every object old holds
// under the names read again rather than at what the patch took out.
func keepsAnalysesByScanning(old, fresh *classify.CatalogueData, wanted namedReads) bool {
	if len(wanted.relations) == 0 && len(wanted.types) == 0 {
		return true
	}
	relations, types := nameSet(wanted.relations), nameSet(wanted.types)
	if !unchangedIn(old.Relations, fresh.Relations, func(r *classify.Relation) (string, string, uint32) { return r.Schema, r.Name, r.OID }, sameRelation, relations) ||
		!unchangedIn(old.Views, fresh.Views, func(v *classify.View) (string, string, uint32) { return v.Schema, v.Name, v.OID }, equal[classify.View], relations) ||
		!unchangedIn(old.Types, fresh.Types, func(t *classify.Type) (string, string, uint32) { return t.Schema, t.Name, t.OID }, equal[classify.Type], types) {
		return false
	}
	for i := range old.Types {
		if t := &old.Types[i]; types(t.Name) && !sameFieldCasts(old, fresh, t.OID, len(wanted.fieldCasts) > 0) {
			return false
		}
	}
	return plainAdditions(fresh)
}

// cloneData returns data's parts in arrays of their own.
func cloneData(data classify.CatalogueData) classify.CatalogueData {
	data.Functions, data.Views, data.Relations = slices.Clone(data.Functions), slices.Clone(data.Views), slices.Clone(data.Relations)
	data.Types, data.Operators, data.Casts, data.FieldCasts = slices.Clone(data.Types), slices.Clone(data.Operators), slices.Clone(data.Casts), slices.Clone(data.FieldCasts)
	return data
}

// sameData reports how got's parts differ from want's.
func sameData(want, got classify.CatalogueData) error {
	for _, part := range []struct {
		name      string
		want, got any
	}{
		{"functions", want.Functions, got.Functions}, {"views", want.Views, got.Views}, {"relations", want.Relations, got.Relations},
		{"types", want.Types, got.Types}, {"operators", want.Operators, got.Operators}, {"casts", want.Casts, got.Casts},
		{"field casts", want.FieldCasts, got.FieldCasts},
	} {
		w, g := reflect.ValueOf(part.want), reflect.ValueOf(part.got)
		if w.Len() == 0 && g.Len() == 0 {
			continue
		}
		if !reflect.DeepEqual(part.want, part.got) {
			return fmt.Errorf("%s: got %+v, want %+v", part.name, part.got, part.want)
		}
	}
	return nil
}
