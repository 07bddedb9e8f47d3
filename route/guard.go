package route

import (
	"strconv"
	"strings"
	"time"
)

// NodeLoad is a node's load as the monitor read it with its last poll.
type NodeLoad struct {
	// Known is true when the last successful poll read the load.
	Known bool
	// Active is the number of client backends running a statement
	// (pg_stat_activity state 'active'), the monitor's own excluded.
	Active int
	// LockWaiting is how many of the client backends wait on a lock.
	LockWaiting int
	// MaxConnections is the node's max_connections.
	MaxConnections int
}

// Guard is the traffic class a guarded statement belongs to and the busy
// limits it sets. The zero Guard is business traffic: never refused for load.
type Guard struct {
	// Name is the guard's configured name; "" when no guard applies.
	Name string
	// MaxActive: the class's statements are not sent to a node that already
	// has this many active client backends; 0: no limit.
	MaxActive int
	// MaxActivePercent is MaxActive as a share of the node's
	// max_connections, in percent; 0: no limit.
	MaxActivePercent int
	// MaxInFlight: the class's statements are not sent to a node that runs
	// this many of them through this pgowl already; 0: no limit.
	MaxInFlight int
	// InFlight is the class's statements running on each node through this
	// pgowl (index i is Snapshot.Nodes[i]); missing entries count as 0.
	InFlight []int
}

// limited reports whether g sets any busy limit.
func (g *Guard) limited() bool {
	return g.Name != "" && (g.MaxActive > 0 || g.MaxActivePercent > 0 || g.MaxInFlight > 0)
}

// inFlight returns the class's statements running on node i.
func (g *Guard) inFlight(i int) int {
	if i >= 0 && i < len(g.InFlight) {
		return g.InFlight[i]
	}
	return 0
}

// OverBusyLimit says which of g's busy limits node i of snap has reached,
// or "" when none: the class's next statement may be sent there. A node
// whose load is not known is over no limit on active sessions (the monitor
// reads it with every poll; a node it cannot poll is down anyway).
func (g *Guard) OverBusyLimit(snap *Snapshot, i int) string {
	if !g.limited() || snap == nil || i < 0 || i >= len(snap.Nodes) {
		return ""
	}
	n := &snap.Nodes[i]
	load := n.Load
	switch {
	case g.MaxInFlight > 0 && g.inFlight(i) >= g.MaxInFlight:
		return "at busy.max_in_flight " + strconv.Itoa(g.MaxInFlight)
	case load.Known && g.MaxActive > 0 && load.Active >= g.MaxActive:
		return "at busy.max_active " + strconv.Itoa(g.MaxActive)
	case load.Known && g.MaxActivePercent > 0 && load.MaxConnections > 0 && load.Active*100 >= g.MaxActivePercent*load.MaxConnections:
		return "at busy.max_active_percent " + strconv.Itoa(g.MaxActivePercent) + "% of max_connections"
	}
	return ""
}

// keepOffBusyNodes applies the guard's busy limits to a fresh decision: a
// read on a standby over the limits moves to another qualifying standby
// that is not; without one, and for any statement whose node is over the
// limits, Plan refuses with DATABASE_BUSY.
func keepOffBusyNodes(req Request, snap *Snapshot, pol Policy, now time.Time, g *Guard, dec Decision) (Decision, error) {
	busy := g.busyNodes(snap)
	if !skipped(busy, dec.NodeIndex) {
		return dec, nil
	}
	if dec.Role == RoleStandby {
		req.Avoid |= busy
		if next, err := Decide(req, snap, pol, now); err == nil && next.Role == RoleStandby && !skipped(busy, next.NodeIndex) {
			return next, nil
		}
	}
	return Decision{}, busyError(snap, now, g, dec)
}

// busyNodes is the set of nodes (by index, as in Request.Avoid) over g's busy limits.
func (g *Guard) busyNodes(snap *Snapshot) uint64 {
	var busy uint64
	for i := range snap.Nodes {
		if i < 64 && g.OverBusyLimit(snap, i) != "" {
			busy |= 1 << uint(i)
		}
	}
	return busy
}

// busyError is the DATABASE_BUSY refusal of a guarded statement, with every
// node's load in the detail.
func busyError(snap *Snapshot, now time.Time, g *Guard, dec Decision) *Error {
	what := "every standby that could run this statement is at guard " + g.Name + "'s busy limits"
	if dec.Role != RoleStandby {
		what = dec.Node + ", which would run this statement, is at guard " + g.Name + "'s busy limits"
	}
	detail := nodeDetail(snap, now, func(i int, n *NodeState) string {
		var b strings.Builder
		if n.Load.Known {
			b.WriteString("active=" + strconv.Itoa(n.Load.Active) + " lock_waiting=" + strconv.Itoa(n.Load.LockWaiting) +
				" max_connections=" + strconv.Itoa(n.Load.MaxConnections))
		} else {
			b.WriteString("active=unknown")
		}
		b.WriteString(" guard_in_flight=" + strconv.Itoa(g.inFlight(i)))
		if why := g.OverBusyLimit(snap, i); why != "" {
			b.WriteString(" " + why)
		}
		return b.String()
	})
	e := NewError(DatabaseBusy, what, "guard="+g.Name+"\n"+detail)
	e.Hint = busyHint
	return e
}

// busyHint is the HINT of a guard's load refusal: transient, like every DATABASE_BUSY.
const busyHint = "This is usually transient: the nodes are busy with other work. Retry shortly, with the same statement."
