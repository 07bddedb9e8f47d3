package classify

import "strings"

// Each PostgreSQL server keeps its cumulative statistics, locks, backends, prepared transactions and
// replication state for itself; a standby's copy describes the standby, not the primary where the
// application's writes happen. Reading them therefore goes to the primary with NODE_LOCAL_STATS.
// Catalog tables and the planner statistics pg_stats / pg_statistic are replicated like any table
// and are read on a standby.

// nodeLocalRelations are the pg_catalog views (besides every pg_stat_* and pg_statio_* view) whose
// contents are node-local.
var nodeLocalRelations = map[string]bool{
	"pg_locks":                     true,
	"pg_replication_slots":         true,
	"pg_prepared_xacts":            true,
	"pg_shmem_allocations":         true,
	"pg_replication_origin_status": true,
	// A standby's copy of a sequence runs ahead of the primary's.
	"pg_sequences": true,
}

// nodeLocalRelation reports whether a pg_catalog relation is node-local: pg_stat_* (not pg_stats,
// pg_statistic), pg_statio_*, and the views listed above.
func nodeLocalRelation(name string) bool {
	return strings.HasPrefix(name, "pg_stat_") || strings.HasPrefix(name, "pg_statio_") || nodeLocalRelations[name]
}

// nodeLocalAnySchema reports whether a relation of an extension, in whatever schema the extension
// was installed, is node-local.
func nodeLocalAnySchema(name string) bool {
	return name == "pg_stat_statements" || name == "pg_stat_statements_info"
}

// nodeLocalFunctions are the pg_catalog functions behind the node-local views, besides every pg_stat_get_*.
var nodeLocalFunctions = map[string]bool{
	"pg_lock_status":                 true,
	"pg_blocking_pids":               true,
	"pg_safe_snapshot_blocking_pids": true,
	"pg_get_replication_slots":       true,
	"pg_prepared_xact":               true,
	"pg_get_shmem_allocations":       true,
	"pg_stat_have_stats":             true,
	"pg_sequence_last_value":         true,
}

// nodeLocalFunction reports whether a pg_catalog function reads node-local statistics.
func nodeLocalFunction(name string) bool {
	return strings.HasPrefix(name, "pg_stat_get_") || nodeLocalFunctions[name]
}
