package classify

import (
	"slices"

	pg_query "github.com/pganalyze/pg_query_go/v5"
)

// maxChangedNames bounds the names a CatalogueChanges carries; past it the change is Everything.
const maxChangedNames = 64

// CatalogueChanges says which part of a database's catalogue a statement changes, as far as its parse
// tree tells: the names of the functions, relations and types it creates, replaces, alters,
// comments on or drops, or Everything when it may change objects it does not name (a DROP ...
// CASCADE, a rename, a schema, an extension, a DO block, a function that runs DDL, ...). Names are
// exactly as PostgreSQL stores them and unqualified: every schema's objects of that name are read
// again.
type CatalogueChanges struct {
	// Functions are names of functions, procedures and aggregates.
	Functions []string `json:"functions,omitempty"`
	// Relations are names of tables, views, materialized views and sequences (their kind, view
	// definition, persistence and read policies).
	Relations []string `json:"relations,omitempty"`
	// Types are names of types and domains, a relation's row type and its array type ("_name").
	Types []string `json:"types,omitempty"`
	// Everything is set when the whole catalogue must be read again.
	Everything bool `json:"everything,omitempty"`
	// Schemas are names of schemas made empty (CREATE SCHEMA without elements): the list of
	// schemas, where an unqualified CREATE goes, is read again, and no name resolves otherwise.
	// A schema renamed, dropped or granted is a change of Everything.
	Schemas []string `json:"schemas,omitempty"`
	// Definitions is set when a statement changes more than tables and sequences (created,
	// dropped): a function, view, type, domain, policy, ... whose definition a verdict reads.
	Definitions bool `json:"-"`
	// Created is the object a CREATE statement makes, when its parse tree spells out all the
	// catalogue needs of it (see CreatedObject); nil otherwise, and in the changes of more than
	// one statement.
	Created CreatedObject `json:"-"`
}

// Merge adds other's changes to c, turning into Everything past maxChangedNames names.
func (c *CatalogueChanges) Merge(other *CatalogueChanges) {
	if other == nil || c.Everything {
		return
	}
	c.Created = nil
	c.Definitions = c.Definitions || other.Definitions
	c.Schemas = addNames(c.Schemas, other.Schemas)
	if other.Everything {
		*c = CatalogueChanges{Everything: true, Definitions: true}
		return
	}
	c.Functions = addNames(c.Functions, other.Functions)
	c.Relations = addNames(c.Relations, other.Relations)
	c.Types = addNames(c.Types, other.Types)
	if len(c.Functions)+len(c.Relations)+len(c.Types)+len(c.Schemas) > maxChangedNames {
		*c = CatalogueChanges{Everything: true, Definitions: true}
	}
}

// Within reports whether c names nothing of that of does not (and is not a change of everything).
func (c *CatalogueChanges) Within(of *CatalogueChanges) bool {
	if c == nil {
		return true
	}
	if c.Everything || of == nil {
		return c.Empty()
	}
	if of.Everything {
		return true
	}
	subset := func(names, of []string) bool {
		for _, name := range names {
			if !slices.Contains(of, name) {
				return false
			}
		}
		return true
	}
	return subset(c.Schemas, of.Schemas) && subset(c.Functions, of.Functions) && subset(c.Relations, of.Relations) && subset(c.Types, of.Types)
}

// Empty reports whether c names no change.
func (c *CatalogueChanges) Empty() bool {
	return c == nil || (!c.Everything && len(c.Functions)+len(c.Relations)+len(c.Types)+len(c.Schemas) == 0)
}

// addNames appends to list the names of more it does not hold yet.
func addNames(list, more []string) []string {
	for _, name := range more {
		if !slices.Contains(list, name) {
			list = append(list, name)
		}
	}
	return list
}

// everything is the change of a statement whose reach the parse tree does not bound.
func everything() *CatalogueChanges { return &CatalogueChanges{Everything: true} }

// schemaMade is the change of a CREATE SCHEMA: the schema's name when it is made empty and its
// name is spelled out (CREATE SCHEMA AUTHORIZATION role names it after the role); a change of
// everything when it makes objects as well, which it does not name here, or it is named after a
// role written CURRENT_USER, SESSION_USER or CURRENT_ROLE.
func schemaMade(stmt *pg_query.CreateSchemaStmt) *CatalogueChanges {
	name := stmt.GetSchemaname()
	if role := stmt.GetAuthrole(); name == "" && role.GetRoletype() == pg_query.RoleSpecType_ROLESPEC_CSTRING {
		name = role.GetRolename()
	}
	if name == "" || len(stmt.GetSchemaElts()) > 0 {
		return everything()
	}
	return &CatalogueChanges{Schemas: []string{name}}
}

// functionNamed is the change of the functions called name.
func functionNamed(name string) *CatalogueChanges {
	if name == "" {
		return everything()
	}
	return &CatalogueChanges{Functions: []string{name}}
}

// relationsNamed is the change of the relations called names, with their row and array types.
func relationsNamed(names ...string) *CatalogueChanges {
	c := typesNamed(names...)
	if !c.Everything {
		c.Relations = addNames(nil, names)
	}
	return c
}

// typesNamed is the change of the types called names, with their array types.
func typesNamed(names ...string) *CatalogueChanges {
	c := &CatalogueChanges{}
	for _, name := range names {
		if name == "" {
			return everything()
		}
		c.Types = addNames(c.Types, []string{name, "_" + name})
	}
	if len(c.Types) == 0 {
		return everything()
	}
	return c
}

// catalogueChanges returns what a top-level statement changes in the catalogue, or nil when it
// changes nothing the classifier reads: functions, procedures, aggregates, views, relations (their
// kind, persistence, inheritance and read policies), types and domains, casts, operators, comments on
// functions, row security policies, schemas, extensions, rules, renames and moves, and role or
// database defaults of search_path.
func catalogueChanges(node *pg_query.Node) *CatalogueChanges {
	switch stmt := node.GetNode().(type) {
	case *pg_query.Node_CreateFunctionStmt:
		return functionNamed(lastName(stmt.CreateFunctionStmt.GetFuncname()))
	case *pg_query.Node_AlterFunctionStmt:
		return functionNamed(lastName(stmt.AlterFunctionStmt.GetFunc().GetObjname()))
	case *pg_query.Node_ViewStmt:
		if stmt.ViewStmt.GetView().GetRelpersistence() == "t" {
			return nil // a temporary view: in no catalogue pgowl reads
		}
		// A view is a relation with a row type of the same name.
		return relationsNamed(stmt.ViewStmt.GetView().GetRelname())
	case *pg_query.Node_CreateStmt:
		if stmt.CreateStmt.GetRelation().GetRelpersistence() == "t" {
			return nil // a temporary table: in no catalogue pgowl reads
		}
		// A table: its name, its row type, and the parents whose partitions or children it joins
		// (whether reading them reads unlogged data).
		names := []string{stmt.CreateStmt.GetRelation().GetRelname()}
		for _, parent := range stmt.CreateStmt.GetInhRelations() {
			names = append(names, parent.GetRangeVar().GetRelname())
		}
		// The tables its foreign keys reference: a write of one now reaches it (Relation.Reaches).
		for _, element := range stmt.CreateStmt.GetTableElts() {
			names = append(names, referencedTables(element)...)
		}
		return relationsNamed(names...)
	case *pg_query.Node_CreateTableAsStmt:
		if stmt.CreateTableAsStmt.GetInto().GetRel().GetRelpersistence() == "t" {
			return nil
		}
		return relationsNamed(stmt.CreateTableAsStmt.GetInto().GetRel().GetRelname())
	case *pg_query.Node_CreateSeqStmt:
		if stmt.CreateSeqStmt.GetSequence().GetRelpersistence() == "t" {
			return nil
		}
		return relationsNamed(stmt.CreateSeqStmt.GetSequence().GetRelname())
	case *pg_query.Node_CompositeTypeStmt:
		return typesNamed(stmt.CompositeTypeStmt.GetTypevar().GetRelname())
	case *pg_query.Node_CreateEnumStmt:
		return typesNamed(lastName(stmt.CreateEnumStmt.GetTypeName()))
	case *pg_query.Node_CreateDomainStmt:
		return typesNamed(lastName(stmt.CreateDomainStmt.GetDomainname()))
	case *pg_query.Node_AlterDomainStmt:
		return typesNamed(lastName(stmt.AlterDomainStmt.GetTypeName()))
	case *pg_query.Node_CreateTrigStmt:
		// What writing the table runs (Relation.WriteRuns).
		return relationsNamed(stmt.CreateTrigStmt.GetRelation().GetRelname())
	case *pg_query.Node_CreatePolicyStmt:
		return relationsNamed(stmt.CreatePolicyStmt.GetTable().GetRelname())
	case *pg_query.Node_AlterPolicyStmt:
		return relationsNamed(stmt.AlterPolicyStmt.GetTable().GetRelname())
	case *pg_query.Node_DefineStmt:
		if stmt.DefineStmt.GetKind() == pg_query.ObjectType_OBJECT_AGGREGATE {
			return functionNamed(lastName(stmt.DefineStmt.GetDefnames()))
		}
		return everything() // operators, base types, collations, text search objects
	case *pg_query.Node_CommentStmt:
		switch stmt.CommentStmt.GetObjtype() {
		case pg_query.ObjectType_OBJECT_FUNCTION, pg_query.ObjectType_OBJECT_PROCEDURE,
			pg_query.ObjectType_OBJECT_ROUTINE, pg_query.ObjectType_OBJECT_AGGREGATE:
			return functionNamed(lastName(stmt.CommentStmt.GetObject().GetObjectWithArgs().GetObjname()))
		}
	case *pg_query.Node_DropStmt:
		return dropChanges(stmt.DropStmt)
	case *pg_query.Node_AlterOwnerStmt:
		// A new owner changes whose privileges a SECURITY DEFINER function runs with.
		switch stmt.AlterOwnerStmt.GetObjectType() {
		case pg_query.ObjectType_OBJECT_FUNCTION, pg_query.ObjectType_OBJECT_PROCEDURE,
			pg_query.ObjectType_OBJECT_ROUTINE, pg_query.ObjectType_OBJECT_AGGREGATE:
			return functionNamed(lastName(stmt.AlterOwnerStmt.GetObject().GetObjectWithArgs().GetObjname()))
		}
	case *pg_query.Node_TransactionStmt:
		if stmt.TransactionStmt.GetKind() == pg_query.TransactionStmtKind_TRANS_STMT_COMMIT_PREPARED {
			// What the prepared transaction changed is not known here: every catalogue change
			// it made is committed now.
			return everything()
		}
	case *pg_query.Node_AlterTableStmt:
		// Persistence and partitions/inheritance decide whether a read needs the primary, and
		// row security whether reading runs policies; which relations a partition or an
		// inheritance change reaches is not named in full, so everything is read again.
		for _, cmd := range stmt.AlterTableStmt.GetCmds() {
			switch cmd.GetAlterTableCmd().GetSubtype() {
			case pg_query.AlterTableType_AT_SetLogged, pg_query.AlterTableType_AT_SetUnLogged,
				pg_query.AlterTableType_AT_AttachPartition, pg_query.AlterTableType_AT_DetachPartition,
				pg_query.AlterTableType_AT_AddInherit, pg_query.AlterTableType_AT_DropInherit,
				pg_query.AlterTableType_AT_EnableRowSecurity, pg_query.AlterTableType_AT_DisableRowSecurity:
				return everything()
			}
		}
		if changesWriteRuns(stmt.AlterTableStmt) {
			names := []string{stmt.AlterTableStmt.GetRelation().GetRelname()}
			for _, cmd := range stmt.AlterTableStmt.GetCmds() {
				names = append(names, referencedTables(cmd.GetAlterTableCmd().GetDef())...)
			}
			return relationsNamed(names...)
		}
	case *pg_query.Node_CreateSchemaStmt:
		return schemaMade(stmt.CreateSchemaStmt)
	case *pg_query.Node_RenameStmt, *pg_query.Node_AlterObjectSchemaStmt,
		*pg_query.Node_CreateExtensionStmt, *pg_query.Node_AlterExtensionStmt, *pg_query.Node_AlterExtensionContentsStmt,
		*pg_query.Node_RuleStmt, *pg_query.Node_AlterRoleSetStmt, *pg_query.Node_AlterDatabaseSetStmt,
		*pg_query.Node_DropOwnedStmt,
		*pg_query.Node_CreateCastStmt, *pg_query.Node_AlterOperatorStmt, *pg_query.Node_CreateRangeStmt,
		// A DO block is how migrations often run DDL; what it runs is not analysed.
		*pg_query.Node_DoStmt:
		// A rename changes the text of every view definition that names the object; the others
		// create or drop objects they do not name (a range type's constructors, a schema's contents).
		return everything()
	}
	return nil
}

// changesWriteRuns reports whether an ALTER TABLE changes what writing the table runs
// (Relation.WriteRuns, Reaches): a trigger enabled or disabled, a column default set or dropped,
// a CHECK constraint or a foreign key (the referenced table's writes now reach this one) added or
// a constraint dropped (which one is not known here), a column added with a default, a
// generation expression, a CHECK or a foreign key. A column dropped or retyped only takes away or
// re-expresses what the catalogue holds, which leaves its verdicts on the safe side until the
// relation is read again.
func changesWriteRuns(alter *pg_query.AlterTableStmt) bool {
	for _, cmd := range alter.GetCmds() {
		c := cmd.GetAlterTableCmd()
		switch c.GetSubtype() {
		case pg_query.AlterTableType_AT_EnableTrig, pg_query.AlterTableType_AT_EnableAlwaysTrig,
			pg_query.AlterTableType_AT_EnableReplicaTrig, pg_query.AlterTableType_AT_EnableTrigAll,
			pg_query.AlterTableType_AT_EnableTrigUser, pg_query.AlterTableType_AT_DisableTrig,
			pg_query.AlterTableType_AT_DisableTrigAll, pg_query.AlterTableType_AT_DisableTrigUser,
			pg_query.AlterTableType_AT_ColumnDefault, pg_query.AlterTableType_AT_CookedColumnDefault,
			pg_query.AlterTableType_AT_DropConstraint:
			return true
		case pg_query.AlterTableType_AT_AddConstraint:
			switch c.GetDef().GetConstraint().GetContype() {
			case pg_query.ConstrType_CONSTR_CHECK, pg_query.ConstrType_CONSTR_FOREIGN:
				return true
			}
		case pg_query.AlterTableType_AT_AddColumn:
			def := c.GetDef().GetColumnDef()
			if def.GetRawDefault() != nil || def.GetCookedDefault() != nil {
				return true
			}
			for _, constraint := range def.GetConstraints() {
				switch constraint.GetConstraint().GetContype() {
				case pg_query.ConstrType_CONSTR_DEFAULT, pg_query.ConstrType_CONSTR_CHECK, pg_query.ConstrType_CONSTR_GENERATED,
					pg_query.ConstrType_CONSTR_FOREIGN:
					return true
				}
			}
		}
	}
	return false
}

// referencedTables returns the names of the tables the foreign keys of a table element (a
// column's constraints, or a table constraint) reference.
func referencedTables(element *pg_query.Node) []string {
	var constraints []*pg_query.Node
	switch e := element.GetNode().(type) {
	case *pg_query.Node_ColumnDef:
		constraints = e.ColumnDef.GetConstraints()
	case *pg_query.Node_Constraint:
		constraints = []*pg_query.Node{element}
	}
	var names []string
	for _, constraint := range constraints {
		if c := constraint.GetConstraint(); c.GetContype() == pg_query.ConstrType_CONSTR_FOREIGN && c.GetPktable().GetRelname() != "" {
			names = append(names, c.GetPktable().GetRelname())
		}
	}
	return names
}

// writeRunsOnly reports whether a statement changes nothing but what writing a table runs
// (Relation.WriteRuns): no verdict of a read rests on that, since a write goes to the primary.
func writeRunsOnly(node *pg_query.Node) bool {
	switch stmt := node.GetNode().(type) {
	case *pg_query.Node_CreateTrigStmt:
		return true
	case *pg_query.Node_AlterTableStmt:
		// Its other changes are everything's (catalogueChanges).
		c := catalogueChanges(node)
		return c != nil && !c.Everything
	case *pg_query.Node_DropStmt:
		return stmt.DropStmt.GetRemoveType() == pg_query.ObjectType_OBJECT_TRIGGER && stmt.DropStmt.GetBehavior() != pg_query.DropBehavior_DROP_CASCADE
	}
	return false
}

// dropChanges is what a DROP changes: the objects it names, unless CASCADE may drop others.
func dropChanges(drop *pg_query.DropStmt) *CatalogueChanges {
	switch drop.GetRemoveType() {
	case pg_query.ObjectType_OBJECT_FUNCTION, pg_query.ObjectType_OBJECT_PROCEDURE, pg_query.ObjectType_OBJECT_ROUTINE,
		pg_query.ObjectType_OBJECT_AGGREGATE, pg_query.ObjectType_OBJECT_VIEW, pg_query.ObjectType_OBJECT_MATVIEW,
		pg_query.ObjectType_OBJECT_TABLE, pg_query.ObjectType_OBJECT_FOREIGN_TABLE, pg_query.ObjectType_OBJECT_SEQUENCE,
		pg_query.ObjectType_OBJECT_TYPE, pg_query.ObjectType_OBJECT_DOMAIN, pg_query.ObjectType_OBJECT_POLICY,
		pg_query.ObjectType_OBJECT_TRIGGER:
	case pg_query.ObjectType_OBJECT_SCHEMA, pg_query.ObjectType_OBJECT_EXTENSION, pg_query.ObjectType_OBJECT_RULE,
		pg_query.ObjectType_OBJECT_CAST, pg_query.ObjectType_OBJECT_OPERATOR:
		return everything()
	default:
		return nil
	}
	if drop.GetBehavior() == pg_query.DropBehavior_DROP_CASCADE {
		return everything()
	}
	var names []string
	for _, object := range drop.GetObjects() {
		var parts []*pg_query.Node
		switch {
		case object.GetObjectWithArgs() != nil:
			parts = object.GetObjectWithArgs().GetObjname()
		case object.GetList() != nil:
			parts = object.GetList().GetItems()
		case object.GetTypeName() != nil:
			parts = object.GetTypeName().GetNames()
		}
		if (drop.GetRemoveType() == pg_query.ObjectType_OBJECT_POLICY || drop.GetRemoveType() == pg_query.ObjectType_OBJECT_TRIGGER) && len(parts) > 1 {
			// [schema.]table.policy: the table's read policies change; [schema.]table.trigger:
			// what writing it runs.
			parts = parts[:len(parts)-1]
		}
		if len(parts) > 1 && parts[0].GetString_().GetSval() == "pg_temp" {
			continue // a temporary object: in no catalogue pgowl reads
		}
		name := lastName(parts)
		if name == "" {
			return everything()
		}
		names = append(names, name)
	}
	if len(names) == 0 {
		return nil
	}
	switch drop.GetRemoveType() {
	case pg_query.ObjectType_OBJECT_FUNCTION, pg_query.ObjectType_OBJECT_PROCEDURE, pg_query.ObjectType_OBJECT_ROUTINE,
		pg_query.ObjectType_OBJECT_AGGREGATE:
		return &CatalogueChanges{Functions: addNames(nil, names)}
	case pg_query.ObjectType_OBJECT_TYPE, pg_query.ObjectType_OBJECT_DOMAIN:
		return typesNamed(names...)
	}
	return relationsNamed(names...)
}

// lastName returns the last element of a qualified name list, "" when it is not a string.
func lastName(names []*pg_query.Node) string {
	if len(names) == 0 {
		return ""
	}
	return names[len(names)-1].GetString_().GetSval()
}
