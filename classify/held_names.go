package classify

import "slices"

// NamedPart is a part of a catalogue's data whose objects a change names without their schema:
// patching replaces the objects of such a name (see Catalogue.HoldsAnyNamed).
type NamedPart uint8

// The parts HoldsAnyNamed answers for.
const (
	FunctionNames NamedPart = iota
	ViewNames
	RelationNames
	TypeNames
)

// HoldsAnyNamed reports whether an object of part has one of names, in any schema. A patch asks
// it before looking through the part for the objects to replace: a migration mostly adds objects
// of new names, and a look through thousands of functions costs more than the rest of the patch.
// It looks each name up in the part's index under every schema the catalogue's objects were ever
// in, so that nothing is kept per name: one lookup per schema and name, thousands in a database of
// a schema per tenant, but only when a patch names something. Its answer is right only while each
// part's index holds exactly the part's names, which deriving the index from the part after each
// patch ensures: an index that kept a dropped name would only cost a look, but one that lost a
// held name would make a patch skip a replace and keep a stale object.
func (c *Catalogue) HoldsAnyNamed(part NamedPart, names []string) bool {
	for _, schema := range c.schemas.list {
		for _, name := range names {
			key := qualified{schema, name}
			var held bool
			switch part {
			case FunctionNames:
				_, held = c.funcs.get(key)
			case ViewNames:
				_, held = c.views.get(key)
			case RelationNames:
				_, held = c.rels.get(key)
			case TypeNames:
				_, held = c.types.get(key)
			}
			if held {
				return true
			}
		}
	}
	return false
}

// HasFieldCasts reports whether data holds field casts of the composite type with this OID.
func (c *Catalogue) HasFieldCasts(composite uint32) bool {
	_, ok := c.fieldCastTargets.get(composite)
	return ok
}

// heldSchemas are the schemas a catalogue's objects are in or were in, in the order first met,
// with a set beside the list: a database of a schema per tenant has thousands, and a lookup
// must not walk them.
type heldSchemas struct {
	list []string
	set  map[string]struct{}
}

// has reports whether schema is held.
func (s *heldSchemas) has(schema string) bool {
	_, held := s.set[schema]
	return held
}

// add notes schema, which the caller checked is not held, in s as it is (not shared).
func (s *heldSchemas) add(schema string) {
	if s.set == nil {
		s.set = make(map[string]struct{})
	}
	s.list = append(s.list, schema)
	s.set[schema] = struct{}{}
}

// clone returns a copy of s that an add does not change s through.
func (s heldSchemas) clone() heldSchemas {
	copied := heldSchemas{list: slices.Clone(s.list), set: make(map[string]struct{}, len(s.set)+1)}
	for schema := range s.set {
		copied.set[schema] = struct{}{}
	}
	return copied
}

// indexSchemas lists the schemas of c's functions, views, relations and types.
func (c *Catalogue) indexSchemas() {
	var schemas heldSchemas
	note := func(schema string) {
		if !schemas.has(schema) {
			schemas.add(schema)
		}
	}
	for i := range c.data.Functions {
		note(c.data.Functions[i].Schema)
	}
	for i := range c.data.Views {
		note(c.data.Views[i].Schema)
	}
	for i := range c.data.Relations {
		note(c.data.Relations[i].Schema)
	}
	for i := range c.data.Types {
		note(c.data.Types[i].Schema)
	}
	c.schemas = schemas
}

// deriveSchemas adds the schemas of delta's added objects to schemas (old's until then), copied
// when one is new. A schema whose objects are all removed stays: HoldsAnyNamed only looks in one
// schema more.
func (c *Catalogue) deriveSchemas(delta *CatalogueDelta) {
	copied := false
	note := func(schema string) {
		if c.schemas.has(schema) {
			return
		}
		if !copied {
			c.schemas, copied = c.schemas.clone(), true
		}
		c.schemas.add(schema)
	}
	for i := range delta.AddedFunctions {
		note(delta.AddedFunctions[i].Schema)
	}
	for i := range delta.AddedViews {
		note(delta.AddedViews[i].Schema)
	}
	for i := range delta.AddedRelations {
		note(delta.AddedRelations[i].Schema)
	}
	for i := range delta.AddedTypes {
		note(delta.AddedTypes[i].Schema)
	}
}
