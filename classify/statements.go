package classify

import (
	"fmt"
	"strconv"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v5"
)

// verdict is the classification of one statement.
type verdict struct {
	access  Access
	reason  Reason
	subject string
	tx      TxControl
	session SessionEffect
	// settings are the names of settings set_config calls with a constant name may change.
	settings []string
	pgowl    *PgowlCommand
	// chain and detail explain a finding inside functions or views (see Effects.Chain).
	chain  []string
	detail string
	// searchPath is set when the statement changes the session's search_path.
	searchPath *SearchPathChange
	// catalogueChange marks DDL after which the function catalogue must be reloaded; changes says
	// what it changes (nil: everything).
	catalogueChange bool
	changes         *CatalogueChanges
	// The typed facts of the statement (see Effects).
	transaction    *TransactionStatement
	settingChanges []SettingChange
	deallocates    string
	// prepares and usesPrepared are the SQL-prepared statement names PREPARE makes and EXECUTE or
	// DEALLOCATE name (Effects.Prepares, UsesPrepared).
	prepares, usesPrepared []string
	loads                  string
	discardsSequences      bool
}

func read(subject string) verdict {
	return verdict{access: Read, reason: ReasonReadOnly, subject: subject}
}

func write(subject string) verdict {
	return verdict{access: Write, reason: ReasonWrite, subject: subject}
}

func unknownEffect(subject string) verdict {
	return verdict{access: Write, reason: ReasonUnknownEffect, subject: subject}
}

// cursorOptHold is PostgreSQL's CURSOR_OPT_HOLD bit in DeclareCursorStmt.options.
const cursorOptHold = 0x0020

// pgowlPrefix starts the names of settings the proxy answers itself.
const pgowlPrefix = "pgowl."

// statement classifies one top-level statement. Statement kinds that execute a query (SELECT, DML,
// COPY, DECLARE, CREATE TABLE AS, CALL, EXPLAIN ANALYZE) are also scanned for row locks,
// data-modifying WITH and function calls. Anything not recognised is a Write with an unknown effect.
func (a *analysis) statement(node *pg_query.Node) verdict {
	v := a.statementKind(node)
	if a.declared != "" {
		return a.takeDeclared(node, v)
	}
	if changes := catalogueChanges(node); changes != nil && (!a.body || !relationOnly(node) || a.dropsTrackedRelation(node)) {
		// Inside a function body, creating and dropping tables and sequences leaves the catalogue's
		// functions and views as they were (a function that creates a temporary table on every
		// call must not reload the catalogue on every call), unless what reading a dropped
		// table meant (its policies, unlogged data) is held.
		v.catalogueChange = true
		if a.changesPartitionsTriggers(node) {
			// The partitions' copies of the trigger change too, under names the statement
			// does not give.
			changes = everything()
		}
		v.changes = changes
		changes.Definitions = !relationOnly(node) && !writeRunsOnly(node)
		if !a.body {
			changes.Created = createdObject(node)
		}
	}
	if a.createsInTempSchema(node) {
		v.session |= SessionTempTable // it lives in the temporary schema, as long as the session's backend
	}
	if drop, ok := node.GetNode().(*pg_query.Node_DropStmt); ok {
		switch drop.DropStmt.GetRemoveType() {
		case pg_query.ObjectType_OBJECT_TABLE, pg_query.ObjectType_OBJECT_VIEW, pg_query.ObjectType_OBJECT_SEQUENCE,
			pg_query.ObjectType_OBJECT_FOREIGN_TABLE, pg_query.ObjectType_OBJECT_TYPE, pg_query.ObjectType_OBJECT_DOMAIN,
			pg_query.ObjectType_OBJECT_FUNCTION, pg_query.ObjectType_OBJECT_PROCEDURE, pg_query.ObjectType_OBJECT_ROUTINE,
			pg_query.ObjectType_OBJECT_AGGREGATE, pg_query.ObjectType_OBJECT_OPERATOR, pg_query.ObjectType_OBJECT_COLLATION,
			pg_query.ObjectType_OBJECT_TSCONFIGURATION, pg_query.ObjectType_OBJECT_TSDICTIONARY, pg_query.ObjectType_OBJECT_TSPARSER,
			pg_query.ObjectType_OBJECT_TSTEMPLATE, pg_query.ObjectType_OBJECT_CONVERSION, pg_query.ObjectType_OBJECT_OPCLASS,
			pg_query.ObjectType_OBJECT_OPFAMILY, pg_query.ObjectType_OBJECT_STATISTIC_EXT:
			v.session |= SessionRelease // it may drop the last object of the temporary schema (createsInTempSchema)
		}
	}
	return v
}

// changesPartitionsTriggers reports whether node creates, drops, enables or disables a trigger
// of a partitioned table the catalogue holds: PostgreSQL does the same to the trigger's copy on
// every partition.
func (a *analysis) changesPartitionsTriggers(node *pg_query.Node) bool {
	var rv *pg_query.RangeVar
	switch stmt := node.GetNode().(type) {
	case *pg_query.Node_CreateTrigStmt:
		rv = stmt.CreateTrigStmt.GetRelation()
	case *pg_query.Node_AlterTableStmt:
		if changesWriteRuns(stmt.AlterTableStmt) {
			rv = stmt.AlterTableStmt.GetRelation()
		}
	case *pg_query.Node_DropStmt:
		if stmt.DropStmt.GetRemoveType() == pg_query.ObjectType_OBJECT_TRIGGER {
			for _, object := range stmt.DropStmt.GetObjects() {
				items := object.GetList().GetItems()
				if len(items) < 2 {
					return true // not a name this knows: the safe side
				}
				rv = &pg_query.RangeVar{Relname: items[len(items)-2].GetString_().GetSval()}
				if len(items) > 2 {
					rv.Schemaname = items[len(items)-3].GetString_().GetSval()
				}
				if a.partitioned(rv) {
					return true
				}
			}
			return false
		}
	}
	return rv != nil && a.partitioned(rv)
}

// partitioned reports whether rv names a partitioned table the catalogue holds, along the path.
func (a *analysis) partitioned(rv *pg_query.RangeVar) bool {
	cat := a.run.cat
	if cat == nil {
		return false
	}
	for _, s := range schemasFor(rv.GetSchemaname(), a.env.path) {
		if kind, ok := cat.rels.get(qualified{s, rv.GetRelname()}); ok {
			return kind == 'p'
		}
	}
	return false
}

// relationOnly reports whether a statement creates or drops only tables, sequences or foreign tables.
func relationOnly(node *pg_query.Node) bool {
	switch stmt := node.GetNode().(type) {
	case *pg_query.Node_CreateStmt, *pg_query.Node_CreateTableAsStmt, *pg_query.Node_CreateSeqStmt:
		return true
	case *pg_query.Node_DropStmt:
		switch stmt.DropStmt.GetRemoveType() {
		case pg_query.ObjectType_OBJECT_TABLE, pg_query.ObjectType_OBJECT_SEQUENCE, pg_query.ObjectType_OBJECT_FOREIGN_TABLE:
			return true
		}
	}
	return false
}

// dropsTrackedRelation reports whether node is a DROP TABLE of a table the catalogue holds row
// security policies or unlogged data for.
func (a *analysis) dropsTrackedRelation(node *pg_query.Node) bool {
	drop, ok := node.GetNode().(*pg_query.Node_DropStmt)
	return ok && drop.DropStmt.GetRemoveType() == pg_query.ObjectType_OBJECT_TABLE && a.dropsTrackedTable(drop.DropStmt)
}

// dropsTrackedTable reports whether DROP TABLE names a table the catalogue holds row security
// policies or unlogged data for.
func (a *analysis) dropsTrackedTable(drop *pg_query.DropStmt) bool {
	cat := a.run.cat
	if cat == nil || (cat.readPolicies.len() == 0 && cat.unlogged.len() == 0) {
		return false
	}
	a.run.dependent = true
	for _, object := range drop.GetObjects() {
		var names []string
		for _, item := range object.GetList().GetItems() {
			names = append(names, item.GetString_().GetSval())
		}
		schemas := a.env.path
		switch len(names) {
		case 0:
			continue
		case 1:
		default:
			schemas = names[len(names)-2 : len(names)-1]
		}
		name := names[len(names)-1]
		a.dependOn(name)
		for _, schema := range schemas {
			key := qualified{schema, name}
			if cat.readPolicies.at(key) != nil || cat.unlogged.at(key) {
				return true
			}
		}
	}
	return false
}

// statementKind classifies one statement by its node type.
func (a *analysis) statementKind(node *pg_query.Node) verdict {
	if node == nil {
		return unknownEffect("empty statement node")
	}
	if a.body {
		// Inside a function body, COPY and transaction control (in procedures) need the primary too.
		switch stmt := node.Node.(type) {
		case *pg_query.Node_CopyStmt:
			return write("COPY")
		case *pg_query.Node_TransactionStmt:
			return write(strings.ToUpper(strings.TrimPrefix(stmt.TransactionStmt.GetKind().String(), "TRANS_STMT_")))
		case *pg_query.Node_ReturnStmt:
			return a.executed(node, read("RETURN"))
		}
	}
	switch stmt := node.Node.(type) {
	case *pg_query.Node_SelectStmt:
		return a.executed(node, read(selectSubject(stmt.SelectStmt)))
	case *pg_query.Node_InsertStmt:
		return a.executed(node, write("INSERT"))
	case *pg_query.Node_UpdateStmt:
		return a.executed(node, write("UPDATE"))
	case *pg_query.Node_DeleteStmt:
		return a.executed(node, write("DELETE"))
	case *pg_query.Node_MergeStmt:
		return a.executed(node, write("MERGE"))
	case *pg_query.Node_CallStmt:
		v := a.executed(node, write("CALL"))
		if v.reason == ReasonUnknownEffect {
			v.session |= SessionUnknown
		}
		return v
	case *pg_query.Node_DoStmt:
		v := write("DO")
		v.session = SessionUnknown
		return v
	case *pg_query.Node_ExplainStmt:
		return a.explain(stmt.ExplainStmt)
	case *pg_query.Node_CopyStmt:
		return a.copy(node, stmt.CopyStmt)
	case *pg_query.Node_DeclareCursorStmt:
		v := a.executed(stmt.DeclareCursorStmt.GetQuery(), read("DECLARE CURSOR"))
		if v.access == Read {
			v.subject = "DECLARE CURSOR"
		}
		if stmt.DeclareCursorStmt.GetOptions()&cursorOptHold != 0 {
			v.session |= SessionHoldCursor
		}
		return v
	case *pg_query.Node_FetchStmt:
		if stmt.FetchStmt.GetIsmove() {
			return read("MOVE")
		}
		return read("FETCH")
	case *pg_query.Node_ClosePortalStmt:
		v := read("CLOSE")
		v.session = SessionRelease // it may close the last WITH HOLD cursor
		return v
	case *pg_query.Node_PrepareStmt:
		// PREPARE runs nothing; its verdict is its query's so that a writing statement is prepared
		// where it will be executed. Session effects of the query happen only at EXECUTE.
		v := a.statement(stmt.PrepareStmt.GetQuery())
		if v.access == Read {
			v.subject = "PREPARE"
		}
		v.tx, v.pgowl = TxNone, nil
		v.session = SessionPrepare
		v.prepares = []string{stmt.PrepareStmt.GetName()}
		return v
	case *pg_query.Node_ExecuteStmt:
		v := unknownEffect("EXECUTE of SQL-prepared statement")
		v.session = SessionUnknown
		v.usesPrepared = []string{stmt.ExecuteStmt.GetName()}
		return v
	case *pg_query.Node_DeallocateStmt:
		v := read("DEALLOCATE")
		v.session = SessionDeallocate | SessionRelease
		if stmt.DeallocateStmt.GetName() == "" {
			v.session |= SessionDeallocateAll
		}
		v.deallocates = stmt.DeallocateStmt.GetName()
		if v.deallocates != "" {
			v.usesPrepared = []string{v.deallocates}
		}
		return v
	case *pg_query.Node_TransactionStmt:
		return transaction(stmt.TransactionStmt)
	case *pg_query.Node_VariableSetStmt:
		return variableSet(stmt.VariableSetStmt)
	case *pg_query.Node_VariableShowStmt:
		return show(stmt.VariableShowStmt.GetName())
	case *pg_query.Node_ConstraintsSetStmt:
		v := read("SET CONSTRAINTS")
		v.tx = TxOther
		v.transaction = &TransactionStatement{Kind: TxKindSetConstraints}
		return v
	case *pg_query.Node_DiscardStmt:
		v := read("DISCARD")
		v.session = SessionDiscard | SessionRelease
		if stmt.DiscardStmt.GetTarget() == pg_query.DiscardMode_DISCARD_ALL {
			v.session |= SessionDiscardAll
			v.searchPath = &SearchPathChange{Reset: true, Known: true}
		}
		switch stmt.DiscardStmt.GetTarget() {
		case pg_query.DiscardMode_DISCARD_ALL, pg_query.DiscardMode_DISCARD_SEQUENCES:
			v.discardsSequences = true
		}
		return v
	case *pg_query.Node_ListenStmt:
		// A standby refuses LISTEN ("cannot execute LISTEN during recovery"), and notifications
		// are only ever raised on the primary, so the listener must be there.
		v := write("LISTEN")
		v.session = SessionListen
		return v
	case *pg_query.Node_UnlistenStmt:
		v := read("UNLISTEN")
		v.session = SessionUnlisten | SessionRelease
		return v
	case *pg_query.Node_NotifyStmt:
		return write("NOTIFY")
	case *pg_query.Node_LockStmt:
		return write("LOCK")
	case *pg_query.Node_CheckPointStmt:
		return write("CHECKPOINT")
	case *pg_query.Node_VacuumStmt:
		if stmt.VacuumStmt.GetIsVacuumcmd() {
			return write("VACUUM")
		}
		return write("ANALYZE")
	case *pg_query.Node_CreateStmt:
		v := write("CREATE TABLE")
		if a.createsTemp(stmt.CreateStmt.GetRelation()) {
			v.subject = "CREATE TEMP TABLE"
			v.session = SessionTempTable
		}
		return v
	case *pg_query.Node_CreateTableAsStmt:
		subject := "CREATE TABLE AS"
		if stmt.CreateTableAsStmt.GetObjtype() == pg_query.ObjectType_OBJECT_MATVIEW {
			subject = "CREATE MATERIALIZED VIEW"
		}
		v := a.executed(stmt.CreateTableAsStmt.GetQuery(), write(subject))
		v.access, v.reason, v.subject = Write, ReasonWrite, subject
		if execute := stmt.CreateTableAsStmt.GetQuery().GetExecuteStmt(); execute != nil {
			v.usesPrepared = []string{execute.GetName()} // CREATE TABLE ... AS EXECUTE name
		}
		if a.createsTemp(stmt.CreateTableAsStmt.GetInto().GetRel()) {
			v.session |= SessionTempTable
		}
		return v
	case *pg_query.Node_ViewStmt:
		v := write("CREATE VIEW")
		if a.createsTemp(stmt.ViewStmt.GetView()) {
			v.session = SessionTempTable
		}
		return v
	case *pg_query.Node_CreateSeqStmt:
		v := write("CREATE SEQUENCE")
		if a.createsTemp(stmt.CreateSeqStmt.GetSequence()) {
			v.session = SessionTempTable
		}
		return v
	case *pg_query.Node_GrantStmt:
		if stmt.GrantStmt.GetIsGrant() {
			return write("GRANT")
		}
		return write("REVOKE")
	case *pg_query.Node_GrantRoleStmt:
		if stmt.GrantRoleStmt.GetIsGrant() {
			return write("GRANT")
		}
		return write("REVOKE")
	case *pg_query.Node_LoadStmt:
		// LOAD runs a shared library's initialisation code, which can do anything.
		v := unknownEffect("LOAD (effect unknown: loads a shared library)")
		v.loads = stmt.LoadStmt.GetFilename()
		return v
	}
	if subject, ok := utilityWriteSubject(node); ok {
		v := write(subject)
		if truncate, ok := node.GetNode().(*pg_query.Node_TruncateStmt); ok {
			// TRUNCATE runs the tables' ON TRUNCATE triggers.
			for _, rel := range truncate.TruncateStmt.GetRelations() {
				v = a.withWriteRuns(v, rel.GetRangeVar())
			}
		}
		return v
	}
	return unknownEffect(fmt.Sprintf("unrecognised statement %s", nodeTypeName(node)))
}

// executed classifies a statement that runs a query: base is the verdict for its kind, which a scan of
// the tree can only make stricter (a read becomes a write), and whose session effects the scan adds to.
func (a *analysis) executed(query *pg_query.Node, base verdict) verdict {
	if query == nil {
		return base
	}
	found := a.scan(query, base.access == Read)
	base.session |= found.session
	base.settings = mergeNames(base.settings, found.settings)
	if found.searchPath != nil {
		base.searchPath = found.searchPath
	}
	switch {
	case base.access == Read && found.reason != 0:
		base.access, base.reason, base.subject = Write, found.reason, found.subject
		base.chain, base.detail = found.chain, found.detail
	case base.access == Read && found.override != "":
		base.reason, base.subject = ReasonOverride, found.override
	case base.access == Write && found.reason != 0 && found.reason != ReasonWrite:
		a.warn("also " + found.reason.String() + ": " + found.subject)
	}
	return base
}

func selectSubject(stmt *pg_query.SelectStmt) string {
	if len(stmt.GetValuesLists()) > 0 {
		return "VALUES"
	}
	return "SELECT"
}

// explain classifies EXPLAIN: with ANALYZE it has the effect of the explained statement. Without
// ANALYZE the statement does not run, but planning it does run IMMUTABLE and STABLE functions with
// constant arguments (it folds them), and needs access to the relations (an unlogged table cannot
// be planned on a standby): those effects count, row locks of the statement do not. Planning a
// write plans the column defaults and rules the rewriter adds, which are not analysed: unknown.
func (a *analysis) explain(stmt *pg_query.ExplainStmt) verdict {
	if !explainAnalyzes(stmt.GetOptions()) {
		full := a.statement(stmt.GetQuery())
		if full.access == Write && full.reason == ReasonWrite {
			// Planning a write also plans what the rewriter adds: column
			// defaults and rules, which pgowl does not analyse.
			v := unknownEffect("EXPLAIN of a write (effect unknown: planning runs column defaults and rules)")
			v.chain, v.detail = []string{"EXPLAIN of a write"}, "planning runs column defaults and rules, which are not analysed"
			v.usesPrepared = full.usesPrepared // EXPLAIN CREATE TABLE ... AS EXECUTE name
			return v
		}
		plan := *a
		plan.planTime = true
		v := plan.executed(stmt.GetQuery(), read("EXPLAIN"))
		v.tx, v.pgowl = TxNone, nil
		v.usesPrepared = full.usesPrepared // EXPLAIN EXECUTE name plans that statement
		return v
	}
	v := a.statement(stmt.GetQuery())
	if v.access == Read {
		v.subject = "EXPLAIN ANALYZE"
	}
	v.tx, v.pgowl = TxNone, nil
	return v
}

// explainAnalyzes reports whether the EXPLAIN options turn ANALYZE on; the last mention wins, and a
// value we cannot read counts as on.
func explainAnalyzes(options []*pg_query.Node) bool {
	analyze := false
	for _, option := range options {
		def := option.GetDefElem()
		if def == nil || !strings.EqualFold(def.GetDefname(), "analyze") {
			continue
		}
		on, ok := booleanOption(def.GetArg())
		analyze = on || !ok
	}
	return analyze
}

// booleanOption reads a DefElem argument the way PostgreSQL's defGetBoolean does; a missing argument is true.
func booleanOption(arg *pg_query.Node) (value, ok bool) {
	if arg == nil {
		return true, true
	}
	switch v := arg.Node.(type) {
	case *pg_query.Node_Integer:
		switch v.Integer.GetIval() {
		case 0:
			return false, true
		case 1:
			return true, true
		}
	case *pg_query.Node_Boolean:
		return v.Boolean.GetBoolval(), true
	case *pg_query.Node_String_:
		return parseBool(v.String_.GetSval())
	case *pg_query.Node_AConst:
		return constBool(v.AConst)
	}
	return false, false
}

// parseBool accepts the spellings PostgreSQL's parse_bool accepts for whole words.
func parseBool(text string) (value, ok bool) {
	switch strings.ToLower(strings.TrimSpace(text)) {
	case "t", "true", "y", "yes", "on", "1":
		return true, true
	case "f", "false", "n", "no", "off", "0":
		return false, true
	}
	return false, false
}

// constBool reads a boolean-valued constant.
func constBool(constant *pg_query.A_Const) (value, ok bool) {
	if constant == nil || constant.GetIsnull() {
		return false, false
	}
	switch v := constant.Val.(type) {
	case *pg_query.A_Const_Boolval:
		return v.Boolval.GetBoolval(), true
	case *pg_query.A_Const_Ival:
		switch v.Ival.GetIval() {
		case 0:
			return false, true
		case 1:
			return true, true
		}
	case *pg_query.A_Const_Sval:
		return parseBool(v.Sval.GetSval())
	}
	return false, false
}

// constText renders a constant as PostgreSQL would pass it to a setting: the string without quotes.
func constText(constant *pg_query.A_Const) (string, bool) {
	if constant == nil || constant.GetIsnull() {
		return "", false
	}
	switch v := constant.Val.(type) {
	case *pg_query.A_Const_Sval:
		return v.Sval.GetSval(), true
	case *pg_query.A_Const_Ival:
		return strconv.FormatInt(int64(v.Ival.GetIval()), 10), true
	case *pg_query.A_Const_Fval:
		return v.Fval.GetFval(), true
	case *pg_query.A_Const_Boolval:
		return strconv.FormatBool(v.Boolval.GetBoolval()), true
	case *pg_query.A_Const_Bsval:
		return v.Bsval.GetBsval(), true
	}
	return "", false
}

// copy classifies COPY: FROM loads data (a write); TO a server file or program has a side effect on
// the server that runs it; TO STDOUT reads a table or has the effect of its query.
func (a *analysis) copy(node *pg_query.Node, stmt *pg_query.CopyStmt) verdict {
	switch {
	case stmt.GetIsFrom():
		// COPY FROM runs the table's triggers, defaults and CHECK constraints for each row, and its WHERE.
		return a.withWriteRuns(a.executed(stmt.GetWhereClause(), write("COPY FROM")), stmt.GetRelation())
	case stmt.GetIsProgram():
		return write("COPY TO PROGRAM")
	case stmt.GetFilename() != "":
		return write("COPY TO server file")
	}
	if rel := stmt.GetRelation(); rel != nil && stmt.GetQuery() == nil {
		// COPY table TO STDOUT reads the table: an unlogged one only on the primary.
		v := read("COPY TO STDOUT")
		if r := a.resolveRelation(rel, nil); r.access == Write {
			v.access, v.reason, v.subject, v.chain, v.detail = Write, r.reason, r.subject, r.chain, r.detail
		}
		return v
	}
	return a.executed(stmt.GetQuery(), read("COPY TO STDOUT"))
}

// withWriteRuns adds to v, a write of rel, the session effects of what writing rel runs (its
// triggers, defaults, CHECK constraints and rules: writeRunsOf).
func (a *analysis) withWriteRuns(v verdict, rel *pg_query.RangeVar) verdict {
	if rel == nil {
		return v
	}
	r := a.writeRunsOf(rel)
	v.session |= r.session
	v.settings = mergeNames(v.settings, r.settings)
	return v
}

// transaction classifies BEGIN, COMMIT, SAVEPOINT and friends.
func transaction(stmt *pg_query.TransactionStmt) verdict {
	switch stmt.GetKind() {
	case pg_query.TransactionStmtKind_TRANS_STMT_BEGIN, pg_query.TransactionStmtKind_TRANS_STMT_START:
		v := beginVerdict(transactionReadOnly(stmt.GetOptions()))
		v.transaction.transactionOptions(stmt.GetOptions())
		if transactionSerializable(stmt.GetOptions()) {
			// A standby refuses serializable transactions ("cannot use serializable mode in a hot standby").
			v.access, v.reason = Write, ReasonWrite
			v.subject = "BEGIN ISOLATION LEVEL SERIALIZABLE (not available on a standby)"
		}
		return v
	case pg_query.TransactionStmtKind_TRANS_STMT_COMMIT:
		return endVerdict("COMMIT", stmt.GetChain())
	case pg_query.TransactionStmtKind_TRANS_STMT_ROLLBACK:
		return endVerdict("ROLLBACK", stmt.GetChain())
	case pg_query.TransactionStmtKind_TRANS_STMT_SAVEPOINT:
		v := txOther("SAVEPOINT", TxKindSavepoint)
		v.transaction.Savepoint = stmt.GetSavepointName()
		return v
	case pg_query.TransactionStmtKind_TRANS_STMT_RELEASE:
		v := txOther("RELEASE SAVEPOINT", TxKindRelease)
		v.transaction.Savepoint = stmt.GetSavepointName()
		return v
	case pg_query.TransactionStmtKind_TRANS_STMT_ROLLBACK_TO:
		v := txOther("ROLLBACK TO SAVEPOINT", TxKindRollbackToSavepoint)
		v.transaction.Savepoint = stmt.GetSavepointName()
		return v
	case pg_query.TransactionStmtKind_TRANS_STMT_PREPARE:
		// Two-phase commit writes the prepared state and detaches the transaction from the session.
		v := write("PREPARE TRANSACTION")
		v.tx = TxEnd
		v.transaction = &TransactionStatement{Kind: TxKindPrepareTransaction}
		return v
	case pg_query.TransactionStmtKind_TRANS_STMT_COMMIT_PREPARED:
		return write("COMMIT PREPARED")
	case pg_query.TransactionStmtKind_TRANS_STMT_ROLLBACK_PREPARED:
		return write("ROLLBACK PREPARED")
	}
	return unknownEffect("unrecognised transaction statement")
}

// beginVerdict is shared by the full and the fast path.
func beginVerdict(readOnly bool) verdict {
	if readOnly {
		v := read("BEGIN READ ONLY")
		v.tx = TxBeginReadOnly
		v.transaction = &TransactionStatement{Kind: TxKindBegin, ReadOnly: true}
		return v
	}
	v := write("BEGIN (read-write transaction)")
	v.tx = TxBegin
	v.transaction = &TransactionStatement{Kind: TxKindBegin}
	return v
}

// endVerdict is shared by the full and the fast path. AND CHAIN starts a new transaction at once,
// so the transaction block goes on: TxOther, not TxEnd.
// subject is "COMMIT" (also for END) or "ROLLBACK" (also for ABORT).
func endVerdict(subject string, chain bool) verdict {
	commit := subject == "COMMIT"
	if chain {
		kind := TxKindRollbackAndChain
		if commit {
			kind = TxKindCommitAndChain
		}
		return txOther(subject+" AND CHAIN", kind)
	}
	v := read(subject)
	v.tx = TxEnd
	v.transaction = &TransactionStatement{Kind: TxKindRollback}
	if commit {
		v.transaction.Kind = TxKindCommit
	}
	return v
}

// txOther is a transaction-control statement that acts inside the block without ending it.
func txOther(subject string, kind TxKind) verdict {
	v := read(subject)
	v.tx = TxOther
	v.transaction = &TransactionStatement{Kind: kind}
	return v
}

// transactionReadOnly reports whether BEGIN/START TRANSACTION options ask for READ ONLY and name no READ WRITE.
func transactionReadOnly(options []*pg_query.Node) bool {
	readOnly := false
	for _, option := range options {
		def := option.GetDefElem()
		if def == nil || def.GetDefname() != "transaction_read_only" {
			continue
		}
		value, ok := booleanOption(def.GetArg())
		if !ok || !value {
			// Any READ WRITE counts, even one a later READ ONLY replaces: PostgreSQL applies
			// the modes in order, and a standby refuses the read-write one before it reaches
			// the next ("cannot set transaction read-write mode during recovery").
			return false
		}
		readOnly = true
	}
	return readOnly
}

// settingValue is one value of a SET statement.
type settingValue struct {
	text string
	ok   bool // false when the value is not a constant we can read
}

// variableSet classifies SET and RESET.
func variableSet(stmt *pg_query.VariableSetStmt) verdict {
	name := stmt.GetName()
	switch stmt.GetKind() {
	case pg_query.VariableSetKind_VAR_SET_VALUE, pg_query.VariableSetKind_VAR_SET_CURRENT:
		values := make([]settingValue, 0, len(stmt.GetArgs()))
		for _, arg := range stmt.GetArgs() {
			text, ok := constText(arg.GetAConst())
			values = append(values, settingValue{text: text, ok: ok})
		}
		v := setVerdict(name, stmt.GetIsLocal(), values)
		if stmt.GetKind() == pg_query.VariableSetKind_VAR_SET_CURRENT {
			v.searchPath = nil // SET ... FROM CURRENT keeps the value in force
		}
		return v
	case pg_query.VariableSetKind_VAR_SET_DEFAULT, pg_query.VariableSetKind_VAR_RESET:
		return resetVerdict(name, stmt.GetIsLocal(), stmt.GetKind() == pg_query.VariableSetKind_VAR_RESET)
	case pg_query.VariableSetKind_VAR_RESET_ALL:
		// RESET ALL leaves role and session_authorization alone (they are GUC_NO_RESET_ALL).
		v := read("RESET ALL")
		v.session = SessionSet
		v.settings = []string{"search_path"} // among all the others
		v.settingChanges = []SettingChange{{All: true, Reset: true, Replay: ReplayStatement}}
		if !stmt.GetIsLocal() {
			v.searchPath = &SearchPathChange{Reset: true, Known: true}
		}
		return v
	case pg_query.VariableSetKind_VAR_SET_MULTI:
		return setMulti(stmt)
	}
	return unknownEffect("unrecognised SET statement")
}

// setMulti classifies SET TRANSACTION, SET TRANSACTION SNAPSHOT and SET SESSION CHARACTERISTICS.
func setMulti(stmt *pg_query.VariableSetStmt) verdict {
	switch stmt.GetName() {
	case "TRANSACTION":
		tx := &TransactionStatement{Kind: TxKindSetTransaction}
		tx.transactionOptions(stmt.GetArgs())
		if transactionSerializable(stmt.GetArgs()) {
			v := write("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE (not available on a standby)")
			v.tx, v.transaction = TxOther, tx
			return v
		}
		if transactionReadWrite(stmt.GetArgs()) {
			// A standby refuses read-write mode ("cannot set transaction read-write mode during recovery").
			v := write("SET TRANSACTION READ WRITE")
			v.tx, v.transaction = TxOther, tx
			return v
		}
		v := txOther("SET TRANSACTION", TxKindSetTransaction)
		v.transaction = tx
		return v
	case "TRANSACTION SNAPSHOT":
		// The snapshot was exported on the primary (pg_export_snapshot needs it); it exists
		// nowhere else.
		v := txOther("SET TRANSACTION SNAPSHOT", TxKindSetTransactionSnapshot)
		v.access, v.reason = Write, ReasonNodeLocalStats
		v.subject = "SET TRANSACTION SNAPSHOT (an exported snapshot exists only on the primary, where pgowl runs pg_export_snapshot)"
		return v
	case "SESSION CHARACTERISTICS":
		v := read("SET SESSION CHARACTERISTICS")
		v.session = SessionSet
		v.settingChanges = []SettingChange{{Replay: ReplayStatement}}
		if transactionSerializable(stmt.GetArgs()) {
			v.session |= SessionSerializableDefault
		}
		return v
	}
	return unknownEffect("unrecognised SET statement")
}

// transactionSerializable reports whether transaction options ask for SERIALIZABLE; the last level wins.
func transactionSerializable(options []*pg_query.Node) bool {
	serializable := false
	for _, option := range options {
		def := option.GetDefElem()
		if def == nil || def.GetDefname() != "transaction_isolation" {
			continue
		}
		// Any serializable level counts, even one a later option replaces:
		// PostgreSQL applies the options in order, and a standby refuses the
		// serializable one before it reaches the next.
		level, ok := constText(def.GetArg().GetAConst())
		serializable = serializable || !ok || strings.EqualFold(level, "serializable")
	}
	return serializable
}

// transactionReadWrite reports whether SET TRANSACTION options ask for READ WRITE.
func transactionReadWrite(options []*pg_query.Node) bool {
	readWrite := false
	for _, option := range options {
		def := option.GetDefElem()
		if def == nil || def.GetDefname() != "transaction_read_only" {
			continue
		}
		value, ok := booleanOption(def.GetArg())
		// Any READ WRITE counts, as in transactionReadOnly.
		readWrite = readWrite || !ok || !value
	}
	return readWrite
}

// refusedTransactionSetting reports the generic-SET spellings of SET TRANSACTION READ WRITE and
// SET TRANSACTION ISOLATION LEVEL SERIALIZABLE, which a standby refuses; values it cannot read count
// as refused.
func refusedTransactionSetting(name string, values []settingValue) (string, bool) {
	if len(values) != 1 {
		return "", false
	}
	switch name {
	case "transaction_read_only":
		if readOnly, ok := parseBool(values[0].text); !values[0].ok || !ok || !readOnly {
			return "SET transaction_read_only = off", true
		}
	case "transaction_isolation":
		if !values[0].ok || strings.EqualFold(strings.TrimSpace(values[0].text), "serializable") {
			return "SET transaction_isolation = serializable (not available on a standby)", true
		}
	}
	return "", false
}

// roleSetting reports whether a setting changes the current user.
func roleSetting(name string) bool {
	return name == "role" || name == "session_authorization"
}

// setVerdict classifies SET name = values; it is shared by the full and the fast path.
func setVerdict(name string, local bool, values []settingValue) verdict {
	if setting, ok := pgowlSetting(name); ok {
		parts := make([]string, 0, len(values))
		for _, value := range values {
			parts = append(parts, value.text)
		}
		v := read("SET " + name)
		v.pgowl = &PgowlCommand{Kind: PgowlSet, Name: setting, Value: strings.Join(parts, ", "), Local: local}
		if !local {
			v.session = SessionSet
		}
		return v
	}
	if subject, refused := refusedTransactionSetting(name, values); refused {
		v := write(subject)
		v.tx = TxOther
		v.transaction = &TransactionStatement{Kind: TxKindSetTransaction}
		if name == "transaction_isolation" {
			v.transaction.Isolation, v.transaction.NamesSerializable = IsolationUnknown, true
			if values[0].ok {
				v.transaction.Isolation = isolationLevel(values[0].text)
			}
		}
		return v
	}
	if local {
		v := read("SET LOCAL")
		v.settings = []string{strings.ToLower(name)}
		v.settingChanges = []SettingChange{{Name: strings.ToLower(name), Local: true}}
		if name == "search_path" {
			v.searchPath = searchPathOf(values)
			v.searchPath.Local = true
		}
		return v
	}
	v := sessionSetting("SET", name)
	v.settings = []string{strings.ToLower(name)}
	if !roleSetting(name) {
		v.settingChanges = []SettingChange{{Name: strings.ToLower(name), Replay: ReplayStatement}}
	}
	if serializableDefault(name, values) {
		v.session |= SessionSerializableDefault
	}
	if name == "search_path" {
		v.searchPath = searchPathOf(values)
	}
	return v
}

// searchPathOf is the search_path change SET search_path = values makes.
func searchPathOf(values []settingValue) *SearchPathChange {
	change := &SearchPathChange{Known: true, Schemas: make([]string, 0, len(values))}
	for _, value := range values {
		change.Known = change.Known && value.ok
		change.Schemas = append(change.Schemas, value.text)
	}
	return change
}

// serializableDefault reports whether a session-level SET makes serializable the default isolation
// level; a value it cannot read counts as serializable.
func serializableDefault(name string, values []settingValue) bool {
	if name != "default_transaction_isolation" || len(values) != 1 {
		return false
	}
	return !values[0].ok || strings.EqualFold(strings.TrimSpace(values[0].text), "serializable")
}

// sessionSetting is the verdict of a session-level SET or RESET of an ordinary setting.
func sessionSetting(verb, name string) verdict {
	if roleSetting(name) {
		v := read(verb + " " + strings.ToUpper(strings.ReplaceAll(name, "_", " ")))
		// It may also go back to the login's role, which ends the pin (the node is asked).
		v.session = SessionSetRole | SessionRelease
		return v
	}
	v := read(verb)
	v.session = SessionSet
	return v
}

// resetVerdict classifies RESET name (isReset) and SET name TO DEFAULT.
func resetVerdict(name string, local, isReset bool) verdict {
	verb := "SET"
	if isReset {
		verb = "RESET"
	}
	if setting, ok := pgowlSetting(name); ok {
		subject := "RESET " + name
		if !isReset {
			subject = "SET " + name + " TO DEFAULT"
		}
		v := read(subject)
		v.pgowl = &PgowlCommand{Kind: PgowlReset, Name: setting, Local: local}
		if !local {
			v.session = SessionSet
		}
		return v
	}
	if local {
		v := read(verb + " LOCAL")
		v.settings = []string{strings.ToLower(name)}
		v.settingChanges = []SettingChange{{Name: strings.ToLower(name), Reset: true, Local: true}}
		if name == "search_path" {
			v.searchPath = &SearchPathChange{Reset: true, Known: true, Local: true}
		}
		return v
	}
	v := sessionSetting(verb, name)
	v.settings = []string{strings.ToLower(name)}
	if !roleSetting(name) {
		v.settingChanges = []SettingChange{{Name: strings.ToLower(name), Reset: true, Replay: ReplayStatement}}
	}
	if name == "search_path" {
		v.searchPath = &SearchPathChange{Reset: true, Known: true}
	}
	return v
}

// show classifies SHOW; it is shared by the full and the fast path.
func show(name string) verdict {
	if setting, ok := pgowlSetting(name); ok {
		v := read("SHOW " + name)
		v.pgowl = &PgowlCommand{Kind: PgowlShow, Name: setting}
		return v
	}
	if nodeLocalSetting(name) {
		return verdict{access: Write, reason: ReasonNodeLocalStats, subject: "SHOW " + strings.ToLower(name)}
	}
	return read("SHOW")
}

// pgowlSetting returns the lower-case setting name after "pgowl.", matching the prefix in any case.
func pgowlSetting(name string) (string, bool) {
	if len(name) <= len(pgowlPrefix) || !strings.EqualFold(name[:len(pgowlPrefix)], pgowlPrefix) {
		return "", false
	}
	return strings.ToLower(name[len(pgowlPrefix):]), true
}

// createsTemp reports whether a relation is created TEMP/TEMPORARY, in the session's temporary
// schema by name (pg_temp.x), or unqualified on a search path that creates there (pg_temp first).
func (a *analysis) createsTemp(rel *pg_query.RangeVar) bool {
	return isTemp(rel) || rel.GetSchemaname() == "" && a.unqualifiedCreatedInTemp()
}

// unqualifiedCreatedInTemp reports whether an object created under an unqualified name goes to the
// session's temporary schema: whether the search path creates there (pg_temp first). The verdict
// then rests on the session's search path, which the cache of statements by text alone does not
// tell apart, so the statement's verdict is not cached (a function body's analysis is memoised by
// search path already).
func (a *analysis) unqualifiedCreatedInTemp() bool {
	if !a.body {
		a.run.createsByPath = true
	}
	return a.env.createsInTemp
}

// createsInTempSchema reports whether node creates, in the session's temporary schema, an object
// that no TEMP keyword marks: a function, a type (composite, enum, range, domain, shell or base),
// an aggregate, operator, collation or text search object (DefineStmt), a foreign table (also
// by IMPORT FOREIGN SCHEMA), a conversion, operator class or family, or extended statistics.
// proxy/pins.go's check of what remains looks in each of their catalogues. It does when the name
// is qualified with pg_temp (pg_temp.x, pg_temp_N.x), or unqualified on a search path that creates
// there (pg_temp first). PostgreSQL keeps such an object, like a temporary table, only on the
// backend that made it, until that backend ends.
func (a *analysis) createsInTempSchema(node *pg_query.Node) bool {
	switch stmt := node.GetNode().(type) {
	case *pg_query.Node_CreateFunctionStmt:
		return a.namesInTemp(stmt.CreateFunctionStmt.GetFuncname())
	case *pg_query.Node_CompositeTypeStmt:
		return a.createsTemp(stmt.CompositeTypeStmt.GetTypevar())
	case *pg_query.Node_CreateEnumStmt:
		return a.namesInTemp(stmt.CreateEnumStmt.GetTypeName())
	case *pg_query.Node_CreateRangeStmt:
		return a.namesInTemp(stmt.CreateRangeStmt.GetTypeName())
	case *pg_query.Node_CreateDomainStmt:
		return a.namesInTemp(stmt.CreateDomainStmt.GetDomainname())
	case *pg_query.Node_DefineStmt:
		return a.namesInTemp(stmt.DefineStmt.GetDefnames())
	case *pg_query.Node_CreateForeignTableStmt:
		return a.createsTemp(stmt.CreateForeignTableStmt.GetBaseStmt().GetRelation())
	case *pg_query.Node_ImportForeignSchemaStmt:
		return namesTempSchema(stmt.ImportForeignSchemaStmt.GetLocalSchema())
	case *pg_query.Node_CreateConversionStmt:
		return a.namesInTemp(stmt.CreateConversionStmt.GetConversionName())
	case *pg_query.Node_CreateOpClassStmt:
		return a.namesInTemp(stmt.CreateOpClassStmt.GetOpclassname())
	case *pg_query.Node_CreateOpFamilyStmt:
		return a.namesInTemp(stmt.CreateOpFamilyStmt.GetOpfamilyname())
	case *pg_query.Node_CreateStatsStmt:
		return a.namesInTemp(stmt.CreateStatsStmt.GetDefnames()) // unnamed: in its table's schema
	}
	return false
}

// namesInTemp reports whether a created object's name (schema.name, or catalog.schema.name) is in
// the session's temporary schema, by name or, unqualified, by the search path.
func (a *analysis) namesInTemp(names []*pg_query.Node) bool {
	if len(names) == 1 {
		return a.unqualifiedCreatedInTemp()
	}
	return len(names) > 1 && namesTempSchema(names[len(names)-2].GetString_().GetSval())
}

// isTemp reports whether a relation is created TEMP/TEMPORARY, or in the
// session's temporary schema by name (pg_temp.x).
func isTemp(rel *pg_query.RangeVar) bool {
	return rel.GetRelpersistence() == "t" || namesTempSchema(rel.GetSchemaname())
}

// namesTempSchema reports whether a schema name written in a statement is the session's temporary
// schema (pg_temp, pg_temp_N), as the classifier takes such names.
func namesTempSchema(schema string) bool {
	return strings.HasPrefix(strings.ToLower(schema), "pg_temp")
}

// nodeTypeName names a node's type for messages, for example "AlterTableStmt".
func nodeTypeName(node *pg_query.Node) string {
	name := fmt.Sprintf("%T", node.Node)
	return strings.TrimPrefix(name, "*pg_query.Node_")
}
