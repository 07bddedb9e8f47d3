package monitor

import (
	"testing"
	"time"

	"github.com/pgowl/pgowl/route"
)

// TestAReloadKeepsPatronisLastAnswer: a reload that edits the node list builds a new monitor,
// which reads Patroni's /cluster only in its own rounds. It takes over the old monitor's last
// answer (InheritSamples), so that its first snapshots still exclude a node that says it is a
// primary while Patroni names another leader. Without it they said Patroni could not be reached
// (patroni_unreachable, a warning logged) and excluded nothing, until the first read came.
func TestAReloadKeepsPatronisLastAnswer(t *testing.T) {
	old := patroniMonitor(t, "switchover_new_leader_named")
	next := New(old.opts)
	next.InheritSamples(old, nil)
	snap := snapshotClaiming(route.RolePrimary, route.RolePrimary, route.RoleStandby, route.RoleStandby)
	next.applyPatroni(snap, time.Now())
	if snap.Topology != route.TopologyPatroni {
		t.Fatalf("the next monitor's topology before its own read: %s (%s), want patroni, from the old monitor's answer", snap.Topology, snap.TopologyError)
	}
	if m1 := snap.Nodes[0]; m1.Up || m1.Excluded == "" {
		t.Errorf("m1, a primary Patroni calls replica: up %v, excluded %q; want it excluded", m1.Up, m1.Excluded)
	}

	otherURLs := old.opts
	otherURLs.PatroniURLs = []string{"http://127.0.0.1:8009"}
	elsewhere := New(otherURLs)
	elsewhere.InheritSamples(old, nil)
	snap = snapshotClaiming(route.RolePrimary, route.RolePrimary, route.RoleStandby, route.RoleStandby)
	elsewhere.applyPatroni(snap, time.Now())
	if snap.Topology == route.TopologyPatroni {
		t.Error("a monitor reading another Patroni took over the old one's answer")
	}
}
