package proxy

import (
	"regexp"
	"strings"
)

// How a session-level setting change is carried to the session's other
// backends. A SET or RESET statement is replayed as it was sent: it has no
// other effect and gives the same value everywhere. A set_config call is
// replayed only when it is the whole statement, with a constant name, and with
// a literal value; with a parameter value ($1) pgowl reads the value the
// setting got and replays that. Anything else that changes a setting (a
// function that calls set_config, a value computed by an expression) is not
// replayed: replaying would run the statement's other effects again and could
// compute another value. Such a change holds on the backend it ran on, whose
// settings then count as unknown (reset before its next unit).

// setConfigCall matches a statement that is one session-level set_config
// call: SELECT [pg_catalog.]set_config('name', value, false), where value is a
// string literal or a parameter, optionally cast.
var setConfigCall = regexp.MustCompile(`(?is)^\s*select\s+(?:pg_catalog\s*\.\s*)?set_config\s*\(\s*'((?:[^'\\]|'')*)'\s*,\s*(\$[0-9]+|[eE]?'(?:[^']|'')*')\s*(?:::\s*[a-z_ ]+?\s*)?,\s*(?:false|'f'|'false')\s*\)\s*;?\s*$`)

// settingReplay says how the single statement sql, which changed a session
// setting, is carried: replay is the text to replay, or name is the setting
// whose value must be read back (set_config with a parameter). Both are empty
// when the change cannot be carried.
func settingReplay(sql string) (replay, name string) {
	words := withoutComments(sql)
	first := strings.ToLower(strings.TrimLeft(words, " \t\r\n("))
	if strings.HasPrefix(first, "set") || strings.HasPrefix(first, "reset") {
		if strings.HasPrefix(first, "set_config") {
			return "", ""
		}
		return sql, ""
	}
	m := setConfigCall.FindStringSubmatch(words)
	if m == nil {
		return "", ""
	}
	if strings.HasPrefix(m[2], "$") {
		return "", strings.ReplaceAll(m[1], "''", "'")
	}
	return sql, ""
}

// recordedSettingName returns the setting a recorded replay statement sets,
// for replacing an earlier value: SET/RESET name, or a set_config call.
func recordedSettingName(recorded string) (name string, reset, ok bool) {
	words := withoutComments(recorded)
	if name, reset, ok := settingName(words); ok {
		return name, reset, true
	}
	if m := setConfigCall.FindStringSubmatch(words); m != nil {
		return strings.ToLower(strings.ReplaceAll(m[1], "''", "'")), false, true
	}
	return "", false, false
}

// setConfigReplay is the statement that gives setting name the value it has.
func setConfigReplay(name, value string) string {
	return "SELECT pg_catalog.set_config('" + strings.ReplaceAll(name, "'", "''") + "', " + quoteLiteral(value) + ", false)"
}

// readSetting reads the value setting name has on be.
func (sess *session) readSetting(be *backend, name string) (string, bool, error) {
	var value string
	got := false
	code, err := sess.runOnBackend(be, "SELECT pg_catalog.current_setting("+quoteLiteral(name)+")", func(row []byte) {
		if values, ok := rowValues(row); ok && len(values) == 1 {
			value, got = values[0], true
		}
	})
	return value, got && code == "", err
}
