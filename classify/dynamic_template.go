package classify

import (
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v5"
)

// Dynamic SQL built from a template the body spells out.
//
// A PL/pgSQL EXECUTE of a computed string cannot be known: pgowl takes it as a write of unknown
// effect (dynamic). What it cannot take it as is free of catalogue changes. Migration helpers run
// their DDL so, in functions as well as procedures:
//
//	EXECUTE format('CREATE OR REPLACE FUNCTION %I() ... AS $b$ ... $b$', name);
//	EXECUTE 'CREATE VIEW ' || quote_ident(name) || ' AS ...';
//
// A call of such a function changes the catalogue, and the session's next statement must be
// classified with that change. dynamicTemplate rebuilds the statement the template describes,
// every value put in standing for a placeholder name, so that its kind can be known: the DDL it
// holds is a catalogue change of names not known (everything). The template never makes the
// string a read: what the placeholders stand for may be anything.

// templateValue stands for a value a template puts in (format's %s and %I, a concatenated
// expression): a name, which parses wherever the DDL a template holds puts one.
const templateValue = "pgowl_template_value"

// dynamicTemplate returns the statement text the PL/pgSQL expression in holder builds, when it is
// a call of format() with a literal format string or a concatenation (||) of literals and other
// expressions, each put-in value written as templateValue (a %L value as a literal); ok is false
// for any other expression.
func dynamicTemplate(holder *jsonNode) (text string, ok bool) {
	value := expressionValue(holder)
	if value == nil {
		return "", false
	}
	if call := value.GetFuncCall(); call != nil {
		names, named := functionNames(call)
		if !named || names[len(names)-1] != "format" || (len(names) == 2 && names[0] != "pg_catalog") || len(names) > 2 || len(call.GetArgs()) == 0 {
			return "", false
		}
		template, literal := stringConstant(call.GetArgs()[0])
		if !literal {
			return "", false
		}
		return formatted(template)
	}
	var b strings.Builder
	if !concatenation(value, &b) {
		return "", false
	}
	return b.String(), true
}

// formatted returns what format(template, ...) builds, each value put in written as
// templateValue (%s, %I) or NULL (%L); ok is false for a template format() refuses. A specifier
// is %[position$][-][width]type, the width a number or * (with its own position).
func formatted(template string) (text string, ok bool) {
	var b strings.Builder
	digits := func(i int) int {
		for i < len(template) && template[i] >= '0' && template[i] <= '9' {
			i++
		}
		return i
	}
	for i := 0; i < len(template); i++ {
		if template[i] != '%' {
			b.WriteByte(template[i])
			continue
		}
		i++
		if i < len(template) && template[i] == '%' {
			b.WriteByte('%')
			continue
		}
		if j := digits(i); j > i && j < len(template) && template[j] == '$' {
			i = j + 1 // the position
		}
		if i < len(template) && template[i] == '-' {
			i++
		}
		if i < len(template) && template[i] == '*' {
			i++
			if j := digits(i); j > i && j < len(template) && template[j] == '$' {
				i = j + 1
			}
		} else {
			i = digits(i)
		}
		if i >= len(template) {
			return "", false
		}
		switch template[i] {
		case 's', 'I':
			b.WriteString(templateValue)
		case 'L':
			b.WriteString("NULL")
		default:
			return "", false
		}
	}
	return b.String(), true
}

// concatenation writes the text a chain of || builds: literals as they are, any other operand as
// templateValue. ok is false when node is no || of which some operand is a literal.
func concatenation(node *pg_query.Node, b *strings.Builder) (ok bool) {
	e := node.GetAExpr()
	if e == nil || e.GetKind() != pg_query.A_Expr_Kind_AEXPR_OP || len(e.GetName()) != 1 || e.GetName()[0].GetString_().GetSval() != "||" {
		return false
	}
	literal := false
	for _, operand := range []*pg_query.Node{e.GetLexpr(), e.GetRexpr()} {
		if text, isLiteral := stringConstant(operand); isLiteral {
			b.WriteString(text)
			literal = true
		} else if concatenation(operand, b) {
			literal = true
		} else {
			b.WriteString(templateValue)
		}
	}
	return literal
}

// stringConstant returns the text of a string literal, cast or not.
func stringConstant(node *pg_query.Node) (string, bool) {
	if cast := node.GetTypeCast(); cast != nil {
		node = cast.GetArg()
	}
	constant := node.GetAConst()
	if constant == nil {
		return "", false
	}
	text, ok := constant.GetVal().(*pg_query.A_Const_Sval)
	if !ok {
		return "", false
	}
	return text.Sval.GetSval(), true
}
