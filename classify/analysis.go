package classify

import (
	"math"
	"slices"
	"strconv"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v5"
	"google.golang.org/protobuf/proto"
)

// analysis is one classification in progress, or a nested analysis of a function body or a view
// definition within it. Nested analyses share the run.
type analysis struct {
	c     *Classifier
	env   *env
	run   *run
	depth int
	// body is set while analysing a function body, where COPY and transaction control are writes.
	body bool
	// declared is set while analysing the body of a STABLE or IMMUTABLE SQL or PL/pgSQL function:
	// "f(text) is declared STABLE". PostgreSQL refuses data-modifying and utility statements there,
	// dynamic ones included, so those are taken as reads (see takeDeclared).
	declared string
	// planTime is set while analysing what planning a statement runs (EXPLAIN without ANALYZE):
	// only calls of IMMUTABLE and STABLE user functions, which the planner may evaluate with
	// constant arguments, in the statement and the views it reads. The bodies of such functions
	// are analysed in full.
	planTime bool
}

// skippedAtPlanTime reports whether planning cannot run a call candidate: a built-in (those
// that act are VOLATILE, which the planner never evaluates) or a VOLATILE user function that
// cannot be inlined and has no default arguments.
func (a *analysis) skippedAtPlanTime(fn *Function) bool {
	// A VOLATILE SQL function may be inlined (and what it calls folded), and
	// default arguments are filled in while planning: those count.
	return a.planTime && (fn == nil || fn.Kind != 'f' ||
		(fn.Volatility == 'v' && fn.Language != "sql" && fn.DefaultExprs == ""))
}

// run is the state shared by one classification and everything it analyses.
type run struct {
	// cat is the catalogue in use; a lookup after a miss may replace it with a newer one.
	cat *Catalogue
	// dependent is set when the verdict may depend on the context (catalogue, search path,
	// parameter types): any function call or relation reference.
	dependent bool
	// provisional: the verdict is made without a catalogue on purpose, to be made again with one
	// (ClassifyWithoutCatalogue); otherwise a classification without a catalogue is final.
	provisional bool
	warnings    []string
	// frames are the functions and views being analysed, outermost first, for cycle detection.
	frames []frame
	// budget bounds the function bodies and views analysed for one statement.
	budget int
	// uncacheable is set when a lookup could not be made: the verdict must not be cached.
	uncacheable bool
	// createsByPath is set when an unqualified CREATE's verdict rests on whether the search path
	// creates in pg_temp (unqualifiedCreatedInTemp): the cache by text alone must not keep it.
	createsByPath bool
	// assumptions say where the verdict rests on a function's declared volatility (see assume).
	assumptions []string
	// restsOn are the names the whole string's verdict rests on (see dependOn), for
	// Effects.RestsOn; restsOnAll: more than maxRestsOn, kept as resting on every name.
	restsOn    []string
	restsOnAll bool
}

// cacheable reports whether the run's verdict may be cached: every lookup was made, and it does not
// rest on whether the search path creates unqualified names in pg_temp.
func (r *run) cacheable() bool { return !r.uncacheable && !r.createsByPath }

type frame struct {
	key memoKey
	// height is the greatest height of what the frame's function or view calls.
	height int
	// tainted means the frame's result depends on something it cannot own (a frame further out in a
	// cycle, or the analysis budget), so it must not be memoised.
	tainted bool
	// reachedDepthLimit means something the frame calls was past classify.max_depth: its result
	// is memoised only as a bound (see fnResult.atLeastHeight).
	reachedDepthLimit bool
	// assumptions are those made inside the frame, memoised with its result.
	assumptions []string
	// dependsOn are the names of the functions the frame's result rests on (see dependOn);
	// dependsOnTooMany means they were more than maxDependencies and were not kept.
	dependsOn        []string
	dependsOnTooMany bool
}

// maxDependencies bounds the function names one memoised result keeps; a result that rests on
// more is not carried into the next catalogue (see Catalogue.KeepAnalysesFrom).
const maxDependencies = 64

// dependOn records, for every function or view being analysed, that its result rests on what the
// catalogue holds under a name: a call resolved by that name (or found nowhere), a function whose
// effect was taken, a relation read or a type cast to by that name (found or not). A change to
// functions of another name, or the addition of relations and types of another name, cannot
// change the result, so the next catalogue may keep it.
func (a *analysis) dependOn(name string) {
	// The string's list keeps repeats but for the last name (Effects.RestsOn drops them once):
	// a check for each would cost the square of the names a memoised result brings.
	if r := a.run; !r.restsOnAll && (len(r.restsOn) == 0 || r.restsOn[len(r.restsOn)-1] != name) {
		if len(r.restsOn) == maxRestsOn {
			r.restsOn, r.restsOnAll = nil, true
		} else {
			r.restsOn = append(r.restsOn, name)
		}
	}
	for i := range a.run.frames {
		f := &a.run.frames[i]
		if f.dependsOnTooMany || slices.Contains(f.dependsOn, name) {
			continue
		}
		if len(f.dependsOn) == maxDependencies {
			f.dependsOn, f.dependsOnTooMany = nil, true
			continue
		}
		f.dependsOn = append(f.dependsOn, name)
	}
}

// dependOnResult records a memoised result's dependencies in every frame being analysed.
func (a *analysis) dependOnResult(result *fnResult) {
	if result.dependsOnTooMany {
		for i := range a.run.frames {
			a.run.frames[i].dependsOn, a.run.frames[i].dependsOnTooMany = nil, true
		}
		a.run.restsOn, a.run.restsOnAll = nil, true
		return
	}
	for _, name := range result.dependsOn {
		a.dependOn(name)
	}
}

// maxRestsOn bounds the names one verdict lists in Effects.RestsOn, repeats included; past it,
// the verdict rests on every name (Effects.RestsOnAll).
const maxRestsOn = 256

// maxAssumptions bounds the assumptions one verdict lists.
const maxAssumptions = 8

// assume records that the verdict takes something on a function's declaration, for the statement
// and for every function or view being analysed (their memoised results carry it, so a later
// statement that reaches them reports it too).
func (a *analysis) assume(texts ...string) {
	r := a.run
	for _, text := range texts {
		if len(r.assumptions) < maxAssumptions && !slices.Contains(r.assumptions, text) {
			r.assumptions = append(r.assumptions, text)
		}
		for i := range r.frames {
			if f := &r.frames[i]; len(f.assumptions) < maxAssumptions && !slices.Contains(f.assumptions, text) {
				f.assumptions = append(f.assumptions, text)
			}
		}
	}
}

// memoKey identifies one memoised analysis: a function (kind 'f') under a search path, or a view ('v').
type memoKey struct {
	kind byte
	oid  uint32
	path string
}

const (
	maxWarnings = 16
	// analysisBudget bounds the bodies analysed (not found in the memo) for one statement.
	analysisBudget = 2000
	// budgetExhausted is the detail of a body the budget did not reach: never read, so not
	// something a STABLE declaration can vouch for (see runEffect).
	budgetExhausted = "analysis budget exhausted"
)

// warn adds a statement-level warning; warnings from nested analyses are left out, because memoised
// results do not carry them and verdicts must not depend on what happened to be analysed before.
func (a *analysis) warn(text string) {
	r := a.run
	if a.depth > 0 || len(r.warnings) >= maxWarnings {
		return
	}
	for _, w := range r.warnings {
		if w == text {
			return
		}
	}
	r.warnings = append(r.warnings, text)
}

// child returns an analysis one level deeper, for a function body or a view.
func (a *analysis) child(e *env, body bool) *analysis {
	return &analysis{c: a.c, env: e, run: a.run, depth: a.depth + 1, body: body}
}

// callResult is the effect of one function call or relation reference, as the scanner records it.
type callResult struct {
	access     Access
	reason     Reason
	subject    string
	chain      []string
	detail     string
	session    SessionEffect
	settings   []string
	override   string
	searchPath *SearchPathChange
}

// fnResult is the memoised effect of running a function or reading a view, seen from inside: chain
// lists what it calls on the way to the deciding effect, without the function itself.
type fnResult struct {
	access   Access
	reason   Reason
	chain    []string
	detail   string
	session  SessionEffect
	settings []string
	override string
	// height is how many levels of functions and views the analysis went through, this one
	// included; a memoised result deeper than the remaining depth is too deep, whatever the order
	// in which functions happened to be analysed.
	height int
	// assumptions are what the result takes on declarations (see analysis.assume).
	assumptions []string
	// atLeastHeight, when not 0, marks a result that reached classify.max_depth: the function or
	// view is at least this high, so a use from a depth where that is past the limit is too deep;
	// from a shallower one it must be analysed again.
	atLeastHeight int
	// dependsOn and dependsOnTooMany are the frame's (see frame), for memoised results.
	dependsOn        []string
	dependsOnTooMany bool
}

// chainSubject renders a finding reached through functions or views as a Subject.
func chainSubject(reason Reason, chain []string, detail string) string {
	text := strings.Join(chain, " → ")
	switch reason {
	case ReasonUnknownEffect:
		return text + " (effect unknown: " + detail + ")"
	case ReasonNodeLocalStats:
		if detail != "" {
			return text + " → " + detail
		}
	case ReasonNestingTooDeep:
		if len(chain) > 0 {
			return chain[0] + " (" + detail + ")"
		}
	}
	return text
}

// fromFn turns the effect of a function or view into the effect of calling or reading it.
func fromFn(display string, r fnResult) callResult {
	res := callResult{access: r.access, session: r.session, settings: r.settings}
	if r.access == Read {
		res.override = r.override
		return res
	}
	res.reason = r.reason
	res.chain = append([]string{display}, r.chain...)
	res.detail = r.detail
	res.subject = chainSubject(res.reason, res.chain, res.detail)
	return res
}

// lookup asks the catalogue source about a name the current catalogue does not hold, once per name
// and catalogue; it reports whether a newer catalogue is now in use.
func (a *analysis) lookup(schema, name string) bool {
	source, cat := a.c.catalogues, a.run.cat
	missing := qualifiedText(schema, name)
	if source == nil || cat == nil || a.env.database == "" || cat.missed(missing) {
		return false
	}
	newer, looked := source.Lookup(a.env.database, cat, name)
	switch {
	case !looked:
		a.run.uncacheable = true
		return false
	case newer == nil || newer == cat:
		cat.noteMiss(missing)
		return false
	}
	a.run.cat = newer
	return true
}

// notFound records that a name is missing from the catalogue in use even after a lookup.
func (a *analysis) notFound(name string) {
	if cat := a.run.cat; cat != nil && a.c.catalogues != nil && !a.run.uncacheable {
		cat.noteMiss(name)
	}
}

// candidate is one function a call may run: a pg_catalog built-in (fn nil) or a catalogue function.
type candidate struct {
	fn      *Function
	builtin builtinEffect
}

// resolveCall finds what a call may run and what that does. Names are looked up along the search
// path (pg_catalog's built-ins through the reviewed tables, other schemas through the catalogue);
// every overload whose argument count fits is a candidate, and when candidates differ in effect the
// evident argument types decide, or the call is unknown.
func (a *analysis) resolveCall(call *pg_query.FuncCall) callResult {
	names, ok := functionNames(call)
	if !ok {
		return callResult{access: Write, reason: ReasonUnknownEffect, subject: "function call (effect unknown: unreadable name)"}
	}
	a.run.dependent = true
	name := names[len(names)-1]
	schema := ""
	if len(names) >= 2 {
		schema = names[len(names)-2]
	}
	display := displayName(names)
	schemas := a.env.path
	if schema != "" {
		schemas = []string{schema}
	}
	allowBuiltin := len(names) <= 2
	nargs := len(call.GetArgs())
	var named []string
	for _, arg := range call.GetArgs() {
		if n := arg.GetNamedArgExpr(); n != nil {
			named = append(named, n.GetName())
		}
	}
	for attempt := 0; attempt < 2; attempt++ {
		if cands := a.candidates(schemas, name, allowBuiltin, nargs, named); len(cands) > 0 {
			return a.choose(call, display, name, cands)
		}
		if effect, ok := a.c.functions.extensions[name]; ok {
			return a.builtinResult(call, name, display, effect)
		}
		if attempt > 0 || !a.lookup(schema, name) {
			if attempt > 0 {
				a.notFound(qualifiedText(schema, name))
			}
			break
		}
	}
	if a.run.cat == nil {
		if resolver := a.c.functions.resolver; resolver != nil {
			if resolved, ok := resolver.ResolveFunction(FunctionCall{Schema: schema, Name: name, Args: nargs}); ok {
				res := callResult{access: resolved.Access, session: resolved.Session}
				if res.access != Read {
					res.access = Write
					res.reason = resolved.Reason
					if res.reason != ReasonWritingFunction {
						res.reason = ReasonUnknownEffect
					}
					res.subject = display + "()"
					if res.reason == ReasonUnknownEffect {
						res.subject += " (effect unknown)"
					}
				}
				return res
			}
		}
		res := callResult{access: Write, reason: ReasonUnknownEffect, subject: display + "() (effect unknown: not analysed yet)",
			chain: []string{display + "()"}, detail: "not analysed yet: no function catalogue"}
		if a.c.catalogues != nil && !a.run.provisional {
			// The catalogue could not be had (its read failed, or outlasted the wait): this
			// verdict is final, and what the call does to the session is not known either (a
			// SET ROLE, a LISTEN), so the node is asked after it, as after a DO block.
			res.session = SessionUnknown
		}
		return res
	}
	detail := "not found"
	if schema == "" {
		detail = "not found on the search path"
	}
	return callResult{access: Write, reason: ReasonUnknownEffect, subject: display + "() (effect unknown: " + detail + ")",
		chain: []string{display + "()"}, detail: detail}
}

func qualifiedText(schema, name string) string {
	if schema == "" {
		return name
	}
	return schema + "." + name
}

// candidates lists the functions named name in schemas, in search-path order, whose argument count
// fits nargs and that have an argument of each name in named (a call in named notation); of several
// with the same argument types only the first (the one PostgreSQL picks) stays.
func (a *analysis) candidates(schemas []string, name string, allowBuiltin bool, nargs int, named []string) []candidate {
	a.dependOn(name) // found or not: a function created under this name may be chosen next time
	var cands []candidate
	cat := a.run.cat
	for _, schema := range schemas {
		if schema == "pg_catalog" {
			if allowBuiltin {
				if effect, ok := a.c.functions.builtin(name); ok {
					cands = append(cands, candidate{builtin: effect})
				}
			}
			continue
		}
		if cat == nil {
			continue
		}
	next:
		for _, f := range cat.funcs.at(qualified{schema, name}) {
			if !argCountFits(f, nargs) || !hasArgNames(f, named, nargs-len(named)) {
				continue
			}
			for _, existing := range cands {
				if existing.fn != nil && sameArgTypes(existing.fn, f) {
					continue next
				}
			}
			cands = append(cands, candidate{fn: f})
		}
	}
	return cands
}

func argCountFits(f *Function, nargs int) bool {
	inputs := len(f.ArgTypes)
	minimum := inputs - f.Defaults
	if f.Variadic && minimum > inputs-1 {
		minimum = inputs - 1
	}
	return nargs >= minimum && (nargs <= inputs || f.Variadic)
}

// hasArgNames reports whether f has an input argument of each name that the positional
// arguments before them (PostgreSQL puts those first) have not already filled.
func hasArgNames(f *Function, names []string, positional int) bool {
	for _, name := range names {
		if i := slices.Index(f.ArgNames, name); i < positional {
			return false
		}
	}
	return true
}

func sameArgTypes(x, y *Function) bool {
	if len(x.ArgTypes) != len(y.ArgTypes) {
		return false
	}
	for i := range x.ArgTypes {
		if x.ArgTypes[i] != y.ArgTypes[i] {
			return false
		}
	}
	return true
}

// builtinResult is the effect of calling a built-in (or a known extension function).
func (a *analysis) builtinResult(call *pg_query.FuncCall, name, display string, effect builtinEffect) callResult {
	res := callResult{access: effect.access, session: effect.session}
	refusedSetting := ""
	if effect.configSetter {
		res.session, res.searchPath = setConfigEffect(call)
		// The name, also for a change local to the transaction; "" when it is not a constant.
		name, _ := constText(functionArgument(call, 0).GetAConst())
		res.settings = []string{strings.ToLower(name)}
		if subject, refused := refusedSetConfig(call); refused {
			res.access, refusedSetting = Write, subject
		}
	}
	if effect.settingReader && readsNodeLocalSetting(call) {
		res.access = Write
		effect.nodeLocal = true
	}
	if res.access == Write {
		res.reason = ReasonWritingFunction
		switch {
		case effect.nodeLocal:
			res.reason = ReasonNodeLocalStats
		case effect.unseen != "":
			res.reason, res.detail = ReasonUnknownEffect, effect.unseen
		}
		res.subject = quoteIdent(name) + "()"
		if effect.extension {
			res.subject = display + "()"
		}
		if refusedSetting != "" {
			res.subject = "set_config() as " + refusedSetting
		}
		if refusedSetting == settingNamedByExpression {
			// Not known to write: what it sets cannot be read, and it may be
			// transaction_read_only, which a standby refuses to turn off.
			res.reason, res.detail = ReasonUnknownEffect, "the setting's name is not a constant; it may be transaction_read_only"
		}
	}
	return res
}

// choose resolves a call among its candidates.
func (a *analysis) choose(call *pg_query.FuncCall, display, name string, cands []candidate) callResult {
	results := make([]callResult, len(cands))
	for i, c := range cands {
		if a.skippedAtPlanTime(c.fn) {
			results[i] = callResult{access: Read}
		} else if c.fn == nil {
			results[i] = a.builtinResult(call, name, display, c.builtin)
		} else {
			results[i] = fromFn(c.fn.Signature(), a.functionEffect(c.fn))
		}
	}
	if agree(results) {
		return merge(results)
	}
	if narrowed := a.narrow(call, cands); len(narrowed) > 0 && len(narrowed) < len(cands) {
		picked := make([]callResult, 0, len(narrowed))
		for _, i := range narrowed {
			picked = append(picked, results[i])
		}
		if agree(picked) {
			return merge(picked)
		}
	}
	signatures := make([]string, len(cands))
	for i, c := range cands {
		signatures[i] = display + "() (built-in)"
		if c.fn != nil {
			signatures[i] = c.fn.Signature()
		}
	}
	return a.differingEffects(display+"()", "overloads differ in effect and the call does not say which runs",
		"overloads differ in effect", signatures, results)
}

// differingEffects is the effect of a call or expression that may run one of several functions
// whose effects differ, when nothing says which: unknown, with every candidate and its effect in
// the detail. label names the call ("f()", "operator ###"), why and short say why it is unknown.
func (a *analysis) differingEffects(label, why, short string, signatures []string, results []callResult) callResult {
	list := make([]string, len(results))
	for i, r := range results {
		effect := "reads"
		if r.access == Write {
			effect = r.reason.String()
		}
		list[i] = signatures[i] + " " + effect
	}
	detail := why + ": " + strings.Join(list, ", ")
	a.warn(label + ": " + detail)
	res := callResult{access: Write, reason: ReasonUnknownEffect, chain: []string{label}, detail: detail,
		subject: label + " (effect unknown: " + short + ")"}
	for _, r := range results {
		res.session |= r.session
		res.settings = mergeNames(res.settings, r.settings)
	}
	return res
}

// agree reports whether every result has the same access.
func agree(results []callResult) bool {
	for _, r := range results[1:] {
		if r.access != results[0].access {
			return false
		}
	}
	return true
}

// merge combines results that agree in access: the strongest write reason, the union of session effects.
func merge(results []callResult) callResult {
	best := results[0]
	var session SessionEffect
	var settings []string
	for _, r := range results {
		session |= r.session
		settings = mergeNames(settings, r.settings)
		if r.access == Write && reasonRank(r.reason) > reasonRank(best.reason) {
			best = r
		}
		if r.access == Read && best.override == "" && r.override != "" {
			best.override = r.override
		}
	}
	best.session = session
	best.settings = settings
	return best
}

// mergeNames returns the union of two lists of setting names, keeping a's order; a is returned
// as is when b adds nothing.
func mergeNames(a, b []string) []string {
	for _, name := range b {
		if !slices.Contains(a, name) {
			a = append(a[:len(a):len(a)], name)
		}
	}
	return a
}

// argEvidence is what a call's argument says about its type.
type argEvidence struct {
	oid uint32
	// exact: a cast, a typed parameter or a boolean; literal: an integer or decimal constant, whose
	// type PostgreSQL may still cast implicitly.
	exact, literal bool
}

// Type OIDs the resolver needs.
const (
	oidBool    = 16
	oidInt4    = 23
	oidInt8    = 20
	oidNumeric = 1700
	oidRecord  = 2249
)

// isInt64Literal reports whether a numeric literal's text is an integer that
// fits in bigint (digits only: a sign is a separate operator to the parser).
func isInt64Literal(text string) bool {
	digits := strings.TrimPrefix(text, "-") // the parser folds a unary minus into the constant
	if digits == "" {
		return false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return false
		}
	}
	_, err := strconv.ParseInt(text, 10, 64)
	return err == nil
}

// polymorphic reports whether a parameter type accepts any argument type.
func polymorphic(oid uint32) bool {
	switch oid {
	case 2276, 2277, 2283, 2776, 3500, 3831, 4537, 4538, 5077, 5078, 5079, 5080:
		return true
	}
	return false
}

// narrow keeps the catalogue candidates whose parameter types match every evident argument type
// exactly (casts, typed parameters, booleans), then, among those, the ones that match integer and
// decimal literals exactly as PostgreSQL prefers. It returns nil when a built-in is a candidate (its
// signature is not known here) or nothing can be decided.
func (a *analysis) narrow(call *pg_query.FuncCall, cands []candidate) []int {
	for _, c := range cands {
		if c.fn == nil {
			return nil
		}
	}
	args := call.GetArgs()
	evidence := make([]argEvidence, len(args))
	for i, arg := range args {
		evidence[i] = a.evidence(arg)
	}
	var keep []int
	for i, c := range cands {
		ok := true
		for j, e := range evidence {
			if !e.exact {
				continue
			}
			if parameter := paramType(c.fn, j); parameter != e.oid && !polymorphic(parameter) {
				ok = false
				break
			}
		}
		if ok {
			keep = append(keep, i)
		}
	}
	if len(keep) == 0 {
		return nil
	}
	var literal []int
	for _, i := range keep {
		ok, any := true, false
		for j, e := range evidence {
			if !e.literal {
				continue
			}
			any = true
			if paramType(cands[i].fn, j) != e.oid {
				ok = false
				break
			}
		}
		if ok && any {
			literal = append(literal, i)
		}
	}
	if len(literal) > 0 {
		return literal
	}
	return keep
}

// paramType is the declared type of argument position j; positions covered by VARIADIC accept anything here.
func paramType(f *Function, j int) uint32 {
	if j < len(f.ArgTypes) && !(f.Variadic && j == len(f.ArgTypes)-1) {
		return f.ArgTypes[j]
	}
	return 2276
}

// evidence reads an argument's evident type.
func (a *analysis) evidence(arg *pg_query.Node) argEvidence {
	switch n := arg.GetNode().(type) {
	case *pg_query.Node_AConst:
		if n.AConst.GetIsnull() {
			return argEvidence{}
		}
		switch n.AConst.GetVal().(type) {
		case *pg_query.A_Const_Ival:
			return argEvidence{oid: oidInt4, literal: true}
		case *pg_query.A_Const_Fval:
			// An integer too large for integer is still an integer to
			// PostgreSQL: bigint when it fits (make_const), numeric beyond.
			if v := n.AConst.GetFval().GetFval(); isInt64Literal(v) {
				// make_const: integer when it fits (-2147483648 does, after the
				// parser folded the minus in), bigint otherwise.
				if i, _ := strconv.ParseInt(v, 10, 64); i >= math.MinInt32 && i <= math.MaxInt32 {
					return argEvidence{oid: oidInt4, literal: true}
				}
				return argEvidence{oid: oidInt8, literal: true}
			}
			return argEvidence{oid: oidNumeric, literal: true}
		case *pg_query.A_Const_Boolval:
			return argEvidence{oid: oidBool, exact: true}
		}
	case *pg_query.Node_TypeCast:
		if oid := a.typeOID(n.TypeCast.GetTypeName()); oid != 0 {
			return argEvidence{oid: oid, exact: true}
		}
	case *pg_query.Node_ParamRef:
		number := int(n.ParamRef.GetNumber())
		if number >= 1 && number <= len(a.env.params) && a.env.params[number-1] != 0 {
			return argEvidence{oid: a.env.params[number-1], exact: true}
		}
	}
	return argEvidence{}
}

// builtinTypes are the pg_catalog types casts name most often, for catalogues without a type list.
var builtinTypes = map[string]uint32{
	"bool": 16, "bytea": 17, "int8": 20, "int2": 21, "int4": 23, "text": 25, "oid": 26, "json": 114,
	"float4": 700, "float8": 701, "bpchar": 1042, "varchar": 1043, "date": 1082, "time": 1083,
	"timestamp": 1114, "timestamptz": 1184, "interval": 1186, "numeric": 1700, "regclass": 2205,
	"uuid": 2950, "jsonb": 3802,
}

// typeOID resolves a cast's type name, or 0.
func (a *analysis) typeOID(tn *pg_query.TypeName) uint32 {
	var parts []string
	for _, n := range tn.GetNames() {
		s, ok := n.GetNode().(*pg_query.Node_String_)
		if !ok {
			return 0
		}
		parts = append(parts, s.String_.GetSval())
	}
	if len(parts) == 0 || len(parts) > 3 || tn.GetSetof() || tn.GetPctType() {
		return 0
	}
	name := parts[len(parts)-1]
	// A type created later under this name may be the one found; its array type is named
	// after it. A name qualified with pg_catalog (as the parser writes int, text and the other
	// SQL types) is not: a change adding to pg_catalog keeps no analysis.
	if len(parts) < 2 || parts[len(parts)-2] != "pg_catalog" {
		a.dependOn(name)
		if base, array := strings.CutPrefix(name, "_"); array {
			a.dependOn(base)
		}
	}
	if len(tn.GetArrayBounds()) > 0 {
		name = "_" + name
	}
	schemas := a.env.path
	if len(parts) >= 2 {
		schemas = []string{parts[len(parts)-2]} // schema.type, or database.schema.type
	}
	if cat := a.run.cat; cat != nil {
		for _, schema := range schemas {
			if t, ok := cat.types.get(qualified{schema, name}); ok {
				return t.OID
			}
		}
	}
	for _, schema := range schemas {
		if schema == "pg_catalog" {
			return builtinTypes[name]
		}
	}
	return 0
}

// functionEffect analyses what calling f does: what running it does, and the CHECK constraints
// of domains its arguments take, which run as the caller converts the arguments.
func (a *analysis) functionEffect(f *Function) fnResult {
	a.dependOn(f.Name)
	r := a.runEffect(f)
	if cat := a.run.cat; cat == nil || cat.domainChecks.len() == 0 {
		return r
	}
	checks := callResult{access: Read}
	for _, oid := range f.ArgTypes {
		if a.run.cat.domainBase.at(oid) != 0 {
			checks = stronger(checks, a.domainChecks(oid))
		}
	}
	// Arrays of the domain, VARIADIC, OUT and TABLE columns, the result: the signature's text
	// (read with search_path = pg_catalog, so such a type shows qualified) names the domain.
	for oid, t := range a.run.cat.domainChecks.all() {
		if mentionsType(f.Arguments, t) || mentionsType(f.Result, t) {
			checks = stronger(checks, a.domainChecks(oid))
		}
	}
	if checks.access != Write || (r.access == Write && reasonRank(r.reason) >= reasonRank(checks.reason)) {
		return r
	}
	return fnResult{access: Write, reason: checks.reason, chain: checks.chain, detail: checks.detail,
		session: r.session | checks.session, settings: mergeNames(r.settings, checks.settings), height: r.height}
}

// mentionsType reports whether a signature's text names type t (as schema.name, quoted as
// format_type quotes), alone or as an array.
func mentionsType(text string, t *Type) bool {
	if text == "" {
		return false
	}
	name := quoteIdent(t.Schema) + "." + quoteIdent(t.Name)
	for from := 0; ; {
		at := strings.Index(text[from:], name)
		if at < 0 {
			return false
		}
		at += from
		end := at + len(name)
		before := at == 0 || !isIdentByte(text[at-1]) && text[at-1] != '.' && text[at-1] != '"'
		after := end == len(text) || !isIdentByte(text[end]) && text[end] != '.'
		if before && after {
			return true
		}
		from = at + 1
	}
}

// runEffect analyses what running f does, memoised per catalogue and search path.
func (a *analysis) runEffect(f *Function) fnResult {
	if kind, source := f.directive(); kind == "writes" {
		return fnResult{access: Write, reason: ReasonWritingFunction, detail: "asserted by " + source}
	} else if kind == "readonly" {
		// The assertion is about data: what the body does to the session (SET ROLE,
		// set_config, an advisory lock, LISTEN) still counts, so that it stays with its client.
		body := a.functionBodyEffect(f)
		return fnResult{access: Read, override: f.Signature() + " asserted read-only by " + source,
			session: body.session, settings: body.settings}
	}
	if effect, ok := a.c.functions.extensions[f.Name]; ok && effect.access == Write {
		reason := ReasonWritingFunction
		if effect.nodeLocal {
			reason = ReasonNodeLocalStats
		}
		return fnResult{access: Write, reason: reason, detail: extensionDetail(f.Name, effect)}
	}
	if setting, refused := f.refusedSetting(); refused {
		// PostgreSQL applies the function's SET clauses as it enters it: a standby refuses
		// this one before the body runs, whatever the body does.
		return fnResult{access: Write, reason: ReasonWritingFunction, detail: "its clause " + setting + " is refused by a standby"}
	}
	if f.DefaultExprs != "" {
		// PostgreSQL evaluates the default of an omitted argument in the caller,
		// whatever the function's own volatility. (Counted whether or not the
		// call omits it: a default with an effect is rare, and safer counted.)
		if r := a.defaultsEffect(f); r.access == Write {
			return r
		}
	}
	nonVolatile := f.Kind != 'a' && (f.Volatility == 'i' || f.Volatility == 's')
	if nonVolatile && f.Language != "sql" && f.Language != "plpgsql" {
		// PostgreSQL refuses data-modifying statements in a STABLE or
		// IMMUTABLE function; a body pgowl cannot read is taken at its word.
		return fnResult{access: Read}
	}
	if nonVolatile {
		// The declaration does not cover everything that matters: a STABLE
		// function may call nextval() or read node-local statistics. Its
		// body decides (with what PostgreSQL refuses there taken as reads,
		// see takeDeclared). What the analysis cannot see in the body itself
		// (a statement it cannot parse, a search_path it cannot follow) falls
		// back to the declaration, as its dynamic SQL does (plWalker.dynamic).
		// An unknown effect reached through a call, a view or a relation
		// (r.chain names it) does not: a VOLATILE function runs its own
		// statements read-write whoever calls it, so a VOLATILE callee that
		// cannot be analysed, or overloads of which one writes, may write.
		r := a.functionBodyEffect(f)
		if r.access == Write && r.reason == ReasonUnknownEffect && len(r.chain) == 0 && !bodyUnread(r.detail) {
			assumption := chainSubject(r.reason, []string{f.Signature()}, r.detail) +
				" taken as a read: " + f.Signature() + " is declared " + volatilityName(f.Volatility)
			a.assume(assumption)
			return fnResult{access: Read, session: r.session, settings: r.settings, height: r.height,
				assumptions: append(slices.Clone(r.assumptions), assumption)}
		}
		return r
	}
	return a.functionBodyEffect(f)
}

// functionBodyEffect analyses the body of a SQL or PL/pgSQL function (or an
// aggregate's support functions); any other body has an unknown effect.
func (a *analysis) functionBodyEffect(f *Function) fnResult {
	bodyEnv := a.env.session
	runsAs := f.runsAs()
	if path, ok := f.searchPathSetting(); ok {
		// A function's SET search_path holds while it runs, for the
		// functions it calls as well.
		if runsAs != "" {
			bodyEnv = a.env.withSessionPathAs(path, runsAs)
		} else {
			bodyEnv = a.env.withSessionPath(path)
		}
	} else if runsAs != "" && runsAs != bodyEnv.user && bodyEnv.schemas != nil {
		// A SECURITY DEFINER function, or one with SET role, runs as another user: "$user" on the
		// path in force is that user while it runs (PostgreSQL computes the path again when the
		// current user changes), also for what it calls.
		bodyEnv = a.env.withSessionPathAs(bodyEnv.schemas, runsAs)
	}
	// The body resolves names with bodyEnv, and the functions it calls without a search_path
	// setting of their own resolve theirs with the path in force: the session's, or that of the
	// nearest caller with a setting. The key holds both.
	key := memoKey{kind: 'f', oid: f.OID, path: bodyEnv.pathKey + "\x01" + a.env.session.pathKey}
	return a.memoised(key, bodyEnv, true, func(child *analysis) fnResult {
		child.dependOn(f.Name) // the memoised body is this function's: a change to it must drop it
		if f.Kind != 'a' && (f.Volatility == 'i' || f.Volatility == 's') {
			child.declared = f.Signature() + " is declared " + volatilityName(f.Volatility)
		}
		switch {
		case f.Kind == 'a':
			return child.aggregate(f)
		case f.Language == "sql":
			return unfollowedPathChange(f, child.sqlBody(f))
		case f.Language == "plpgsql":
			return unfollowedPathChange(f, child.plpgsqlBody(f))
		}
		volatility := "VOLATILE"
		if f.Kind == 'p' {
			volatility = "a procedure"
		}
		r := fnResult{access: Write, reason: ReasonUnknownEffect, detail: f.Language + " function, " + volatility + ", body cannot be analysed"}
		if f.Language != "c" && f.Language != "internal" {
			// A body in a procedural language (PL/Python, PL/Perl, PL/v8) runs SQL as it likes:
			// SET ROLE, set_config, LISTEN. A C function seldom changes what the pin check sees
			// (and asking after each call of uuid_generate_v4() would cost two round trips).
			r.session = SessionUnknown
		}
		return r
	})
}

// bodyUnread reports whether an unknown effect's detail says the body itself was never analysed:
// not parsed (pg_query's PL/pgSQL parser refuses cursor variables), too deep to decode, or not
// reached within the budget. Its visible nextval(), advisory locks and node-local reads were not
// seen, so the declaration cannot stand in for them: such a body stays unknown (the primary).
func bodyUnread(detail string) bool {
	return detail == budgetExhausted || strings.Contains(detail, "could not be parsed") ||
		strings.Contains(detail, "nested too deeply to analyse")
}

// volatilityName is provolatile as CREATE FUNCTION spells it.
func volatilityName(v byte) string {
	switch v {
	case 'i':
		return "IMMUTABLE"
	case 's':
		return "STABLE"
	}
	return "VOLATILE"
}

// takeDeclared returns the verdict of a statement in the body of a function declared STABLE or
// IMMUTABLE (a.declared set): a statement PostgreSQL refuses there wherever it runs — INSERT,
// UPDATE, DELETE, MERGE, a SELECT that locks rows or modifies data in WITH, any utility statement
// (DDL, LOCK, NOTIFY, COPY, CALL, SET, ...) — runs nothing, so it is taken as a read, and the
// verdict says it rests on the declaration. What the statement runs that PostgreSQL does not refuse
// (nextval(), advisory locks, node-local reads, a VOLATILE function that writes) still decides.
func (a *analysis) takeDeclared(node *pg_query.Node, v verdict) verdict {
	if a.declared == "" || v.access != Write || !refusedInNonVolatile(node, v) {
		return v
	}
	if v.reason == ReasonRowLock {
		// PostgreSQL refuses the SELECT only when its locking clause reaches a table (the plan
		// has row marks): over no FROM, a function, VALUES or an unreferenced CTE it locks
		// nothing and the statement runs. What it runs beside the lock then still decides.
		if rest := a.statementKind(withoutRowLocks(node)); rest.access == Write && !refusedInNonVolatile(node, rest) {
			return rest
		}
	}
	a.assume(v.subject + " taken as a read: " + a.declared + ", and PostgreSQL refuses it there")
	return read(v.subject)
}

// withoutRowLocks is a copy of node with the locking clauses of all its SELECTs removed.
func withoutRowLocks(node *pg_query.Node) *pg_query.Node {
	clone := proto.Clone(node).(*pg_query.Node)
	var strip func(m any)
	strip = func(m any) {
		if sel, ok := m.(*pg_query.SelectStmt); ok {
			sel.LockingClause = nil
		}
		eachChild(m, strip)
	}
	strip(clone)
	return clone
}

// refusedInNonVolatile reports whether PostgreSQL refuses a statement, with verdict v, in a
// non-volatile function: anything but a query that neither locks rows nor modifies data.
func refusedInNonVolatile(node *pg_query.Node, v verdict) bool {
	switch node.GetNode().(type) {
	case nil:
		return false
	case *pg_query.Node_SelectStmt:
		// WRITE and ROW_LOCK on a SELECT come from its own clauses (SELECT INTO, a
		// data-modifying WITH, FOR UPDATE, a view that locks); what it calls shows as
		// WRITING_FUNCTION, NODE_LOCAL_STATS or UNKNOWN_EFFECT and is not refused.
		return v.reason == ReasonWrite || v.reason == ReasonRowLock
	}
	return true
}

// unfollowedPathChange turns a read into UNKNOWN_EFFECT when the body changes search_path as it
// runs (SET [LOCAL] search_path or SCHEMA, RESET, set_config of it or of a name that is not a
// constant, here or in what it calls): its statements were analysed on the path the function
// starts with, and a name after the change may resolve to another function (one that writes).
func unfollowedPathChange(f *Function, r fnResult) fnResult {
	if r.access != Read || !(slices.Contains(r.settings, "search_path") || slices.Contains(r.settings, "")) {
		return r
	}
	return fnResult{access: Write, reason: ReasonUnknownEffect, session: r.session, settings: r.settings,
		detail: "its body changes search_path, and the names after the change are not resolved again"}
}

func extensionDetail(name string, effect builtinEffect) string {
	if effect.nodeLocal {
		return ""
	}
	return name + "() is known to write"
}

// memoised runs analyse in a child analysis unless key's result is memoised, detecting cycles and
// enforcing the depth limit and the budget.
func (a *analysis) memoised(key memoKey, e *env, body bool, analyse func(*analysis) fnResult) fnResult {
	cat := a.run.cat
	r := a.run
	if cat != nil {
		if cached, ok := cat.memoised(key); ok {
			result := cached
			if result.atLeastHeight > 0 {
				if a.depth+result.atLeastHeight > a.c.maxDepth {
					a.dependOnResult(&result)
					return a.tooDeep()
				}
				goto analyse // reached the limit from deeper than here: it may not reach it now
			}
			if a.depth+result.height > a.c.maxDepth {
				return a.tooDeep()
			}
			a.noteHeight(result.height)
			a.assume(result.assumptions...)
			a.dependOnResult(&result)
			return result
		}
	}
analyse:
	for i := range r.frames {
		if r.frames[i].key == key {
			// A cycle: the frame at i is being analysed and will include everything the cycle
			// reaches; the frames inside it cannot be memoised on their own.
			for j := i + 1; j < len(r.frames); j++ {
				r.frames[j].tainted = true
			}
			return fnResult{access: Read}
		}
	}
	if a.depth+1 > a.c.maxDepth {
		return a.tooDeep()
	}
	if r.budget <= 0 {
		for j := range r.frames {
			r.frames[j].tainted = true
		}
		return fnResult{access: Write, reason: ReasonUnknownEffect, detail: budgetExhausted}
	}
	r.budget--
	r.frames = append(r.frames, frame{key: key})
	result := analyse(a.child(e, body))
	top := r.frames[len(r.frames)-1]
	r.frames = r.frames[:len(r.frames)-1]
	result.height = 1 + top.height
	result.assumptions = top.assumptions
	result.dependsOn, result.dependsOnTooMany = top.dependsOn, top.dependsOnTooMany
	if top.reachedDepthLimit {
		// Called from depth a.depth, something inside was past the limit: whatever the height
		// is, a.depth plus it exceeds the limit, and so does any deeper use. The result is the
		// plain too-deep one, whatever was found above the cut (which depends on how deep the
		// use started), so that a memoised bound gives the same verdict as an analysis: a
		// chain of functions each calling the last (a migration creates them one by one and
		// calls each) is then not walked to the limit again on every use.
		result = fnResult{access: Write, reason: ReasonNestingTooDeep, detail: a.tooDeepDetail(), height: result.height,
			dependsOn: top.dependsOn, dependsOnTooMany: top.dependsOnTooMany}
		if !top.tainted && cat != nil && cat == a.run.cat {
			bound := result
			bound.atLeastHeight = a.c.maxDepth - a.depth + 1
			cat.memo.Store(key, bound)
		}
		a.noteHeight(result.height)
		return result
	}
	if !top.tainted && cat != nil && cat == a.run.cat {
		cat.memo.Store(key, result)
	}
	a.noteHeight(result.height)
	return result
}

// tooDeep is the result past classify.max_depth; no frame that reached it is memoised as a result,
// since at a shallower depth it might not be too deep, only as a bound (see fnResult.atLeastHeight).
func (a *analysis) tooDeep() fnResult {
	for j := range a.run.frames {
		a.run.frames[j].reachedDepthLimit = true
	}
	return fnResult{access: Write, reason: ReasonNestingTooDeep, detail: a.tooDeepDetail()}
}

func (a *analysis) tooDeepDetail() string {
	return "function and view nesting deeper than classify.max_depth " + strconv.Itoa(a.c.maxDepth)
}

// noteHeight records a callee's height in the calling frame.
func (a *analysis) noteHeight(height int) {
	if n := len(a.run.frames); n > 0 && height > a.run.frames[n-1].height {
		a.run.frames[n-1].height = height
	}
}

// aggregate combines the effects of an aggregate's support functions.
func (a *analysis) aggregate(f *Function) fnResult {
	result := fnResult{access: Read}
	for _, oid := range f.Calls {
		support, ok := a.run.cat.Function(oid)
		if !ok {
			continue // a pg_catalog built-in: a read
		}
		r := fromFn(support.Signature(), a.functionEffect(support))
		result.session |= r.session
		result.settings = mergeNames(result.settings, r.settings)
		if r.access == Write && reasonRank(fnReason(r.reason)) > reasonRank(result.reason) {
			result.access, result.reason, result.chain, result.detail = Write, fnReason(r.reason), r.chain, r.detail
		}
	}
	return result
}

// fnReason is how a finding inside a function shows at its call: anything that writes or locks is
// a writing function; the other reasons stay.
func fnReason(reason Reason) Reason {
	switch reason {
	case ReasonWrite, ReasonRowLock, ReasonWritingFunction:
		return ReasonWritingFunction
	}
	return reason
}

// bodyResult combines the verdicts of a body's statements: the strongest finding wins (the first on
// a tie, except that an unknown effect reached through a call, a view or a relation wins over the
// body's own: a STABLE declaration covers only the latter, see runEffect), session effects add
// up, and a read that relied on an assertion keeps it.
func bodyResult(stmts []*pg_query.Node, verdicts []verdict) fnResult {
	return combineBody(stmts, verdicts, fnReason)
}

// combineBody is bodyResult with a choice of how inner reasons show outside.
func combineBody(stmts []*pg_query.Node, verdicts []verdict, outer func(Reason) Reason) fnResult {
	result := fnResult{access: Read}
	for i, v := range verdicts {
		result.session |= v.session
		result.settings = mergeNames(result.settings, v.settings)
		if v.catalogueChange {
			result.session |= sessionCatalogueChange
		}
		if v.access == Read {
			if v.reason == ReasonOverride && result.override == "" {
				result.override = v.subject
			}
			continue
		}
		reason := outer(v.reason)
		visibleUnknown := reason == ReasonUnknownEffect && result.reason == ReasonUnknownEffect &&
			len(result.chain) == 0 && len(v.chain) > 0
		if reasonRank(reason) < reasonRank(result.reason) || reasonRank(reason) == reasonRank(result.reason) && !visibleUnknown {
			continue
		}
		result.access, result.reason = Write, reason
		if len(v.chain) > 0 {
			result.chain, result.detail = v.chain, v.detail
		} else {
			result.chain, result.detail = nil, describeFinding(stmts[i], v)
		}
	}
	if result.access == Write {
		result.override = ""
	}
	return result
}

// describeFinding says what a statement in a body does, naming the target of DML.
func describeFinding(stmt *pg_query.Node, v verdict) string {
	if v.reason != ReasonWrite {
		return v.subject
	}
	switch n := stmt.GetNode().(type) {
	case *pg_query.Node_InsertStmt:
		return "INSERT INTO " + rangeVarName(n.InsertStmt.GetRelation())
	case *pg_query.Node_UpdateStmt:
		return "UPDATE " + rangeVarName(n.UpdateStmt.GetRelation())
	case *pg_query.Node_DeleteStmt:
		return "DELETE FROM " + rangeVarName(n.DeleteStmt.GetRelation())
	case *pg_query.Node_MergeStmt:
		return "MERGE INTO " + rangeVarName(n.MergeStmt.GetRelation())
	}
	return v.subject
}

func rangeVarName(rv *pg_query.RangeVar) string {
	if rv.GetSchemaname() != "" {
		return quoteIdent(rv.GetSchemaname()) + "." + quoteIdent(rv.GetRelname())
	}
	return quoteIdent(rv.GetRelname())
}

// sqlBody analyses an SQL-language function's statements.
func (a *analysis) sqlBody(f *Function) fnResult {
	var stmts []*pg_query.Node
	if f.SQLBody != "" {
		tree, err := a.c.bodies.parse(f.SQLBody)
		if err != nil || len(tree.GetStmts()) != 1 || tree.GetStmts()[0].GetStmt().GetCreateFunctionStmt() == nil {
			return fnResult{access: Write, reason: ReasonUnknownEffect, detail: "BEGIN ATOMIC body could not be parsed"}
		}
		stmts = flattenBody(tree.GetStmts()[0].GetStmt().GetCreateFunctionStmt().GetSqlBody(), nil)
	} else {
		tree, err := a.c.bodies.parse(f.Source)
		if err != nil {
			return fnResult{access: Write, reason: ReasonUnknownEffect, detail: "SQL body could not be parsed"}
		}
		for _, raw := range tree.GetStmts() {
			stmts = append(stmts, raw.GetStmt())
		}
	}
	verdicts := make([]verdict, len(stmts))
	for i, stmt := range stmts {
		verdicts[i] = a.statement(stmt)
	}
	return bodyResult(stmts, verdicts)
}

// flattenBody lists the statements of a BEGIN ATOMIC body (nested lists) or a RETURN body.
func flattenBody(node *pg_query.Node, out []*pg_query.Node) []*pg_query.Node {
	if node == nil {
		return out
	}
	if list, ok := node.GetNode().(*pg_query.Node_List); ok {
		for _, item := range list.List.GetItems() {
			out = flattenBody(item, out)
		}
		return out
	}
	return append(out, node)
}

// resolveRelation finds what reading a relation means: node-local statistics, a view's effects, or a
// plain read. Without a catalogue every relation other than the statistics views is a table.
func (a *analysis) resolveRelation(rv *pg_query.RangeVar, ctes map[string]bool) callResult {
	a.run.dependent = true
	schema, name := rv.GetSchemaname(), rv.GetRelname()
	if schema != "pg_catalog" {
		// Found or not, a relation created under this name may be the one read next time (a
		// change adding to pg_catalog keeps no analysis).
		a.dependOn(name)
	}
	if schema != "pg_catalog" && nodeLocalAnySchema(name) {
		return nodeLocalResult(name)
	}
	schemas := a.env.path
	if schema != "" {
		schemas = []string{schema}
	}
	for attempt := 0; attempt < 2; attempt++ {
		cat := a.run.cat
		for _, s := range schemas {
			if s == "pg_catalog" {
				if cat == nil {
					// Without a catalogue the names are all there is to go by.
					if nodeLocalRelation(name) {
						return nodeLocalResult(name)
					}
					if schema == "pg_catalog" {
						return callResult{access: Read}
					}
					continue
				}
				if _, ok := cat.rels.get(qualified{s, name}); ok {
					if nodeLocalRelation(name) {
						return nodeLocalResult(name)
					}
					return callResult{access: Read}
				}
				continue
			}
			if cat == nil {
				continue
			}
			if v, ok := cat.views.get(qualified{s, name}); ok {
				return fromFn(v.display(), a.viewEffect(v))
			}
			if kind, ok := cat.rels.get(qualified{s, name}); ok {
				if cat.unlogged.at(qualified{s, name}) {
					// Its data stays on the primary: a standby refuses to read (or plan) it.
					return callResult{access: Write, reason: ReasonNodeLocalStats, subject: "unlogged " + quoteIdent(s) + "." + quoteIdent(name)}
				}
				if kind == 'S' {
					// A standby's copy of a sequence is the value WAL-logged
					// ahead of use (up to 32 past the primary's last_value):
					// reading it there gives a different answer.
					return callResult{access: Write, reason: ReasonNodeLocalStats, subject: quoteIdent(s) + "." + quoteIdent(name)}
				}
				if rel := cat.readPolicies.at(qualified{s, name}); rel != nil {
					// Row security adds the policies' expressions to the query: their
					// functions run for every row read (for the owner only with FORCE
					// ROW LEVEL SECURITY; counted for every user).
					display := quoteIdent(s) + "." + quoteIdent(name)
					if s == "public" {
						display = quoteIdent(name)
					}
					return fromFn("row security policy on "+display, a.policyEffect(rel))
				}
				return callResult{access: Read}
			}
		}
		if cat == nil || (schema == "" && ctes[name]) {
			return callResult{access: Read}
		}
		if attempt > 0 || !a.lookup(schema, name) {
			if attempt > 0 {
				a.notFound(qualifiedText(schema, name))
			}
			break
		}
	}
	display := rangeVarName(rv)
	return callResult{access: Write, reason: ReasonUnknownEffect, subject: "relation " + display + " (effect unknown: not in the catalogue)",
		chain: []string{"relation " + display}, detail: "not in the catalogue (a temporary table, or created since the catalogue was loaded)"}
}

func nodeLocalResult(name string) callResult {
	return callResult{access: Write, reason: ReasonNodeLocalStats, subject: quoteIdent(name)}
}

// defaultsEffect analyses a function's parameter default expressions, memoised per catalogue. They
// are read with search_path = pg_catalog, so every other name in them is qualified.
func (a *analysis) defaultsEffect(f *Function) fnResult {
	e := a.env.withPath([]string{"pg_catalog"})
	return a.memoised(memoKey{kind: 'd', oid: f.OID, path: a.env.session.pathKey}, e, false, func(child *analysis) fnResult {
		child.dependOn(f.Name)
		sql := "SELECT " + f.DefaultExprs
		tree, err := a.c.bodies.parse(sql)
		if err != nil || len(tree.GetStmts()) != 1 {
			return fnResult{access: Write, reason: ReasonUnknownEffect, detail: "parameter defaults of " + f.Signature() + " could not be parsed"}
		}
		stmt := tree.GetStmts()[0].GetStmt()
		return combineBody([]*pg_query.Node{stmt}, []verdict{child.statement(stmt)}, func(r Reason) Reason { return r })
	})
}

// viewEffect analyses a view's definition, memoised per catalogue.
func (a *analysis) viewEffect(v *View) fnResult {
	if v.query != nil {
		return a.takenViewEffect(v)
	}
	return a.definitionEffect('v', v.OID, v.Definition, "view definition")
}

// takenViewEffect analyses the query of a view taken from its CREATE statement, its names
// resolved along the search_path it was made under (see CreatedView), memoised per catalogue as
// definitionEffect's.
func (a *analysis) takenViewEffect(v *View) fnResult {
	e := a.env.withPath(strings.Split(strings.TrimSuffix(v.path, "\x00"), "\x00"))
	kind := byte('v')
	if a.planTime {
		kind = 'V'
	}
	return a.memoised(memoKey{kind: kind, oid: v.OID, path: a.env.session.pathKey}, e, false, func(child *analysis) fnResult {
		child.planTime = a.planTime
		return combineBody([]*pg_query.Node{v.query}, []verdict{child.statement(v.query)}, func(r Reason) Reason { return r })
	})
}

// policyEffect analyses what the row security policies of a table run when it is read.
func (a *analysis) policyEffect(r *Relation) fnResult {
	return a.definitionEffect('p', r.OID, "SELECT "+r.ReadPolicy, "row security policy")
}

// writeRunsOf returns what a write to rv runs besides the statement, as far as the catalogue holds
// it (Relation.WriteRuns, WriteRule): the zero result when nothing, or when the relation is not
// in the catalogue (a temporary table, one made since). Only its session effects count: a write
// goes to the primary whatever its triggers do. A write of a view also writes the relation in
// its FROM (viewBase): an automatically updatable view has exactly one, whose triggers, defaults
// and CHECKs run as for a write of it, and so on down views of views.
func (a *analysis) writeRunsOf(rv *pg_query.RangeVar) fnResult {
	if rv == nil {
		return fnResult{}
	}
	// Without a catalogue too: the verdict depends on one (a TRUNCATE or COPY FROM classified
	// before the catalogue was read must not be kept as is).
	a.run.dependent = true
	cat := a.run.cat
	if cat == nil {
		return fnResult{}
	}
	var res fnResult
	var seen map[uint32]bool // the relations followed, made at the first that runs anything
	schema, name, path := rv.GetSchemaname(), rv.GetRelname(), a.env.path
	for hops := 0; hops <= maxViewHops; hops++ {
		if schema != "pg_catalog" {
			// A trigger made on the relation later changes what writing it runs.
			a.dependOn(name)
		}
		key, found := qualified{}, false
		for _, s := range schemasFor(schema, path) {
			if _, ok := cat.rels.get(qualified{s, name}); ok {
				key, found = qualified{s, name}, true
				break
			}
		}
		if !found {
			break
		}
		if r := cat.writeRuns.at(key); r != nil && !seen[r.OID] {
			if seen == nil {
				seen = map[uint32]bool{}
			}
			own := a.reachedWriteRuns(cat, r, seen)
			res.session |= own.session
			res.settings = mergeNames(res.settings, own.settings)
		}
		v, ok := cat.views.get(key)
		if !ok {
			break
		}
		base, basePath, ok := a.viewBase(v)
		if !ok {
			break
		}
		schema, name, path = base.GetSchemaname(), base.GetRelname(), basePath
	}
	return res
}

// readSessionEffect is what reading rv does to the session, as far as the catalogue holds it: a
// view's query analysed, a table's read policies; nothing for a CTE, a relation of pg_catalog or
// one the catalogue does not hold (no name is looked up: a write's temporary tables are in no
// catalogue). Only its session effects count: the statement that reads it is a write.
func (a *analysis) readSessionEffect(rv *pg_query.RangeVar, ctes map[string]bool) fnResult {
	cat := a.run.cat
	schema, name := rv.GetSchemaname(), rv.GetRelname()
	if cat == nil || schema == "pg_catalog" || (schema == "" && ctes[name]) {
		return fnResult{}
	}
	a.run.dependent = true
	// A view created under this name may be the one read next time.
	a.dependOn(name)
	for _, s := range schemasFor(schema, a.env.path) {
		key := qualified{s, name}
		if s != "pg_catalog" {
			if v, ok := cat.views.get(key); ok {
				r := a.viewEffect(v)
				return fnResult{session: r.session, settings: r.settings}
			}
		}
		if _, ok := cat.rels.get(key); ok {
			if rel := cat.readPolicies.at(key); rel != nil {
				r := a.policyEffect(rel)
				return fnResult{session: r.session, settings: r.settings}
			}
			return fnResult{}
		}
	}
	return fnResult{}
}

// schemasFor is where a relation named in schema (none: along path) is looked for.
func schemasFor(schema string, path []string) []string {
	if schema != "" {
		return []string{schema}
	}
	return path
}

// maxViewHops bounds the views of views one write's analysis goes down (writeRunsOf).
const maxViewHops = 32

// viewBase is the one relation in the FROM of v's query, with the search_path its name resolves
// along: the relation a write of the view writes when the view is automatically updatable. A
// view with more than one FROM item, a join, a subquery or a set operation has none (a write of
// it runs its INSTEAD OF triggers or rules, which are its own write runs, or fails).
func (a *analysis) viewBase(v *View) (*pg_query.RangeVar, []string, bool) {
	query, path := v.query, []string{"pg_catalog"}
	if query == nil {
		tree, err := a.c.bodies.parse(v.Definition)
		if err != nil || len(tree.GetStmts()) != 1 {
			return nil, nil, false
		}
		query = tree.GetStmts()[0].GetStmt()
	} else {
		path = strings.Split(strings.TrimSuffix(v.path, "\x00"), "\x00")
	}
	sel := query.GetSelectStmt()
	if sel == nil || sel.GetOp() != pg_query.SetOperation_SETOP_NONE || len(sel.GetFromClause()) != 1 {
		return nil, nil, false
	}
	base := sel.GetFromClause()[0].GetRangeVar()
	if base == nil {
		return nil, nil, false
	}
	return base, path, true
}

// reachedWriteRuns is what a write of r runs: its own write runs, then those of the tables the
// write may reach (partitions and children, tables whose foreign keys cascade from it), each
// once (seen holds the OIDs followed so far).
func (a *analysis) reachedWriteRuns(cat *Catalogue, r *Relation, seen map[uint32]bool) fnResult {
	var res fnResult
	seen[r.OID] = true
	queue := []*Relation{r}
	for len(queue) > 0 {
		rel := queue[0]
		queue = queue[1:]
		own := a.ownWriteRuns(rel)
		res.session |= own.session
		res.settings = mergeNames(res.settings, own.settings)
		for _, oid := range rel.Reaches {
			if seen[oid] || len(seen) >= maxReachedRelations {
				continue
			}
			seen[oid] = true
			if reached := cat.writeRunsByOID.at(oid); reached != nil {
				a.dependOn(reached.Name)
				queue = append(queue, reached)
			}
		}
	}
	return res
}

// maxReachedRelations bounds the tables one write's analysis follows (writeRunsOf).
const maxReachedRelations = 256

// ownWriteRuns is what a write of r itself runs: its WriteRuns analysed (memoised under its OID
// and text), and a rule, whose actions are statements this does not follow.
func (a *analysis) ownWriteRuns(r *Relation) fnResult {
	var res fnResult
	if r.WriteRuns != "" {
		res = a.definitionEffect('w', r.OID, "SELECT "+r.WriteRuns, "what writing "+quoteIdent(r.Schema)+"."+quoteIdent(r.Name)+" runs")
	}
	if r.WriteRule {
		res.session |= SessionUnknown
	}
	return res
}

// definitionEffect analyses SQL the server stored for an object (a view's query, a table's policy
// expressions), memoised per catalogue under kind and oid. Definitions are read with search_path =
// pg_catalog, so every other name in them is qualified; functions they call resolve theirs with the
// session's path. Planning a statement plans these as part of it (kept apart in the memo, under the
// kind in upper case).
func (a *analysis) definitionEffect(kind byte, oid uint32, sql, what string) fnResult {
	e := a.env.withPath([]string{"pg_catalog"})
	if a.planTime {
		kind -= 'a' - 'A'
	}
	key := memoKey{kind: kind, oid: oid, path: a.env.session.pathKey}
	if kind == 'w' {
		// What writing a table runs changes under its OID (a trigger added, a default changed).
		key.path += "\x00" + sql
	}
	return a.memoised(key, e, false, func(child *analysis) fnResult {
		child.planTime = a.planTime
		tree, err := a.c.bodies.parse(sql)
		if err != nil {
			return fnResult{access: Write, reason: ReasonUnknownEffect, detail: what + " could not be parsed"}
		}
		stmts := make([]*pg_query.Node, 0, len(tree.GetStmts()))
		verdicts := make([]verdict, 0, len(tree.GetStmts()))
		for _, raw := range tree.GetStmts() {
			stmts = append(stmts, raw.GetStmt())
			verdicts = append(verdicts, child.statement(raw.GetStmt()))
		}
		// A view or a policy runs no statement of its own: what its query does (a row lock, a
		// writing function, node-local statistics) is what reading the relation does.
		return combineBody(stmts, verdicts, func(r Reason) Reason { return r })
	})
}
