package cluster

import (
	"errors"
	"fmt"
	"strings"
)

// Code classifies what went wrong in the cluster harness.
type Code int

const (
	// CodeBinariesMissing means the PostgreSQL binaries were not found in the bin directory.
	CodeBinariesMissing Code = iota + 1
	// CodeInvalidOptions means Options failed validation.
	CodeInvalidOptions
	// CodeSetup means preparing files, directories, users or ports failed.
	CodeSetup
	// CodeCommand means a PostgreSQL tool (initdb, pg_ctl, pg_basebackup) failed.
	CodeCommand
	// CodeQuery means connecting to a node or running SQL on it failed.
	CodeQuery
	// CodeTimeout means a wait for an observed state did not succeed in time.
	CodeTimeout
	// CodeState means the cluster is not in the state the operation needs.
	CodeState
)

// String returns the code's short name.
func (c Code) String() string {
	switch c {
	case CodeBinariesMissing:
		return "binaries_missing"
	case CodeInvalidOptions:
		return "invalid_options"
	case CodeSetup:
		return "setup"
	case CodeCommand:
		return "command"
	case CodeQuery:
		return "query"
	case CodeTimeout:
		return "timeout"
	case CodeState:
		return "state"
	default:
		return fmt.Sprintf("code(%d)", int(c))
	}
}

// Error is the error type returned by every function of this package.
type Error struct {
	// Code classifies the failure.
	Code Code
	// Node names the node concerned, or is empty for cluster-wide failures.
	Node string
	// Reason says in words what failed.
	Reason string
	// Detail holds the tail of a tool's output or server log, if any.
	Detail string
	// Err is the underlying error, if any.
	Err error
}

// Error renders the code, node, reason, cause and detail.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("cluster: ")
	b.WriteString(e.Code.String())
	if e.Node != "" {
		b.WriteString(" [")
		b.WriteString(e.Node)
		b.WriteString("]")
	}
	b.WriteString(": ")
	b.WriteString(e.Reason)
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	if e.Detail != "" {
		b.WriteString("\n--- detail ---\n")
		b.WriteString(e.Detail)
	}
	return b.String()
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// IsBinariesMissing reports whether err says the PostgreSQL binaries are not installed.
func IsBinariesMissing(err error) bool {
	return HasCode(err, CodeBinariesMissing)
}

// HasCode reports whether err is an *Error with the given code.
func HasCode(err error, code Code) bool {
	var clusterErr *Error
	return errors.As(err, &clusterErr) && clusterErr.Code == code
}

func newError(code Code, node, reason string, err error) *Error {
	return &Error{Code: code, Node: node, Reason: reason, Err: err}
}

// maxDetailBytes bounds how much tool output or log text an Error carries.
const maxDetailBytes = 4096

// tail returns at most the last maxDetailBytes of text, trimmed of blank edges.
func tail(text string) string {
	text = strings.TrimSpace(text)
	if len(text) <= maxDetailBytes {
		return text
	}
	return "..." + text[len(text)-maxDetailBytes:]
}
