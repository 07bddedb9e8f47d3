package proxy

import (
	"testing"
	"time"

	"github.com/pgowl/pgowl/route"
)

// TestAServerAReloadAddsAfterEveryNodeReplayedANewDefaultIsFollowed: a reload that comes after
// every node listed has replayed a change of defaults, and adds a standby, or points a name at
// another server, that has not replayed it yet (pool.min_idle and RememberLoginsOf dial it at
// once, under the old default), is followed all the same: when the server replays the change,
// its old-default connections are retired.
func TestAServerAReloadAddsAfterEveryNodeReplayedANewDefaultIsFollowed(t *testing.T) {
	noticed := time.Date(2026, 12, 7, 4, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return noticed.Add(time.Duration(ms) * time.Millisecond) }
	node := func(name, addr string, role route.Role, sampled time.Time, pos route.LSN) route.NodeState {
		return route.NodeState{Name: name, Addr: addr, Up: true, Role: role, SampledAt: sampled, WALPosition: pos}
	}
	snap := func(taken time.Time, nodes ...route.NodeState) *route.Snapshot {
		return &route.Snapshot{TakenAt: taken, Nodes: nodes}
	}
	var d standbyDefaults
	d.noticed("app", noticed)
	d.due(snap(at(260), node("pg1", "10.0.0.1:5432", route.RolePrimary, at(250), 900),
		node("pg2", "10.0.0.2:5432", route.RoleStandby, at(255), 900)))

	// The reload adds pg3, and moves pg2 to another server; neither has replayed the change.
	d.due(snap(at(510), node("pg1", "10.0.0.1:5432", route.RolePrimary, at(500), 1000),
		node("pg2", "10.0.0.9:5432", route.RoleStandby, at(505), 500),
		node("pg3", "10.0.0.3:5432", route.RoleStandby, at(505), 500)))
	// Both replay it.
	got := d.due(snap(at(760), node("pg1", "10.0.0.1:5432", route.RolePrimary, at(750), 1000),
		node("pg2", "10.0.0.9:5432", route.RoleStandby, at(755), 1000),
		node("pg3", "10.0.0.3:5432", route.RoleStandby, at(755), 1000)))
	want := []standbyRetirement{{node: "pg2", database: "app", before: at(760)}, {node: "pg3", database: "app", before: at(760)}}
	if !sameRetirements(got, want) && !sameRetirements(got, []standbyRetirement{want[1], want[0]}) {
		t.Errorf("a moved pg2 and an added pg3, both lagging when the reload came after every node had replayed the change, then past it: got %v, want %v", got, want)
	}
}
