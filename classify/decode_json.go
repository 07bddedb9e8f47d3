package classify

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	pg_query "github.com/pganalyze/pg_query_go/v5"
	"github.com/pganalyze/pg_query_go/v5/parser"
)

// The parse tree through JSON.
//
// pg_query's C library writes the tree PostgreSQL's parser built in two forms: protobuf
// (parser.ParseToProtobuf) and JSON (parser.ParseToJSON). The protobuf writer (protobuf-c) visits
// every field a message type declares to size it and again to pack it, and a Node declares one per
// node type (about 250), for each node of the tree: two thirds of the C side of a short
// statement's parse. The JSON writer writes only the fields a node has. So parseSQL reads the JSON
// (decodejson_generated.go, from the same message descriptors as the protobuf decoder) and gives
// the same tree (TestJSONTreeMatchesProtobufTree). Where the JSON cannot say exactly what the
// protobuf says, the read fails and parseSQL parses again through protobuf: an Integer node the
// writer wrote without its value (it drops one that is 0 or negative) outside an A_Const whose
// text says it, a double (written with %f), an IntList's or OidList's numbers (the message holds
// Nodes), a string that is not UTF-8 (as proto.Unmarshal, the protobuf path fails it), a key the
// message does not have (a writer that differs from the descriptors).
//
// Statements longer than jsonTextBound, and those that may hold a multi-column assignment, are
// parsed through protobuf from the start: their JSON could outgrow what the C writer can hold,
// which ends the process (see jsonTextBound).
//
// Strings in the tree are substrings of the JSON text, not copies, unless they hold an escape:
// a tree kept keeps its statement's JSON text.

// parseSQL is pg_query.Parse: PostgreSQL's parser in C, the tree read into pg_query's Go
// messages without protobuf reflection, through JSON where it says the tree exactly and cannot
// outgrow what the C writer can hold (readsThroughJSON).
func parseSQL(sql string) (*pg_query.ParseResult, error) {
	shares := mayShareSubtrees(sql)
	if shares {
		if bound := sharedTreeBound(sql); bound > sharedTreeBudget {
			return nil, &treeTooCostlyError{bound: bound}
		}
	}
	if !throughJSON(sql, shares) {
		return parseSQLThroughProtobuf(sql)
	}
	text, err := parser.ParseToJSON(sql)
	if err != nil {
		return nil, err
	}
	if tree, failure := readJSONTree(sql, text); failure == "" {
		return tree, nil
	}
	return parseSQLThroughProtobuf(sql)
}

// jsonTextBound is the longest statement parseSQL parses through JSON.
//
// pg_query writes the JSON into a PostgreSQL string buffer, which cannot grow past 1 GB, and the
// error it raises there is outside the parse's error handler: it ends the process. (The protobuf
// is written with malloc, without that bound.) Without subtrees shared in the tree, the JSON is
// at most some tens of times its statement. The grammar shares one: the source of a multi-column
// assignment, SET (a, b, ...) = (...), which both writers write once per column, so that the
// text written grows as the product of the two (a 205 KB UPDATE of 1000 columns from a 200 KB
// string of '<', which the JSON writes as \u003c: 200 MB of protobuf, over 1 GB of JSON). Such
// statements are parsed through protobuf (mayShareSubtrees); the bound keeps a sharing this does
// not know of, if one exists, from reaching 1 GB where it would grow as the square of the text:
// 1.5 times the square of 16 KB is 400 MB. Longer statements are rare and cost the parse more
// than the writer does.
const jsonTextBound = 16 << 10

// readsThroughJSON reports whether parseSQL parses sql through JSON (see jsonTextBound).
func readsThroughJSON(sql string) bool {
	return throughJSON(sql, mayShareSubtrees(sql))
}

// throughJSON is readsThroughJSON for sql of which mayShareSubtrees said shares: parseSQL asks
// it with the words already looked for.
func throughJSON(sql string, shares bool) bool {
	return !shares && len(sql) <= jsonTextBound
}

// mayShareSubtrees reports whether sql may hold a multi-column assignment, whose source the
// grammar shares among the columns. The assignment is part of a SET list after UPDATE (an UPDATE,
// an INSERT's ON CONFLICT DO UPDATE, a MERGE's THEN UPDATE), and keywords are ASCII, matched
// without case, never quoted and never split by a comment: a text without both words holds none.
func mayShareSubtrees(sql string) bool {
	return containsFold(sql, "update") && containsFold(sql, "set")
}

// sharedTreeBudget is the most sharedTreeBound lets a statement's parse tree reach.
//
// Both of pg_query's writers write a multi-column assignment's source once per column, and an
// UPDATE inside a WITH inside such a source copies its own source again for each copy (the raw
// grammar takes it; only analysis refuses it). So the written tree can grow as a power of the
// statement: through protobuf, a 105 KB UPDATE of 1000 columns from a 100 KB string took 2.7 s
// and 320 MB, one of 211 KB 10 s and 1.2 GB, and one of 1 MB (the default
// limits.max_message_size is 64 MB) would take the proxy's memory. A source of many small nodes
// costs more per byte than a string: up to some hundreds of bytes of tree per byte. Such a
// statement is not parsed: like input the parser rejects, it goes to the primary as of unknown
// effect, the reason saying why. A statement that holds the assignment writes (UPDATE, INSERT ...
// ON CONFLICT DO UPDATE, MERGE), so its routing does not change.
const sharedTreeBudget = 2 << 20

// sharedTreeBound bounds the bytes of source text that copies of shared sources can put in sql's
// parse tree, for sql that may share subtrees (mayShareSubtrees): 0 when it holds no multi-column
// assignment, else its length times the columns of
// each assignment's target list, SET (a, b, ...) = or , (a, b, ...) = (a nested one multiplies
// the copies; others only add, but the product bounds both), saturating past sharedTreeBudget.
// The scanner finds the lists, only for a statement whose length times its commas (and one), for
// each UPDATE in it, passes the budget.
func sharedTreeBound(sql string) uint64 {
	commas := uint64(strings.Count(sql, ",") + 1)
	crude := uint64(len(sql))
	for range countFold(sql, "update", 8) {
		if crude *= commas; crude > sharedTreeBudget {
			break
		}
	}
	if crude <= sharedTreeBudget {
		return crude
	}
	tokens, err := scanSQL(sql)
	if err != nil {
		return 0 // the parser rejects it as well
	}
	code := tokens[:0:0]
	for _, tok := range tokens {
		if tok.Token != pg_query.Token_SQL_COMMENT && tok.Token != pg_query.Token_C_COMMENT {
			code = append(code, tok)
		}
	}
	text := func(i int) string { return sql[code[i].Start:code[i].End] }
	bound, lists := uint64(len(sql)), 0
	var open []int // the '(' not closed yet
	for i := range code {
		switch text(i) {
		case "(":
			open = append(open, i)
		case ")":
			if len(open) == 0 {
				continue
			}
			first := open[len(open)-1]
			open = open[:len(open)-1]
			if first == 0 || i+1 >= len(code) || text(i+1) != "=" {
				continue
			}
			if before := text(first - 1); before != "," && !strings.EqualFold(before, "set") {
				continue
			}
			columns := uint64(1)
			for j := first + 1; j < i; j++ {
				if text(j) == "," {
					columns++
				}
			}
			lists++
			if bound *= columns; bound > sharedTreeBudget {
				return bound
			}
		}
	}
	if lists == 0 {
		return 0
	}
	return bound
}

// treeTooCostlyError is why a statement is not parsed (sharedTreeBudget).
type treeTooCostlyError struct{ bound uint64 }

func (e *treeTooCostlyError) Error() string {
	return fmt.Sprintf("not parsed: a multi-column assignment could copy its source into a parse tree of up to %d MB (the bound is %d MB)",
		e.bound>>20, sharedTreeBudget>>20)
}

// parseSQLThroughProtobuf is pg_query.Parse, with the C parser's protobuf decoded by
// decode_generated.go instead of proto.Unmarshal: the same tree
// (TestGeneratedDecodeMatchesProtoUnmarshal), in about a third of the time.
func parseSQLThroughProtobuf(sql string) (*pg_query.ParseResult, error) {
	encoded, err := parser.ParseToProtobuf(sql)
	if err != nil {
		return nil, err
	}
	tree := &pg_query.ParseResult{}
	if err := decodeParseResult(encoded, tree); err != nil {
		return nil, err
	}
	return tree, nil
}

// readJSONTree reads the JSON the C parser wrote for sql; failure says why it cannot say the
// tree exactly (see above), "" when it can.
func readJSONTree(sql, text string) (tree *pg_query.ParseResult, failure string) {
	if !utf8.ValidString(text) {
		return nil, "not UTF-8"
	}
	r := jsonReader{sql: sql, s: text}
	tree = &pg_query.ParseResult{}
	readJSONParseResult(&r, tree)
	if r.failure == "" && r.peek() != 0 {
		r.fail("text after the tree")
	}
	return tree, r.failure
}

// jsonReader reads the JSON the C parser writes, in one pass, for the generated readers. Its first
// failure (a reason, for tests) stops the read: every later read returns a zero value and ends
// every object and array, so that a generated reader needs no error checks of its own.
type jsonReader struct {
	sql string // the statement, for an A_Const whose Integer the writer left empty
	s   string // the JSON text
	i   int    // the next byte of s to read

	failure string // why the tree cannot be read exactly; "" while it can
	at      int    // where it failed
}

func (r *jsonReader) fail(reason string) {
	if r.failure == "" {
		r.failure, r.at = reason, r.i
	}
	r.i = len(r.s)
}

// unknownKey fails on a key the message does not have.
func (r *jsonReader) unknownKey() { r.fail("a key the message does not have") }

// inexact fails on a value the JSON does not say exactly.
func (r *jsonReader) inexact() { r.fail("a value the JSON does not say exactly") }

func (r *jsonReader) peek() byte {
	for r.i < len(r.s) {
		switch c := r.s[r.i]; c {
		case ' ', '\n', '\t', '\r':
			r.i++
		default:
			return c
		}
	}
	return 0
}

// open reads the start of an object.
func (r *jsonReader) open() bool {
	if r.peek() == '{' {
		r.i++
		return true
	}
	r.fail("expected an object")
	return false
}

// more reports whether the object has another key, reading the end of the object when it has not.
func (r *jsonReader) more() bool {
	switch r.peek() {
	case ',':
		r.i++
		return true
	case '"':
		return true
	case '}':
		r.i++
		return false
	}
	r.fail("expected a key or the end of an object")
	return false
}

// key reads a key and its colon.
func (r *jsonReader) key() string {
	k := r.str()
	if r.peek() != ':' {
		r.fail("expected a colon")
		return ""
	}
	r.i++
	return k
}

// openArray reads the start of an array.
func (r *jsonReader) openArray() {
	if r.peek() == '[' {
		r.i++
		return
	}
	r.fail("expected an array")
}

// moreItems reports whether the array has another element, reading the end of the array when it
// has not.
func (r *jsonReader) moreItems() bool {
	switch r.peek() {
	case ',':
		r.i++
		return true
	case ']':
		r.i++
		return false
	case 0:
		r.fail("unterminated array")
		return false
	}
	return true
}

// null reads a null, if that is what comes next.
func (r *jsonReader) null() bool {
	if r.peek() == 'n' && strings.HasPrefix(r.s[r.i:], "null") {
		r.i += len("null")
		return true
	}
	return false
}

// str reads a string (null reads as ""): a substring of the text when it holds no escape.
func (r *jsonReader) str() string {
	if r.peek() != '"' {
		if !r.null() {
			r.fail("expected a string")
		}
		return ""
	}
	start := r.i + 1
	end := strings.IndexByte(r.s[start:], '"')
	if end < 0 {
		r.fail("unterminated string")
		return ""
	}
	end += start
	if strings.IndexByte(r.s[start:end], '\\') < 0 {
		r.i = end + 1
		return r.s[start:end]
	}
	return r.escapedString(start)
}

// escapedString reads the string that starts at start and holds an escape.
func (r *jsonReader) escapedString(start int) string {
	var b strings.Builder
	b.Grow(32)
	for j := start; j < len(r.s); {
		c := r.s[j]
		switch {
		case c == '"':
			r.i = j + 1
			return b.String()
		case c != '\\':
			b.WriteByte(c)
			j++
			continue
		}
		if j+1 >= len(r.s) {
			break
		}
		switch e := r.s[j+1]; e {
		case '"', '\\', '/':
			b.WriteByte(e)
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			if j+6 > len(r.s) {
				r.fail("short \\u escape")
				return ""
			}
			code, err := strconv.ParseUint(r.s[j+2:j+6], 16, 16)
			if err != nil || (code >= 0xd800 && code < 0xe000) {
				r.fail("a \\u escape the writer does not write") // it escapes control characters, < and >
				return ""
			}
			b.WriteRune(rune(code))
			j += 6
			continue
		default:
			r.fail("unknown escape")
			return ""
		}
		j += 2
	}
	r.fail("unterminated string")
	return ""
}

// number returns the text of the number that comes next, and reads it.
func (r *jsonReader) number() string {
	r.peek()
	start := r.i
	j := start
	if j < len(r.s) && r.s[j] == '-' {
		j++
	}
	for j < len(r.s) && r.s[j] >= '0' && r.s[j] <= '9' {
		j++
	}
	r.i = j
	return r.s[start:j]
}

// integer reads a signed integer that fits in bits.
func (r *jsonReader) integer(bits int) int64 {
	v, err := strconv.ParseInt(r.number(), 10, bits)
	if err != nil {
		r.fail("expected an integer of the field's size")
	}
	return v
}

// unsigned reads an unsigned integer that fits in bits.
func (r *jsonReader) unsigned(bits int) uint64 {
	v, err := strconv.ParseUint(r.number(), 10, bits)
	if err != nil {
		r.fail("expected an unsigned integer of the field's size")
	}
	return v
}

func (r *jsonReader) boolean() bool {
	switch r.peek() {
	case 't':
		if strings.HasPrefix(r.s[r.i:], "true") {
			r.i += len("true")
			return true
		}
	case 'f':
		if strings.HasPrefix(r.s[r.i:], "false") {
			r.i += len("false")
			return false
		}
	}
	r.fail("expected a boolean")
	return false
}

// enum reads an enum value by its name, in the enum's map from names to numbers.
func (r *jsonReader) enum(values map[string]int32) int32 {
	v, ok := values[r.str()]
	if !ok {
		r.fail("an enum value the enum does not have")
	}
	return v
}

// readJSONInteger reads an Integer node. The writer writes its value only when it is above 0; one
// written without it is 0 or negative, which only an A_Const's text can tell (readJSONA_Const).
func readJSONInteger(r *jsonReader, m *pg_query.Integer) {
	r.readInteger(m)
	if m.Ival == 0 {
		r.inexact()
	}
}

// readInteger reads an Integer node, an empty one as 0.
func (r *jsonReader) readInteger(m *pg_query.Integer) {
	if !r.open() {
		return
	}
	for r.more() {
		switch r.key() {
		case "ival":
			m.Ival = int32(r.integer(32))
		default:
			r.unknownKey()
		}
	}
}

// readJSONA_Const reads an A_Const node. An Integer written without its value takes it from the
// statement's text at the constant's location: 0, or a minus sign (the parser folds it into the
// constant and moves the location to it) and digits.
func readJSONA_Const(r *jsonReader, m *pg_query.A_Const) {
	if !r.open() {
		return
	}
	var unwritten *pg_query.Integer
	for r.more() {
		switch r.key() {
		case "isnull":
			m.Isnull = r.boolean()
		case "location":
			m.Location = int32(r.integer(32))
		case "ival":
			v := new(pg_query.Integer)
			r.readInteger(v)
			if v.Ival == 0 {
				unwritten = v
			}
			m.Val = &pg_query.A_Const_Ival{Ival: v}
		case "fval":
			v := new(pg_query.Float)
			readJSONFloat(r, v)
			m.Val = &pg_query.A_Const_Fval{Fval: v}
		case "boolval":
			v := new(pg_query.Boolean)
			readJSONBoolean(r, v)
			m.Val = &pg_query.A_Const_Boolval{Boolval: v}
		case "sval":
			v := new(pg_query.String)
			readJSONString(r, v)
			m.Val = &pg_query.A_Const_Sval{Sval: v}
		case "bsval":
			v := new(pg_query.BitString)
			readJSONBitString(r, v)
			m.Val = &pg_query.A_Const_Bsval{Bsval: v}
		default:
			r.unknownKey()
		}
	}
	if unwritten != nil && r.failure == "" {
		v, ok := integerAt(r.sql, int(m.Location))
		if !ok {
			r.inexact()
		}
		unwritten.Ival = v
	}
}

// integerAt reads the integer constant 0 or -N (N a decimal that fits in int32 negated) at
// location in sql; false when the text there is anything else.
func integerAt(sql string, location int) (int32, bool) {
	if location < 0 || location >= len(sql) {
		return 0, false
	}
	text := sql[location:]
	negative := text[0] == '-'
	if negative {
		text = strings.TrimLeft(text[1:], " \t\n\r\f")
	}
	end := 0
	for end < len(text) && text[end] >= '0' && text[end] <= '9' {
		end++
	}
	if end == 0 || (end < len(text) && (isIdentifierByte(text[end]) || text[end] == '.')) {
		return 0, false
	}
	v, err := strconv.ParseInt(text[:end], 10, 64)
	if err != nil {
		return 0, false
	}
	if negative {
		v = -v
	}
	if v > 0 || v < -(1<<31) {
		return 0, false
	}
	return int32(v), true
}

// isIdentifierByte reports whether c may continue a number into something else (1e5, 1_000, 0x1).
func isIdentifierByte(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80
}
