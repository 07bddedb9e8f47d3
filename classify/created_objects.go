package classify

import (
	"slices"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v5"
)

// CreatedObject is an object a CREATE statement makes whose catalogue rows, as far as the
// classifier reads them, the statement's parse tree spells out in full: a *CreatedFunction, a
// *CreatedType or a *CreatedView. A catalogue adds it without reading it back from the node
// (Catalogue.TakeCreated), so that a migration that makes an object and uses it at once pays for
// the change what the node pays. A statement that says less has none; its change is read.
type CreatedObject interface {
	// Changes is what making the object changes in the catalogue: what a read of it reads.
	Changes() CatalogueChanges
}

// Changes is the function's name.
func (cf *CreatedFunction) Changes() CatalogueChanges {
	return CatalogueChanges{Functions: []string{cf.Name}}
}

// CreatedType is what CREATE TYPE name AS (...) or AS ENUM (...) makes: the type, of kind 'c' or
// 'e', and its array type "_name". A composite type's fields matter to the classifier only where
// a cast of a user's converts one (Catalogue.TakeCreated reads such a type).
type CreatedType struct {
	// Schema is the schema the statement names, "" when unqualified.
	Schema, Name string
	// Kind is typtype: 'c' or 'e'.
	Kind byte
}

// Changes is the type's name and its array type's.
func (ct *CreatedType) Changes() CatalogueChanges { return *typesNamed(ct.Name) }

// CreatedView is what CREATE [OR REPLACE] VIEW makes: the view, its relation and its row and
// array types. PostgreSQL stores a view's query with every name bound to the object it found
// then; a view taken from its statement keeps the query as written with the search_path it was
// made under, and resolves its names along that path when it is analysed. The two agree until an
// object made later in a schema earlier in that path takes one of the query's names: the Manager
// reads the view again before it takes in such an object (Uses), and with its next read of any
// name or of the whole catalogue.
type CreatedView struct {
	// Schema is the schema the statement names, "" when unqualified.
	Schema, Name string
	// Replace is OR REPLACE.
	Replace bool
	query   *pg_query.Node
	uses    []string
}

// Changes is the view's name, as a relation and as its row and array types.
func (cv *CreatedView) Changes() CatalogueChanges { return *relationsNamed(cv.Name) }

// Uses returns every identifier and string the view's query holds: any name it may resolve
// along its search_path is among them.
func (cv *CreatedView) Uses() []string { return cv.uses }

// createdType reads CREATE TYPE ... AS (...) and AS ENUM, or returns nil for a type in the
// temporary schema or a name PostgreSQL may shorten.
func createdType(node *pg_query.Node) *CreatedType {
	ct := &CreatedType{}
	switch stmt := node.GetNode().(type) {
	case *pg_query.Node_CompositeTypeStmt:
		rv := stmt.CompositeTypeStmt.GetTypevar()
		if rv.GetRelpersistence() == "t" || rv.GetCatalogname() != "" {
			return nil
		}
		ct.Schema, ct.Name, ct.Kind = rv.GetSchemaname(), rv.GetRelname(), 'c'
	case *pg_query.Node_CreateEnumStmt:
		names := stmt.CreateEnumStmt.GetTypeName()
		switch len(names) {
		case 1:
			ct.Name = names[0].GetString_().GetSval()
		case 2:
			ct.Schema, ct.Name = names[0].GetString_().GetSval(), names[1].GetString_().GetSval()
		default:
			return nil
		}
		ct.Kind = 'e'
	default:
		return nil
	}
	if !creatableName(ct.Schema, ct.Name) {
		return nil
	}
	return ct
}

// createdView reads CREATE [OR REPLACE] VIEW, or returns nil for a temporary view.
func createdView(stmt *pg_query.ViewStmt) *CreatedView {
	rv := stmt.GetView()
	if rv.GetRelpersistence() == "t" || rv.GetCatalogname() != "" || stmt.GetQuery() == nil {
		return nil
	}
	cv := &CreatedView{Schema: rv.GetSchemaname(), Name: rv.GetRelname(), Replace: stmt.GetReplace(), query: stmt.GetQuery()}
	if !creatableName(cv.Schema, cv.Name) {
		return nil
	}
	cv.uses = stringsIn(cv.query, nil)
	return cv
}

// creatableName reports whether an object named so may be taken from its statement: not in the
// temporary schema or pg_catalog, and short enough that PostgreSQL keeps it and its array type's
// name ("_name") as written (it shortens names past 63 bytes).
func creatableName(schema, name string) bool {
	return name != "" && len(name) < maxNameBytes &&
		!strings.HasPrefix(schema, "pg_temp") && schema != "pg_catalog" && !strings.HasPrefix(schema, "pg_toast")
}

// maxNameBytes is NAMEDATALEN-1: the longest name PostgreSQL keeps whole.
const maxNameBytes = 63

// stringsIn appends every string of message and of the messages below it to out, once each
// (eachString, eachChild).
func stringsIn(message any, out []string) []string {
	var walk func(m any)
	walk = func(m any) {
		eachString(m, func(s string) { out = appendName(out, s) })
		eachChild(m, walk)
	}
	walk(message)
	return out
}

func appendName(out []string, s string) []string {
	if s == "" || slices.Contains(out, s) {
		return out
	}
	return append(out, s)
}

// TakeCreated returns the catalogue rows obj makes, as a read of them would give them (a view's
// definition aside, see CreatedView), when the catalogue can tell them all; ctx is the context of
// the session whose statement made obj. New objects get OIDs newOID returns, not PostgreSQL's.
// ok is false when the catalogue cannot tell: see CreatedFunction, and for types and views, a
// held object of the name that the statement, which succeeded, would have failed on, or casts of
// a user's that may convert a composite's fields.
func (c *Catalogue) TakeCreated(obj CreatedObject, ctx *Context, newOID func() uint32) (*CatalogueData, bool) {
	switch obj := obj.(type) {
	case *CreatedFunction:
		f, ok := c.CreatedFunction(obj, ctx, newOID)
		if !ok {
			return nil, false
		}
		return &CatalogueData{Functions: []Function{f}}, true
	case *CreatedType:
		return c.createdType(obj, ctx, newOID)
	case *CreatedView:
		return c.createdView(obj, ctx, newOID)
	}
	return nil, false
}

// createdSchema is the schema a CREATE that succeeded made its object in (named, else along the
// search_path of ctx), or "" when the catalogue cannot tell or it is one no catalogue pgowl reads
// holds. A named schema exists, since the statement succeeded, whether the catalogue knew of it
// or not.
func (c *Catalogue) createdSchema(named string, ctx *Context) (schema string, effective []byte) {
	schemas, user := contextSchemas(ctx, c)
	if ctx != nil && ctx.SearchPathUnknown {
		return "", nil
	}
	effective = appendEffectivePath(nil, schemas, user)
	if !strings.HasPrefix(string(effective), "pg_catalog\x00") {
		return "", nil // a type name may then mean a user's type
	}
	schema = named
	if schema == "" {
		schema = c.creationSchema(schemas, user)
	}
	if schema == "pg_catalog" || strings.HasPrefix(schema, "pg_temp") || strings.HasPrefix(schema, "pg_toast") {
		schema = ""
	}
	return schema, effective
}

// unheldOID returns an OID from newOID that no function or composite type held has.
func (c *Catalogue) unheldOID(newOID func() uint32) uint32 {
	for {
		oid := newOID()
		if oid != 0 && c.byOID.at(oid) == nil && !c.rowTypes.at(oid) {
			return oid
		}
	}
}

func (c *Catalogue) createdType(ct *CreatedType, ctx *Context, newOID func() uint32) (*CatalogueData, bool) {
	schema, _ := c.createdSchema(ct.Schema, ctx)
	if schema == "" || (ct.Kind == 'c' && len(c.data.Casts) > 0) {
		return nil, false
	}
	_, typeHeld := c.types.get(qualified{schema, ct.Name})
	_, arrayHeld := c.types.get(qualified{schema, "_" + ct.Name})
	_, relationHeld := c.rels.get(qualified{schema, ct.Name})
	if typeHeld || arrayHeld || relationHeld {
		return nil, false
	}
	t := Type{OID: c.unheldOID(newOID), Schema: schema, Name: ct.Name, Kind: ct.Kind}
	array := Type{OID: c.unheldOID(newOID), Schema: schema, Name: "_" + ct.Name, Kind: 'b'}
	return &CatalogueData{Types: []Type{t, array}}, true
}

func (c *Catalogue) createdView(cv *CreatedView, ctx *Context, newOID func() uint32) (*CatalogueData, bool) {
	schema, effective := c.createdSchema(cv.Schema, ctx)
	if schema == "" || len(c.data.Casts) > 0 {
		return nil, false
	}
	key, arrayKey := qualified{schema, cv.Name}, qualified{schema, "_" + cv.Name}
	heldRowType, typeHeld := c.types.get(key)
	heldArrayType, arrayHeld := c.types.get(arrayKey)
	kind, relationHeld := c.rels.get(key)
	held, viewHeld := c.views.get(key)
	var oid, rowType, arrayType uint32
	switch {
	case viewHeld && relationHeld && kind == 'v' && typeHeld && arrayHeld:
		if !cv.Replace {
			return nil, false
		}
		oid, rowType, arrayType = held.OID, heldRowType.OID, heldArrayType.OID
	case viewHeld || relationHeld || typeHeld || arrayHeld:
		return nil, false
	default:
		oid, rowType, arrayType = c.unheldOID(newOID), c.unheldOID(newOID), c.unheldOID(newOID)
	}
	return &CatalogueData{
		Views:     []View{{OID: oid, Schema: schema, Name: cv.Name, query: cv.query, path: string(effective)}},
		Relations: []Relation{{Schema: schema, Name: cv.Name, Kind: 'v', OID: oid}},
		Types:     []Type{{OID: rowType, Schema: schema, Name: cv.Name, Kind: 'c'}, {OID: arrayType, Schema: schema, Name: "_" + cv.Name, Kind: 'b'}},
	}, true
}

// createdObject returns what a top-level CREATE statement makes, when its parse tree says all of
// it (CreatedObject), else nil.
func createdObject(node *pg_query.Node) CreatedObject {
	switch stmt := node.GetNode().(type) {
	case *pg_query.Node_CreateFunctionStmt:
		if cf := createdFunction(stmt.CreateFunctionStmt); cf != nil {
			return cf
		}
	case *pg_query.Node_CompositeTypeStmt, *pg_query.Node_CreateEnumStmt:
		if ct := createdType(node); ct != nil {
			return ct
		}
	case *pg_query.Node_ViewStmt:
		if cv := createdView(stmt.ViewStmt); cv != nil {
			return cv
		}
	}
	return nil
}
