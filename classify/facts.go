package classify

import (
	"fmt"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v5"
)

// The typed facts of this file describe what a statement does to the session's transaction and
// settings, so that a proxy acts on them instead of reading the SQL text (or the display Subject)
// again. They come from the parse tree, or from the fast path for the statements it handles,
// and the two agree.

// TxKind names a transaction-control statement.
type TxKind uint8

const (
	// TxKindNone is no transaction-control statement.
	TxKindNone TxKind = iota
	// TxKindBegin is BEGIN or START TRANSACTION.
	TxKindBegin
	// TxKindCommit is COMMIT or END: it commits the block (a failed block rolls back).
	TxKindCommit
	// TxKindRollback is ROLLBACK or ABORT.
	TxKindRollback
	// TxKindCommitAndChain commits and starts a new transaction with the same characteristics.
	TxKindCommitAndChain
	// TxKindRollbackAndChain rolls back and starts a new transaction with the same characteristics.
	TxKindRollbackAndChain
	// TxKindSavepoint is SAVEPOINT.
	TxKindSavepoint
	// TxKindRelease is RELEASE [SAVEPOINT].
	TxKindRelease
	// TxKindRollbackToSavepoint is ROLLBACK TO [SAVEPOINT]: it undoes what ran since the savepoint,
	// settings included, and the block goes on.
	TxKindRollbackToSavepoint
	// TxKindPrepareTransaction is PREPARE TRANSACTION: it ends the block and detaches it from the session.
	TxKindPrepareTransaction
	// TxKindSetTransaction is SET TRANSACTION, or SET transaction_isolation / transaction_read_only
	// with a value a standby refuses.
	TxKindSetTransaction
	// TxKindSetTransactionSnapshot is SET TRANSACTION SNAPSHOT.
	TxKindSetTransactionSnapshot
	// TxKindSetConstraints is SET CONSTRAINTS.
	TxKindSetConstraints
)

var txKindNames = [...]string{
	TxKindNone:                   "NONE",
	TxKindBegin:                  "BEGIN",
	TxKindCommit:                 "COMMIT",
	TxKindRollback:               "ROLLBACK",
	TxKindCommitAndChain:         "COMMIT_AND_CHAIN",
	TxKindRollbackAndChain:       "ROLLBACK_AND_CHAIN",
	TxKindSavepoint:              "SAVEPOINT",
	TxKindRelease:                "RELEASE",
	TxKindRollbackToSavepoint:    "ROLLBACK_TO_SAVEPOINT",
	TxKindPrepareTransaction:     "PREPARE_TRANSACTION",
	TxKindSetTransaction:         "SET_TRANSACTION",
	TxKindSetTransactionSnapshot: "SET_TRANSACTION_SNAPSHOT",
	TxKindSetConstraints:         "SET_CONSTRAINTS",
}

// EndsBlock reports whether a transaction statement of kind k ends its transaction block, and
// with it whatever SET LOCAL set in it (AND CHAIN opens the next).
func (k TxKind) EndsBlock() bool {
	switch k {
	case TxKindCommit, TxKindRollback, TxKindCommitAndChain, TxKindRollbackAndChain, TxKindPrepareTransaction:
		return true
	}
	return false
}

// String returns the kind's code, for example "ROLLBACK_TO_SAVEPOINT".
func (k TxKind) String() string {
	if int(k) < len(txKindNames) {
		return txKindNames[k]
	}
	return fmt.Sprintf("TX_KIND(%d)", uint8(k))
}

// MarshalText encodes the kind as its code.
func (k TxKind) MarshalText() ([]byte, error) {
	if int(k) >= len(txKindNames) {
		return nil, fmt.Errorf("classify: invalid transaction statement kind %d", uint8(k))
	}
	return []byte(txKindNames[k]), nil
}

// UnmarshalText decodes a code such as "COMMIT_AND_CHAIN".
func (k *TxKind) UnmarshalText(text []byte) error {
	for i, name := range txKindNames {
		if name == string(text) {
			*k = TxKind(i)
			return nil
		}
	}
	return fmt.Errorf("classify: unknown transaction statement kind %q", text)
}

// Isolation is a transaction isolation level that a statement names.
type Isolation uint8

const (
	// IsolationUnnamed means the statement names no level: the session's default applies.
	IsolationUnnamed Isolation = iota
	// IsolationReadUncommitted is READ UNCOMMITTED (PostgreSQL runs it as READ COMMITTED).
	IsolationReadUncommitted
	// IsolationReadCommitted is READ COMMITTED.
	IsolationReadCommitted
	// IsolationRepeatableRead is REPEATABLE READ.
	IsolationRepeatableRead
	// IsolationSerializable is SERIALIZABLE, which a standby refuses.
	IsolationSerializable
	// IsolationUnknown is a level given by a value the classifier cannot read.
	IsolationUnknown
)

var isolationNames = [...]string{
	IsolationUnnamed:         "",
	IsolationReadUncommitted: "READ_UNCOMMITTED",
	IsolationReadCommitted:   "READ_COMMITTED",
	IsolationRepeatableRead:  "REPEATABLE_READ",
	IsolationSerializable:    "SERIALIZABLE",
	IsolationUnknown:         "UNKNOWN",
}

// String returns the level's code, for example "REPEATABLE_READ"; "" when unnamed.
func (l Isolation) String() string {
	if int(l) < len(isolationNames) {
		return isolationNames[l]
	}
	return fmt.Sprintf("ISOLATION(%d)", uint8(l))
}

// MarshalText encodes the level as its code.
func (l Isolation) MarshalText() ([]byte, error) {
	if int(l) >= len(isolationNames) {
		return nil, fmt.Errorf("classify: invalid isolation level %d", uint8(l))
	}
	return []byte(isolationNames[l]), nil
}

// UnmarshalText decodes a code such as "SERIALIZABLE".
func (l *Isolation) UnmarshalText(text []byte) error {
	for i, name := range isolationNames {
		if name == string(text) {
			*l = Isolation(i)
			return nil
		}
	}
	return fmt.Errorf("classify: unknown isolation level %q", text)
}

// isolationLevel reads a level as PostgreSQL spells it in transaction_isolation.
func isolationLevel(text string) Isolation {
	switch strings.ToLower(strings.Join(strings.Fields(text), " ")) {
	case "read uncommitted":
		return IsolationReadUncommitted
	case "read committed":
		return IsolationReadCommitted
	case "repeatable read":
		return IsolationRepeatableRead
	case "serializable":
		return IsolationSerializable
	}
	return IsolationUnknown
}

// TransactionStatement is the typed description of a transaction-control statement.
type TransactionStatement struct {
	// Kind is which statement it is.
	Kind TxKind `json:"kind"`
	// Isolation is the level BEGIN, START TRANSACTION or SET TRANSACTION asks for; with several
	// isolation options the last one wins, as in PostgreSQL.
	Isolation Isolation `json:"isolation,omitempty"`
	// NamesSerializable is set when some isolation option names SERIALIZABLE, or a level that
	// cannot be read: a standby refuses the statement, even when a later option changes the level.
	NamesSerializable bool `json:"names_serializable,omitempty"`
	// ReadOnly is set when the statement asks for READ ONLY (the last access mode wins).
	ReadOnly bool `json:"read_only,omitempty"`
	// Deferrable is set when the statement asks for DEFERRABLE (the last one wins).
	Deferrable bool `json:"deferrable,omitempty"`
	// Savepoint names the savepoint SAVEPOINT sets, RELEASE releases or ROLLBACK TO returns to.
	Savepoint string `json:"savepoint,omitempty"`
}

// transactionOptions fills isolation, access mode and deferrability from the option list of
// BEGIN, START TRANSACTION or SET TRANSACTION.
func (t *TransactionStatement) transactionOptions(options []*pg_query.Node) {
	for _, option := range options {
		def := option.GetDefElem()
		if def == nil {
			continue
		}
		switch def.GetDefname() {
		case "transaction_isolation":
			level, ok := constText(def.GetArg().GetAConst())
			t.Isolation = IsolationUnknown
			if ok {
				t.Isolation = isolationLevel(level)
			}
			t.NamesSerializable = t.NamesSerializable || t.Isolation == IsolationSerializable || t.Isolation == IsolationUnknown
		case "transaction_read_only":
			value, ok := booleanOption(def.GetArg())
			t.ReadOnly = ok && value
		case "transaction_deferrable":
			value, ok := booleanOption(def.GetArg())
			t.Deferrable = ok && value
		}
	}
}

// SettingReplay says how the change a statement makes to a setting reaches another backend of
// the session.
type SettingReplay uint8

const (
	// ReplayNone means the change cannot be carried by replaying anything the statement names:
	// its value is computed, or the statement does more than change the setting. A proxy reads
	// the session's settings back instead.
	ReplayNone SettingReplay = iota
	// ReplayStatement means the statement, sent again as it is, makes the same change and
	// nothing else: SET, RESET, RESET ALL, or a statement that is one set_config call with a
	// constant name and a literal value.
	ReplayStatement
	// ReplayReadBack means the statement is one set_config call with a constant name and a
	// parameter value: read the value the setting got, and replay that.
	ReplayReadBack
)

var settingReplayNames = [...]string{
	ReplayNone:      "NONE",
	ReplayStatement: "STATEMENT",
	ReplayReadBack:  "READ_BACK",
}

// String returns the replay's code, for example "READ_BACK".
func (r SettingReplay) String() string {
	if int(r) < len(settingReplayNames) {
		return settingReplayNames[r]
	}
	return fmt.Sprintf("REPLAY(%d)", uint8(r))
}

// MarshalText encodes the replay as its code.
func (r SettingReplay) MarshalText() ([]byte, error) {
	if int(r) >= len(settingReplayNames) {
		return nil, fmt.Errorf("classify: invalid setting replay %d", uint8(r))
	}
	return []byte(settingReplayNames[r]), nil
}

// UnmarshalText decodes a code such as "STATEMENT".
func (r *SettingReplay) UnmarshalText(text []byte) error {
	for i, name := range settingReplayNames {
		if name == string(text) {
			*r = SettingReplay(i)
			return nil
		}
	}
	return fmt.Errorf("classify: unknown setting replay %q", text)
}

// SettingChange is a change a statement makes, by its own text, to one setting or to all of them.
// SET ROLE and SET SESSION AUTHORIZATION are not settings changes here but pins (SessionSetRole),
// and pgowl.* settings are commands (Effects.Pgowl).
type SettingChange struct {
	// Name is the setting in lower case, as PostgreSQL names it ("timezone" for SET TIME ZONE,
	// "search_path" for SET SCHEMA, "client_encoding" for SET NAMES). It is empty for RESET ALL
	// and for SET SESSION CHARACTERISTICS, which changes the default_transaction_* settings.
	Name string `json:"name,omitempty"`
	// All is set for RESET ALL.
	All bool `json:"all,omitempty"`
	// Reset is set when the setting returns to the session's default: RESET, SET ... TO DEFAULT
	// and RESET ALL.
	Reset bool `json:"reset,omitempty"`
	// Local is set for SET LOCAL and set_config(..., true): the change ends with the transaction.
	Local bool `json:"local,omitempty"`
	// Replay says how the change reaches another backend of the session.
	Replay SettingReplay `json:"replay"`
}

// loneSetConfig returns the setting change of a statement that is exactly one call
// SELECT [pg_catalog.]set_config('name', value, is_local) with a constant name, a constant
// is_local and nothing else; value is a literal (the statement replays as it is) or a parameter
// (the value is read back), optionally cast. ok is false for any other statement.
func loneSetConfig(node *pg_query.Node) (SettingChange, bool) {
	stmt := node.GetSelectStmt()
	if stmt == nil || len(stmt.GetTargetList()) != 1 || stmt.GetOp() != pg_query.SetOperation_SETOP_NONE ||
		len(stmt.GetFromClause()) > 0 || stmt.GetWhereClause() != nil || len(stmt.GetGroupClause()) > 0 ||
		stmt.GetHavingClause() != nil || len(stmt.GetSortClause()) > 0 || stmt.GetLimitCount() != nil ||
		stmt.GetLimitOffset() != nil || len(stmt.GetDistinctClause()) > 0 || len(stmt.GetWindowClause()) > 0 ||
		len(stmt.GetValuesLists()) > 0 || stmt.GetWithClause() != nil || stmt.GetIntoClause() != nil ||
		len(stmt.GetLockingClause()) > 0 {
		return SettingChange{}, false
	}
	target := stmt.GetTargetList()[0].GetResTarget()
	if target == nil || target.GetName() != "" {
		return SettingChange{}, false
	}
	call := target.GetVal().GetFuncCall()
	if call == nil || len(call.GetArgs()) != 3 || call.GetAggStar() || call.GetAggDistinct() || call.GetFuncVariadic() ||
		call.GetOver() != nil || call.GetAggFilter() != nil || len(call.GetAggOrder()) > 0 {
		return SettingChange{}, false
	}
	names, ok := functionNames(call)
	if !ok || !(len(names) == 1 && names[0] == "set_config" || len(names) == 2 && names[0] == "pg_catalog" && names[1] == "set_config") {
		return SettingChange{}, false
	}
	nameConst := functionArgument(call, 0).GetAConst()
	if nameConst == nil || nameConst.GetSval() == nil {
		return SettingChange{}, false
	}
	name := strings.ToLower(nameConst.GetSval().GetSval())
	local, ok := constBool(functionArgument(call, 2).GetAConst())
	if !ok || name == "" || roleSetting(name) {
		return SettingChange{}, false
	}
	change := SettingChange{Name: name, Local: local}
	if local {
		return change, true
	}
	value := functionArgument(call, 1)
	if value == nil {
		return change, true
	}
	if cast := value.GetTypeCast(); cast != nil {
		value = cast.GetArg()
	}
	switch {
	case value.GetParamRef() != nil:
		change.Replay = ReplayReadBack
	case value.GetAConst() != nil && value.GetAConst().GetSval() != nil:
		change.Replay = ReplayStatement
	}
	return change, true
}
