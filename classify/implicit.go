package classify

import (
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v5"
)

// Some expressions run a function without naming it: an operator runs its pg_operator.oprcode, a
// cast runs its pg_cast.castfunc, and attribute notation r.f runs f(r). The raw parse tree holds an
// A_Expr, a TypeCast or a ColumnRef, not a FuncCall, so these are looked up here. Argument types
// are not resolved (that needs the types of columns), so every candidate counts: when they agree
// the statement has their effect, when they differ its effect is unknown. Only operators, casts and
// functions outside pg_catalog are candidates; the built-in ones only read.

// implicitCandidate is one function an expression may run, with how the statement shows it.
type implicitCandidate struct {
	display string
	fn      *Function
	builtin string // a pg_catalog function, judged by the built-in tables
}

// resolveImplicit combines the effects of the functions an expression may run. what names the
// expression for messages: "operator ###", "cast to mytype", "r.f".
func (a *analysis) resolveImplicit(what string, cands []implicitCandidate) callResult {
	results := make([]callResult, len(cands))
	for i, c := range cands {
		if a.skippedAtPlanTime(c.fn) {
			results[i] = callResult{access: Read}
			continue
		}
		if c.fn == nil {
			effect, ok := a.c.functions.builtin(c.builtin)
			if !ok {
				effect = builtinEffect{access: Read}
			}
			results[i] = a.builtinResult(&pg_query.FuncCall{}, c.builtin, c.builtin, effect)
			if results[i].access == Write {
				results[i].subject = what + " → " + results[i].subject
			}
			continue
		}
		results[i] = fromFn(what+" → "+c.display, a.functionEffect(c.fn))
	}
	if agree(results) {
		return merge(results)
	}
	signatures := make([]string, len(cands))
	for i, c := range cands {
		signatures[i] = c.display
	}
	return a.differingEffects(what, "the functions it may run differ in effect and the argument types are not resolved",
		"the functions it may run differ in effect", signatures, results)
}

// resolveOperator finds the operators outside pg_catalog named by name (a qualified name list, as in
// OPERATOR(schema.op)) along the search path. Without such operators the expression only reads.
func (a *analysis) resolveOperator(name []*pg_query.Node) callResult {
	cat := a.run.cat
	// Another catalogue, or one loaded later, may hold a user operator of
	// this name: the verdict depends on it even when there is none here.
	a.run.dependent = true
	if cat == nil || len(name) == 0 || len(name) > 3 {
		return callResult{access: Read}
	}
	if len(cat.operators) == 0 {
		return callResult{access: Read}
	}
	op := name[len(name)-1].GetString_().GetSval()
	schemas := a.env.path
	if len(name) >= 2 {
		// OPERATOR(schema.op), or database.schema.op of the current database.
		schemas = []string{name[len(name)-2].GetString_().GetSval()}
	}
	var cands []implicitCandidate
	addFunction := func(oid uint32) {
		if f, ok := cat.byOID.get(oid); ok {
			cands = append(cands, implicitCandidate{fn: f, display: f.Signature()})
		}
	}
	for _, schema := range schemas {
		for _, o := range cat.operators[qualified{schema, op}] {
			if o.BuiltinFunction != "" {
				cands = append(cands, implicitCandidate{builtin: o.BuiltinFunction, display: o.BuiltinFunction + "()"})
			} else {
				addFunction(o.Function)
			}
			// The planner may run the negator (NOT (a op b)) or the commutator instead.
			addFunction(o.Negator)
			addFunction(o.Commutator)
		}
	}
	if len(cands) == 0 {
		return callResult{access: Read}
	}
	return a.resolveImplicit("operator "+op, cands)
}

// expressionOperators returns the operator names an A_Expr applies: its own name, or for BETWEEN
// the comparisons it expands to.
func expressionOperators(expr *pg_query.A_Expr) [][]*pg_query.Node {
	switch expr.GetKind() {
	case pg_query.A_Expr_Kind_AEXPR_BETWEEN, pg_query.A_Expr_Kind_AEXPR_NOT_BETWEEN,
		pg_query.A_Expr_Kind_AEXPR_BETWEEN_SYM, pg_query.A_Expr_Kind_AEXPR_NOT_BETWEEN_SYM:
		return [][]*pg_query.Node{{pg_query.MakeStrNode(">=")}, {pg_query.MakeStrNode("<=")}}
	}
	return [][]*pg_query.Node{expr.GetName()}
}

// resolveCast finds the casts to the target type that run a function outside pg_catalog. When the
// argument's type is evident only the casts from it count; a string literal is read by the type's
// input function, not by a cast. Casts to and from a domain are its base type's, a cast to an
// array type casts each element, and ROW(...)::t casts each field to the type of t's field.
func (a *analysis) resolveCast(cast *pg_query.TypeCast) callResult {
	cat := a.run.cat
	a.run.dependent = true // with no catalogue as well: another one may hold a user cast
	if cat == nil {
		return callResult{access: Read}
	}
	element := cast.GetTypeName()
	if len(element.GetArrayBounds()) > 0 {
		element = &pg_query.TypeName{Names: element.GetNames()}
	}
	return stronger(a.castFunctions(cast, element), a.domainChecks(a.typeOID(element)))
}

// castFunctions is the part of resolveCast that finds user cast functions; element is the target
// type, or its element type for an array.
func (a *analysis) castFunctions(cast *pg_query.TypeCast, element *pg_query.TypeName) callResult {
	cat := a.run.cat
	if len(cat.castsTo) == 0 {
		return callResult{access: Read}
	}
	if constant := cast.GetArg().GetAConst(); constant != nil {
		if _, isString := constant.GetVal().(*pg_query.A_Const_Sval); isString || constant.GetIsnull() {
			return callResult{access: Read}
		}
	}
	var cands []implicitCandidate
	add := func(c Cast) {
		if f, ok := cat.byOID.get(c.Function); ok {
			cands = append(cands, implicitCandidate{fn: f, display: f.Signature()})
		}
	}
	if cast.GetArg().GetRowExpr() != nil {
		// ROW(...)::t converts each field to the type of t's field: every cast to the
		// type of one of t's fields counts (the row's own field types are not known here).
		for _, target := range cat.fieldCastTargets.at(cat.baseType(a.typeOID(cast.GetTypeName()))) {
			for _, c := range cat.castsTo[target] {
				add(c)
			}
		}
	} else {
		// An array cast converts each element; a domain casts as its base type.
		target := cat.baseType(a.typeOID(element))
		if target == 0 {
			return callResult{access: Read} // not a type the catalogue knows: no user cast to it either
		}
		source := a.evidence(cast.GetArg())
		source.oid = cat.baseType(source.oid)
		for _, c := range cat.castsTo[target] {
			if (source.exact || source.literal) && source.oid != 0 && c.Source != source.oid {
				continue
			}
			add(c)
		}
	}
	if len(cands) == 0 {
		return callResult{access: Read}
	}
	return a.resolveImplicit("cast to "+typeDisplay(cast.GetTypeName()), cands)
}

// typeDisplay renders a type name as written.
func typeDisplay(tn *pg_query.TypeName) string {
	var parts []string
	for _, n := range tn.GetNames() {
		parts = append(parts, quoteIdent(n.GetString_().GetSval()))
	}
	return strings.Join(parts, ".")
}

// resolveAttribute finds what r.f may run: f(r) for a function f that takes one row argument, on
// the search path. PostgreSQL takes a column named f first; the column types are not known here,
// so a matching function counts even where a column of that name exists.
func (a *analysis) resolveAttribute(display, field string) callResult {
	cat := a.run.cat
	a.run.dependent = true // with no catalogue as well: another one may hold such a function
	if cat == nil {
		return callResult{access: Read}
	}
	a.dependOn(field) // r.field may call a function of that name created later
	fns := cat.rowFunctions.at(field)
	if len(fns) == 0 {
		return callResult{access: Read}
	}
	var cands []implicitCandidate
	for _, schema := range a.env.path {
		for _, f := range fns {
			if f.Schema == schema {
				cands = append(cands, implicitCandidate{fn: f, display: f.Signature()})
			}
		}
	}
	if len(cands) == 0 {
		return callResult{access: Read}
	}
	return a.resolveImplicit(display, cands)
}

// attributeField returns the last name of a column reference with at least two names (r.f,
// s.r.f), which attribute notation may turn into f(r).
func attributeField(ref *pg_query.ColumnRef) (display, field string, ok bool) {
	fields := ref.GetFields()
	if len(fields) < 2 {
		return "", "", false
	}
	parts := make([]string, 0, len(fields))
	for _, f := range fields {
		s, isString := f.GetNode().(*pg_query.Node_String_)
		if !isString {
			return "", "", false // r.*
		}
		parts = append(parts, s.String_.GetSval())
	}
	return strings.Join(parts, "."), parts[len(parts)-1], true
}

// domainChecks is what making a value of type oid runs: the CHECK constraints of the domain and
// of the domains it is built on. A read when oid is no domain with checks.
func (a *analysis) domainChecks(oid uint32) callResult {
	cat := a.run.cat
	result := callResult{access: Read}
	if cat == nil || cat.domainChecks.len() == 0 {
		return result
	}
	for range 8 {
		if t := cat.domainChecks.at(oid); t != nil {
			display := "check of domain " + quoteIdent(t.Schema) + "." + quoteIdent(t.Name)
			result = stronger(result, fromFn(display, a.definitionEffect('k', t.OID, "SELECT "+t.Check, "domain check")))
		}
		base, ok := cat.domainBase.get(oid)
		if !ok || base == 0 {
			break
		}
		oid = base
	}
	return result
}

// stronger returns the stronger of two call results (a write over a read, then the higher-ranked
// reason), with the session effects and setting names of both.
func stronger(x, y callResult) callResult {
	best := x
	if y.access == Write && (x.access != Write || reasonRank(y.reason) > reasonRank(x.reason)) {
		best = y
	}
	best.session = x.session | y.session
	best.settings = mergeNames(x.settings, y.settings)
	return best
}

// baseType is a domain's base type (domains over domains followed), or oid itself.
func (c *Catalogue) baseType(oid uint32) uint32 {
	for range 8 {
		base, ok := c.domainBase.get(oid)
		if !ok || base == 0 {
			return oid
		}
		oid = base
	}
	return oid
}
