package classify

import (
	"slices"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v5"
)

// CreatedFunction is what a CREATE [OR REPLACE] FUNCTION or PROCEDURE statement says of the
// function it makes, read from its parse tree, when the statement spells out every column of
// pg_proc the classifier uses: an SQL or PL/pgSQL body given as a string, input arguments of
// built-in types without defaults, a built-in result type, no SET clause. A catalogue adds such a
// function without reading it back from the node (Catalogue.CreatedFunction): a migration that
// creates a function and calls it at once then pays for the change what the node pays, not a
// catalogue read on top. A statement that says less has no CreatedFunction; its change is read.
type CreatedFunction struct {
	// Schema is the schema the statement names, "" when the name is unqualified (the function
	// goes to the first schema of the session's search_path that exists).
	Schema, Name string
	// Replace is OR REPLACE.
	Replace   bool
	Procedure bool
	// Language is "sql" or "plpgsql".
	Language string
	// Volatility is provolatile: 'i', 's' or 'v' (the default).
	Volatility byte
	// Source is the body, exactly as prosrc stores it.
	Source string
	// ArgNames are the input arguments' names ("" for an unnamed one), ArgTypes their types.
	ArgNames []string
	ArgTypes []writtenType
	// Result is the result type (zero for a procedure), ReturnsSet whether it is SETOF.
	Result     writtenType
	ReturnsSet bool
}

// writtenType is a type name as a statement writes it: schema "" when unqualified (int, text and
// the other SQL-standard names are written pg_catalog-qualified by the parser).
type writtenType struct{ schema, name string }

// builtinType is a pg_catalog type a created function's signature may use: its OID and the name
// format_type gives it (pg_get_function_arguments and pg_get_function_result print that name).
type builtinType struct {
	oid     uint32
	display string
}

// signatureTypes are the pg_catalog types a CreatedFunction may name, by their internal name.
// Any other type (a user's type, an array, a type with a name the parser leaves unqualified only
// when quoted, such as "char") makes the change one that is read.
var signatureTypes = map[string]builtinType{
	"bool": {16, "boolean"}, "bytea": {17, "bytea"}, "int8": {20, "bigint"}, "int2": {21, "smallint"},
	"int4": {23, "integer"}, "text": {25, "text"}, "oid": {26, "oid"}, "json": {114, "json"},
	"float4": {700, "real"}, "float8": {701, "double precision"}, "bpchar": {1042, "character"},
	"varchar": {1043, "character varying"}, "date": {1082, "date"}, "time": {1083, "time without time zone"},
	"timestamp": {1114, "timestamp without time zone"}, "timestamptz": {1184, "timestamp with time zone"},
	"interval": {1186, "interval"}, "numeric": {1700, "numeric"}, "regclass": {2205, "regclass"},
	"record": {2249, "record"}, "void": {2278, "void"}, "trigger": {2279, "trigger"},
	"uuid": {2950, "uuid"}, "jsonb": {3802, "jsonb"},
}

// createdFunction reads a CREATE FUNCTION or PROCEDURE statement, or returns nil when it does not
// spell out all a CreatedFunction holds.
func createdFunction(stmt *pg_query.CreateFunctionStmt) *CreatedFunction {
	if stmt.GetSqlBody() != nil {
		// BEGIN ATOMIC and RETURN bodies are stored parsed, bound to their objects
		// (Function.SQLBody is pg_get_functiondef's text): read.
		return nil
	}
	cf := &CreatedFunction{Replace: stmt.GetReplace(), Procedure: stmt.GetIsProcedure(), Volatility: 'v'}
	names := stmt.GetFuncname()
	switch len(names) {
	case 1:
		cf.Name = names[0].GetString_().GetSval()
	case 2:
		cf.Schema, cf.Name = names[0].GetString_().GetSval(), names[1].GetString_().GetSval()
		if cf.Schema == "" || strings.HasPrefix(cf.Schema, "pg_temp") || cf.Schema == "pg_catalog" {
			return nil // the session's temporary schema is in no catalogue pgowl reads
		}
	default:
		return nil
	}
	if cf.Name == "" {
		return nil
	}
	for _, p := range stmt.GetParameters() {
		param := p.GetFunctionParameter()
		if param == nil || param.GetDefexpr() != nil ||
			(param.GetMode() != pg_query.FunctionParameterMode_FUNC_PARAM_IN && param.GetMode() != pg_query.FunctionParameterMode_FUNC_PARAM_DEFAULT) {
			return nil // OUT, INOUT, VARIADIC, TABLE columns, defaults: read
		}
		t, ok := signatureType(param.GetArgType())
		if !ok {
			return nil
		}
		cf.ArgNames = append(cf.ArgNames, param.GetName())
		cf.ArgTypes = append(cf.ArgTypes, t)
	}
	if !cf.Procedure {
		result := stmt.GetReturnType()
		if result == nil {
			return nil
		}
		t, ok := signatureType(result)
		if !ok {
			return nil
		}
		cf.Result, cf.ReturnsSet = t, result.GetSetof()
	} else if stmt.GetReturnType() != nil {
		return nil
	}
	for _, o := range stmt.GetOptions() {
		opt := o.GetDefElem()
		if opt == nil {
			return nil
		}
		switch opt.GetDefname() {
		case "as":
			items := opt.GetArg().GetList().GetItems()
			if len(items) != 1 || items[0].GetString_() == nil {
				return nil // a C function's object file and symbol
			}
			cf.Source = items[0].GetString_().GetSval()
		case "language":
			cf.Language = opt.GetArg().GetString_().GetSval()
		case "volatility":
			switch opt.GetArg().GetString_().GetSval() {
			case "immutable":
				cf.Volatility = 'i'
			case "stable":
				cf.Volatility = 's'
			case "volatile":
				cf.Volatility = 'v'
			default:
				return nil
			}
		case "security":
			if opt.GetArg().GetBoolean().GetBoolval() {
				return nil // SECURITY DEFINER: its owner, whose name its body resolves "$user" with, is read
			}
		case "strict", "leakproof", "parallel", "cost", "rows":
			// Columns of pg_proc the classifier does not read.
		default:
			return nil // SET (proconfig), WINDOW, TRANSFORM, SUPPORT, ...: read
		}
	}
	if cf.Language != "sql" && cf.Language != "plpgsql" {
		return nil
	}
	return cf
}

// signatureType reads an argument's or a result's type, when it is one signatureTypes holds.
func signatureType(tn *pg_query.TypeName) (writtenType, bool) {
	if tn == nil || tn.GetPctType() || len(tn.GetArrayBounds()) > 0 {
		return writtenType{}, false
	}
	var t writtenType
	switch names := tn.GetNames(); len(names) {
	case 1:
		t.name = names[0].GetString_().GetSval()
	case 2:
		t.schema, t.name = names[0].GetString_().GetSval(), names[1].GetString_().GetSval()
		if t.schema != "pg_catalog" {
			return writtenType{}, false
		}
	default:
		return writtenType{}, false
	}
	if _, ok := signatureTypes[t.name]; !ok {
		return writtenType{}, false
	}
	return t, true
}

// CreatedFunction returns the pg_proc row cf makes, as a read of it would give it, when the
// catalogue can tell all of it; ctx is the session's (its search_path and user decide the schema
// of an unqualified name). OR REPLACE of a function held keeps its OID and comment; a new
// function gets the OID newOID returns, not PostgreSQL's: the Manager reads the function again
// with the next read of its name or of the whole catalogue. ok is false when the catalogue cannot
// tell: the schema is unknown or temporary, pg_catalog is not searched first (a type name may
// then mean a user's type), or a function of the signature is held where the statement, which
// succeeded, did not replace it.
func (c *Catalogue) CreatedFunction(cf *CreatedFunction, ctx *Context, newOID func() uint32) (Function, bool) {
	schema, _ := c.createdSchema(cf.Schema, ctx)
	if schema == "" {
		return Function{}, false
	}
	f := Function{Schema: schema, Name: cf.Name, Language: cf.Language, Volatility: cf.Volatility, Kind: 'f',
		ReturnsSet: cf.ReturnsSet, Source: cf.Source}
	if cf.Procedure {
		f.Kind = 'p'
	}
	arguments := make([]string, 0, len(cf.ArgTypes))
	named := false
	for i, t := range cf.ArgTypes {
		builtin := signatureTypes[t.name]
		f.ArgTypes = append(f.ArgTypes, builtin.oid)
		f.ArgTypeNames = append(f.ArgTypeNames, builtin.display)
		argument := builtin.display
		if name := cf.ArgNames[i]; name != "" {
			named = true
			argument = quoteIdent(name) + " " + argument
		}
		if cf.Procedure {
			argument = "IN " + argument // as pg_get_function_arguments prints a procedure's
		}
		arguments = append(arguments, argument)
	}
	if named {
		f.ArgNames = cf.ArgNames
	}
	f.Arguments = strings.Join(arguments, ", ")
	if !cf.Procedure {
		f.Result = signatureTypes[cf.Result.name].display
		if cf.ReturnsSet {
			f.Result = "SETOF " + f.Result
		}
	}
	for _, held := range c.funcs.at(qualified{schema, cf.Name}) {
		if !sameArgTypes(held, &f) {
			continue
		}
		if !cf.Replace || held.Kind == 'a' || held.Kind == 'w' {
			return Function{}, false
		}
		f.OID, f.Comment, f.Override = held.OID, held.Comment, held.Override
		return f, true
	}
	f.OID = c.unheldOID(newOID)
	return f, true
}

// creationSchema is the schema an unqualified CREATE that succeeded made its object in: the first
// schema of the search_path as set ("$user" standing for user) that exists, where pg_temp and
// pg_catalog count only when named. A schema the catalogue does not know of may have been made
// since the catalogue's last whole read: when it is the last of the path, PostgreSQL had no other
// schema to make the object in, so it is that one (the statement would have failed with "no
// schema has been selected to create in"); when another follows, "" (the catalogue cannot tell).
func (c *Catalogue) creationSchema(schemas []string, user string) string {
	for i, schema := range schemas {
		fromUser := schema == "$user"
		if fromUser {
			if user == "" {
				continue
			}
			schema = user
		}
		if schema == "pg_temp" || strings.HasPrefix(schema, "pg_temp_") || schema == "pg_catalog" {
			return schema
		}
		switch {
		case c.SchemaExists(schema):
			return schema
		case fromUser && c.data.Schemas != nil:
			// Not a schema at the last whole read, and nothing held in it: PostgreSQL skips
			// it. Only "$user" is taken to be missing so: it is missing in most databases,
			// while a schema named in search_path that the catalogue does not know of was
			// more likely made since.
		case i == len(schemas)-1:
			return schema // the last the statement could go to: it exists
		default:
			return ""
		}
	}
	return ""
}

// SchemaExists reports whether schema existed at the catalogue's last whole read, or holds an
// object the catalogue holds.
func (c *Catalogue) SchemaExists(schema string) bool {
	_, listed := slices.BinarySearch(c.data.Schemas, schema)
	return listed || c.schemas.has(schema)
}
