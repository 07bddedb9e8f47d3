package classify

import "strings"

// Each PostgreSQL server keeps its cumulative statistics, locks, backends, prepared transactions and
// replication state for itself; a standby's copy describes the standby, not the primary where the
// application's writes happen. Reading them therefore goes to the primary with NODE_LOCAL_STATS.
// So do the questions a client asks to learn what kind of server it reached (pg_is_in_recovery(),
// SHOW transaction_read_only, in_hot_standby): pgowl presents itself as a read-write server (its
// startup ParameterStatus says in_hot_standby off), and a standby's answer would contradict that,
// so that pgx with target_session_attrs=read-write, or any health check that asks whether writes
// are possible, would refuse pgowl.
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
	// Settings and configuration files as this node loaded them; a standby reports
	// transaction_read_only and in_hot_standby on.
	"pg_settings":            true,
	"pg_file_settings":       true,
	"pg_hba_file_rules":      true,
	"pg_ident_file_mappings": true,
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
	// Which server this is, and how far its recovery has come.
	"pg_is_in_recovery":             true,
	"pg_last_wal_receive_lsn":       true,
	"pg_last_wal_replay_lsn":        true,
	"pg_last_xact_replay_timestamp": true,
	"pg_is_wal_replay_paused":       true,
	"pg_get_wal_replay_pause_state": true,
	"inet_server_addr":              true,
	"inet_server_port":              true,
	"pg_postmaster_start_time":      true,
	"pg_conf_load_time":             true,
	"pg_control_checkpoint":         true,
	"pg_control_recovery":           true,
	"pg_control_system":             true,
	"pg_control_init":               true,
	// The functions behind pg_settings, pg_file_settings and pg_hba_file_rules.
	"pg_show_all_settings":      true,
	"pg_show_all_file_settings": true,
	"pg_hba_file_rules":         true,
	// The sizes of the node's files: an unlogged relation has no data on a standby, and the
	// free space and visibility maps are not kept in step.
	"pg_relation_size":       true,
	"pg_total_relation_size": true,
	"pg_table_size":          true,
	"pg_indexes_size":        true,
	"pg_database_size":       true,
	"pg_tablespace_size":     true,
	// The node's own files.
	"pg_current_logfile":      true,
	"pg_ls_dir":               true,
	"pg_ls_logdir":            true,
	"pg_ls_waldir":            true,
	"pg_ls_tmpdir":            true,
	"pg_ls_archive_statusdir": true,
	"pg_ls_logicalmapdir":     true,
	"pg_ls_logicalsnapdir":    true,
	"pg_ls_replslotdir":       true,
	"pg_read_file":            true,
	"pg_read_binary_file":     true,
	"pg_stat_file":            true,
	// Exported snapshots exist only on the node that exported them, and the transaction that
	// imports one (SET TRANSACTION SNAPSHOT, as pg_dump --jobs does) must run there: both go to
	// the primary, the one node every session reaches alike.
	"pg_export_snapshot": true,
}

// nodeLocalFunction reports whether a pg_catalog function reads node-local statistics.
func nodeLocalFunction(name string) bool {
	return strings.HasPrefix(name, "pg_stat_get_") || nodeLocalFunctions[name]
}

// nodeLocalSettings are the run-time settings whose value describes the node that answers: which
// kind of server it is (transaction_read_only and in_hot_standby are on on a standby, off on the
// primary outside a read-only transaction), and where it replicates from (set on a standby, empty
// on the primary). Settings that name the server (port, data_directory, cluster_name) are usually
// the same on every host of a deployment and stay reads.
var nodeLocalSettings = map[string]bool{
	"transaction_read_only":    true,
	"in_hot_standby":           true,
	"primary_conninfo":         true,
	"primary_slot_name":        true,
	"restore_command":          true,
	"recovery_min_apply_delay": true,
}

// nodeLocalSetting reports whether SHOW name or current_setting(name) describes the node that
// answers it; SHOW ALL includes such settings.
func nodeLocalSetting(name string) bool {
	name = strings.ToLower(name)
	return name == "all" || nodeLocalSettings[name]
}
