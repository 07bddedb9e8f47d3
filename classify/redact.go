package classify

import (
	"strconv"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v5"
)

// Redact returns sql as logs and SHOW pgowl.explain may show it: pg_query's
// normalised text, with every literal and every comment it left in place
// masked too. Input that does not scan gives UnparseablePlaceholder: the
// raw text never reaches a log.
func Redact(sql string) string {
	masked, err := redact(sql)
	if err != nil {
		return UnparseablePlaceholder
	}
	return masked
}

// redact is Redact, with the error of input that does not scan.
func redact(sql string) (string, error) {
	normalized, err := pg_query.Normalize(sql)
	if err != nil {
		return "", err
	}
	return maskLiterals(normalized)
}

// maskLiterals replaces what pg_query's normaliser keeps of a statement's
// values: it replaces constants only where a query's plan would, and leaves
// those of utility statements and DDL (PREPARE ... AS SELECT 'x', CREATE
// TABLE ... AS, CREATE VIEW, COMMENT ... IS 'x', ALTER SYSTEM SET, COPY ...
// FROM PROGRAM 'cmd', CALL p('x'), NOTIFY ch, 'x', function bodies), and SQL
// comments. Working on the scanner's tokens rather than the parse tree
// catches every position the grammar allows a literal in, including those
// no normaliser knows:
//
//   - each string, bit-string, hexadecimal, integer or numeric constant
//     becomes $n, numbered after the statement's own parameters;
//   - each comment is removed;
//   - the value of a SET-style clause (SET, SET LOCAL, ALTER SYSTEM/ROLE/
//     DATABASE/FUNCTION ... SET name TO value), which the grammar also
//     takes as a bare word (SET application_name = secret), becomes $n, as
//     does each item of a list of them (SET search_path = a, b).
func maskLiterals(text string) (string, error) {
	if holdsNothingToMask(text) {
		return text, nil
	}
	tokens, err := scanSQL(text)
	if err != nil {
		return "", err
	}
	return maskLiteralTokens(text, tokens)
}

// maskLiteralTokens is maskLiterals with the scanner's tokens of text.
func maskLiteralTokens(text string, tokens []scanToken) (string, error) {
	next := 1
	for _, tok := range tokens {
		if tok.Token == pg_query.Token_PARAM {
			if n, err := strconv.Atoi(strings.TrimPrefix(text[tok.Start:tok.End], "$")); err == nil && n >= next {
				next = n + 1
			}
		}
	}
	var b strings.Builder
	b.Grow(len(text))
	copied := 0
	replace := func(start, end int32, with string) {
		b.WriteString(text[copied:start])
		b.WriteString(with)
		copied = int(end)
	}
	placeholder := func() string {
		p := "$" + strconv.Itoa(next)
		next++
		return p
	}
	// settingStatement: the current statement starts with SET, ALTER or
	// CREATE, whose SET clauses take values; an UPDATE's SET takes
	// expressions, which keep their column names.
	settingStatement, atStart := false, true
	for i := 0; i < len(tokens); i++ {
		tok := tokens[i]
		switch tok.Token {
		case pg_query.Token_SQL_COMMENT, pg_query.Token_C_COMMENT:
		case pg_query.Token_ASCII_59:
			atStart = true
		default:
			if atStart {
				settingStatement = tok.Token == pg_query.Token_SET || tok.Token == pg_query.Token_ALTER || tok.Token == pg_query.Token_CREATE
				atStart = false
			}
		}
		switch {
		case isConstantToken(tok.Token):
			replace(tok.Start, tok.End, placeholder())
		case tok.Token == pg_query.Token_SQL_COMMENT || tok.Token == pg_query.Token_C_COMMENT:
			replace(tok.Start, tok.End, "")
		case tok.Token == pg_query.Token_SET && settingStatement:
			start, end := setValues(tokens, i)
			for j := start; j < end; j++ {
				if v := &tokens[j]; isSetValueWord(v) {
					replace(v.Start, v.End, placeholder())
				} else if isConstantToken(v.Token) {
					replace(v.Start, v.End, placeholder())
				} else if v.Token == pg_query.Token_SQL_COMMENT || v.Token == pg_query.Token_C_COMMENT {
					replace(v.Start, v.End, "")
				}
			}
			if end > start {
				i = end - 1
			}
		}
	}
	b.WriteString(text[copied:])
	return b.String(), nil
}

// isConstantToken reports the scanner's literal tokens.
func isConstantToken(t pg_query.Token) bool {
	switch t {
	case pg_query.Token_SCONST, pg_query.Token_USCONST, pg_query.Token_BCONST, pg_query.Token_XCONST,
		pg_query.Token_ICONST, pg_query.Token_FCONST:
		return true
	}
	return false
}

// isSetValueWord reports a bare word that a SET clause takes as its value:
// an identifier or a keyword that is not reserved (on, off, true, local).
// DEFAULT stays: it names no value.
func isSetValueWord(tok *scanToken) bool {
	switch {
	case tok.Token == pg_query.Token_DEFAULT:
		return false
	case tok.Token == pg_query.Token_IDENT || tok.Token == pg_query.Token_UIDENT:
		return true
	case tok.KeywordKind != pg_query.KeywordKind_NO_KEYWORD && tok.KeywordKind != pg_query.KeywordKind_RESERVED_KEYWORD:
		return true
	case tok.Token == pg_query.Token_TRUE_P || tok.Token == pg_query.Token_FALSE_P:
		return true
	}
	return false
}

// setValues returns the token range [start, end) of the value list of a
// clause "SET [SESSION|LOCAL] name[.name] {TO|=} value[, value ...]" that
// starts at tokens[set]; the range is empty when the tokens there are not
// such a clause (SET ROLE, SET TRANSACTION, SET SCHEMA 'x').
func setValues(tokens []scanToken, set int) (start, end int) {
	i := set + 1
	skipComments := func() {
		for i < len(tokens) && (tokens[i].Token == pg_query.Token_SQL_COMMENT || tokens[i].Token == pg_query.Token_C_COMMENT) {
			i++
		}
	}
	skipComments()
	if i < len(tokens) && (tokens[i].Token == pg_query.Token_SESSION || tokens[i].Token == pg_query.Token_LOCAL) {
		i++
		skipComments()
	}
	// The setting's name: words joined by dots.
	for {
		if i >= len(tokens) || !isNameToken(&tokens[i]) {
			return set, set
		}
		i++
		skipComments()
		if i < len(tokens) && tokens[i].Token == pg_query.Token_ASCII_46 {
			i++
			continue
		}
		break
	}
	if i >= len(tokens) || (tokens[i].Token != pg_query.Token_TO && tokens[i].Token != pg_query.Token_ASCII_61) {
		return set, set
	}
	i++
	start = i
	// The values: single words or constants (with an optional sign), separated by commas.
	for {
		skipComments()
		if i < len(tokens) && (tokens[i].Token == pg_query.Token_ASCII_45 || tokens[i].Token == pg_query.Token_ASCII_43) {
			i++
		}
		if i >= len(tokens) || !(isSetValueWord(&tokens[i]) || isConstantToken(tokens[i].Token) ||
			tokens[i].Token == pg_query.Token_DEFAULT || tokens[i].Token == pg_query.Token_PARAM) {
			return start, i
		}
		i++
		skipComments()
		if i >= len(tokens) || tokens[i].Token != pg_query.Token_ASCII_44 {
			return start, i
		}
		i++
	}
}

// isNameToken reports a token that can name a setting: an identifier or any keyword.
func isNameToken(tok *scanToken) bool {
	return tok.Token == pg_query.Token_IDENT || tok.Token == pg_query.Token_UIDENT || tok.KeywordKind != pg_query.KeywordKind_NO_KEYWORD
}

// holdsNothingToMask reports, without scanning, that maskLiterals would return text as it is: a
// single statement that holds no SET clause, whose bare words are values (one that starts with
// SET, ALTER or CREATE holds none when the letters "set" appear nowhere in it, in any case; in an
// UPDATE, SET takes expressions), with no quote of any kind ('...', E'...', "...", $$...$$: a
// quoted identifier may hide anything), no comment, and no digit outside an identifier or a
// parameter ($1): pg_query's normalised text of most queries, whose constants it replaced
// already. It errs toward false: then the scanner decides. What pg_query.Normalize returns has
// scanned already, so skipping the scan loses no error.
func holdsNothingToMask(text string) bool {
	if strings.ContainsAny(text, "'\";") || strings.Contains(text, "--") || strings.Contains(text, "/*") {
		return false
	}
	first := strings.TrimLeft(text, " \t\n\r\f(")
	for _, keyword := range [...]string{"set", "alter", "create"} {
		if len(first) >= len(keyword) && strings.EqualFold(first[:len(keyword)], keyword) && containsFold(first, "set") {
			// Perhaps a SET clause (SET, ALTER ... SET, CREATE FUNCTION ... SET), whose bare
			// words are values; or RESET, a name holding "set": the scanner decides.
			return false
		}
	}
	identifier := false // the previous byte belongs to an identifier or keyword
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case identifier && isIdentByte(c): // digits and $ inside a word (f_12, a$b)
		case isDigit(c):
			return false // a number
		case c == '$':
			// A parameter: digits, then no identifier byte.
			j := i + 1
			for j < len(text) && isDigit(text[j]) {
				j++
			}
			if j == i+1 || (j < len(text) && isIdentByte(text[j])) {
				return false // a dollar quote, or something the scanner must read
			}
			i, identifier = j-1, false
		default:
			identifier = isIdentByte(c)
		}
	}
	return true
}
