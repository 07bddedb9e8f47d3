package classify

import (
	"fmt"
	"slices"
	"strings"
)

// ChangedDefinitions compares two catalogues of one database, old and c, and returns the bare
// names (as CatalogueChanges and Effects.RestsOn name them) under which they hold different
// definitions that a verdict reads: functions, views, types and domains added, dropped or changed,
// and relations whose kind, persistence or read policies changed, or that were added or dropped
// with a policy, as unlogged or as a view. A table or sequence only added or dropped is not
// listed, nor the row type that comes with it: a standby without it fails the read (42P01),
// which is the staleness a standby within the lag limit may show. OIDs are not compared: a
// function pgowl took in from its CREATE statement has a stand-in OID until it is read. When
// among is not nil, only objects named in it are compared (a read of those names). all is set
// when operators or casts differ, or past maxChangedNames names.
func ChangedDefinitions(old, c *Catalogue, among []string) (names []string, all bool) {
	if old == nil || c == nil {
		return nil, true
	}
	considered := func(name string) bool { return among == nil || slices.Contains(among, name) }
	add := func(name string) {
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	o, n := &CatalogueData{}, &CatalogueData{}
	for _, pair := range []struct{ to, from *CatalogueData }{{o, &old.data}, {n, &c.data}} {
		from := pair.from
		*pair.to = CatalogueData{Operators: from.Operators, Casts: from.Casts, FieldCasts: from.FieldCasts,
			Functions: namedAmong(from.Functions, func(f *Function) string { return f.Name }, among),
			Views:     namedAmong(from.Views, func(v *View) string { return v.Name }, among),
			Relations: namedAmong(from.Relations, func(r *Relation) string { return r.Name }, among),
			Types:     namedAmong(from.Types, func(t *Type) string { return strings.TrimPrefix(t.Name, "_") }, among)}
	}

	diffByKey(o.Functions, n.Functions, func(f *Function) string { return functionKey(f) }, functionContent, func(f *Function) {
		if considered(f.Name) {
			add(f.Name)
		}
	})
	diffByKey(o.Views, n.Views, func(v *View) string { return v.Schema + "\x00" + v.Name }, func(v *View) string { return v.Definition }, func(v *View) {
		if considered(v.Name) {
			add(v.Name)
		}
	})
	plainTable := map[string]bool{}
	onlyAddedOrDropped := func(r *Relation) bool {
		return (r.Kind == 'r' || r.Kind == 'p' || r.Kind == 'S') && !r.Unlogged && r.ReadPolicy == ""
	}
	for _, list := range [][]Relation{o.Relations, n.Relations} {
		for i := range list {
			if r := &list[i]; onlyAddedOrDropped(r) {
				plainTable[r.Schema+"\x00"+r.Name] = true
			}
		}
	}
	relationKey := func(r *Relation) string { return r.Schema + "\x00" + r.Name }
	relationContent := func(r *Relation) string {
		return fmt.Sprintf("%c %t %s", r.Kind, r.Unlogged, r.ReadPolicy)
	}
	diffRelations(o.Relations, n.Relations, relationKey, relationContent, onlyAddedOrDropped, func(r *Relation) {
		if considered(r.Name) {
			add(r.Name)
		}
	})
	diffByKey(o.Types, n.Types, func(t *Type) string { return t.Schema + "\x00" + t.Name }, func(t *Type) string {
		return fmt.Sprintf("%c %d %s", t.Kind, t.Base, t.Check)
	}, func(t *Type) {
		base := strings.TrimPrefix(t.Name, "_")
		if plainTable[t.Schema+"\x00"+base] {
			return // the row type (or its array) of a table only added or dropped
		}
		add(t.Name)
	})
	if !slices.EqualFunc(o.Operators, n.Operators, func(a, b Operator) bool {
		return a.Schema == b.Schema && a.Name == b.Name && a.BuiltinFunction == b.BuiltinFunction
	}) || len(o.Casts) != len(n.Casts) || len(o.FieldCasts) != len(n.FieldCasts) {
		return nil, true
	}
	if len(names) > maxChangedNames {
		return nil, true
	}
	return names, false
}

// namedAmong returns the objects of list whose name is among names, or list when names is nil.
func namedAmong[T any](list []T, name func(*T) string, names []string) []T {
	if names == nil {
		return list
	}
	var kept []T
	for i := range list {
		if n := name(&list[i]); slices.Contains(names, n) || slices.Contains(names, "_"+n) {
			kept = append(kept, list[i])
		}
	}
	return kept
}

// diffByKey calls changed with every object of old or new whose key only one of them holds, or
// whose content differs between them (with the new one).
func diffByKey[T any](old, new []T, key func(*T) string, content func(*T) string, changed func(*T)) {
	diffRelations(old, new, key, content, func(*T) bool { return false }, changed)
}

// diffRelations is diffByKey, leaving out objects added or dropped for which quiet holds.
func diffRelations[T any](old, new []T, key func(*T) string, content func(*T) string, quiet func(*T) bool, changed func(*T)) {
	before := make(map[string]string, len(old))
	for i := range old {
		k := key(&old[i])
		before[k] += content(&old[i]) + "\x01" // overloads share a key's names, never its argument types
	}
	seen := make(map[string]string, len(new))
	for i := range new {
		seen[key(&new[i])] += content(&new[i]) + "\x01"
	}
	for i := range new {
		k := key(&new[i])
		was, ok := before[k]
		switch {
		case !ok && quiet(&new[i]):
		case !ok || was != seen[k]:
			changed(&new[i])
		}
	}
	for i := range old {
		if _, ok := seen[key(&old[i])]; !ok && !quiet(&old[i]) {
			changed(&old[i])
		}
	}
}

// functionKey identifies a function across catalogues: its schema, name and argument types.
func functionKey(f *Function) string {
	return f.Schema + "\x00" + f.Name + "\x00" + strings.Join(f.ArgTypeNames, ",")
}

// functionContent is what a verdict reads of a function, its OID and the OIDs it calls aside.
func functionContent(f *Function) string {
	return fmt.Sprintf("%s %c %c %t %q %q %q %q %d %q %t %q %q %q %q", f.Language, f.Volatility, f.Kind, f.ReturnsSet,
		f.Source, f.SQLBody, f.ArgNames, f.Arguments, f.Defaults, f.DefaultExprs, f.Variadic, f.Result, f.Config, f.Comment, f.Override)
}
