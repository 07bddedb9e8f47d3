package classify

import (
	"math"
	"strconv"
	"strings"
)

// A statement's shape is its text with every literal replaced by a marker of
// the literal's kind. Statements that differ only in their literals, such as
// pgbench's "SELECT abalance FROM pgbench_accounts WHERE aid = 4711" with a
// new aid each time, share a shape, so they share one cache entry instead of
// each paying for a full parse.
//
// Sharing is only sound where literals cannot change the verdict. They can in
// EXPLAIN options ((ANALYZE 'off')), in set_config's and current_setting's arguments, in SET and
// transaction-mode statements, and in pgowl commands, so only statements that
// start with one of shapeKeywords and never mention set_config or current_setting are shaped, and
// only verdicts without session effects are shared. Literal kinds stay apart
// (integer, bigint, numeric, decimal, string, bit string) because they are the
// argument types a function's overload or a cast is resolved by.

// integerKind is the shape marker of an integer literal: PostgreSQL types it
// integer when it fits, else bigint, else numeric, and the type decides which
// overload or cast runs. Underscores (not integers to PostgreSQL 15) are left
// to the parser.
func integerKind(text string) (string, bool) {
	if strings.IndexByte(text, '_') >= 0 {
		return "", false
	}
	if len(text) <= 9 {
		return "?i", true
	}
	switch strings.TrimLeft(text, "0") {
	case "2147483648", "9223372036854775808":
		// With a unary minus (folded into the constant) these fit the smaller
		// type; the shape cannot tell a unary minus from a binary one.
		return "", false
	}
	v, err := strconv.ParseInt(text, 10, 64)
	switch {
	case err != nil:
		return "?n", true
	case v <= math.MaxInt32:
		return "?i", true
	}
	return "?l", true
}

// shapeKeywords are the statement starts whose verdict never depends on a literal's value.
var shapeKeywords = []string{"select", "with", "insert", "update", "delete", "values", "table", "merge"}

// shapePrefix keeps shape keys apart from SQL text in the cache: a Query string cannot contain NUL.
const shapePrefix = "\x00"

// shapeOf returns the cache key of sql's shape, or false when sql must not share a verdict
// with other statements (or cannot be scanned with certainty).
func shapeOf(sql string) (string, bool) {
	shape, ok := appendShape(nil, sql)
	return string(shape), ok
}

// appendShape appends the cache key of sql's shape to dst (see shapeOf). The hot path passes a
// buffer on its stack, so that looking a shape up allocates nothing.
func appendShape(dst []byte, sql string) ([]byte, bool) {
	if !shapeEligible(sql) {
		return dst, false
	}
	b := dst
	b = append(b, shapePrefix...)
	prevIdent := false // the previous byte belongs to an identifier or keyword
	replaced := false
	// inByList is set after BY (ORDER BY, GROUP BY, PARTITION BY): an integer there may be a
	// column position, which is part of the statement, not a value, so it stays.
	inByList := false
	wordStart := -1
	for i := 0; i < len(sql); {
		c := sql[i]
		switch {
		case c == '-' && i+1 < len(sql) && sql[i+1] == '-':
			// PostgreSQL ends such a comment at a newline or a carriage return.
			end := strings.IndexAny(sql[i:], "\n\r")
			if end < 0 {
				end = len(sql) - i
			}
			b = append(b, sql[i:i+end]...)
			i += end
			prevIdent = false
		case c == '/' && i+1 < len(sql) && sql[i+1] == '*':
			end, ok := blockCommentEnd(sql, i)
			if !ok {
				return dst, false
			}
			b = append(b, sql[i:end]...)
			i = end
			prevIdent = false
		case c == '"':
			end, ok := quotedEnd(sql, i, '"', false)
			if !ok || (end < len(sql) && sql[end] == '$') {
				// A '$' right after a quoted identifier may open a dollar quote
				// (it cannot continue the identifier): leave it to the parser.
				return dst, false
			}
			b = append(b, sql[i:end]...)
			i = end
			prevIdent = true
		case c == '\'':
			// A string; a one-letter prefix written just before it (E, B, X, N) was copied
			// as an identifier byte: E strings take backslash escapes, B and X are bit strings.
			escapes, bits := false, false
			if i > 0 && prevIdent && (i < 2 || !isIdentByte(sql[i-2])) {
				switch sql[i-1] | 0x20 {
				case 'e':
					escapes = true
				case 'b', 'x':
					bits = true
				}
			}
			end, ok := quotedEnd(sql, i, '\'', escapes)
			if !ok {
				return dst, false
			}
			if bits {
				b = append(b, "?b"...)
			} else {
				b = append(b, "?s"...)
			}
			replaced = true
			i = end
			prevIdent = false
		case c == '$' && !prevIdent:
			if i+1 < len(sql) && isDigit(sql[i+1]) {
				// A parameter such as $1: keep it.
				j := i + 1
				for j < len(sql) && isDigit(sql[j]) {
					j++
				}
				b = append(b, sql[i:j]...)
				i = j
				prevIdent = true
				continue
			}
			end, ok := dollarQuoteEnd(sql, i)
			if !ok {
				return dst, false // not a dollar quote we understand
			}
			b = append(b, "?s"...)
			replaced = true
			i = end
			prevIdent = false
		case (isDigit(c) || (c == '.' && i+1 < len(sql) && isDigit(sql[i+1]))) && !prevIdent:
			j, decimal := i, false
			for j < len(sql) {
				d := sql[j]
				switch {
				case isDigit(d) || d == '_':
				case d == '.' && !(j+1 < len(sql) && sql[j+1] == '.'):
					decimal = true
				case (d == 'e' || d == 'E') && j+1 < len(sql) && (isDigit(sql[j+1]) || ((sql[j+1] == '+' || sql[j+1] == '-') && j+2 < len(sql) && isDigit(sql[j+2]))):
					decimal = true
					j++
				default:
					goto done
				}
				j++
			}
		done:
			if j < len(sql) && isIdentByte(sql[j]) {
				return dst, false // 1abc, 0x1F: leave such text to the parser
			}
			if inByList && !decimal {
				b = append(b, sql[i:j]...)
				i = j
				prevIdent = false
				continue
			}
			if decimal {
				b = append(b, "?f"...)
			} else {
				kind, ok := integerKind(sql[i:j])
				if !ok {
					return dst, false
				}
				b = append(b, kind...)
			}
			replaced = true
			i = j
			prevIdent = false
		case isIdentByte(c):
			// The rest of a word: every byte of it takes this branch (digits and '$' after an
			// identifier byte are part of it), so it is copied whole.
			if !prevIdent {
				wordStart = i
			}
			j := i + 1
			for j < len(sql) && isIdentByte(sql[j]) {
				j++
			}
			b = append(b, sql[i:j]...)
			inByList = updateByList(inByList, sql[wordStart:j])
			prevIdent = true
			i = j
		default:
			b = append(b, c)
			if c == ')' || c == ';' || c == '(' {
				inByList = false
			}
			prevIdent = false
			i++
		}
	}
	if !replaced {
		return dst, false // the exact text is its own key
	}
	return b, true
}

// byListEnds are the keywords that end an ORDER BY / GROUP BY list.
var byListEnds = []string{"limit", "offset", "fetch", "for", "having", "window", "union", "intersect", "except",
	"from", "where", "select", "returning", "on", "range", "rows", "groups"}

// updateByList tracks whether the scanner is inside a BY list after the word w.
func updateByList(inByList bool, w string) bool {
	if len(w) == 2 && w[0]|0x20 == 'b' && w[1]|0x20 == 'y' {
		return true
	}
	if !inByList {
		return false // only BY starts a list: no need to compare every word
	}
	for _, k := range byListEnds {
		if strings.EqualFold(w, k) {
			return false
		}
	}
	return inByList
}

// shapeEligible reports whether sql starts with a keyword whose verdict cannot depend on a literal.
func shapeEligible(sql string) bool {
	s := strings.TrimLeft(sql, " \t\r\n(")
	word := s
	for i := 0; i < len(s); i++ {
		if !isIdentByte(s[i]) {
			word = s[:i]
			break
		}
	}
	ok := false
	for _, k := range shapeKeywords {
		if strings.EqualFold(word, k) {
			ok = true
			break
		}
	}
	// An identifier written with Unicode escapes (U&"current\005fsetting")
	// could hide a name mentionsSettingCall looks for.
	return ok && !mentionsSettingCall(sql) && !strings.Contains(sql, "&\"")
}

// shareable reports whether a verdict may be shared by every statement of its shape.
func shareable(e *Effects) bool {
	return e.Pgowl == nil && e.Session == 0 && e.ParseError == "" && e.Tx == TxNone
}

func blockCommentEnd(sql string, start int) (int, bool) {
	depth := 0
	for i := start; i+1 < len(sql); i++ {
		switch {
		case sql[i] == '/' && sql[i+1] == '*':
			depth++
			i++
		case sql[i] == '*' && sql[i+1] == '/':
			depth--
			i++
			if depth == 0 {
				return i + 1, true
			}
		}
	}
	return 0, false
}

// quotedEnd returns the index just past the quoted text that starts at start.
func quotedEnd(sql string, start int, quote byte, backslashEscapes bool) (int, bool) {
	for i := start + 1; i < len(sql); i++ {
		switch sql[i] {
		case '\\':
			if backslashEscapes {
				i++
			}
		case quote:
			if i+1 < len(sql) && sql[i+1] == quote {
				i++
				continue
			}
			return i + 1, true
		}
	}
	return 0, false
}

// dollarQuoteEnd returns the index just past the dollar-quoted string that starts at start ($tag$
// ... $tag$, the tag empty or an identifier); ok is false when the text there is no such string or
// it is left open.
func dollarQuoteEnd(sql string, start int) (int, bool) {
	tagEnd := start + 1
	for tagEnd < len(sql) && isIdentByte(sql[tagEnd]) && sql[tagEnd] != '$' {
		tagEnd++
	}
	if tagEnd >= len(sql) || sql[tagEnd] != '$' || (tagEnd > start+1 && isDigit(sql[start+1])) {
		return 0, false
	}
	tag := sql[start : tagEnd+1]
	close := strings.Index(sql[tagEnd+1:], tag)
	if close < 0 {
		return 0, false
	}
	return tagEnd + 1 + close + len(tag), true
}

// isIdentByte reports whether c can be part of an identifier or keyword (after its first byte).
func isIdentByte(c byte) bool { return identBytes[c] }

// identBytes is isIdentByte's table: the scanners ask it for every byte of a statement.
var identBytes = func() (table [256]bool) {
	for c := range table {
		b := byte(c)
		table[c] = b == '_' || b == '$' || isDigit(b) || (b|0x20 >= 'a' && b|0x20 <= 'z') || b >= 0x80
	}
	return table
}()

// mentionsSettingCall reports whether sql mentions set_config or current_setting, in any case,
// whose literal arguments decide their effect. Both names contain '_', so only the underscores in
// sql are checked.
func mentionsSettingCall(sql string) bool {
	for from := 0; ; {
		i := strings.IndexByte(sql[from:], '_')
		if i < 0 {
			return false
		}
		p := from + i
		if p >= 3 && p+7 <= len(sql) && strings.EqualFold(sql[p-3:p+7], "set_config") {
			return true
		}
		if p >= 7 && p+8 <= len(sql) && strings.EqualFold(sql[p-7:p+8], "current_setting") {
			return true
		}
		from = p + 1
	}
}
