package classify

import (
	"reflect"
	"slices"
)

// deltaBetween returns what changed from old to data, for tests that derive a catalogue from data
// they changed by hand: per part, the objects (by OID; composite fields by value) that data no
// longer holds as old did, and those it holds anew or differently.
func deltaBetween(old, data *CatalogueData) *CatalogueDelta {
	d := &CatalogueDelta{}
	d.RemovedFunctions, d.AddedFunctions = differentObjects(old.Functions, data.Functions, func(f *Function) uint32 { return f.OID })
	d.RemovedViews, d.AddedViews = differentObjects(old.Views, data.Views, func(v *View) uint32 { return v.OID })
	d.RemovedRelations, d.AddedRelations = differentObjects(old.Relations, data.Relations, func(r *Relation) uint32 { return r.OID })
	d.RemovedTypes, d.AddedTypes = differentObjects(old.Types, data.Types, func(t *Type) uint32 { return t.OID })
	for _, fc := range old.FieldCasts {
		if !slices.Contains(data.FieldCasts, fc) {
			d.RemovedFieldCasts = append(d.RemovedFieldCasts, fc)
		}
	}
	for _, fc := range data.FieldCasts {
		if !slices.Contains(old.FieldCasts, fc) {
			d.AddedFieldCasts = append(d.AddedFieldCasts, fc)
		}
	}
	d.Parts = CatalogueParts{
		Functions: len(d.RemovedFunctions)+len(d.AddedFunctions) > 0,
		Relations: len(d.RemovedViews)+len(d.AddedViews)+len(d.RemovedRelations)+len(d.AddedRelations) > 0,
		Types:     len(d.RemovedTypes)+len(d.AddedTypes)+len(d.RemovedFieldCasts)+len(d.AddedFieldCasts) > 0,
	}
	return d
}

// differentObjects returns the objects of old that data does not hold alike, and those of data
// that old does not, in data's order.
func differentObjects[T any](old, data []T, oid func(*T) uint32) (removed, added []T) {
	in := func(list []T, o *T) bool {
		return slices.ContainsFunc(list, func(other T) bool { return oid(&other) == oid(o) && reflect.DeepEqual(other, *o) })
	}
	for i := range old {
		if !in(data, &old[i]) {
			removed = append(removed, old[i])
		}
	}
	for i := range data {
		if !in(old, &data[i]) {
			added = append(added, data[i])
		}
	}
	return removed, added
}
