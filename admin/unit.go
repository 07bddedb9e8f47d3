package admin

import (
	"time"

	"github.com/pgowl/pgowl/route"
)

// Unit is one routed unit (a simple Query, or an extended batch up to Sync)
// as the routing log describes it: the record the history keeps.
type Unit struct {
	// Time is when the unit ended.
	Time time.Time `json:"time"`
	// ConnID is the client connection's id, as in the routing log.
	ConnID uint64 `json:"conn_id"`
	// User, Database and Application are the client's login.
	User        string `json:"user"`
	Database    string `json:"database"`
	Application string `json:"application_name"`
	// Node is the node that ran the unit; empty when no node could (Refusal says why).
	Node string `json:"node"`
	// Role is Node's role when it was chosen.
	Role route.Role `json:"role"`
	// Reason is the routing reason code (READ_ONLY, WRITE, ...); for a refused
	// unit, the statement's own effect.
	Reason string `json:"reason"`
	// Refusal is the code of why no node ran the unit (NO_READABLE_REPLICA,
	// REPLICA_LAG_EXCEEDED, NO_PRIMARY, DATABASE_BUSY, or a SQLSTATE), empty when one did. A
	// guard's refusal (QUERY_COST_EXCEEDED) keeps the Node its cost check ran on.
	Refusal string `json:"refusal,omitempty"`
	// FallbackRule names the rule that fell back with FALLBACK_PRIMARY.
	FallbackRule string `json:"fallback_rule,omitempty"`
	// Lag is the chosen node's effective lag when it was chosen.
	Lag time.Duration `json:"-"`
	// Outcome is "ok" or the SQLSTATE of the first error.
	Outcome string `json:"outcome"`
	// Duration is from the unit's start to its last reply.
	Duration time.Duration `json:"-"`
	// Decision is the routing decision's own time: from the unit's start
	// (after classification) to the node being chosen, without waits for a
	// primary or a backend.
	Decision time.Duration `json:"-"`
	// Fingerprint groups statements of the same shape.
	Fingerprint string `json:"fingerprint"`
	// Statement is pg_query's normalised text: literals are $n.
	Statement string `json:"statement"`
	// AI is true when the statement began with routing.ai_comment_prefix.
	AI bool `json:"ai"`
}

// Routed reports whether a node ran the unit.
func (u *Unit) Routed() bool { return u.Node != "" }

// refused reports whether the unit was refused rather than run: no node could take it, or a
// guard refused it after its cost check on a node.
func (u *Unit) refused() bool { return u.Node == "" || u.Refusal != "" }
