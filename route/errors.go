package route

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Code names why a statement could not be routed.
type Code uint8

const (
	// NoReadableReplica means a read found no standby that is up.
	NoReadableReplica Code = iota + 1
	// ReplicaLagExceeded means standbys are up but none is within the lag limits.
	ReplicaLagExceeded
	// NoPrimary means no node is an available, unambiguous primary.
	NoPrimary
	// DatabaseBusy means the chosen node has no backend connection to spare; the proxy raises it.
	DatabaseBusy
	// InvalidRequest means the request or policy handed to Decide is malformed; it is a pgowl bug.
	InvalidRequest
	// PrimaryReplaced means the session holds a transaction or pinned state
	// on a node taken as the primary that is no longer the primary: what it
	// held there is gone.
	PrimaryReplaced
	// QueryCostExceeded means a guarded statement's estimated plan cost is
	// over its guard's max_cost; the proxy raises it after asking the node
	// for the plan. Of the codes it is the one the caller fixes by changing
	// the statement, not by retrying.
	QueryCostExceeded
)

var codeNames = [...]string{
	NoReadableReplica:  "NO_READABLE_REPLICA",
	ReplicaLagExceeded: "REPLICA_LAG_EXCEEDED",
	NoPrimary:          "NO_PRIMARY",
	DatabaseBusy:       "DATABASE_BUSY",
	InvalidRequest:     "INVALID_REQUEST",
	PrimaryReplaced:    "PRIMARY_REPLACED",
	QueryCostExceeded:  "QUERY_COST_EXCEEDED",
}

var codeSQLStates = [...]string{
	NoReadableReplica:  "57P03", // cannot_connect_now
	ReplicaLagExceeded: "57P03",
	NoPrimary:          "57P03",
	DatabaseBusy:       "53300", // too_many_connections
	InvalidRequest:     "XX000", // internal_error
	PrimaryReplaced:    "08006", // connection_failure: the session's connection there is lost
	QueryCostExceeded:  "54001", // statement_too_complex
}

var codeHints = [...]string{
	NoReadableReplica:  "This is usually transient: a standby may be restarting or reconnecting. Retry shortly.",
	ReplicaLagExceeded: "This is usually transient: retry once a standby has caught up with the primary.",
	NoPrimary:          "This is usually transient, for example during a restart or failover. Retry shortly.",
	DatabaseBusy:       "This is usually transient: every backend connection is in use. Retry shortly.",
	InvalidRequest:     "This is a bug in pgowl, not a transient condition; please report it.",
	PrimaryReplaced:    "Retry the transaction; it will run on the current primary.",
	QueryCostExceeded:  "Make the statement cheaper: the plan nodes in DETAIL carry most of its cost. Retrying the same SQL fails again.",
}

func (c Code) valid() bool { return c > 0 && int(c) < len(codeNames) }

// String returns the code's name, such as "NO_PRIMARY".
func (c Code) String() string {
	if c.valid() {
		return codeNames[c]
	}
	return fmt.Sprintf("invalid code %d", uint8(c))
}

// MarshalText encodes the code as its name.
func (c Code) MarshalText() ([]byte, error) {
	if c.valid() {
		return []byte(codeNames[c]), nil
	}
	return nil, fmt.Errorf("route: cannot marshal invalid code %d", uint8(c))
}

// UnmarshalText decodes a code from its name.
func (c *Code) UnmarshalText(text []byte) error {
	for i := 1; i < len(codeNames); i++ {
		if codeNames[i] == string(text) {
			*c = Code(i)
			return nil
		}
	}
	return fmt.Errorf("route: unknown code %q", text)
}

// SQLState returns the SQLSTATE the proxy sends with this code: 57P03 for
// the routing failures, 53300 for DATABASE_BUSY, XX000 for INVALID_REQUEST,
// 08006 for PRIMARY_REPLACED.
func (c Code) SQLState() string {
	if c.valid() {
		return codeSQLStates[c]
	}
	return "XX000"
}

// Error is a routing failure, shaped so the proxy can send it to the client
// as an ErrorResponse without further work.
type Error struct {
	// Code names the failure.
	Code Code
	// SQLState is the SQLSTATE sent to the client.
	SQLState string
	// Message is the primary message; it starts "pgowl: <CODE>", except for
	// PRIMARY_REPLACED and Plan's login refusal, which name the node instead.
	Message string
	// Detail lists every node's state, one per line, with why it was not chosen.
	Detail string
	// Hint tells the client whether and when retrying helps.
	Hint string
}

// Error returns the message.
func (e *Error) Error() string { return e.Message }

// NewError builds an *Error for code with a message "pgowl: <CODE>: <what>",
// the code's SQLSTATE and hint, and the given detail; the proxy uses it for
// DATABASE_BUSY.
func NewError(code Code, what, detail string) *Error {
	return &Error{
		Code:     code,
		SQLState: code.SQLState(),
		Message:  "pgowl: " + code.String() + ": " + what,
		Detail:   detail,
		Hint:     codeHint(code),
	}
}

func codeHint(code Code) string {
	if code.valid() {
		return codeHints[code]
	}
	return codeHints[InvalidRequest]
}

func invalidRequest(what string) *Error { return NewError(InvalidRequest, what, "") }

// nodeDetail renders one line per node: its state and, from why, the reason
// it was not chosen.
func nodeDetail(snap *Snapshot, now time.Time, why func(i int, n *NodeState) string) string {
	var b strings.Builder
	for i := range snap.Nodes {
		n := &snap.Nodes[i]
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(n.Name)
		b.WriteString(": ")
		b.WriteString(n.Role.String())
		if n.Up {
			b.WriteString(" up")
		} else {
			b.WriteString(" down")
		}
		b.WriteString(" lag_ms=")
		if n.LagKnown {
			b.WriteString(strconv.FormatInt(n.Lag.Milliseconds(), 10))
		} else {
			b.WriteString("unknown")
		}
		b.WriteString(" sample_age_ms=")
		if n.SampledAt.IsZero() {
			b.WriteString("never")
		} else {
			b.WriteString(strconv.FormatInt(sampleAge(n, now).Milliseconds(), 10))
		}
		if n.Role == RoleStandby && n.LagKnown {
			b.WriteString(" lag_bytes=")
			b.WriteString(strconv.FormatUint(n.LagBytes, 10))
		}
		if reason := why(i, n); reason != "" {
			b.WriteString(": ")
			b.WriteString(reason)
		}
		if n.LastError != "" {
			b.WriteString(" (last error: ")
			// One line per node: a connect error can span several.
			b.WriteString(strings.Join(strings.Fields(n.LastError), " "))
			b.WriteString(")")
		}
	}
	return b.String()
}
