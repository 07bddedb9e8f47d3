package classify

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v5"
	"github.com/valyala/fastjson"
)

// PL/pgSQL bodies are parsed with pg_query's PL/pgSQL parser, which needs a whole CREATE FUNCTION
// statement and returns the compiled function as JSON. The JSON is walked in document order:
// every PLpgSQL_expr (embedded SQL, PERFORM, RETURN QUERY, conditions, assignments, cursor
// queries, defaults) is parsed with the SQL parser and classified like a statement; EXECUTE of a
// string (EXECUTE, FOR ... IN EXECUTE, RETURN QUERY EXECUTE, OPEN ... FOR EXECUTE) is a write,
// because nothing can see what the string will hold; COMMIT and ROLLBACK (in procedures) are writes.

// returnNextBare matches RETURN NEXT without an expression.
var returnNextBare = regexp.MustCompile(`(?i)\bRETURN\s+NEXT\s*;`)

// maxJSONDepth bounds the nesting the walker follows; deeper bodies are not analysed. It is
// fastjson's own bound, which decodeOrdered meets first (a walker level is at least one JSON
// level), so this check only guards a walk over a tree some other decoder made.
const maxJSONDepth = fastjson.MaxDepth

// plpgsqlBody analyses a PL/pgSQL function.
func (a *analysis) plpgsqlBody(f *Function) fnResult {
	root, problem := a.c.plpgsqlParse(createStatement(f))
	if root == nil {
		// What the body does to the session (SET ROLE, set_config, LISTEN, a temporary
		// table, an advisory lock) is as unknown as the rest.
		return fnResult{access: Write, reason: ReasonUnknownEffect, detail: problem, session: SessionUnknown}
	}
	w := plWalker{a: a, procedure: f.Kind == 'p'}
	w.walk(root, 0)
	if w.tooDeep {
		return fnResult{access: Write, reason: ReasonUnknownEffect, detail: "PL/pgSQL body nested too deeply to analyse", session: SessionUnknown}
	}
	return bodyResult(w.stmts, w.verdicts)
}

// plpgsqlParse returns the decoded parse of a CREATE statement of a PL/pgSQL function (as
// createStatement makes it), from the kept parses when it was parsed before; nil and the problem,
// as a verdict's detail, when it cannot be parsed or read.
func (c *Classifier) plpgsqlParse(text string) (*jsonNode, string) {
	if root, ok := c.plpgsql.get(text); ok {
		return root, ""
	}
	out, err := pg_query.ParsePlPgSqlToJSON(text)
	if err != nil && strings.Contains(err.Error(), "missing expression") && returnNextBare.MatchString(text) {
		// pg_query's PL/pgSQL parser does not know OUT parameters make a bare RETURN NEXT valid;
		// giving it an expression changes nothing the analysis looks at.
		out, err = pg_query.ParsePlPgSqlToJSON(returnNextBare.ReplaceAllString(text, "RETURN NEXT NULL;"))
	}
	if err != nil {
		problem := "PL/pgSQL body could not be parsed"
		if strings.Contains(err.Error(), "cursor or refcursor") {
			problem += " (pg_query's PL/pgSQL parser does not support cursor variables)"
		}
		return nil, problem
	}
	root, err := decodeOrdered(&c.plpgsqlJSON, out)
	if errors.Is(err, errJSONTooDeep) {
		return nil, "PL/pgSQL body nested too deeply to analyse"
	}
	if err != nil {
		return nil, "PL/pgSQL parse result could not be read"
	}
	c.plpgsql.keep(text, root)
	return root, ""
}

// createStatement rebuilds a CREATE FUNCTION (or PROCEDURE) statement for the PL/pgSQL parser from
// the catalogue row. RETURNS TABLE(...) is turned into OUT parameters, which the parser understands.
func createStatement(f *Function) string {
	tag := "$pgowl$"
	for i := 0; strings.Contains(f.Source, tag) && i < 100; i++ {
		tag = fmt.Sprintf("$pgowl%d$", i)
	}
	args := f.Arguments
	result := f.Result
	if strings.HasPrefix(result, "TABLE(") && strings.HasSuffix(result, ")") {
		columns := splitTopLevel(result[len("TABLE(") : len(result)-1])
		out := make([]string, 0, len(columns))
		for _, column := range columns {
			out = append(out, "OUT "+strings.TrimSpace(column))
		}
		if args != "" {
			args += ", "
		}
		args += strings.Join(out, ", ")
		result = "SETOF record"
	}
	var b strings.Builder
	if f.Kind == 'p' {
		b.WriteString("CREATE PROCEDURE pgowl_analysed(")
		b.WriteString(args)
		b.WriteString(") LANGUAGE plpgsql AS ")
	} else {
		if result == "" {
			result = "void"
		}
		b.WriteString("CREATE FUNCTION pgowl_analysed(")
		b.WriteString(args)
		b.WriteString(") RETURNS ")
		b.WriteString(result)
		b.WriteString(" LANGUAGE plpgsql AS ")
	}
	b.WriteString(tag)
	b.WriteString(f.Source)
	b.WriteString(tag)
	return b.String()
}

// splitTopLevel splits s at commas outside parentheses and quotes.
func splitTopLevel(s string) []string {
	var parts []string
	depth, start := 0, 0
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '(' || c == '[':
			depth++
		case c == ')' || c == ']':
			depth--
		case c == ',' && depth == 0:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}

// jsonNode is a JSON value that keeps the order of object keys.
type jsonNode struct {
	keys   []string
	values []*jsonNode // object members or array elements (keys nil for arrays)
	array  bool
	text   string // strings
	number float64
	isNum  bool
}

func (n *jsonNode) get(key string) *jsonNode {
	if n == nil {
		return nil
	}
	for i, k := range n.keys {
		if k == key {
			return n.values[i]
		}
	}
	return nil
}

// decodeOrdered reads JSON into jsonNodes with fastjson, a parser of one pass over the text that
// allocates nothing per token (jsontext's token reader, used before, cost as much as pg_query's
// parse itself on the path of the first statement that calls a function a migration just
// created). parsers are reused: a parser keeps the values of its last parse until the next one.
// JSON nested deeper than fastjson reads (300 levels) is reported as errJSONTooDeep.
func decodeOrdered(parsers *fastjson.ParserPool, text string) (*jsonNode, error) {
	parser := parsers.Get()
	defer parsers.Put(parser)
	value, err := parser.Parse(text)
	if err != nil {
		// fastjson (v1.6.10) has no error value for depth, only this text; if its wording
		// changes the body still goes to the primary, as "could not be read", and
		// TestPlpgsqlBodyNestedTooDeeplyIsUnknown, which wants the depth named, fails.
		if strings.Contains(err.Error(), "too big depth") {
			return nil, errJSONTooDeep
		}
		return nil, err
	}
	return copyJSON(value), nil
}

// errJSONTooDeep reports JSON nested deeper than the decoder reads.
var errJSONTooDeep = errors.New("JSON nested too deeply")

// copyJSON copies a parsed value into jsonNodes, which outlive the parser.
func copyJSON(value *fastjson.Value) *jsonNode {
	switch value.Type() {
	case fastjson.TypeObject:
		object, _ := value.Object()
		node := &jsonNode{keys: make([]string, 0, object.Len()), values: make([]*jsonNode, 0, object.Len())}
		object.Visit(func(key []byte, member *fastjson.Value) {
			node.keys = append(node.keys, string(key))
			node.values = append(node.values, copyJSON(member))
		})
		return node
	case fastjson.TypeArray:
		elements, _ := value.Array()
		node := &jsonNode{array: true, values: make([]*jsonNode, len(elements))}
		for i, element := range elements {
			node.values[i] = copyJSON(element)
		}
		return node
	case fastjson.TypeString:
		text, _ := value.StringBytes()
		return &jsonNode{text: string(text)}
	case fastjson.TypeNumber:
		number, _ := value.Float64()
		return &jsonNode{number: number, isNum: true}
	default:
		return &jsonNode{} // booleans and null carry nothing the walker needs
	}
}

// plWalker collects the statements a PL/pgSQL body runs and their verdicts.
type plWalker struct {
	a *analysis
	// procedure is set for a procedure's body, where SQL pgowl cannot read may be a migration's DDL.
	procedure bool
	stmts     []*pg_query.Node
	verdicts  []verdict
	tooDeep   bool
	// assigned holds, by variable name (lower case), the templates of the values assignments
	// before gave it (templateOf): what an EXECUTE of the variable may run.
	assigned map[string][]string
}

// dynamicStatements are the PL/pgSQL statements that run a string as SQL.
var dynamicStatements = map[string]string{
	"PLpgSQL_stmt_dynexecute": "EXECUTE of dynamic SQL",
	"PLpgSQL_stmt_dynfors":    "FOR ... IN EXECUTE of dynamic SQL",
}

func (w *plWalker) walk(n *jsonNode, depth int) {
	if n == nil || w.tooDeep {
		return
	}
	if depth > maxJSONDepth {
		w.tooDeep = true
		return
	}
	for i, key := range n.keys {
		value := n.values[i]
		switch key {
		case "PLpgSQL_expr":
			w.expression(value)
			continue
		case "PLpgSQL_type":
			w.declaredType(value)
		case "PLpgSQL_stmt_commit":
			w.add(nil, write("COMMIT"))
		case "PLpgSQL_stmt_rollback":
			w.add(nil, write("ROLLBACK"))
		case "PLpgSQL_stmt_return_query":
			if query := value.get("dynquery"); query != nil {
				w.dynamic("RETURN QUERY EXECUTE of dynamic SQL", query)
			}
		case "PLpgSQL_stmt_open":
			if query := value.get("dynquery"); query != nil {
				w.dynamic("OPEN ... FOR EXECUTE of dynamic SQL", query)
			}
		default:
			if subject, ok := dynamicStatements[key]; ok {
				w.dynamic(subject, value.get("query"))
			}
		}
		w.walk(value, depth+1)
	}
	if n.array {
		for _, value := range n.values {
			w.walk(value, depth+1)
		}
	}
}

// dynamic adds what a statement that runs a string as SQL runs. A string written as one literal
// ('CREATE POLICY ...') is analysed as the statements it holds; any other string cannot be
// known: a write, which in a procedure may also change the catalogue (migrations run DDL so), as
// may one in a function whose template holds DDL (templateChangesCatalogue), and which may
// change the session's state unseen (SET ROLE, set_config, LISTEN, a temporary table, an
// advisory lock), read or write: SessionUnknown, so that pgowl asks the node what the session
// holds afterwards, as after a DO block.
func (w *plWalker) dynamic(subject string, query *jsonNode) {
	if text, ok := literalSQL(query); ok {
		if tree, err := w.a.c.bodies.parse(text); err == nil && len(tree.GetStmts()) > 0 {
			for _, raw := range tree.GetStmts() {
				w.add(raw.GetStmt(), w.a.statement(raw.GetStmt()))
			}
			return
		}
	}
	v := write(subject)
	v.catalogueChange = w.procedure || w.templateChangesCatalogue(query)
	if w.a.declared != "" {
		// PostgreSQL runs the string read-only, as it does every statement of a STABLE or
		// IMMUTABLE function: whatever it writes is refused. Only what it calls that a
		// standby refuses (nextval(), advisory locks) or that reads node-local state is
		// not covered; the declaration is taken at its word for those.
		w.a.assume(subject + " taken as a read: " + w.a.declared)
		v = read(subject)
	}
	v.session = SessionUnknown
	w.add(nil, v)
}

// templateChangesCatalogue reports whether the string a dynamic statement runs is built from a
// template (dynamicTemplate; for a variable, the templates assigned to it before) that holds a
// statement which changes the catalogue, as that statement would in the body (statement): a
// function whose EXECUTE runs format('CREATE OR REPLACE FUNCTION %I ...') changes the catalogue
// when it is called, of names not known. A template that does not parse (a placeholder where a
// query goes: format('CREATE VIEW %I AS %s', ...)) counts when its first words say it creates a
// function, procedure, type or view (ProvisionalCreate).
func (w *plWalker) templateChangesCatalogue(query *jsonNode) bool {
	var templates []string
	if text, ok := dynamicTemplate(query); ok {
		templates = []string{text}
	} else if ref := expressionValue(query).GetColumnRef(); ref != nil && len(ref.GetFields()) == 1 {
		templates = w.assigned[strings.ToLower(ref.GetFields()[0].GetString_().GetSval())]
	}
	for _, text := range templates {
		tree, err := w.a.c.bodies.parse(text)
		if err != nil {
			if _, creates := ProvisionalCreate(text); creates {
				return true
			}
			continue
		}
		for _, raw := range tree.GetStmts() {
			node := raw.GetStmt()
			if catalogueChanges(node) != nil && (!relationOnly(node) || w.a.dropsTrackedRelation(node)) {
				return true
			}
		}
	}
	return false
}

// noteAssignedTemplate records the template an assignment's value builds (templateOf) under the
// variable assigned, for an EXECUTE of it later in the body.
func (w *plWalker) noteAssignedTemplate(expr *jsonNode) {
	mode := expr.get("parseMode")
	query := expr.get("query")
	if mode == nil || !mode.isNum || int(mode.number) < parseAssignFirst || int(mode.number) > parseAssignLast || query == nil {
		return
	}
	target, value, ok := splitAssignment(query.text)
	if !ok {
		return
	}
	text, ok := templateOf(value)
	if !ok {
		return
	}
	if w.assigned == nil {
		w.assigned = map[string][]string{}
	}
	name := strings.ToLower(strings.TrimSpace(target))
	w.assigned[name] = append(w.assigned[name], text)
}

// literalSQL returns the text of a PL/pgSQL expression that is one string literal, cast or not.
func literalSQL(holder *jsonNode) (string, bool) {
	value := expressionValue(holder)
	if value == nil {
		return "", false
	}
	return stringConstant(value)
}

// expressionValue returns the parse tree of a PL/pgSQL expression that is one value (no FROM, no
// WHERE), or nil.
func expressionValue(holder *jsonNode) *pg_query.Node {
	expr := holder.get("PLpgSQL_expr")
	if expr == nil {
		return nil
	}
	query := expr.get("query")
	if query == nil {
		return nil
	}
	tree, err := parseSQL("SELECT " + query.text)
	if err != nil || len(tree.GetStmts()) != 1 {
		return nil
	}
	sel := tree.GetStmts()[0].GetStmt().GetSelectStmt()
	if sel == nil || len(sel.GetTargetList()) != 1 || sel.GetFromClause() != nil || sel.GetWhereClause() != nil {
		return nil
	}
	return sel.GetTargetList()[0].GetResTarget().GetVal()
}

// declaredType adds what giving a variable of a declared type a value runs: the CHECK constraints
// when the type is a domain with checks (PL/pgSQL checks them at every assignment).
func (w *plWalker) declaredType(t *jsonNode) {
	name := t.get("typname")
	if cat := w.a.run.cat; name == nil || name.text == "" || name.text == "UNKNOWN" || cat == nil || cat.domainChecks.len() == 0 {
		return
	}
	tree, err := w.a.c.bodies.parse("SELECT NULL::" + name.text)
	if err != nil || len(tree.GetStmts()) != 1 {
		return // %TYPE, %ROWTYPE and the like: not a domain written out
	}
	stmt := tree.GetStmts()[0].GetStmt()
	if v := w.a.statement(stmt); v.access == Write {
		v.subject = "a variable of type " + name.text + ": " + v.subject
		w.add(stmt, v)
	}
}

func (w *plWalker) add(stmt *pg_query.Node, v verdict) {
	if stmt == nil {
		stmt = &pg_query.Node{}
	}
	w.stmts = append(w.stmts, stmt)
	w.verdicts = append(w.verdicts, v)
}

// Parse modes of PLpgSQL_expr (PostgreSQL's RawParseMode).
const (
	parseDefault     = 0
	parseTypeName    = 1
	parseExpression  = 2
	parseAssignFirst = 3
	parseAssignLast  = 5
)

// expression classifies one PLpgSQL_expr by its parse mode: a whole statement, an expression, or an
// assignment (target := expression).
func (w *plWalker) expression(expr *jsonNode) {
	w.noteAssignedTemplate(expr)
	texts, problem := expressionTexts(expr)
	if problem != "" {
		w.add(nil, unknownEffect(problem))
		return
	}
	for _, text := range texts {
		tree, err := w.a.c.bodies.parse(text)
		if err != nil {
			w.add(nil, unknownEffect("PL/pgSQL statement could not be parsed"))
			continue
		}
		for _, raw := range tree.GetStmts() {
			w.add(raw.GetStmt(), w.a.statement(raw.GetStmt()))
		}
	}
}

// expressionTexts returns the SQL texts one PLpgSQL_expr runs, by its parse mode (none for a type
// name), or the problem, as a verdict's detail, when they cannot be told.
func expressionTexts(expr *jsonNode) (texts []string, problem string) {
	query := expr.get("query")
	if query == nil {
		return nil, ""
	}
	mode := 0
	if m := expr.get("parseMode"); m != nil && m.isNum {
		mode = int(m.number)
	}
	switch {
	case mode == parseDefault:
		return []string{query.text}, ""
	case mode == parseTypeName:
		return nil, ""
	case mode == parseExpression:
		return []string{"SELECT " + query.text}, ""
	case mode >= parseAssignFirst && mode <= parseAssignLast:
		target, value, ok := splitAssignment(query.text)
		if !ok {
			return nil, "PL/pgSQL assignment could not be read"
		}
		texts = []string{"SELECT " + value}
		for _, subscript := range subscripts(target) {
			texts = append(texts, "SELECT "+subscript)
		}
		return texts, ""
	}
	return nil, fmt.Sprintf("PL/pgSQL expression of unknown kind %d", mode)
}

// splitAssignment splits "target := value" (or "target = value") at the first assignment operator
// outside quotes and brackets.
func splitAssignment(text string) (target, value string, ok bool) {
	depth := 0
	var quote byte
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '(' || c == '[':
			depth++
		case c == ')' || c == ']':
			depth--
		case depth == 0 && c == ':' && i+1 < len(text) && text[i+1] == '=':
			return text[:i], text[i+2:], strings.TrimSpace(text[i+2:]) != ""
		case depth == 0 && c == '=':
			return text[:i], text[i+1:], strings.TrimSpace(text[i+1:]) != ""
		}
	}
	return "", "", false
}

// subscripts returns the expressions inside [...] of an assignment target, such as arr[f(1)].
func subscripts(target string) []string {
	var out []string
	for len(out) < 16 {
		open := strings.IndexByte(target, '[')
		if open < 0 {
			break
		}
		end := bytes.IndexByte([]byte(target[open:]), ']')
		if end < 0 {
			break
		}
		inner := target[open+1 : open+end]
		for _, part := range strings.Split(inner, ":") {
			if strings.TrimSpace(part) != "" {
				out = append(out, part)
			}
		}
		target = target[open+end+1:]
	}
	return out
}
