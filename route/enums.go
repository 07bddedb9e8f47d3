package route

import "fmt"

// Role is what a node's last sample says it is.
type Role uint8

const (
	// RoleUnknown means the node has not answered yet, so its role is not known.
	RoleUnknown Role = iota
	// RolePrimary means the node is not in recovery and accepts writes.
	RolePrimary
	// RoleStandby means the node is in recovery (a hot standby) and accepts reads only.
	RoleStandby
)

var roleNames = [...]string{RoleUnknown: "unknown", RolePrimary: "primary", RoleStandby: "standby"}

// String returns "unknown", "primary" or "standby".
func (r Role) String() string { return enumName(roleNames[:], uint8(r), "role") }

// MarshalText encodes the role as its String form.
func (r Role) MarshalText() ([]byte, error) { return enumMarshal(roleNames[:], uint8(r), "role") }

// UnmarshalText decodes a role from its String form.
func (r *Role) UnmarshalText(text []byte) error {
	return enumUnmarshal(roleNames[:], (*uint8)(r), text, "role")
}

// Access says whether a statement needs a writable node. The proxy maps the
// classifier's verdict into it.
type Access uint8

const (
	// AccessWrite means the statement must run on the primary. It is the zero
	// value, so a request whose access was never set goes to the primary.
	AccessWrite Access = iota
	// AccessRead means the statement only reads and may run on a standby.
	AccessRead
)

var accessNames = [...]string{AccessWrite: "write", AccessRead: "read"}

// String returns "write" or "read".
func (a Access) String() string { return enumName(accessNames[:], uint8(a), "access") }

// MarshalText encodes the access as its String form.
func (a Access) MarshalText() ([]byte, error) { return enumMarshal(accessNames[:], uint8(a), "access") }

// UnmarshalText decodes an access from its String form.
func (a *Access) UnmarshalText(text []byte) error {
	return enumUnmarshal(accessNames[:], (*uint8)(a), text, "access")
}

// Reason says why a statement ran where it did. The first five are effect
// reasons the classifier gives a request; the others are chosen by the router
// or the proxy.
type Reason uint8

const (
	// ReasonUnknownEffect means the classifier could not tell what the statement
	// does (for example it calls a user function), so it needs the primary. It is
	// the zero value so that an unset reason never reaches a standby.
	ReasonUnknownEffect Reason = iota
	// ReasonReadOnly means the statement only reads; it needs AccessRead.
	ReasonReadOnly
	// ReasonWrite means the statement writes (INSERT, UPDATE, DDL, ...).
	ReasonWrite
	// ReasonRowLock means the statement locks rows (SELECT ... FOR UPDATE/SHARE).
	ReasonRowLock
	// ReasonWritingFunction means the statement calls a function known to write, such as nextval().
	ReasonWritingFunction
	// ReasonInTransaction means the statement is part of a transaction already running on a node.
	ReasonInTransaction
	// ReasonFallbackPrimary means a read ran on the primary because no standby
	// qualified and Policy.WhenNoStandby is UsePrimary.
	ReasonFallbackPrimary
	// ReasonNoStandbyConfigured means a read ran on the primary because the
	// configuration has only one node.
	ReasonNoStandbyConfigured
	// ReasonSessionPinned means the session is pinned to a node (session state
	// such as LISTEN or temporary tables) and every statement runs there.
	ReasonSessionPinned
	// ReasonNodeLocalStats means the statement reads statistics each node keeps
	// for itself (pg_stat_*, pg_locks, pg_stat_statements, ...); it needs
	// AccessWrite, because the primary's are the ones that describe the business.
	ReasonNodeLocalStats
	// ReasonHint means a leading /*pgowl:readonly*/ (AccessRead) or
	// /*pgowl:primary*/ (AccessWrite) comment decided; Subject names the hint.
	ReasonHint
	// ReasonNestingTooDeep means function or view analysis went deeper than
	// classify.max_depth; it needs AccessWrite.
	ReasonNestingTooDeep
	// ReasonOverride means the statement only reads because a function it calls
	// is asserted read-only (COMMENT ON FUNCTION 'pgowl:readonly' or
	// classify.functions.readonly); it needs AccessRead, and Subject names the assertion.
	ReasonOverride
	// ReasonReadYourWrites means a read ran on the primary because no standby
	// had replayed the session's last write (SessionFacts.ReadAfter) within
	// routing.read_your_writes_wait; Decision.Behind names the standby asked.
	ReasonReadYourWrites
)

var reasonNames = [...]string{
	ReasonUnknownEffect:       "UNKNOWN_EFFECT",
	ReasonReadOnly:            "READ_ONLY",
	ReasonWrite:               "WRITE",
	ReasonRowLock:             "ROW_LOCK",
	ReasonWritingFunction:     "WRITING_FUNCTION",
	ReasonInTransaction:       "IN_TRANSACTION",
	ReasonFallbackPrimary:     "FALLBACK_PRIMARY",
	ReasonNoStandbyConfigured: "NO_STANDBY_CONFIGURED",
	ReasonSessionPinned:       "SESSION_PINNED",
	ReasonNodeLocalStats:      "NODE_LOCAL_STATS",
	ReasonHint:                "HINT",
	ReasonNestingTooDeep:      "NESTING_TOO_DEEP",
	ReasonOverride:            "OVERRIDE",
	ReasonReadYourWrites:      "READ_YOUR_WRITES",
}

// String returns the reason's code, such as "READ_ONLY".
func (r Reason) String() string { return enumName(reasonNames[:], uint8(r), "reason") }

// MarshalText encodes the reason as its code.
func (r Reason) MarshalText() ([]byte, error) { return enumMarshal(reasonNames[:], uint8(r), "reason") }

// UnmarshalText decodes a reason from its code.
func (r *Reason) UnmarshalText(text []byte) error {
	return enumUnmarshal(reasonNames[:], (*uint8)(r), text, "reason")
}

// StandbyChoice says how Decide picks among several qualifying standbys.
type StandbyChoice uint8

const (
	// LeastLag picks the standby with the smallest effective lag; ties go to
	// the earlier node in the snapshot. It is the default.
	LeastLag StandbyChoice = iota
	// RoundRobin picks qualifying standby number Request.Turn modulo their count.
	RoundRobin
	// LeastConnections picks the standby with the fewest backend connections in
	// use; ties go to the smaller effective lag, then the earlier node.
	LeastConnections
)

var standbyChoiceNames = [...]string{LeastLag: "least_lag", RoundRobin: "round_robin", LeastConnections: "least_connections"}

// String returns "least_lag", "round_robin" or "least_connections".
func (c StandbyChoice) String() string {
	return enumName(standbyChoiceNames[:], uint8(c), "standby choice")
}

// MarshalText encodes the choice as its String form.
func (c StandbyChoice) MarshalText() ([]byte, error) {
	return enumMarshal(standbyChoiceNames[:], uint8(c), "standby choice")
}

// UnmarshalText decodes a choice from its String form.
func (c *StandbyChoice) UnmarshalText(text []byte) error {
	return enumUnmarshal(standbyChoiceNames[:], (*uint8)(c), text, "standby choice")
}

// NoStandbyRule says what a read does when no standby qualifies.
type NoStandbyRule uint8

const (
	// Reject fails the read with NO_READABLE_REPLICA or REPLICA_LAG_EXCEEDED. It is the default.
	Reject NoStandbyRule = iota
	// UsePrimary runs the read on the primary with reason FALLBACK_PRIMARY.
	UsePrimary
)

var noStandbyRuleNames = [...]string{Reject: "reject", UsePrimary: "use_primary"}

// String returns "reject" or "use_primary".
func (r NoStandbyRule) String() string {
	return enumName(noStandbyRuleNames[:], uint8(r), "no-standby rule")
}

// MarshalText encodes the rule as its String form.
func (r NoStandbyRule) MarshalText() ([]byte, error) {
	return enumMarshal(noStandbyRuleNames[:], uint8(r), "no-standby rule")
}

// UnmarshalText decodes a rule from its String form.
func (r *NoStandbyRule) UnmarshalText(text []byte) error {
	return enumUnmarshal(noStandbyRuleNames[:], (*uint8)(r), text, "no-standby rule")
}

func enumName(names []string, value uint8, kind string) string {
	if int(value) < len(names) {
		return names[value]
	}
	return fmt.Sprintf("invalid %s %d", kind, value)
}

func enumMarshal(names []string, value uint8, kind string) ([]byte, error) {
	if int(value) < len(names) {
		return []byte(names[value]), nil
	}
	return nil, fmt.Errorf("route: cannot marshal invalid %s %d", kind, value)
}

func enumUnmarshal(names []string, value *uint8, text []byte, kind string) error {
	for i, name := range names {
		if name == string(text) {
			*value = uint8(i)
			return nil
		}
	}
	return fmt.Errorf("route: unknown %s %q", kind, text)
}
