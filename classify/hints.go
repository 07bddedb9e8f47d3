package classify

import "strings"

// Statement hints are leading comments in which the client asserts where a statement belongs:
//
//	/*pgowl:readonly*/ SELECT report()   -- it only reads: run it on a standby (reason HINT)
//	/*pgowl:primary*/ SELECT * FROM t    -- run it on the primary (reason HINT)
//
// Only comments before the first token count, and the comment must hold nothing else than the
// directive (white space aside). /*pgowl:primary*/ always applies: the primary can run anything.
// /*pgowl:readonly*/ replaces only the verdicts that analysis cannot be sure of: an unknown effect,
// nesting too deep, node-local statistics, or a user function found to write. It never turns a
// statement that itself writes or locks rows into a read, never applies to transaction control,
// unparseable input or a string of several statements, and a standby refuses any write it lets
// through.

type hint uint8

const (
	hintNone hint = iota
	hintReadonly
	hintPrimary
)

// leadingHint finds a hint among the comments before the first token; primary wins over readonly.
func leadingHint(sql string) hint {
	found := hintNone
	for i, comments := 0, 0; i < len(sql) && comments < 16; {
		c := sql[i]
		switch {
		case isSpace(c):
			i++
		case c == '-' && i+1 < len(sql) && sql[i+1] == '-':
			end := strings.IndexByte(sql[i:], '\n')
			if end < 0 {
				return found
			}
			i += end + 1
			comments++
		case c == '/' && i+1 < len(sql) && sql[i+1] == '*':
			end, ok := blockCommentEnd(sql, i)
			if !ok {
				return found
			}
			switch strings.ToLower(strings.TrimSpace(sql[i+2 : end-2])) {
			case "pgowl:primary":
				found = hintPrimary
			case "pgowl:readonly":
				if found == hintNone {
					found = hintReadonly
				}
			}
			i = end
			comments++
		default:
			return found
		}
	}
	return found
}

// hintOverridable reports whether a readonly hint may replace a verdict.
func hintOverridable(e *Effects) bool {
	switch e.Reason {
	case ReasonUnknownEffect, ReasonNestingTooDeep, ReasonNodeLocalStats:
		return true
	case ReasonWritingFunction:
		return len(e.Chain) > 0 // found in a user function's body, not a built-in from the reviewed table
	}
	return false
}

// applyHint applies a leading hint to a verdict.
func applyHint(h hint, e *Effects) {
	if h == hintNone || e.Pgowl != nil || e.ParseError != "" {
		return
	}
	switch h {
	case hintPrimary:
		if e.Access == Write {
			e.Warnings = appendWarning(e.Warnings, "without the /*pgowl:primary*/ hint: "+e.Reason.String()+" ("+e.Subject+")")
		} else {
			e.Warnings = appendWarning(e.Warnings, "without the /*pgowl:primary*/ hint the statement would read on a standby")
		}
		e.Access, e.Reason, e.Subject = Write, ReasonHint, "/*pgowl:primary*/ hint"
		e.Chain, e.Detail = nil, ""
	case hintReadonly:
		switch {
		case e.Access == Read:
			e.Warnings = appendWarning(e.Warnings, "the /*pgowl:readonly*/ hint was not needed: the statement only reads")
		case e.Statements > 1:
			// Only one statement's finding is kept for a string of several: the
			// others may write or lock rows themselves.
			e.Warnings = appendWarning(e.Warnings, "the /*pgowl:readonly*/ hint was ignored: it applies to a single statement, and this string has several")
		case e.Tx != TxNone || !hintOverridable(e):
			e.Warnings = appendWarning(e.Warnings, "the /*pgowl:readonly*/ hint was ignored: "+e.Reason.String()+" ("+e.Subject+") cannot run on a standby")
		default:
			e.Warnings = appendWarning(e.Warnings, "the /*pgowl:readonly*/ hint overrides "+e.Reason.String()+" ("+e.Subject+")")
			e.Access, e.Reason, e.Subject = Read, ReasonHint, "/*pgowl:readonly*/ hint"
			e.Chain, e.Detail = nil, ""
		}
	}
}

func appendWarning(warnings []string, text string) []string {
	if len(warnings) >= maxWarnings+2 {
		return warnings
	}
	return append(append([]string(nil), warnings...), text)
}
