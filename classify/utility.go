package classify

import (
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v5"
)

// utilityWriteSubject names the utility statements that change the schema, roles, settings on disk or
// storage: all of them need the primary. ok is false for anything else, which the caller then treats
// as unknown.
func utilityWriteSubject(node *pg_query.Node) (subject string, ok bool) {
	switch stmt := node.Node.(type) {
	case *pg_query.Node_AlterTableStmt:
		return "ALTER " + objectTypeWord(stmt.AlterTableStmt.GetObjtype(), "TABLE"), true
	case *pg_query.Node_DropStmt:
		return "DROP " + objectTypeWord(stmt.DropStmt.GetRemoveType(), "OBJECT"), true
	case *pg_query.Node_RenameStmt:
		return "ALTER " + objectTypeWord(stmt.RenameStmt.GetRenameType(), "OBJECT") + " RENAME", true
	case *pg_query.Node_AlterObjectSchemaStmt:
		return "ALTER " + objectTypeWord(stmt.AlterObjectSchemaStmt.GetObjectType(), "OBJECT") + " SET SCHEMA", true
	case *pg_query.Node_AlterOwnerStmt:
		return "ALTER " + objectTypeWord(stmt.AlterOwnerStmt.GetObjectType(), "OBJECT") + " OWNER", true
	case *pg_query.Node_DefineStmt:
		return "CREATE " + objectTypeWord(stmt.DefineStmt.GetKind(), "OBJECT"), true
	case *pg_query.Node_CommentStmt:
		return "COMMENT", true
	case *pg_query.Node_SecLabelStmt:
		return "SECURITY LABEL", true
	case *pg_query.Node_TruncateStmt:
		return "TRUNCATE", true
	case *pg_query.Node_IndexStmt:
		return "CREATE INDEX", true
	case *pg_query.Node_ReindexStmt:
		return "REINDEX", true
	case *pg_query.Node_ClusterStmt:
		return "CLUSTER", true
	case *pg_query.Node_RefreshMatViewStmt:
		return "REFRESH MATERIALIZED VIEW", true
	case *pg_query.Node_AlterSystemStmt:
		return "ALTER SYSTEM", true
	case *pg_query.Node_CreateSchemaStmt:
		return "CREATE SCHEMA", true
	case *pg_query.Node_CreateFunctionStmt:
		if stmt.CreateFunctionStmt.GetIsProcedure() {
			return "CREATE PROCEDURE", true
		}
		return "CREATE FUNCTION", true
	case *pg_query.Node_AlterFunctionStmt:
		return "ALTER FUNCTION", true
	case *pg_query.Node_CreateTrigStmt:
		return "CREATE TRIGGER", true
	case *pg_query.Node_CreateEventTrigStmt:
		return "CREATE EVENT TRIGGER", true
	case *pg_query.Node_AlterEventTrigStmt:
		return "ALTER EVENT TRIGGER", true
	case *pg_query.Node_RuleStmt:
		return "CREATE RULE", true
	case *pg_query.Node_CreateDomainStmt:
		return "CREATE DOMAIN", true
	case *pg_query.Node_AlterDomainStmt:
		return "ALTER DOMAIN", true
	case *pg_query.Node_CompositeTypeStmt:
		return "CREATE TYPE", true
	case *pg_query.Node_CreateEnumStmt:
		return "CREATE TYPE", true
	case *pg_query.Node_CreateRangeStmt:
		return "CREATE TYPE", true
	case *pg_query.Node_AlterEnumStmt:
		return "ALTER TYPE", true
	case *pg_query.Node_AlterTypeStmt:
		return "ALTER TYPE", true
	case *pg_query.Node_AlterSeqStmt:
		return "ALTER SEQUENCE", true
	case *pg_query.Node_CreateExtensionStmt:
		return "CREATE EXTENSION", true
	case *pg_query.Node_AlterExtensionStmt, *pg_query.Node_AlterExtensionContentsStmt:
		return "ALTER EXTENSION", true
	case *pg_query.Node_CreatedbStmt:
		return "CREATE DATABASE", true
	case *pg_query.Node_AlterDatabaseStmt, *pg_query.Node_AlterDatabaseSetStmt, *pg_query.Node_AlterDatabaseRefreshCollStmt:
		return "ALTER DATABASE", true
	case *pg_query.Node_DropdbStmt:
		return "DROP DATABASE", true
	case *pg_query.Node_CreateRoleStmt:
		return "CREATE ROLE", true
	case *pg_query.Node_AlterRoleStmt, *pg_query.Node_AlterRoleSetStmt:
		return "ALTER ROLE", true
	case *pg_query.Node_DropRoleStmt:
		return "DROP ROLE", true
	case *pg_query.Node_DropOwnedStmt:
		return "DROP OWNED", true
	case *pg_query.Node_ReassignOwnedStmt:
		return "REASSIGN OWNED", true
	case *pg_query.Node_AlterDefaultPrivilegesStmt:
		return "ALTER DEFAULT PRIVILEGES", true
	case *pg_query.Node_CreateTableSpaceStmt:
		return "CREATE TABLESPACE", true
	case *pg_query.Node_DropTableSpaceStmt:
		return "DROP TABLESPACE", true
	case *pg_query.Node_AlterTableSpaceOptionsStmt, *pg_query.Node_AlterTableMoveAllStmt:
		return "ALTER TABLESPACE", true
	case *pg_query.Node_CreateFdwStmt:
		return "CREATE FOREIGN DATA WRAPPER", true
	case *pg_query.Node_AlterFdwStmt:
		return "ALTER FOREIGN DATA WRAPPER", true
	case *pg_query.Node_CreateForeignServerStmt:
		return "CREATE SERVER", true
	case *pg_query.Node_AlterForeignServerStmt:
		return "ALTER SERVER", true
	case *pg_query.Node_CreateForeignTableStmt:
		return "CREATE FOREIGN TABLE", true
	case *pg_query.Node_CreateUserMappingStmt:
		return "CREATE USER MAPPING", true
	case *pg_query.Node_AlterUserMappingStmt:
		return "ALTER USER MAPPING", true
	case *pg_query.Node_DropUserMappingStmt:
		return "DROP USER MAPPING", true
	case *pg_query.Node_ImportForeignSchemaStmt:
		return "IMPORT FOREIGN SCHEMA", true
	case *pg_query.Node_CreatePolicyStmt:
		return "CREATE POLICY", true
	case *pg_query.Node_AlterPolicyStmt:
		return "ALTER POLICY", true
	case *pg_query.Node_CreateAmStmt:
		return "CREATE ACCESS METHOD", true
	case *pg_query.Node_CreatePlangStmt:
		return "CREATE LANGUAGE", true
	case *pg_query.Node_CreateOpClassStmt:
		return "CREATE OPERATOR CLASS", true
	case *pg_query.Node_CreateOpFamilyStmt:
		return "CREATE OPERATOR FAMILY", true
	case *pg_query.Node_AlterOpFamilyStmt:
		return "ALTER OPERATOR FAMILY", true
	case *pg_query.Node_AlterOperatorStmt:
		return "ALTER OPERATOR", true
	case *pg_query.Node_CreateStatsStmt:
		return "CREATE STATISTICS", true
	case *pg_query.Node_AlterStatsStmt:
		return "ALTER STATISTICS", true
	case *pg_query.Node_AlterCollationStmt:
		return "ALTER COLLATION", true
	case *pg_query.Node_CreateConversionStmt:
		return "CREATE CONVERSION", true
	case *pg_query.Node_CreateCastStmt:
		return "CREATE CAST", true
	case *pg_query.Node_CreateTransformStmt:
		return "CREATE TRANSFORM", true
	case *pg_query.Node_AlterTsdictionaryStmt:
		return "ALTER TEXT SEARCH DICTIONARY", true
	case *pg_query.Node_AlterTsconfigurationStmt:
		return "ALTER TEXT SEARCH CONFIGURATION", true
	case *pg_query.Node_CreatePublicationStmt:
		return "CREATE PUBLICATION", true
	case *pg_query.Node_AlterPublicationStmt:
		return "ALTER PUBLICATION", true
	case *pg_query.Node_CreateSubscriptionStmt:
		return "CREATE SUBSCRIPTION", true
	case *pg_query.Node_AlterSubscriptionStmt:
		return "ALTER SUBSCRIPTION", true
	case *pg_query.Node_DropSubscriptionStmt:
		return "DROP SUBSCRIPTION", true
	case *pg_query.Node_AlterObjectDependsStmt:
		return "ALTER OBJECT DEPENDS ON EXTENSION", true
	case *pg_query.Node_ReplicaIdentityStmt:
		return "ALTER TABLE REPLICA IDENTITY", true
	}
	return "", false
}

// objectTypeWord turns an ObjectType such as OBJECT_MATVIEW into SQL words ("MATERIALIZED VIEW").
func objectTypeWord(objectType pg_query.ObjectType, fallback string) string {
	switch objectType {
	case pg_query.ObjectType_OBJECT_MATVIEW:
		return "MATERIALIZED VIEW"
	case pg_query.ObjectType_OBJECT_FOREIGN_TABLE:
		return "FOREIGN TABLE"
	case pg_query.ObjectType_OBJECT_TSCONFIGURATION:
		return "TEXT SEARCH CONFIGURATION"
	case pg_query.ObjectType_OBJECT_TSDICTIONARY:
		return "TEXT SEARCH DICTIONARY"
	case pg_query.ObjectType_OBJECT_TSPARSER:
		return "TEXT SEARCH PARSER"
	case pg_query.ObjectType_OBJECT_TSTEMPLATE:
		return "TEXT SEARCH TEMPLATE"
	case pg_query.ObjectType_OBJECT_FDW:
		return "FOREIGN DATA WRAPPER"
	case pg_query.ObjectType_OBJECT_FOREIGN_SERVER:
		return "SERVER"
	case pg_query.ObjectType_OBJECT_STATISTIC_EXT:
		return "STATISTICS"
	case pg_query.ObjectType_OBJECT_LARGEOBJECT:
		return "LARGE OBJECT"
	case pg_query.ObjectType_OBJECT_TYPE_UNDEFINED:
		return fallback
	}
	name, ok := pg_query.ObjectType_name[int32(objectType)]
	if !ok {
		return fallback
	}
	return strings.ReplaceAll(strings.TrimPrefix(name, "OBJECT_"), "_", " ")
}
