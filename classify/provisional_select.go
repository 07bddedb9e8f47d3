package classify

import "strings"

// ProvisionalSelect gives effects for sql, before it is parsed, when its first words say it is one
// SELECT that selects into no table: one statement, no transaction control, no session command
// and no pgowl command. Unlike ProvisionalCreate's, these effects are not what the full
// classification will give (the SELECT may read, write through a function, lock rows or change
// settings): they are a write of unknown effect, for a proxy that sends the statement where every
// verdict would send it (the primary) and classifies it fully while the node runs it, before any
// reply reaches the client. ok is false for anything else, and for what the words alone cannot
// settle, as for ProvisionalCreate:
//   - a comment before the first word (it may hold a routing hint);
//   - the word INTO anywhere, in any case (SELECT INTO makes a table; an identifier that holds
//     the word is turned away too);
//   - a semicolon outside quotes and comments followed by more than spaces and semicolons;
//   - a backslash anywhere;
//   - quotes or comments left open.
//
// The effects carry their labels (Fingerprint, Normalized) to compute when asked (Effects.Label).
func ProvisionalSelect(sql string) (Effects, bool) {
	word, rest := nextWord(strings.TrimLeft(sql, " \t\n\r\f"))
	if !strings.EqualFold(word, "select") || strings.IndexByte(sql, '\\') >= 0 || containsFold(sql, "into") || !oneStatement(rest) {
		return Effects{}, false
	}
	return Effects{Access: Write, Reason: ReasonUnknownEffect, Subject: "SELECT", Statements: 1,
		labels: &statementLabels{sql: sql}}, true
}

// containsFold reports whether s holds word (lower-case ASCII letters) in any case.
func containsFold(s, word string) bool {
	for i := 0; i+len(word) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(word)], word) {
			return true
		}
	}
	return false
}
