package classify

import (
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
// among is not nil, only objects named in it are compared (a read of those names); the cost is
// then one map lookup per object held. all is set when operators or casts differ, or past
// maxChangedNames names.
func ChangedDefinitions(old, c *Catalogue, among []string) (names []string, all bool) {
	if old == nil || c == nil {
		return nil, true
	}
	var wanted map[string]bool
	if among != nil {
		wanted = make(map[string]bool, len(among))
		for _, name := range among {
			wanted[strings.TrimPrefix(name, "_")] = true
		}
	}
	// Past maxChangedNames the answer is all: nothing more is considered once it is passed, so
	// that a read of many names that changed (another client's migration) costs one pass.
	overflowed := false
	listed := map[string]bool{}
	considered := func(name string) bool {
		return !overflowed && (wanted == nil || wanted[strings.TrimPrefix(name, "_")])
	}
	add := func(name string) {
		if overflowed || listed[name] {
			return
		}
		listed[name] = true
		names = append(names, name)
		overflowed = len(names) > maxChangedNames
	}
	o, n := &old.data, &c.data
	keys := wantedKeys(old, c, wanted)
	if keys == nil {
		diffObjects(o.Functions, n.Functions, func(f *Function) string { return f.Name }, considered, functionKey, sameFunction,
			func(*Function) bool { return false }, func(f *Function) { add(f.Name) })
		diffObjects(o.Views, n.Views, func(v *View) string { return v.Name }, considered, func(v *View) qualified { return qualified{v.Schema, v.Name} },
			func(a, b *View) bool { return a.Definition == b.Definition }, func(*View) bool { return false }, func(v *View) { add(v.Name) })
	} else {
		diffIndexed(old, c, keys, add)
	}
	plain := func(r *Relation) bool {
		return (r.Kind == 'r' || r.Kind == 'p' || r.Kind == 'S') && !r.Unlogged && r.ReadPolicy == ""
	}
	plainTables := map[qualified]bool{}
	relations := [2][]Relation{o.Relations, n.Relations}
	if keys != nil {
		relations = [2][]Relation{old.relationsAt(keys), c.relationsAt(keys)}
	}
	for _, list := range relations {
		for i := range list {
			if r := &list[i]; considered(r.Name) && plain(r) {
				plainTables[qualified{r.Schema, r.Name}] = true
			}
		}
	}
	diffObjects(relations[0], relations[1], func(r *Relation) string { return r.Name }, considered,
		func(r *Relation) qualified { return qualified{r.Schema, r.Name} },
		func(a, b *Relation) bool {
			return a.Kind == b.Kind && a.Unlogged == b.Unlogged && a.ReadPolicy == b.ReadPolicy
		},
		plain, func(r *Relation) { add(r.Name) })
	types := [2][]Type{o.Types, n.Types}
	if keys != nil {
		types = [2][]Type{old.typesAt(keys), c.typesAt(keys)}
	}
	diffObjects(types[0], types[1], func(t *Type) string { return t.Name }, considered, func(t *Type) qualified { return qualified{t.Schema, t.Name} },
		func(a, b *Type) bool { return a.Kind == b.Kind && a.Base == b.Base && a.Check == b.Check },
		func(t *Type) bool { return plainTables[qualified{t.Schema, strings.TrimPrefix(t.Name, "_")}] }, // a plain table's row type
		func(t *Type) { add(t.Name) })
	if !slices.EqualFunc(o.Operators, n.Operators, func(a, b Operator) bool {
		return a.Schema == b.Schema && a.Name == b.Name && a.BuiltinFunction == b.BuiltinFunction
	}) || len(o.Casts) != len(n.Casts) || len(o.FieldCasts) != len(n.FieldCasts) {
		return nil, true
	}
	if overflowed {
		return nil, true
	}
	return names, false
}

// wantedKeys returns every schema-qualified name under which old or c may hold an object that a
// read of wanted (names without a leading underscore) compares: each name, and its array type's,
// in each schema either holds. It returns nil when wanted is nil (everything is compared), or when
// those names outnumber the objects held: the lists are then cheaper to walk than the indexes to
// look up.
func wantedKeys(old, c *Catalogue, wanted map[string]bool) []qualified {
	if wanted == nil {
		return nil
	}
	schemas := old.schemas.list
	for _, schema := range c.schemas.list {
		if !old.schemas.has(schema) {
			schemas = append(slices.Clip(schemas), schema)
		}
	}
	held := len(c.data.Functions) + len(c.data.Views) + len(c.data.Relations) + len(c.data.Types)
	if 2*len(schemas)*len(wanted) > held {
		return nil
	}
	names := make([]string, 0, 2*len(wanted))
	for name := range wanted {
		names = append(names, name, "_"+name)
	}
	keys := make([]qualified, 0, len(schemas)*len(names))
	for _, schema := range schemas {
		for _, name := range names {
			keys = append(keys, qualified{schema, name})
		}
	}
	return keys
}

// diffIndexed is ChangedDefinitions' comparison of functions and views, through the catalogues'
// indexes of keys rather than their lists: what a read of a few names costs in a large database.
func diffIndexed(old, c *Catalogue, keys []qualified, add func(string)) {
	for _, key := range keys {
		before, _ := old.funcs.get(key)
		after, _ := c.funcs.get(key)
		if len(before)+len(after) > 0 && !sameFunctions(before, after) {
			add(key.name)
		}
		was, wasHeld := old.views.get(key)
		is, isHeld := c.views.get(key)
		if wasHeld != isHeld || (wasHeld && was.Definition != is.Definition) {
			add(key.name)
		}
	}
}

// sameFunctions reports whether two lists of the functions of one name hold the same signatures
// with the same definitions (sameFunction), in any order.
func sameFunctions(a, b []*Function) bool {
	if len(a) != len(b) {
		return false
	}
	for _, f := range a {
		k := functionKey(f)
		if !slices.ContainsFunc(b, func(g *Function) bool { return functionKey(g) == k && sameFunction(f, g) }) {
			return false
		}
	}
	return true
}

// relationsAt returns, from the indexes, the relations c holds under keys: what ChangedDefinitions
// compares of them (kind, persistence, read policies).
func (c *Catalogue) relationsAt(keys []qualified) []Relation {
	var out []Relation
	for _, key := range keys {
		kind, ok := c.rels.get(key)
		if !ok {
			continue
		}
		r := Relation{Schema: key.schema, Name: key.name, Kind: kind}
		r.Unlogged, _ = c.unlogged.get(key)
		if policy, ok := c.readPolicies.get(key); ok {
			r.ReadPolicy = policy.ReadPolicy
		}
		out = append(out, r)
	}
	return out
}

// typesAt returns the types c holds under keys.
func (c *Catalogue) typesAt(keys []qualified) []Type {
	var out []Type
	for _, key := range keys {
		if t, ok := c.types.get(key); ok {
			out = append(out, *t)
		}
	}
	return out
}

// diffObjects calls changed with every object of old or new, among those whose name considered
// holds, whose key only one of them holds (unless quiet holds for it: an addition or a drop that
// does not count), or whose content differs between them (same), with the new one.
func diffObjects[T any, K comparable](old, new []T, name func(*T) string, considered func(string) bool, key func(*T) K,
	same func(a, b *T) bool, quiet func(*T) bool, changed func(*T)) {
	before := map[K]*T{}
	for i := range old {
		if considered(name(&old[i])) {
			before[key(&old[i])] = &old[i]
		}
	}
	seen := map[K]bool{}
	for i := range new {
		obj := &new[i]
		if !considered(name(obj)) {
			continue
		}
		k := key(obj)
		seen[k] = true
		was, ok := before[k]
		switch {
		case !ok && quiet(obj):
		case !ok || !same(was, obj):
			changed(obj)
		}
	}
	for k, obj := range before {
		if !seen[k] && !quiet(obj) {
			changed(obj)
		}
	}
}

// functionSignature identifies a function across catalogues: its schema, name and argument types.
type functionSignature struct {
	schema, name, args string
}

func functionKey(f *Function) functionSignature {
	args := ""
	switch len(f.ArgTypeNames) {
	case 0:
	case 1:
		args = f.ArgTypeNames[0]
	default:
		args = strings.Join(f.ArgTypeNames, ",")
	}
	return functionSignature{f.Schema, f.Name, args}
}

// sameFunction reports whether a and b are the same definition to a verdict: everything it reads
// of a function but its OID and the OIDs it calls (stand-ins until read).
func sameFunction(a, b *Function) bool {
	return a.Language == b.Language && a.Volatility == b.Volatility && a.Kind == b.Kind && a.ReturnsSet == b.ReturnsSet &&
		a.Source == b.Source && a.SQLBody == b.SQLBody && slices.Equal(a.ArgNames, b.ArgNames) && a.Arguments == b.Arguments &&
		a.Defaults == b.Defaults && a.DefaultExprs == b.DefaultExprs && a.Variadic == b.Variadic && a.Result == b.Result &&
		slices.Equal(a.Config, b.Config) && a.Comment == b.Comment && a.Override == b.Override && a.DefinerUser == b.DefinerUser
}
