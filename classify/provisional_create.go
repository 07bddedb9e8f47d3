package classify

import "strings"

// ProvisionalCreate gives the effects of sql when its first words say it is one CREATE [OR
// REPLACE] FUNCTION, PROCEDURE, TYPE or VIEW that is not temporary: a write that changes the
// catalogue, one statement, no transaction control and no session effect. Those are all that
// routing reads, and the full classification gives the same (TestProvisionalCreateAgrees), so
// the proxy may send such a statement before it is parsed and classify it fully while the node
// runs it: what it makes (CatalogueChanges) and the NOTICE's subject come from that. ok is false
// for anything else, and for what the words alone cannot settle:
//   - a comment before the first word (it may hold a routing hint);
//   - a name in a pg_temp schema (a temporary object: a session effect);
//   - a semicolon outside quotes and comments followed by more than spaces and semicolons (a
//     second statement, or a BEGIN ATOMIC body: the parser counts those);
//   - a backslash anywhere (with standard_conforming_strings off it escapes a quote);
//   - quotes or comments left open.
//
// An unqualified name goes to pg_temp when the session's search path starts with it, which these
// words do not know: such a CREATE makes a temporary object, a session effect. The full
// classification gives it, and the proxy replaces these effects with that one (finishAhead) before
// it follows the unit's session effects, so the session is pinned all the same.
//
// The effects carry their labels (Fingerprint, Normalized) to compute when asked (Effects.Label).
// A statement that does not parse after all is still a write for the primary, where it fails.
func ProvisionalCreate(sql string) (Effects, bool) {
	rest, subject, ok := createdKind(sql)
	if !ok || strings.IndexByte(sql, '\\') >= 0 || temporaryName(rest) || !oneStatement(rest) {
		return Effects{}, false
	}
	return Effects{Access: Write, Reason: ReasonWrite, Subject: subject, Statements: 1, CatalogueChange: true,
		labels: &statementLabels{sql: sql}}, true
}

// createdKind reads CREATE [OR REPLACE] FUNCTION|PROCEDURE|TYPE|VIEW at the start of sql (spaces
// before it allowed, comments not), returning what follows and the subject ClassifyIn gives.
func createdKind(sql string) (rest, subject string, ok bool) {
	word, rest := nextWord(strings.TrimLeft(sql, " \t\n\r\f"))
	if !strings.EqualFold(word, "create") {
		return "", "", false
	}
	word, rest = nextWord(rest)
	replace := false
	if strings.EqualFold(word, "or") {
		if word, rest = nextWord(rest); !strings.EqualFold(word, "replace") {
			return "", "", false
		}
		replace = true
		word, rest = nextWord(rest)
	}
	switch {
	case strings.EqualFold(word, "function"):
		return rest, "CREATE FUNCTION", true
	case strings.EqualFold(word, "procedure"):
		return rest, "CREATE PROCEDURE", true
	case strings.EqualFold(word, "view"):
		return rest, "CREATE VIEW", true
	case strings.EqualFold(word, "type") && !replace:
		return rest, "CREATE TYPE", true
	}
	return "", "", false
}

// nextWord returns the keyword at the start of s (ASCII letters) and what follows it, spaces
// skipped; the word is empty when s does not start with a letter or the word runs into anything
// but a space.
func nextWord(s string) (word, rest string) {
	i := 0
	for i < len(s) && isASCIILetter(s[i]) {
		i++
	}
	if i == 0 || (i < len(s) && !isSpace(s[i])) {
		return "", s
	}
	return s[:i], strings.TrimLeft(s[i:], " \t\n\r\f")
}

// temporaryName reports whether the name at the start of rest (quoted or not) may be in a pg_temp
// schema: its first part, folded as PostgreSQL folds it, starts with pg_temp, as the classifier
// takes such names (pg_temp, pg_temp_N; no other schema may start with pg_).
func temporaryName(rest string) bool {
	var first string
	if strings.HasPrefix(rest, `"`) {
		end, ok := quotedEnd(rest, 0, '"', false)
		if !ok {
			return true
		}
		first = strings.ReplaceAll(rest[1:end-1], `""`, `"`)
	} else {
		i := 0
		for i < len(rest) && isIdentByte(rest[i]) {
			i++
		}
		first = strings.ToLower(rest[:i])
	}
	return strings.HasPrefix(first, "pg_temp")
}

// oneStatement reports whether s holds no semicolon outside quotes, dollar quotes and comments
// that more than spaces and semicolons follow, and leaves no quote or comment open.
func oneStatement(s string) bool {
	prevIdent := false
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '-' && i+1 < len(s) && s[i+1] == '-':
			end := strings.IndexAny(s[i:], "\n\r")
			if end < 0 {
				return true
			}
			i += end
			prevIdent = false
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			end, ok := blockCommentEnd(s, i)
			if !ok {
				return false
			}
			i, prevIdent = end, false
		case c == '\'' || c == '"':
			end, ok := quotedEnd(s, i, c, false)
			if !ok {
				return false
			}
			i, prevIdent = end, c == '"'
		case c == '$' && !prevIdent && !(i+1 < len(s) && isDigit(s[i+1])):
			end, ok := dollarQuoteEnd(s, i)
			if !ok {
				return false
			}
			i, prevIdent = end, false
		case c == ';':
			return strings.Trim(s[i:], "; \t\n\r\f") == ""
		default:
			prevIdent = isIdentByte(c)
			i++
		}
	}
	return true
}
