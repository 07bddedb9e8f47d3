package classify

import (
	"slices"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v5"
)

// finding is what a scan of a statement's tree found: the strongest reason to send it to the primary
// (zero when none) and the session effects of the functions it calls.
type finding struct {
	reason  Reason
	subject string
	chain   []string
	detail  string
	session SessionEffect
	// settings are the names of settings set_config calls with a constant name may change.
	settings []string
	// override is the assertion a read relied on (a function asserted read-only); "" when none.
	override string
	// searchPath is set by set_config('search_path', ..., false).
	searchPath *SearchPathChange
}

// reasonRank orders reasons found inside one statement: a certain write beats a row lock, which beats
// a known writing function, which beats node-local statistics, which beat a function whose effect is
// unknown or nested too deeply. Certain knowledge is the more useful explanation.
func reasonRank(reason Reason) int {
	switch reason {
	case ReasonWrite:
		return 6
	case ReasonRowLock:
		return 5
	case ReasonWritingFunction:
		return 4
	case ReasonNodeLocalStats:
		return 3
	case ReasonNestingTooDeep:
		return 2
	case ReasonUnknownEffect:
		return 1
	}
	return 0
}

// scanner walks every message of a parse tree (eachChild, generated from pg_query's descriptors
// for every message type, and checked against them by TestGeneratedTreeCodeIsCurrent), so that no
// node type (and no field added by a future pg_query) can hide a function call or a row lock from
// it.
type scanner struct {
	a     *analysis
	found finding
	// relations are the RangeVars met, resolved after the walk, when every CTE name is known.
	relations []*pg_query.RangeVar
	ctes      map[string]bool
	// targets are relations a statement creates (SELECT INTO), which are not read.
	targets map[*pg_query.RangeVar]bool
	// written are the relations INSERT, UPDATE, DELETE and MERGE write: their triggers, defaults,
	// CHECK constraints and rules run (writeRunsOf).
	written []*pg_query.RangeVar
}

// scan walks the whole tree under root. Relations are resolved (views analysed, node-local
// statistics found) only for statements that are not writes already (resolveRelations, and no
// write found in the tree): a write goes to the primary whatever it reads, and the targets it
// creates are not in any catalogue. Of a write's relations only what reading them does to the
// session counts (readSessionEffect): a view it reads or writes runs its query's functions (an
// UPDATE or DELETE through a view its WHERE, RETURNING its select list, WITH CHECK OPTION its
// WHERE on the new row), a table its read policies.
func (a *analysis) scan(root *pg_query.Node, resolveRelations bool) finding {
	s := scanner{a: a}
	s.walk(root)
	writes := !resolveRelations || s.found.reason == ReasonWrite
	for _, rv := range s.relations {
		switch {
		case s.targets[rv]:
		case writes && slices.Contains(s.written, rv):
			s.applySession(a.readSessionEffect(rv, nil)) // a written relation is never a CTE
		case writes:
			s.applySession(a.readSessionEffect(rv, s.ctes))
		default:
			s.relation(rv)
		}
	}
	for _, rv := range s.written {
		s.applySession(a.writeRunsOf(rv))
	}
	if len(s.relations) > 0 {
		a.run.dependent = true
	}
	return s.found
}

// applySession records the session effects of what a write runs beside the statement (its
// triggers, defaults, CHECK constraints): the statement is a write already.
func (s *scanner) applySession(r fnResult) {
	s.found.session |= r.session
	s.found.settings = mergeNames(s.found.settings, r.settings)
}

// recordWrite records a data-modifying statement, which planning alone does not run.
func (s *scanner) recordWrite(subject string) {
	if !s.a.planTime {
		s.record(ReasonWrite, subject)
	}
}

// noteWritten keeps a relation the statement writes, unless it is only planned.
func (s *scanner) noteWritten(rv *pg_query.RangeVar) {
	if !s.a.planTime && rv != nil {
		s.written = append(s.written, rv)
	}
}

func (s *scanner) record(reason Reason, subject string) {
	s.recordChain(reason, subject, nil, "")
}

// recordChain keeps the strongest finding; a weaker one becomes a warning.
func (s *scanner) recordChain(reason Reason, subject string, chain []string, detail string) {
	if reasonRank(reason) > reasonRank(s.found.reason) {
		if s.found.reason != 0 {
			s.a.warn("also " + s.found.reason.String() + ": " + s.found.subject)
		}
		s.found.reason, s.found.subject, s.found.chain, s.found.detail = reason, subject, chain, detail
		return
	}
	if subject != s.found.subject || reason != s.found.reason {
		s.a.warn("also " + reason.String() + ": " + subject)
	}
}

// walk visits m and then every message below it, fields in declaration order.
func (s *scanner) walk(m any) {
	s.visit(m)
	eachChild(m, s.walk)
}

// visit inspects one message of the tree.
func (s *scanner) visit(message any) {
	switch node := message.(type) {
	case *pg_query.FuncCall:
		s.functionCall(node)
	case *pg_query.SelectStmt:
		if s.a.planTime {
			break // planning takes no row locks and creates nothing
		}
		if locks := node.GetLockingClause(); len(locks) > 0 {
			s.record(ReasonRowLock, lockSubject(locks[0].GetLockingClause()))
		}
		if into := node.GetIntoClause(); into != nil {
			if s.targets == nil {
				s.targets = make(map[*pg_query.RangeVar]bool)
			}
			s.targets[into.GetRel()] = true
			s.record(ReasonWrite, "SELECT INTO")
			if s.a.createsTemp(into.GetRel()) {
				s.found.session |= SessionTempTable
			}
		}
	case *pg_query.CommonTableExpr:
		if isDataModifying(node.GetCtequery()) && !s.a.planTime {
			s.record(ReasonWrite, "data-modifying WITH")
		}
	case *pg_query.InsertStmt:
		s.recordWrite("INSERT")
		s.noteWritten(node.GetRelation())
	case *pg_query.UpdateStmt:
		s.recordWrite("UPDATE")
		s.noteWritten(node.GetRelation())
	case *pg_query.DeleteStmt:
		s.recordWrite("DELETE")
		s.noteWritten(node.GetRelation())
	case *pg_query.MergeStmt:
		s.recordWrite("MERGE")
		s.noteWritten(node.GetRelation())
	case *pg_query.RangeVar:
		s.relations = append(s.relations, node)
	// Expressions that run a function without naming it (see implicit.go).
	case *pg_query.A_Expr:
		for _, name := range expressionOperators(node) {
			s.apply(s.a.resolveOperator(name))
		}
	case *pg_query.SubLink:
		if name := node.GetOperName(); len(name) > 0 {
			s.apply(s.a.resolveOperator(name))
		}
	case *pg_query.SortBy:
		if name := node.GetUseOp(); len(name) > 0 {
			s.apply(s.a.resolveOperator(name))
		}
	case *pg_query.TypeCast:
		s.apply(s.a.resolveCast(node))
	case *pg_query.CaseExpr:
		if node.GetArg() != nil {
			// CASE x WHEN y compares with x = y.
			s.apply(s.a.resolveOperator([]*pg_query.Node{pg_query.MakeStrNode("=")}))
		}
	case *pg_query.ColumnRef:
		if display, field, ok := attributeField(node); ok {
			s.apply(s.a.resolveAttribute(display, field))
		}
	case *pg_query.A_Indirection:
		for _, step := range node.GetIndirection() {
			if field, ok := step.GetNode().(*pg_query.Node_String_); ok {
				s.apply(s.a.resolveAttribute("(...)."+field.String_.GetSval(), field.String_.GetSval()))
			}
		}
	}
	if cte, ok := message.(*pg_query.CommonTableExpr); ok && cte.GetCtename() != "" {
		if s.ctes == nil {
			s.ctes = make(map[string]bool)
		}
		s.ctes[cte.GetCtename()] = true
	}
}

func isDataModifying(node *pg_query.Node) bool {
	switch node.GetNode().(type) {
	case *pg_query.Node_InsertStmt, *pg_query.Node_UpdateStmt, *pg_query.Node_DeleteStmt, *pg_query.Node_MergeStmt:
		return true
	}
	return false
}

func lockSubject(clause *pg_query.LockingClause) string {
	switch clause.GetStrength() {
	case pg_query.LockClauseStrength_LCS_FORKEYSHARE:
		return "FOR KEY SHARE"
	case pg_query.LockClauseStrength_LCS_FORSHARE:
		return "FOR SHARE"
	case pg_query.LockClauseStrength_LCS_FORNOKEYUPDATE:
		return "FOR NO KEY UPDATE"
	}
	return "FOR UPDATE"
}

// functionCall records the effect of one call.
func (s *scanner) functionCall(call *pg_query.FuncCall) {
	s.apply(s.a.resolveCall(call))
}

// apply records the effect of a call, named or implicit.
func (s *scanner) apply(r callResult) {
	s.found.session |= r.session
	s.found.settings = mergeNames(s.found.settings, r.settings)
	if r.searchPath != nil {
		s.found.searchPath = r.searchPath
	}
	if r.access == Write {
		s.recordChain(r.reason, r.subject, r.chain, r.detail)
	} else if r.override != "" && s.found.override == "" {
		s.found.override = r.override
	}
}

// relation records the effect of reading a relation: node-local statistics, or a view's definition.
func (s *scanner) relation(rv *pg_query.RangeVar) {
	r := s.a.resolveRelation(rv, s.ctes)
	s.found.session |= r.session
	s.found.settings = mergeNames(s.found.settings, r.settings)
	if r.access == Write {
		s.recordChain(r.reason, r.subject, r.chain, r.detail)
	} else if r.override != "" && s.found.override == "" {
		s.found.override = r.override
	}
}

// functionNames returns the parts of a call's qualified name.
func functionNames(call *pg_query.FuncCall) ([]string, bool) {
	parts := call.GetFuncname()
	if len(parts) == 0 || len(parts) > 3 {
		return nil, false
	}
	names := make([]string, 0, len(parts))
	for _, part := range parts {
		text, ok := part.GetNode().(*pg_query.Node_String_)
		if !ok {
			return nil, false
		}
		names = append(names, text.String_.GetSval())
	}
	return names, true
}

// setConfigEffect returns the session effect of set_config(setting_name, new_value, is_local): a
// session-level change unless is_local is the constant true; SessionSetRole when it sets the role.
// A session-level change of search_path (or of a setting whose name cannot be read) is reported too.
func setConfigEffect(call *pg_query.FuncCall) (SessionEffect, *SearchPathChange) {
	name, named := constText(functionArgument(call, 0).GetAConst())
	if local, ok := constBool(functionArgument(call, 2).GetAConst()); ok && local {
		// The rest of the transaction block resolves names on a local change of search_path.
		if !named || strings.EqualFold(name, "search_path") {
			value, known := constText(functionArgument(call, 1).GetAConst())
			change := &SearchPathChange{Known: named && known, Local: true}
			if change.Known {
				change.Schemas = SplitSearchPath(value)
			}
			return 0, change
		}
		return 0, nil
	}
	if !named {
		// The name may be role or session_authorization: a change no RESET ALL undoes and the
		// settings read back leave out, so it must pin the session as SET ROLE does, or another
		// client given the backend would run as that role.
		return SessionSet | SessionSetRole, &SearchPathChange{Known: false}
	}
	name = strings.ToLower(name)
	if roleSetting(name) {
		return SessionSetRole | SessionRelease, nil
	}
	value, ok := constText(functionArgument(call, 1).GetAConst())
	if name == "search_path" {
		change := &SearchPathChange{Known: ok}
		if ok {
			change.Schemas = SplitSearchPath(value)
		}
		return SessionSet, change
	}
	if serializableDefault(name, []settingValue{{text: value, ok: ok}}) {
		return SessionSet | SessionSerializableDefault, nil
	}
	return SessionSet, nil
}

// settingNamedByExpression is refusedSetConfig's subject for a set_config whose setting name is
// not a constant.
const settingNamedByExpression = "a setting named by an expression"

// refusedSetConfig reports a set_config call that a standby refuses, as SET of the same setting:
// transaction_read_only off, transaction_isolation serializable (at any is_local), or a setting
// whose name it cannot read.
func refusedSetConfig(call *pg_query.FuncCall) (string, bool) {
	name, ok := constText(functionArgument(call, 0).GetAConst())
	if !ok {
		// A name computed or given as a parameter may be transaction_read_only: what cannot be
		// read goes to the primary, as current_setting's does.
		return settingNamedByExpression, true
	}
	value, ok := constText(functionArgument(call, 1).GetAConst())
	return refusedTransactionSetting(strings.ToLower(name), []settingValue{{text: value, ok: ok}})
}

// readsNodeLocalSetting reports whether a current_setting call may read a setting whose value
// depends on the kind of server (nodeLocalSetting); a name that is not a constant may be one.
func readsNodeLocalSetting(call *pg_query.FuncCall) bool {
	name, ok := constText(functionArgument(call, 0).GetAConst())
	return !ok || nodeLocalSetting(name)
}

// functionArgument returns the positional argument at position, or nil. Named arguments are not
// matched: set_config does not accept them, and a nil argument makes callers assume the worst. A
// constant cast to a text or boolean type is the constant: the server writes the definitions it
// stores (a view's, a default's, a CHECK's) with such casts ('role'::text).
func functionArgument(call *pg_query.FuncCall, position int) *pg_query.Node {
	args := call.GetArgs()
	if position >= len(args) || args[position].GetNamedArgExpr() != nil {
		return nil
	}
	if cast := args[position].GetTypeCast(); cast != nil && cast.GetArg().GetAConst() != nil && keepsConstant(cast.GetTypeName()) {
		return cast.GetArg()
	}
	return args[position]
}

// keepsConstant reports whether a cast to typ leaves a string or boolean constant's value as it
// is: text and its kin, and boolean (without a type modifier or array bounds).
func keepsConstant(typ *pg_query.TypeName) bool {
	if len(typ.GetTypmods()) > 0 || len(typ.GetArrayBounds()) > 0 {
		return false
	}
	names := typ.GetNames()
	if len(names) == 0 || (len(names) == 2 && names[0].GetString_().GetSval() != "pg_catalog") || len(names) > 2 {
		return false
	}
	switch names[len(names)-1].GetString_().GetSval() {
	case "text", "varchar", "name", "bool":
		return true
	}
	return false
}

// displayName joins a qualified name, quoting parts that need it.
func displayName(names []string) string {
	quoted := make([]string, len(names))
	for i, name := range names {
		quoted[i] = quoteIdent(name)
	}
	return strings.Join(quoted, ".")
}

// quoteIdent double-quotes an identifier unless it is a plain lower-case name.
func quoteIdent(name string) string {
	plain := name != ""
	for i, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r == '_':
		case (r >= '0' && r <= '9') || r == '$':
			plain = plain && i > 0
		default:
			plain = false
		}
	}
	if plain {
		return name
	}
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}
