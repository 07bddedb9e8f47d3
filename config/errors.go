package config

import "fmt"

// UnknownKey is the Problem of an Error about a key that Config does not have.
const UnknownKey = "unknown key"

// Error is a configuration problem tied to one key path such as "nodes[1].port".
type Error struct {
	// Key is the dotted key path of the offending value, with [i] for list items.
	Key string
	// Problem says what is wrong with the value, or is UnknownKey.
	Problem string
}

// Error formats the problem with its key path, e.g. `config: nodes[1].port: 70000 is out of range 1..65535`.
func (e *Error) Error() string {
	if e.Problem == UnknownKey {
		return fmt.Sprintf("config: unknown key %q", e.Key)
	}
	return "config: " + e.Key + ": " + e.Problem
}

// problemf returns an Error for key with a formatted problem.
func problemf(key, format string, args ...any) *Error {
	return &Error{Key: key, Problem: fmt.Sprintf(format, args...)}
}
