package classify

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
)

// IndexDifferences lists how c's indexes answer lookups differently from other's (nil when they
// answer every one alike): the keys one holds and the other does not, and the objects they lead
// to where those differ in content (the pointers themselves may differ). Tests use it to check
// that a derived catalogue (DeriveCatalogue) is the catalogue NewCatalogue builds from its data.
func (c *Catalogue) IndexDifferences(other *Catalogue) []string {
	var out []string
	add := func(index string, diffs []string) {
		for _, d := range diffs {
			out = append(out, index+": "+d)
		}
	}
	add("funcs", differentLayered(&c.funcs, &other.funcs, sameObjectLists[Function]))
	add("byOID", differentLayered(&c.byOID, &other.byOID, sameObjects[Function]))
	add("byFirstArg", differentLayered(&c.byFirstArg, &other.byFirstArg, sameObjectLists[Function]))
	add("views", differentLayered(&c.views, &other.views, sameObjects[View]))
	add("rels", differentLayered(&c.rels, &other.rels, same[byte]))
	add("unlogged", differentLayered(&c.unlogged, &other.unlogged, same[bool]))
	add("readPolicies", differentLayered(&c.readPolicies, &other.readPolicies, sameObjects[Relation]))
	add("writeRuns", differentLayered(&c.writeRuns, &other.writeRuns, sameObjects[Relation]))
	add("writeRunsByOID", differentLayered(&c.writeRunsByOID, &other.writeRunsByOID, sameObjects[Relation]))
	add("types", differentLayered(&c.types, &other.types, sameObjects[Type]))
	add("rowTypes", differentLayered(&c.rowTypes, &other.rowTypes, same[bool]))
	add("domainBase", differentLayered(&c.domainBase, &other.domainBase, same[uint32]))
	add("domainChecks", differentLayered(&c.domainChecks, &other.domainChecks, sameObjects[Type]))
	add("operators", differentMaps(c.operators, other.operators, sameObjectLists[Operator]))
	add("castsTo", differentMaps(c.castsTo, other.castsTo, slices.Equal[[]Cast]))
	add("fieldCastTargets", differentLayered(&c.fieldCastTargets, &other.fieldCastTargets, slices.Equal[[]uint32]))
	add("rowFunctions", differentLayered(&c.rowFunctions, &other.rowFunctions, sameObjectLists[Function]))
	return out
}

// differentLayered describes the keys of a and b whose values differ or that only one holds, and
// a count of keys that is not how many an index holds.
func differentLayered[K comparable, V any](a, b *layered[K, V], equal func(V, V) bool) []string {
	am, bm := maps.Collect(a.all()), maps.Collect(b.all())
	out := differentMaps(am, bm, equal)
	for i, l := range []struct{ counted, held int }{{a.len(), len(am)}, {b.len(), len(bm)}} {
		if l.counted != l.held {
			out = append(out, fmt.Sprintf("index %d counts %d keys and holds %d", i+1, l.counted, l.held))
		}
	}
	return out
}

// differentMaps describes the keys of a and b whose values differ or that only one holds.
func differentMaps[K comparable, V any](a, b map[K]V, equal func(V, V) bool) []string {
	var out []string
	for _, key := range slices.SortedFunc(maps.Keys(a), func(x, y K) int { return compareKeys(x, y) }) {
		bv, ok := b[key]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%v only in the first", key))
		case !equal(a[key], bv):
			out = append(out, fmt.Sprintf("%v differs: %s and %s", key, describe(a[key]), describe(bv)))
		}
	}
	for _, key := range slices.SortedFunc(maps.Keys(b), func(x, y K) int { return compareKeys(x, y) }) {
		if _, ok := a[key]; !ok {
			out = append(out, fmt.Sprintf("%v only in the second", key))
		}
	}
	return out
}

// compareKeys orders keys by their printed form, so that differences are listed in a fixed order.
func compareKeys[K comparable](x, y K) int {
	sx, sy := fmt.Sprint(x), fmt.Sprint(y)
	switch {
	case sx < sy:
		return -1
	case sx > sy:
		return 1
	}
	return 0
}

// describe prints a value, following pointers.
func describe(v any) string {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer:
		if rv.IsNil() {
			return "nil"
		}
		return fmt.Sprintf("%+v", rv.Elem().Interface())
	case reflect.Slice:
		parts := make([]string, rv.Len())
		for i := range parts {
			parts[i] = describe(rv.Index(i).Interface())
		}
		return fmt.Sprint(parts)
	}
	return fmt.Sprintf("%+v", v)
}

func same[V comparable](a, b V) bool { return a == b }

// sameObjects reports whether a and b point to equal objects.
func sameObjects[T any](a, b *T) bool {
	return (a == nil) == (b == nil) && (a == nil || reflect.DeepEqual(*a, *b))
}

// sameObjectLists reports whether a and b point, in order, to equal objects.
func sameObjectLists[T any](a, b []*T) bool {
	return slices.EqualFunc(a, b, sameObjects[T])
}
