package route

import (
	"fmt"
	"time"
)

// NodeState is one node's state as last observed by the monitor.
type NodeState struct {
	// Name is the node's configured name, such as "pg2".
	Name string
	// Addr is the node's host:port.
	Addr string
	// Up is true when the node has answered a poll within DownAfter.
	Up bool
	// Role is what the node's last successful sample said it is.
	Role Role
	// Timeline is the node's timeline from pg_control_checkpoint().timeline_id.
	Timeline uint32
	// LagKnown is true when Lag and LagBytes were measured; for a standby that
	// needs a primary and an answer from the standby.
	LagKnown bool
	// LagUnknownReason says why a standby's lag is not known ("no primary",
	// "standby's last poll failed", ...), for error messages; may be empty.
	LagUnknownReason string
	// Lag is how stale a standby's data was at SampledAt, measured from WAL
	// positions; zero for a primary.
	Lag time.Duration
	// LagBytes is how many bytes of WAL a standby had not replayed at SampledAt.
	LagBytes uint64
	// SampledAt is when this node's last successful sample was taken; zero if never.
	SampledAt time.Time
	// LastError describes the last failed poll, or is empty.
	LastError string
	// InUse is the number of backend connections in use; filled by the caller, informational.
	InUse int
	// Idle is the number of idle backend connections; filled by the caller, informational.
	Idle int
	// WALPosition is the node's WAL position at SampledAt: the insert
	// position of a primary, the replay position of a standby; 0 when not
	// known. Reads that must see a session's write compare it (see
	// SessionFacts.ReadAfter).
	WALPosition LSN
	// FlushPosition is a primary's WAL flush position at SampledAt; 0 for a
	// standby or when not known. No standby can have replayed WAL past it,
	// so a read that must see a later write cannot find a standby before
	// the primary flushes it (synchronous_commit = off).
	FlushPosition LSN
	// Excluded, when not empty, says why the topology source (Patroni) keeps
	// every statement from this node although it answers: Patroni does not
	// list it, or it says it is a primary while Patroni names another leader.
	// Such a node is also not Up.
	Excluded string
	// Load is what the monitor's last poll read of the node's load.
	Load NodeLoad
}

// TopologySource says where the snapshot's roles come from.
type TopologySource uint8

const (
	// TopologyOwnPolling means roles come from pgowl's own polling of the nodes alone
	// (no topology source is configured).
	TopologyOwnPolling TopologySource = iota
	// TopologyPatroni means Patroni's /cluster answered: its leader is the only primary,
	// the nodes it does not list are unavailable.
	TopologyPatroni
	// TopologyPatroniUnreachable means Patroni is configured but did not answer within
	// DownAfter: pgowl fell back to its own polling alone.
	TopologyPatroniUnreachable
)

var topologyNames = [...]string{TopologyOwnPolling: "own_polling", TopologyPatroni: "patroni", TopologyPatroniUnreachable: "patroni_unreachable"}

// String returns "own_polling", "patroni" or "patroni_unreachable".
func (s TopologySource) String() string { return enumName(topologyNames[:], uint8(s), "topology") }

// MarshalText encodes the source as its String form.
func (s TopologySource) MarshalText() ([]byte, error) {
	return enumMarshal(topologyNames[:], uint8(s), "topology")
}

// Snapshot is the state of every configured node at one moment. Decide only
// reads it; holders must not modify a snapshot they did not create.
type Snapshot struct {
	// Nodes lists every configured node in configuration order.
	Nodes []NodeState
	// TakenAt is when the snapshot was assembled.
	TakenAt time.Time
	// NewestPrimaryTimeline is the highest timeline a node has been seen
	// primary on (0: none yet). A node that claims primary on a lower one is
	// a stale primary: a standby was promoted past it, and its writes since
	// are on an abandoned branch. It gets no statement, even when the
	// promoted node is gone.
	NewestPrimaryTimeline uint32
	// Topology says where the roles come from; TopologyError says why
	// Patroni could not be read when Topology is TopologyPatroniUnreachable.
	Topology      TopologySource
	TopologyError string
}

// Policy holds the operator's routing rules.
type Policy struct {
	// MaxReplicaLag is the largest effective lag (lag plus sample age) a
	// standby may have to serve a read.
	MaxReplicaLag time.Duration
	// MaxReplicaLagBytes is the largest unreplayed WAL, in bytes, a standby may
	// have to serve a read; 0 turns the byte limit off.
	MaxReplicaLagBytes uint64
	// StandbyChoice picks among qualifying standbys; LeastLag by default.
	StandbyChoice StandbyChoice
	// WhenNoStandby says what a read does when no standby qualifies; Reject by default.
	WhenNoStandby NoStandbyRule
	// DownAfter is how old a node's last sample may be before the node is
	// treated as down; it must be positive.
	DownAfter time.Duration
	// ReadYourWritesReject refuses (REPLICA_LAG_EXCEEDED) a read that no
	// standby could serve with the session's last write, instead of running
	// it on the primary (READ_YOUR_WRITES).
	ReadYourWritesReject bool
}

// Validate reports whether the policy can be used, as an *Error with code
// InvalidRequest.
func (p Policy) Validate() error {
	switch {
	case p.MaxReplicaLag <= 0:
		return invalidRequest(fmt.Sprintf("policy max replica lag must be positive, got %s", p.MaxReplicaLag))
	case p.DownAfter <= 0:
		return invalidRequest(fmt.Sprintf("policy down-after must be positive, got %s", p.DownAfter))
	case int(p.StandbyChoice) >= len(standbyChoiceNames):
		return invalidRequest(fmt.Sprintf("policy has %s", p.StandbyChoice))
	case int(p.WhenNoStandby) >= len(noStandbyRuleNames):
		return invalidRequest(fmt.Sprintf("policy has %s", p.WhenNoStandby))
	}
	return nil
}

// Request describes one statement to route.
type Request struct {
	// Access says whether the statement needs the primary.
	Access Access
	// Reason is the classifier's effect reason: READ_ONLY for reads; WRITE,
	// ROW_LOCK, WRITING_FUNCTION or UNKNOWN_EFFECT for writes (the proxy may
	// also send IN_TRANSACTION or SESSION_PINNED writes).
	Reason Reason
	// Subject names what decided the effect, for the notice: "INSERT",
	// "FOR UPDATE", "nextval()", "myfunc()"; may be empty.
	Subject string
	// SessionMaxLag is the session's own lag limit; 0 means none. It can only
	// tighten Policy.MaxReplicaLag.
	SessionMaxLag time.Duration
	// Turn is a counter the caller advances per read, used by RoundRobin.
	Turn uint64
	// Avoid marks standbys the caller would rather not use now, such as
	// those whose connection pool is exhausted (bit i is Snapshot.Nodes[i]).
	// An avoided standby is chosen only when no other qualifies.
	Avoid uint64
	// Exclude marks standbys that must not serve this read at all (bit i is
	// Snapshot.Nodes[i]), such as those not known to have replayed the
	// session's last write.
	Exclude uint64
}

// EffectiveMaxLag returns the lag limit that applies to req under pol: the
// policy's limit, tightened by the session's limit when that is set.
func EffectiveMaxLag(pol Policy, req Request) time.Duration {
	if req.SessionMaxLag > 0 && req.SessionMaxLag < pol.MaxReplicaLag {
		return req.SessionMaxLag
	}
	return pol.MaxReplicaLag
}

// Decision names the node that runs a statement and why.
type Decision struct {
	// Node is the chosen node's name.
	Node string
	// NodeIndex is the chosen node's index in Snapshot.Nodes.
	NodeIndex int
	// Role is the chosen node's role.
	Role Role
	// Reason says why the statement runs there.
	Reason Reason
	// Lag is the chosen node's effective lag (lag plus sample age); zero for a primary.
	Lag time.Duration
	// LagBytes is the chosen node's unreplayed WAL in bytes; zero for a primary.
	LagBytes uint64
	// LagKnown is true when Lag is meaningful; always true for Decide's results.
	LagKnown bool
	// Subject is copied from Request.Subject.
	Subject string
	// FallbackRule names the rule that fell back ("NO_READABLE_REPLICA" or
	// "REPLICA_LAG_EXCEEDED") when Reason is FALLBACK_PRIMARY; empty otherwise.
	FallbackRule string
	// ReadAfter is the WAL position the read had to see (the session's last
	// write, see SessionFacts.ReadAfter); 0 when it had none.
	ReadAfter LSN
	// NodeReplay is, with ReadAfter, what the chosen standby was known to
	// have replayed, or for READ_YOUR_WRITES what Behind had; 0 when not known.
	NodeReplay LSN
	// Behind names, for READ_YOUR_WRITES, the standby that had not replayed
	// ReadAfter within the wait.
	Behind string
	// ReadAfterChange and ReadAfterChanged are, for READ_YOUR_WRITES,
	// SessionFacts': ReadAfter is a definition change's position the read
	// rests on, and the name changed.
	ReadAfterChange  bool
	ReadAfterChanged string
	// LoginRefused names, for FALLBACK_PRIMARY, the standbys that qualified
	// but refused the session's login (SessionFacts.LoginRefused), joined
	// by commas ("pg2,pg3"); empty otherwise.
	LoginRefused string
}
