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
//	EXECUTE format('CREATE OR REPLACE FUNCTION %I() ... AS %L', name, body);
//	EXECUTE 'CREATE VIEW ' || quote_ident(name) || ' AS ...';
//	ddl := concat('DROP VIEW ', name); EXECUTE ddl;
//
// A call of such a function changes the catalogue, and the session's next statement must be
// classified with that change. The template is rebuilt (rendered): literals as they are, format()
// and concat() expanded, and every other value put in written as a placeholder, so that the kind
// of statement it builds can be known: DDL in it is a catalogue change of names not known
// (everything). The template never makes the string a read: what the placeholders stand for may be
// anything.

// templateValue stands for a value a template puts in (format's %s and %I, a concatenated
// expression): a name, which parses wherever the DDL a template holds puts one.
const templateValue = "pgowl_template_value"

// templateLiteral stands for a value format's %L puts in: a string literal, which parses where a
// function's body or a default goes.
const templateLiteral = "'" + templateValue + "'"

// dynamicTemplate returns the statement text the PL/pgSQL expression in holder builds, when it is
// built from literals (render); ok is false for any other expression.
func dynamicTemplate(holder *jsonNode) (text string, ok bool) {
	value := expressionValue(holder)
	if value == nil {
		return "", false
	}
	return render(value)
}

// templateOf is dynamicTemplate for an expression's text (the value of an assignment).
func templateOf(expression string) (text string, ok bool) {
	if !strings.ContainsAny(expression, "'$") {
		return "", false // no literal: nothing to render
	}
	tree, err := parseSQL("SELECT " + expression)
	if err != nil || len(tree.GetStmts()) != 1 {
		return "", false
	}
	sel := tree.GetStmts()[0].GetStmt().GetSelectStmt()
	if sel == nil || len(sel.GetTargetList()) != 1 || sel.GetFromClause() != nil {
		return "", false
	}
	return render(sel.GetTargetList()[0].GetResTarget().GetVal())
}

// render returns the text an expression builds: a string literal's text, a cast's argument's, a ||
// chain's or a concat() call's operands joined, a format() call's template expanded; any other
// value is templateValue. ok is false when no literal went into the text.
func render(node *pg_query.Node) (text string, ok bool) {
	if cast := node.GetTypeCast(); cast != nil {
		return render(cast.GetArg())
	}
	if constant := node.GetAConst(); constant != nil {
		if sval, isString := constant.GetVal().(*pg_query.A_Const_Sval); isString {
			return sval.Sval.GetSval(), true
		}
		return templateValue, false
	}
	if e := node.GetAExpr(); e != nil && e.GetKind() == pg_query.A_Expr_Kind_AEXPR_OP && len(e.GetName()) == 1 &&
		e.GetName()[0].GetString_().GetSval() == "||" {
		return joined([]*pg_query.Node{e.GetLexpr(), e.GetRexpr()})
	}
	call := node.GetFuncCall()
	if call == nil {
		return templateValue, false
	}
	names, named := functionNames(call)
	if !named || len(names) > 2 || (len(names) == 2 && names[0] != "pg_catalog") {
		return templateValue, false
	}
	switch names[len(names)-1] {
	case "concat":
		return joined(call.GetArgs())
	case "format":
		if len(call.GetArgs()) == 0 {
			return templateValue, false
		}
		template, literal := render(call.GetArgs()[0])
		if !literal {
			return templateValue, false
		}
		if text, ok := formatted(template, call.GetArgs()[1:]); ok {
			return text, true
		}
	}
	return templateValue, false
}

// joined renders each of operands and joins them; ok is true when a literal went into one.
func joined(operands []*pg_query.Node) (text string, ok bool) {
	var b strings.Builder
	for _, operand := range operands {
		part, literal := render(operand)
		b.WriteString(part)
		ok = ok || literal
	}
	return b.String(), ok
}

// formatted returns what format(template, args...) builds: %s and %I put in the argument rendered
// when a literal went into it, templateValue otherwise; %L puts in templateLiteral; %% a percent
// sign. ok is false for a template format() refuses. A specifier is %[position$][-][width]type,
// the width a number or * (with its own position), each * taking an argument as format() does.
func formatted(template string, args []*pg_query.Node) (text string, ok bool) {
	var b strings.Builder
	next := 0 // the argument the next specifier without a position takes
	digits := func(i int) (int, int) {
		n := 0
		for ; i < len(template) && template[i] >= '0' && template[i] <= '9'; i++ {
			n = n*10 + int(template[i]-'0')
		}
		return i, n
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
		arg := -1
		if j, n := digits(i); j > i && j < len(template) && template[j] == '$' {
			arg, i = n-1, j+1
		}
		if i < len(template) && template[i] == '-' {
			i++
		}
		if i < len(template) && template[i] == '*' {
			i++
			if j, n := digits(i); j > i && j < len(template) && template[j] == '$' {
				i, next = j+1, n
			} else {
				next++
			}
		} else {
			i, _ = digits(i)
		}
		if i >= len(template) {
			return "", false
		}
		if arg < 0 {
			arg = next
		}
		next = arg + 1
		switch template[i] {
		case 's', 'I':
			value := templateValue
			if arg >= 0 && arg < len(args) {
				if rendered, literal := render(args[arg]); literal {
					value = rendered
				}
			}
			b.WriteString(value)
		case 'L':
			b.WriteString(templateLiteral)
		default:
			return "", false
		}
	}
	return b.String(), true
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
