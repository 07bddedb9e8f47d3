package classify

import (
	_ "embed"
	"slices"
	"strings"
)

//go:generate go run ./internal/genbuiltins -out pg15_builtin_functions.txt

// pg15BuiltinFunctions is every distinct function name in PostgreSQL 15's pg_catalog, one per line;
// lines starting with '#' are comments. Regenerate it with `go generate ./classify`.
//
//go:embed pg15_builtin_functions.txt
var pg15BuiltinFunctions string

// parseBuiltinNames turns the embedded list into a set.
func parseBuiltinNames(list string) map[string]struct{} {
	names := make(map[string]struct{}, 3200)
	for _, line := range strings.Split(list, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		names[line] = struct{}{}
	}
	return names
}

// builtinEffect is what calling a built-in function does beyond computing its result.
type builtinEffect struct {
	// access is Write when the call must run on the primary.
	access Access
	// session is the session state the call changes.
	session SessionEffect
	// configSetter marks set_config, whose session effect depends on its third argument.
	configSetter bool
	// settingReader marks current_setting, which is node-local when it asks for a setting that
	// says which kind of server answered (nodeLocalSetting).
	settingReader bool
	// nodeLocal marks functions that read statistics each node keeps for itself (NODE_LOCAL_STATS).
	nodeLocal bool
	// extension marks functions of extensions, which match in any schema.
	extension bool
	// unseen, when set, says what the call runs that analysis cannot see (SQL given as text, a
	// relation named by a string): the call needs the primary as an UNKNOWN_EFFECT, with this
	// as its detail, not as a known writer.
	unseen string
}

// functionTable knows which functions are built-in and which of those write.
type functionTable struct {
	builtins   map[string]struct{}
	writing    map[string]builtinEffect
	prefixes   []string
	extensions map[string]builtinEffect
	resolver   FunctionResolver
}

// builtin looks a pg_catalog function up: a writer from the reviewed table, a reader of node-local
// statistics, or a read when it is in the generated list of PostgreSQL 15 functions.
func (t *functionTable) builtin(name string) (builtinEffect, bool) {
	if effect, ok := t.writing[name]; ok {
		return effect, true
	}
	_, known := t.builtins[name]
	if !known {
		return builtinEffect{}, false
	}
	for _, prefix := range t.prefixes {
		if strings.HasPrefix(name, prefix) {
			return builtinEffect{access: Write}, true
		}
	}
	if nodeLocalFunction(name) {
		return builtinEffect{access: Write, nodeLocal: true}, true
	}
	return builtinEffect{access: Read}, true
}

// writingBuiltins is the reviewed table of pg_catalog functions that write, or that only make sense
// on the primary. Every pg_catalog function not listed here is treated as a read. Each entry must
// exist in pg15_builtin_functions.txt (TestWritingBuiltinsExist checks it).
func writingBuiltins() map[string]builtinEffect {
	needsPrimary := builtinEffect{access: Write} // must run on the primary, leaves no session state
	// Calls whose effect is that of SQL they are given, or of relations they are given by name:
	// the primary, as any effect that cannot be analysed.
	runsSQLText := builtinEffect{access: Write, unseen: "it runs the SQL text it is given, which is not analysed"}
	readsNamedRelations := builtinEffect{access: Write, unseen: "it reads relations named by its arguments, whose views are not analysed"}
	sessionAdvisory := builtinEffect{access: Write, session: SessionAdvisoryLock}
	advisoryUnlock := builtinEffect{access: Write, session: SessionRelease}
	return map[string]builtinEffect{
		// Sequences. nextval and setval write the sequence. currval and lastval only have a value
		// after nextval in the same session, which ran on the primary, so they must follow it there.
		"nextval": needsPrimary,
		"setval":  needsPrimary,
		"currval": needsPrimary,
		"lastval": needsPrimary,

		// Transaction ids. Asking for the current transaction id assigns one (a write); the
		// *_if_assigned forms only have an answer in a transaction that already wrote on the primary.
		"txid_current":                   needsPrimary,
		"txid_current_if_assigned":       needsPrimary,
		"pg_current_xact_id":             needsPrimary,
		"pg_current_xact_id_if_assigned": needsPrimary,

		// WAL position and control. The pg_current_wal_* functions and pg_walfile_name* refuse to
		// run during recovery; switching WAL and creating restore points write WAL.
		"pg_current_wal_lsn":        needsPrimary,
		"pg_current_wal_insert_lsn": needsPrimary,
		"pg_current_wal_flush_lsn":  needsPrimary,
		"pg_walfile_name":           needsPrimary,
		"pg_walfile_name_offset":    needsPrimary,
		"pg_switch_wal":             needsPrimary,
		"pg_create_restore_point":   needsPrimary,

		// Backups. Starting and stopping a backup are paired calls on one node; the primary is
		// the node operators expect.
		"pg_backup_start": needsPrimary,
		"pg_backup_stop":  needsPrimary,

		// Recovery control. These act on a standby's recovery; sending them to whichever standby
		// has the least lag would be arbitrary, so they go to the primary, which rejects them clearly.
		"pg_promote":           needsPrimary,
		"pg_wal_replay_pause":  needsPrimary,
		"pg_wal_replay_resume": needsPrimary,

		// Advisory locks, session level. They coordinate clients, so they must be taken where
		// every client takes them: the primary. The lock outlives the statement, so the session is pinned.
		"pg_advisory_lock":            sessionAdvisory,
		"pg_advisory_lock_shared":     sessionAdvisory,
		"pg_try_advisory_lock":        sessionAdvisory,
		"pg_try_advisory_lock_shared": sessionAdvisory,
		// Unlocking takes no lock; it may release the last one, which pgowl checks on the node.
		"pg_advisory_unlock":        advisoryUnlock,
		"pg_advisory_unlock_shared": advisoryUnlock,
		"pg_advisory_unlock_all":    advisoryUnlock,
		// Advisory locks, transaction level: the primary for the same reason, but released at
		// transaction end, so no session state remains.
		"pg_advisory_xact_lock":            needsPrimary,
		"pg_advisory_xact_lock_shared":     needsPrimary,
		"pg_try_advisory_xact_lock":        needsPrimary,
		"pg_try_advisory_xact_lock_shared": needsPrimary,

		// Notifications: NOTIFY needs a transaction id and listeners sit on the primary.
		"pg_notify": needsPrimary,

		// Large objects. Creating, changing, importing and deleting write pg_largeobject. lo_open
		// is here because a descriptor opened for writing must be on the primary, and the mode is
		// an argument we do not evaluate. lo_export writes a file on the server it runs on. (libpq's
		// lo_write is called lowrite in SQL.)
		"lo_create":     needsPrimary,
		"lo_creat":      needsPrimary,
		"lo_import":     needsPrimary,
		"lo_unlink":     needsPrimary,
		"lo_put":        needsPrimary,
		"lo_from_bytea": needsPrimary,
		"lo_open":       needsPrimary,
		"lowrite":       needsPrimary,
		"lo_truncate":   needsPrimary,
		"lo_truncate64": needsPrimary,
		"lo_export":     needsPrimary,

		// Statistics resets change the cumulative statistics the primary's operators look at.
		"pg_stat_reset":                          needsPrimary,
		"pg_stat_reset_shared":                   needsPrimary,
		"pg_stat_reset_single_table_counters":    needsPrimary,
		"pg_stat_reset_single_function_counters": needsPrimary,
		"pg_stat_reset_slru":                     needsPrimary,
		"pg_stat_reset_replication_slot":         needsPrimary,
		"pg_stat_reset_subscription_stats":       needsPrimary,

		// Signals to backends and the postmaster. A backend pid is only meaningful on the node it
		// belongs to; application sessions live on the primary. Reloading and rotating act on one server.
		"pg_terminate_backend":           needsPrimary,
		"pg_cancel_backend":              needsPrimary,
		"pg_log_backend_memory_contexts": needsPrimary,
		"pg_reload_conf":                 needsPrimary,
		"pg_rotate_logfile":              needsPrimary,

		// Replication slots and logical decoding write slot state or WAL.
		"pg_create_physical_replication_slot": needsPrimary,
		"pg_create_logical_replication_slot":  needsPrimary,
		"pg_drop_replication_slot":            needsPrimary,
		"pg_copy_physical_replication_slot":   needsPrimary,
		"pg_copy_logical_replication_slot":    needsPrimary,
		"pg_replication_slot_advance":         needsPrimary,
		"pg_logical_slot_get_changes":         needsPrimary,
		"pg_logical_slot_get_binary_changes":  needsPrimary,
		"pg_logical_emit_message":             needsPrimary,
		// Peeking leaves the slot where it was, but PostgreSQL 15 refuses all logical decoding on
		// a standby: "logical decoding cannot be used while in recovery".
		"pg_logical_slot_peek_changes":        needsPrimary,
		"pg_logical_slot_peek_binary_changes": needsPrimary,

		// Index maintenance functions that write index pages.
		"brin_summarize_new_values": needsPrimary,
		"brin_summarize_range":      needsPrimary,
		"brin_desummarize_range":    needsPrimary,
		"gin_clean_pending_list":    needsPrimary,

		// Functions that run the SQL text they are given, which the classifier does not see into
		// and which may write: a standby refuses query_to_xml('SELECT nextval(...)', ...) with
		// "cannot execute nextval() in a read-only transaction". Only the (tsquery, text) form of
		// ts_rewrite runs a query, but a name cannot tell the forms apart. query_to_xmlschema
		// plans its query without running it and stays a read.
		"query_to_xml":               runsSQLText,
		"query_to_xml_and_xmlschema": runsSQLText,
		"ts_stat":                    runsSQLText,
		"ts_rewrite":                 runsSQLText,
		// Functions that read the relation named by their argument, or every relation of a schema
		// or of the database, and so run the definition of any view among them, which may write;
		// a relation named in a string is no relation to the classifier. A standby refuses
		// table_to_xml of a view that calls nextval() as above. The *_xmlschema forms only
		// describe the relations and stay reads.
		"table_to_xml":                  readsNamedRelations,
		"table_to_xml_and_xmlschema":    readsNamedRelations,
		"schema_to_xml":                 readsNamedRelations,
		"schema_to_xml_and_xmlschema":   readsNamedRelations,
		"database_to_xml":               readsNamedRelations,
		"database_to_xml_and_xmlschema": readsNamedRelations,

		// Catalogue writers: collation import, extension configuration, OID allocation.
		"pg_import_system_collations": needsPrimary,
		"pg_extension_config_dump":    needsPrimary,
		"pg_nextoid":                  needsPrimary,

		// Configuration. set_config changes only this session's settings, which a standby can
		// hold as well as the primary, so it is a read; with is_local false it is a session-level
		// change (SessionSet), with is_local true it lasts only until the transaction ends.
		"set_config": {access: Read, configSetter: true},
		// current_setting('transaction_read_only') on a standby says on: see nodeLocalSettings.
		"current_setting": {access: Read, settingReader: true},
	}
}

// writingBuiltinPrefixes names families of pg_catalog functions that need the primary: the
// binary_upgrade_* functions set catalogue OIDs and state for pg_upgrade, and the
// pg_replication_origin_* functions create, drop and advance origins, and even the readers among
// them (pg_replication_origin_oid, pg_replication_origin_session_is_setup, ...) fail during recovery
// with "cannot manipulate replication origins during recovery".
func writingBuiltinPrefixes() []string {
	return []string{"binary_upgrade_", "pg_replication_origin_"}
}

// writingExtensionFunctions lists functions of common extensions (not in pg_catalog) that are known
// to write. Any function outside pg_catalog is already a Write with an unknown effect; listing it
// here only gives the more precise reason WRITING_FUNCTION. They match in any schema.
func writingExtensionFunctions() map[string]builtinEffect {
	return map[string]builtinEffect{
		// dblink_exec runs a command on another server, usually a write.
		"dblink_exec": {access: Write, extension: true},
		// pg_stat_statements_reset clears the statistics the primary's operators look at.
		"pg_stat_statements_reset": {access: Write, extension: true},
		// pg_stat_statements keeps statistics per node: the standby's describe the standby.
		"pg_stat_statements":      {access: Write, extension: true, nodeLocal: true},
		"pg_stat_statements_info": {access: Write, extension: true, nodeLocal: true},
	}
}

// SessionChangingBuiltins lists, sorted, the pg_catalog functions whose call may change the
// session's state (set_config, advisory locks) or runs SQL text the analysis does not see. A
// stored expression (a column default, a CHECK) that calls none of them and no function outside
// pg_catalog changes nothing of the session: the catalogue need not read it (catalog's
// relations part).
func SessionChangingBuiltins() []string {
	var names []string
	for name, effect := range writingBuiltins() {
		if effect.session != 0 || effect.configSetter || effect.unseen != "" {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}
