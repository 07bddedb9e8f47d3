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
	return countFold(s, word, 1) > 0
}

// countFold counts the places s holds word (lower-case ASCII letters) in any case, up to limit.
// Keywords are matched in ASCII only, as PostgreSQL's scanner matches them; a byte or'd with 0x20
// equals a lower-case letter only when it is that letter in either case.
func countFold(s, word string, limit int) int {
	count := 0
	for i := 0; i+len(word) <= len(s) && count < limit; i++ {
		j := 0
		for j < len(word) && s[i+j]|0x20 == word[j] {
			j++
		}
		if j == len(word) {
			count++
		}
	}
	return count
}
