package classify

import (
	"strings"
	"unicode/utf8"

	pg_query "github.com/pganalyze/pg_query_go/v5"
)

// The fast path recognises the few statements that dominate pooled traffic (BEGIN, COMMIT, ROLLBACK,
// END, ABORT, START TRANSACTION, SET name = literal, SHOW name) by their keywords and skips building
// the Go parse tree, the costliest step of a miss. It is deliberately narrow: anything it is not sure
// of (comments, quoting, escapes, lists, special SET forms, a second statement) goes to the full path.
// It still asks pg_query for the fingerprint, which also proves the string parses, and it builds its
// verdict with the same functions the full path uses. TestFastPathMatchesFullPath checks that both
// paths agree on every golden case.

// fastTokenKind is the kind of one fast-path token.
type fastTokenKind uint8

const (
	tokenWord fastTokenKind = iota + 1
	tokenNumber
	tokenString
	tokenDot
	tokenEquals
	tokenSemicolon
)

type fastToken struct {
	kind fastTokenKind
	text string // for tokenString, the content between the quotes
}

// maxFastTokens bounds the statements the fast path looks at.
const maxFastTokens = 12

// fastTokens splits sql into at most maxFastTokens simple tokens; ok is false for anything else.
func fastTokens(sql string, tokens *[maxFastTokens]fastToken) (count int, ok bool) {
	i := 0
	for i < len(sql) {
		ch := sql[i]
		if ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' {
			i++
			continue
		}
		if count == maxFastTokens {
			return 0, false
		}
		start := i
		switch {
		case isASCIILetter(ch) || ch == '_':
			for i < len(sql) && (isASCIILetter(sql[i]) || isDigit(sql[i]) || sql[i] == '_' || sql[i] == '$') {
				i++
			}
			if i < len(sql) && sql[i] == '\'' {
				return 0, false // E'..', B'..', X'..', N'..' and friends
			}
			tokens[count] = fastToken{kind: tokenWord, text: sql[start:i]}
		case isDigit(ch):
			for i < len(sql) && isDigit(sql[i]) {
				i++
			}
			if i < len(sql) && (isASCIILetter(sql[i]) || sql[i] == '_' || sql[i] == '.' || sql[i] == '$' || sql[i] == '\'') {
				return 0, false
			}
			tokens[count] = fastToken{kind: tokenNumber, text: sql[start:i]}
		case ch == '\'':
			end := strings.IndexByte(sql[i+1:], '\'')
			if end < 0 {
				return 0, false
			}
			content := sql[i+1 : i+1+end]
			if strings.IndexByte(content, '\\') >= 0 || strings.IndexByte(content, 0) >= 0 {
				return 0, false
			}
			i += end + 2
			if i < len(sql) && sql[i] == '\'' {
				return 0, false // doubled quote inside the string
			}
			tokens[count] = fastToken{kind: tokenString, text: content}
		case ch == '.':
			i++
			tokens[count] = fastToken{kind: tokenDot}
		case ch == '=':
			i++
			tokens[count] = fastToken{kind: tokenEquals}
		case ch == ';':
			i++
			tokens[count] = fastToken{kind: tokenSemicolon}
		default:
			return 0, false
		}
		count++
	}
	return count, true
}

func isASCIILetter(ch byte) bool { return (ch|0x20) >= 'a' && (ch|0x20) <= 'z' }
func isDigit(ch byte) bool       { return ch >= '0' && ch <= '9' }

// fastVerdict returns the verdict for a trivial statement, or ok false when the full path must decide.
func fastVerdict(sql string) (verdict, bool) {
	if !utf8.ValidString(sql) {
		return verdict{}, false // the full parse rejects invalid UTF-8; so must we
	}
	var buffer [maxFastTokens]fastToken
	count, ok := fastTokens(sql, &buffer)
	if !ok || count == 0 {
		return verdict{}, false
	}
	tokens := buffer[:count]
	if tokens[len(tokens)-1].kind == tokenSemicolon {
		tokens = tokens[:len(tokens)-1]
	}
	for _, token := range tokens {
		if token.kind == tokenSemicolon {
			return verdict{}, false // more than one statement
		}
	}
	if len(tokens) == 0 || tokens[0].kind != tokenWord {
		return verdict{}, false
	}
	rest := tokens[1:]
	switch strings.ToLower(tokens[0].text) {
	case "begin":
		rest = skipWord(rest, "work", "transaction")
		return fastBegin(rest)
	case "start":
		if len(rest) == 0 || !isWord(rest[0], "transaction") {
			return verdict{}, false
		}
		return fastBegin(rest[1:])
	case "commit", "end":
		if len(skipWord(rest, "work", "transaction")) == 0 {
			return endVerdict("COMMIT", false), true
		}
	case "rollback", "abort":
		if len(skipWord(rest, "work", "transaction")) == 0 {
			return endVerdict("ROLLBACK", false), true
		}
	case "set":
		return fastSet(rest)
	case "show":
		name, tail, ok := fastName(rest, "time", "transaction", "session")
		if ok && len(tail) == 0 {
			return show(name), true
		}
	}
	return verdict{}, false
}

// fastBegin handles what follows BEGIN [WORK|TRANSACTION] or START TRANSACTION.
func fastBegin(rest []fastToken) (verdict, bool) {
	switch {
	case len(rest) == 0:
		return beginVerdict(false), true
	case len(rest) == 2 && isWord(rest[0], "read") && isWord(rest[1], "only"):
		return beginVerdict(true), true
	case len(rest) == 2 && isWord(rest[0], "read") && isWord(rest[1], "write"):
		return beginVerdict(false), true
	}
	return verdict{}, false
}

// fastSet handles SET [SESSION|LOCAL] name {=|TO} literal.
func fastSet(rest []fastToken) (verdict, bool) {
	local := false
	if len(rest) > 0 && isWord(rest[0], "session") {
		rest = rest[1:]
	} else if len(rest) > 0 && isWord(rest[0], "local") {
		local = true
		rest = rest[1:]
	}
	// These first words start SET forms with their own grammar (SET TIME ZONE, SET ROLE, ...).
	name, tail, ok := fastName(rest, "session", "local", "time", "transaction", "names", "schema", "xml",
		"role", "catalog", "constraints", "authorization", "characteristics")
	if !ok || len(tail) != 2 {
		return verdict{}, false
	}
	if tail[0].kind != tokenEquals && !isWord(tail[0], "to") {
		return verdict{}, false
	}
	value, ok := fastValue(tail[1])
	if !ok {
		return verdict{}, false
	}
	return setVerdict(name, local, []settingValue{{text: value, ok: true}}), true
}

// fastName reads name(.name)* in lower case; excluded first words leave it to the full path.
func fastName(tokens []fastToken, excluded ...string) (name string, rest []fastToken, ok bool) {
	if len(tokens) == 0 || tokens[0].kind != tokenWord {
		return "", nil, false
	}
	for _, word := range excluded {
		if isWord(tokens[0], word) {
			return "", nil, false
		}
	}
	end := 1
	for end+1 < len(tokens) && tokens[end].kind == tokenDot && tokens[end+1].kind == tokenWord {
		end += 2
	}
	if end < len(tokens) && tokens[end].kind == tokenDot {
		return "", nil, false
	}
	var builder strings.Builder
	for _, token := range tokens[:end] {
		if token.kind == tokenDot {
			builder.WriteByte('.')
		} else {
			builder.WriteString(strings.ToLower(token.text))
		}
	}
	return builder.String(), tokens[end:], true
}

// fastValue reads a literal the way the grammar turns it into a setting value.
func fastValue(token fastToken) (string, bool) {
	switch token.kind {
	case tokenString:
		return token.text, true
	case tokenNumber:
		// Larger numbers become floats and leading zeros are dropped; leave those to the full path.
		if len(token.text) > 9 || (len(token.text) > 1 && token.text[0] == '0') {
			return "", false
		}
		return token.text, true
	case tokenWord:
		for _, word := range []string{"on", "off", "true", "false"} {
			if isWord(token, word) {
				return word, true
			}
		}
	}
	return "", false
}

func isWord(token fastToken, word string) bool {
	return token.kind == tokenWord && strings.EqualFold(token.text, word)
}

// skipWord drops one leading word if it is one of words.
func skipWord(tokens []fastToken, words ...string) []fastToken {
	if len(tokens) == 0 {
		return tokens
	}
	for _, word := range words {
		if isWord(tokens[0], word) {
			return tokens[1:]
		}
	}
	return tokens
}

// classifyFast returns the effects of a trivial statement without building the parse tree.
func (c *Classifier) classifyFast(sql string) (Effects, bool) {
	v, ok := fastVerdict(sql)
	if !ok {
		return Effects{}, false
	}
	fingerprint, err := pg_query.Fingerprint(sql)
	if err != nil {
		return Effects{}, false // the full path reports the parse error
	}
	normalized, err := redact(sql)
	if err != nil {
		return Effects{}, false
	}
	effects := stringEffects([]verdict{v})
	effects.Fingerprint = fingerprint
	effects.Normalized = normalized
	return effects, true
}
