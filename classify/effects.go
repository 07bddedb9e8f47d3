package classify

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Access says whether a statement may run on a standby (Read) or needs the primary (Write).
type Access uint8

const (
	// Read means the statement neither changes data nor needs state that exists only on the primary.
	Read Access = iota + 1
	// Write means the statement changes data, needs the primary, or has an effect the classifier cannot rule out.
	Write
)

var accessNames = [...]string{Read: "read", Write: "write"}

// String returns "read" or "write".
func (a Access) String() string {
	if int(a) < len(accessNames) && accessNames[a] != "" {
		return accessNames[a]
	}
	return fmt.Sprintf("access(%d)", uint8(a))
}

// MarshalText encodes the access as its String form.
func (a Access) MarshalText() ([]byte, error) {
	if int(a) >= len(accessNames) || accessNames[a] == "" {
		return nil, fmt.Errorf("classify: invalid access %d", uint8(a))
	}
	return []byte(accessNames[a]), nil
}

// UnmarshalText decodes "read" or "write".
func (a *Access) UnmarshalText(text []byte) error {
	for i, name := range accessNames {
		if name != "" && name == string(text) {
			*a = Access(i)
			return nil
		}
	}
	return fmt.Errorf("classify: unknown access %q", text)
}

// Reason says why a statement has its Access; its String form is a stable code for notices and logs.
type Reason uint8

const (
	// ReasonReadOnly means every part of the string was recognised as free of writes.
	ReasonReadOnly Reason = iota + 1
	// ReasonWrite means the statement modifies data or schema, or is a command that only the primary accepts.
	ReasonWrite
	// ReasonRowLock means a SELECT takes row locks (FOR UPDATE, FOR SHARE, ...), which only the primary can do.
	ReasonRowLock
	// ReasonWritingFunction means the statement calls a built-in function known to write or to need the primary.
	ReasonWritingFunction
	// ReasonUnknownEffect means the classifier cannot see what the statement does, so it fails closed to the primary.
	ReasonUnknownEffect
	// ReasonNodeLocalStats means the statement reads cumulative statistics or other state that each node
	// keeps for itself (pg_stat_*, pg_statio_*, pg_locks, pg_stat_statements, ...): a standby's copy does
	// not describe the primary, where the business runs, so it goes to the primary.
	ReasonNodeLocalStats
	// ReasonHint means a leading statement comment decided: /*pgowl:readonly*/ (Access Read: the client
	// asserts the statement only reads) or /*pgowl:primary*/ (Access Write).
	ReasonHint
	// ReasonNestingTooDeep means function or view analysis went deeper than Options.MaxDepth, so the
	// statement fails closed to the primary.
	ReasonNestingTooDeep
	// ReasonOverride means the statement only reads because a function it calls is asserted read-only
	// (COMMENT ON FUNCTION ... 'pgowl:readonly' or classify.functions.readonly); Subject names the assertion.
	ReasonOverride
)

var reasonNames = [...]string{
	ReasonReadOnly:        "READ_ONLY",
	ReasonWrite:           "WRITE",
	ReasonRowLock:         "ROW_LOCK",
	ReasonWritingFunction: "WRITING_FUNCTION",
	ReasonUnknownEffect:   "UNKNOWN_EFFECT",
	ReasonNodeLocalStats:  "NODE_LOCAL_STATS",
	ReasonHint:            "HINT",
	ReasonNestingTooDeep:  "NESTING_TOO_DEEP",
	ReasonOverride:        "OVERRIDE",
}

// ReadReason reports whether r is a reason a Read verdict may carry: READ_ONLY, OVERRIDE, or HINT.
func (r Reason) ReadReason() bool {
	return r == ReasonReadOnly || r == ReasonOverride || r == ReasonHint
}

// String returns the reason code, for example "ROW_LOCK".
func (r Reason) String() string {
	if int(r) < len(reasonNames) && reasonNames[r] != "" {
		return reasonNames[r]
	}
	return fmt.Sprintf("REASON(%d)", uint8(r))
}

// MarshalText encodes the reason as its code.
func (r Reason) MarshalText() ([]byte, error) {
	if int(r) >= len(reasonNames) || reasonNames[r] == "" {
		return nil, fmt.Errorf("classify: invalid reason %d", uint8(r))
	}
	return []byte(reasonNames[r]), nil
}

// UnmarshalText decodes a reason code such as "WRITING_FUNCTION".
func (r *Reason) UnmarshalText(text []byte) error {
	for i, name := range reasonNames {
		if name != "" && name == string(text) {
			*r = Reason(i)
			return nil
		}
	}
	return fmt.Errorf("classify: unknown reason %q", text)
}

// TxControl says how a statement changes the transaction state of the session.
type TxControl uint8

const (
	// TxNone means the statement does not start or end a transaction block.
	TxNone TxControl = iota
	// TxBegin is a read-write BEGIN or START TRANSACTION.
	TxBegin
	// TxBeginReadOnly is BEGIN or START TRANSACTION with READ ONLY.
	TxBeginReadOnly
	// TxEnd ends the transaction block: COMMIT, ROLLBACK, END, ABORT and PREPARE TRANSACTION.
	TxEnd
	// TxOther acts inside a transaction block without ending it: SAVEPOINT, RELEASE, ROLLBACK TO, SET TRANSACTION, SET CONSTRAINTS.
	TxOther
)

var txNames = [...]string{
	TxNone:          "NONE",
	TxBegin:         "BEGIN",
	TxBeginReadOnly: "BEGIN_READ_ONLY",
	TxEnd:           "END",
	TxOther:         "OTHER",
}

// String returns the transaction-control code, for example "BEGIN_READ_ONLY".
func (t TxControl) String() string {
	if int(t) < len(txNames) {
		return txNames[t]
	}
	return fmt.Sprintf("TX(%d)", uint8(t))
}

// MarshalText encodes the transaction control as its code.
func (t TxControl) MarshalText() ([]byte, error) {
	if int(t) >= len(txNames) {
		return nil, fmt.Errorf("classify: invalid tx control %d", uint8(t))
	}
	return []byte(txNames[t]), nil
}

// UnmarshalText decodes a transaction-control code such as "END".
func (t *TxControl) UnmarshalText(text []byte) error {
	for i, name := range txNames {
		if name == string(text) {
			*t = TxControl(i)
			return nil
		}
	}
	return fmt.Errorf("classify: unknown tx control %q", text)
}

// SessionEffect is a set of ways a statement changes session state that a pooled backend would carry over.
type SessionEffect uint32

const (
	// SessionSet is a session-level configuration change: SET, SET SESSION, RESET, set_config(..., false).
	SessionSet SessionEffect = 1 << iota
	// SessionDiscard is DISCARD ALL, PLANS, SEQUENCES or TEMP.
	SessionDiscard
	// SessionPrepare is a SQL-level PREPARE.
	SessionPrepare
	// SessionDeallocate is DEALLOCATE of one or all SQL-level prepared statements.
	SessionDeallocate
	// SessionListen is LISTEN.
	SessionListen
	// SessionUnlisten is UNLISTEN.
	SessionUnlisten
	// SessionTempTable is the creation of a temporary object: a TEMP table, view or sequence, or
	// any object created in the session's temporary schema (a function, type, domain, aggregate,
	// operator or foreign table in pg_temp).
	SessionTempTable
	// SessionHoldCursor is DECLARE ... WITH HOLD, a cursor that outlives its transaction.
	SessionHoldCursor
	// SessionAdvisoryLock is a session-level advisory lock or unlock (pg_advisory_lock and friends).
	SessionAdvisoryLock
	// SessionSetRole is SET ROLE, RESET ROLE or SET SESSION AUTHORIZATION at session level.
	SessionSetRole
	// SessionSerializableDefault makes serializable the session's default isolation level: a standby
	// accepts the SET but then refuses every later statement of the session ("cannot use serializable
	// mode in a hot standby"), so such a session can only be served by the primary.
	SessionSerializableDefault
	// SessionRelease marks a statement that may end state that pins a session: UNLISTEN, DISCARD,
	// DEALLOCATE, CLOSE, DROP (of a temporary table, or of a type, function or other object that may be
	// in the temporary schema) and the advisory unlock functions. Whether it
	// did depends on what else the session holds, so pgowl asks the node afterwards.
	SessionRelease
	// SessionDiscardAll is DISCARD ALL, which ends every kind of session state.
	SessionDiscardAll
	// SessionDeallocateAll is DEALLOCATE ALL, which also drops protocol-level prepared statements.
	SessionDeallocateAll
	// SessionUnknown marks a statement that may change session state the classifier cannot see:
	// DO, EXECUTE of an SQL prepared statement, CALL of a procedure whose body is not analysed,
	// a call of a function that runs a computed string as SQL, whose body cannot be parsed, or
	// that is VOLATILE in a procedural language other than SQL and PL/pgSQL (not C).
	SessionUnknown
)

// sessionCatalogueChange is not a session effect: it marks, inside the analysis, a function or
// procedure whose body creates, changes or drops what the catalogue holds (CREATE FUNCTION in a
// migration procedure), so that the finding travels to the caller along with the session effects.
// verdict.effects moves it to Effects.CatalogueChange; it never leaves the package in Effects.Session.
const sessionCatalogueChange SessionEffect = 1 << 31

// sessionNames lists the bits in declaration order with their codes.
var sessionNames = [...]struct {
	bit  SessionEffect
	name string
}{
	{SessionSet, "SET"},
	{SessionDiscard, "DISCARD"},
	{SessionPrepare, "PREPARE"},
	{SessionDeallocate, "DEALLOCATE"},
	{SessionListen, "LISTEN"},
	{SessionUnlisten, "UNLISTEN"},
	{SessionTempTable, "TEMP_TABLE"},
	{SessionHoldCursor, "HOLD_CURSOR"},
	{SessionAdvisoryLock, "ADVISORY_LOCK"},
	{SessionSetRole, "SET_ROLE"},
	{SessionSerializableDefault, "SERIALIZABLE_DEFAULT"},
	{SessionRelease, "RELEASE"},
	{SessionDiscardAll, "DISCARD_ALL"},
	{SessionDeallocateAll, "DEALLOCATE_ALL"},
	{SessionUnknown, "UNKNOWN"},
}

// Has reports whether every bit of other is set in s.
func (s SessionEffect) Has(other SessionEffect) bool { return s&other == other }

// Names returns the codes of the set bits in a fixed order, for example ["SET", "LISTEN"].
func (s SessionEffect) Names() []string {
	var names []string
	for _, entry := range sessionNames {
		if s&entry.bit != 0 {
			names = append(names, entry.name)
		}
	}
	if rest := s &^ allSessionEffects(); rest != 0 {
		names = append(names, fmt.Sprintf("0x%x", uint32(rest)))
	}
	return names
}

// String returns the codes of the set bits joined by "|", or "NONE".
func (s SessionEffect) String() string {
	if s == 0 {
		return "NONE"
	}
	return strings.Join(s.Names(), "|")
}

// MarshalJSON encodes the set as a JSON list of codes.
func (s SessionEffect) MarshalJSON() ([]byte, error) {
	names := s.Names()
	if names == nil {
		names = []string{}
	}
	return json.Marshal(names)
}

// UnmarshalJSON decodes a JSON list of codes such as ["SET","LISTEN"].
func (s *SessionEffect) UnmarshalJSON(data []byte) error {
	var names []string
	if err := json.Unmarshal(data, &names); err != nil {
		return fmt.Errorf("classify: session effects must be a list of codes: %w", err)
	}
	var set SessionEffect
	for _, name := range names {
		bit, ok := sessionBitByName(name)
		if !ok {
			return fmt.Errorf("classify: unknown session effect %q", name)
		}
		set |= bit
	}
	*s = set
	return nil
}

func sessionBitByName(name string) (SessionEffect, bool) {
	for _, entry := range sessionNames {
		if entry.name == name {
			return entry.bit, true
		}
	}
	return 0, false
}

func allSessionEffects() SessionEffect {
	var all SessionEffect
	for _, entry := range sessionNames {
		all |= entry.bit
	}
	return all
}

// PgowlKind says which pgowl-level command a statement is.
type PgowlKind uint8

const (
	// PgowlSet is SET pgowl.name = value (or TO value).
	PgowlSet PgowlKind = iota + 1
	// PgowlReset is RESET pgowl.name or SET pgowl.name TO DEFAULT.
	PgowlReset
	// PgowlShow is SHOW pgowl.name.
	PgowlShow
)

var pgowlKindNames = [...]string{PgowlSet: "SET", PgowlReset: "RESET", PgowlShow: "SHOW"}

// String returns "SET", "RESET" or "SHOW".
func (k PgowlKind) String() string {
	if int(k) < len(pgowlKindNames) && pgowlKindNames[k] != "" {
		return pgowlKindNames[k]
	}
	return fmt.Sprintf("PGOWL_KIND(%d)", uint8(k))
}

// MarshalText encodes the kind as its String form.
func (k PgowlKind) MarshalText() ([]byte, error) {
	if int(k) >= len(pgowlKindNames) || pgowlKindNames[k] == "" {
		return nil, fmt.Errorf("classify: invalid pgowl kind %d", uint8(k))
	}
	return []byte(pgowlKindNames[k]), nil
}

// UnmarshalText decodes "SET", "RESET" or "SHOW".
func (k *PgowlKind) UnmarshalText(text []byte) error {
	for i, name := range pgowlKindNames {
		if name != "" && name == string(text) {
			*k = PgowlKind(i)
			return nil
		}
	}
	return fmt.Errorf("classify: unknown pgowl kind %q", text)
}

// PgowlCommand is a SET, RESET or SHOW of a pgowl.* setting, which the proxy answers itself.
type PgowlCommand struct {
	// Kind is SET, RESET or SHOW.
	Kind PgowlKind `json:"kind"`
	// Name is the lower-case setting name after "pgowl.", for example "notice".
	Name string `json:"name"`
	// Value is the new value as text without quotes; empty for RESET and SHOW.
	Value string `json:"value,omitempty"`
	// Local is true for SET LOCAL, which lasts only until the end of the transaction.
	Local bool `json:"local,omitempty"`
}

// Effects is the classifier's verdict on one SQL string; values returned from the cache are shared and must not be modified.
type Effects struct {
	// Access is Read when the whole string may run on a standby.
	Access Access `json:"access"`
	// Reason is why the string has its Access.
	Reason Reason `json:"reason"`
	// Subject names what decided the verdict, for example "INSERT", "FOR UPDATE" or "nextval()".
	Subject string `json:"subject"`
	// Tx is the transaction control of the first statement that has one (see Merge).
	Tx TxControl `json:"tx"`
	// Session is the union of the session effects of all statements.
	Session SessionEffect `json:"session"`
	// Pgowl is non-nil when the string is exactly one SET, RESET or SHOW of a pgowl.* setting.
	Pgowl *PgowlCommand `json:"pgowl,omitempty"`
	// Statements is the number of statements in the string.
	Statements int `json:"statements"`
	// Fingerprint is pg_query's fingerprint as a hex string, or "" when the string does not parse.
	Fingerprint string `json:"fingerprint"`
	// Normalized is the string with literals replaced by $n; for unparseable input a fixed placeholder.
	Normalized string `json:"normalized"`
	// labels, when not nil, computes Fingerprint and Normalized when first asked (Label): effects
	// from Classifier.ClassifyToRoute may carry them so, for the proxy to label a statement once
	// it is on its way.
	labels *statementLabels
	// ParseError is the parser's message when the string does not parse; it may quote part of the input.
	ParseError string `json:"parse_error,omitempty"`
	// Chain lists the functions and views through which the deciding effect was found, outermost first,
	// for example ["f_report()", "audit_log(text)"]; empty when the statement's own text decided.
	Chain []string `json:"chain,omitempty"`
	// Detail says what the last element of Chain does, for example "INSERT INTO audit".
	Detail string `json:"detail,omitempty"`
	// Warnings are further findings and doubts worth showing in an explanation: other reasons the
	// statement would need the primary, overloads that could not be resolved, ignored hints, a catalogue
	// that could not be loaded.
	Warnings []string `json:"warnings,omitempty"`
	// Assumptions say where a read verdict rests on a function's declared volatility rather than on
	// what analysis saw, for example "EXECUTE of dynamic SQL taken as a read: f(text) is declared
	// STABLE": PostgreSQL refuses writes there, so what such a function hides can at worst fail on a
	// standby (nextval() in a dynamic string), never write.
	Assumptions []string `json:"assumptions,omitempty"`
	// RestsOn names what a read verdict rests on in the catalogue: every function called, relation
	// read and type cast to by name, found or not, in the string and in the functions and views it
	// runs (bare names, as CatalogueChanges lists them; names qualified with pg_catalog are not
	// listed; sorted, each once). A standby that has not replayed a change to one of them runs
	// another definition than the one the verdict was made with. RestsOnAll stands for every name
	// (there were more than can be listed). Both are empty for a write: it runs on the primary, which has every change.
	RestsOn    []string `json:"-"`
	RestsOnAll bool     `json:"-"`
	// CatalogueChange is set when some statement creates, changes or drops a function, procedure or view,
	// or comments on a function: cached function analyses of the database must be refreshed after it runs.
	CatalogueChange bool `json:"catalogue_change,omitempty"`
	// CatalogueChanges says what CatalogueChange changes: the names of the objects, or everything.
	// Set exactly when CatalogueChange is; pass it to Classifier.CatalogueChanged once the statement ran.
	CatalogueChanges *CatalogueChanges `json:"catalogue_changes,omitempty"`
	// SetConfigNames are the settings (lower case) that SET, RESET and set_config calls, in the
	// statement or in the functions it runs, may change, "" standing for a set_config whose name
	// is not a constant. A proxy reads their values back: settings of extensions and applications
	// (app.tenant) are not listed in pg_settings.
	SetConfigNames []string `json:"set_config_names,omitempty"`
	// SearchPath is set when the string is one statement that changes search_path (for the session, or
	// for the rest of the transaction block: SearchPathChange.Local).
	SearchPath *SearchPathChange `json:"search_path,omitempty"`

	// Transaction describes the first transaction-control statement, the one Tx comes from;
	// nil when there is none.
	Transaction *TransactionStatement `json:"transaction,omitempty"`
	// EndsBlock is set when a statement of the string ends a transaction block (TxKind.EndsBlock),
	// whichever it is: Transaction describes the first only, so in "SAVEPOINT b; COMMIT; BEGIN"
	// it is the SAVEPOINT.
	EndsBlock bool `json:"ends_block,omitempty"`
	// Settings are the setting changes the statements make by their own text, in order: SET,
	// RESET, RESET ALL, SET LOCAL, SET SESSION CHARACTERISTICS, and a statement that is one
	// set_config call with a constant name. A set_config call inside a larger statement or in
	// a function shows only in SetConfigNames (and Session).
	Settings []SettingChange `json:"settings,omitempty"`
	// Deallocates is the statement name a lone DEALLOCATE [PREPARE] name drops; empty otherwise
	// (DEALLOCATE ALL sets SessionDeallocateAll instead).
	Deallocates string `json:"deallocates,omitempty"`
	// Prepares are the names the string's SQL PREPARE statements make, in order.
	Prepares []string `json:"prepares,omitempty"`
	// UsesPrepared are the SQL-prepared statement names the string's EXECUTE (also under EXPLAIN
	// and CREATE TABLE AS) and DEALLOCATE statements name, in order.
	UsesPrepared []string `json:"uses_prepared,omitempty"`
	// Loads is the library a lone LOAD 'library' loads; empty otherwise.
	Loads string `json:"loads,omitempty"`
	// DiscardsSequences is set when some statement is DISCARD SEQUENCES or DISCARD ALL, which end
	// the session's currval and lastval state.
	DiscardsSequences bool `json:"discards_sequences,omitempty"`
}

// SearchPathChange is a change of search_path made by SET, RESET, SET ... TO DEFAULT, RESET ALL,
// DISCARD ALL or set_config('search_path', ...): session-level, or, marked Local, for the rest of
// the transaction block (SET LOCAL, set_config(..., true)).
type SearchPathChange struct {
	// Reset is true when the setting returns to the session's default (its startup value).
	Reset bool `json:"reset,omitempty"`
	// Schemas is the new path, one schema name per element exactly as PostgreSQL stores it
	// ("$user" included as written); meaningful when Reset is false.
	Schemas []string `json:"schemas,omitempty"`
	// Known is false when the new value could not be read (a parameter, an expression): the path is
	// then unknown and names resolve to nothing, so unknown functions stay on the primary.
	Known bool `json:"known"`
	// Local is set for SET LOCAL and set_config(..., true): the change holds until the transaction
	// block ends, and the session's own search_path is left as it was.
	Local bool `json:"local,omitempty"`
}

// ChainString renders the chain and its detail, for example
// "f_report() → audit_log(text) writes: INSERT INTO audit"; "" without a chain.
func (e *Effects) ChainString() string {
	if len(e.Chain) == 0 {
		return ""
	}
	text := strings.Join(e.Chain, " → ")
	if e.Detail != "" {
		verb := "writes"
		switch e.Reason {
		case ReasonUnknownEffect:
			verb = "has an unknown effect"
		case ReasonNodeLocalStats:
			verb = "reads node-local statistics"
		case ReasonNestingTooDeep:
			verb = "is nested too deeply"
		case ReasonRowLock:
			verb = "locks rows"
		case ReasonOverride, ReasonReadOnly, ReasonHint:
			verb = "is asserted read-only"
		}
		text += " " + verb + ": " + e.Detail
	}
	return text
}
