package admin

import (
	"fmt"
	"time"

	"github.com/pgowl/pgowl/route"
)

// Readiness says whether pgowl can route, and why not.
type Readiness struct {
	Ready bool `json:"ready"`
	// Primary is the node writes go to, empty when none.
	Primary string `json:"primary"`
	// Reads is the node a read would go to now (a standby, or the primary
	// under routing.when_no_standby: primary), empty when reads are refused.
	Reads string `json:"reads"`
	// Why says what is missing; empty when ready.
	Why string `json:"why,omitempty"`
	// Topology is where the roles come from, when a topology source is configured:
	// "patroni", or "patroni_unreachable" (pgowl fell back to its own polling), with
	// TopologyError saying why Patroni could not be read.
	Topology      string `json:"topology,omitempty"`
	TopologyError string `json:"topology_error,omitempty"`
}

// Ready decides readiness from a snapshot: a primary is known and its last
// poll answered, and a read has a node (a standby within the lag limits, or
// the configured fallback to the primary) whose last poll answered. A node
// whose last poll failed counts as gone at once, without waiting for
// monitor.down_after, so that a load balancer learns within a monitor
// interval or two that every node is down.
func Ready(snap *route.Snapshot, pol route.Policy, now time.Time) Readiness {
	var r Readiness
	if snap.Topology != route.TopologyOwnPolling {
		r.Topology, r.TopologyError = snap.Topology.String(), snap.TopologyError
	}
	if pol.DownAfter <= 0 {
		pol.DownAfter = time.Second
	}
	i, err := route.Primary(snap, pol, now)
	switch {
	case err != nil:
		r.Why = "no primary: " + err.Error()
		return r
	case snap.Nodes[i].LastError != "":
		r.Why = fmt.Sprintf("the primary %s did not answer its last poll: %s", snap.Nodes[i].Name, snap.Nodes[i].LastError)
		return r
	}
	r.Primary = snap.Nodes[i].Name
	dec, err := route.Decide(route.Request{Access: route.AccessRead, Reason: route.ReasonReadOnly}, snap, pol, now)
	switch {
	case err != nil:
		r.Why = "reads have no node: " + err.Error()
		return r
	case dec.NodeIndex >= 0 && dec.NodeIndex < len(snap.Nodes) && snap.Nodes[dec.NodeIndex].LastError != "":
		r.Why = fmt.Sprintf("reads would go to %s, which did not answer its last poll", dec.Node)
		return r
	}
	r.Reads, r.Ready = dec.Node, true
	return r
}

// readiness is Ready, but not ready while pgowl drains for a shutdown: every new login is
// refused then (FATAL 57P01), and a load balancer must stop sending clients at once.
func readiness(src *Sources, snap *route.Snapshot, pol route.Policy, now time.Time) Readiness {
	if src.ShuttingDown != nil && src.ShuttingDown() {
		return Readiness{Why: "pgowl is shutting down: new clients are refused"}
	}
	return Ready(snap, pol, now)
}

// NodeVerdict says whether a node serves what its role allows now and, if
// not, why, in the terms of the routing errors.
func NodeVerdict(n *route.NodeState, pol route.Policy, now time.Time) string {
	age := now.Sub(n.SampledAt)
	switch {
	case n.Excluded != "":
		return "excluded: " + n.Excluded
	case !n.Up || n.SampledAt.IsZero():
		if n.LastError != "" {
			return "down: " + n.LastError
		}
		return "down"
	case n.LastError != "":
		return "last poll failed: " + n.LastError
	case n.Role == route.RolePrimary:
		return "serves writes"
	case n.Role != route.RoleStandby:
		return "role unknown"
	case !n.LagKnown:
		why := n.LagUnknownReason
		if why == "" {
			why = "lag unknown"
		}
		return "REPLICA_LAG_EXCEEDED: lag unknown (" + why + ")"
	case pol.MaxReplicaLagBytes != 0 && n.LagBytes > pol.MaxReplicaLagBytes:
		return fmt.Sprintf("REPLICA_LAG_EXCEEDED: %d bytes behind, over routing.max_replica_lag_bytes %d", n.LagBytes, pol.MaxReplicaLagBytes)
	case n.Lag+age > pol.MaxReplicaLag:
		return fmt.Sprintf("REPLICA_LAG_EXCEEDED: lag %s over routing.max_replica_lag %s", (n.Lag + age).Round(time.Millisecond), pol.MaxReplicaLag)
	}
	return fmt.Sprintf("serves reads (lag %s)", (n.Lag + age).Round(time.Millisecond))
}
