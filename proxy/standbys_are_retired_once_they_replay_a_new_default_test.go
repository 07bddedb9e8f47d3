package proxy

import (
	"testing"
	"time"

	"github.com/pgowl/pgowl/route"
)

// TestStandbysAreRetiredOnceTheyReplayANewDefault: a change of defaults the catalogue noticed is
// followed until each standby's replay reaches the primary's WAL position of the first sample
// taken after the change was noticed; each standby's connections are then retired once, up to
// the snapshot that showed it there. A later change of the same database starts over; a change a
// standby has not replayed is followed however long it stays down. A name a reload points at
// another server is followed again, and a primary on a timeline below the newest one seen gives
// no position.
func TestStandbysAreRetiredOnceTheyReplayANewDefault(t *testing.T) {
	noticed := time.Date(2026, 12, 7, 4, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return noticed.Add(time.Duration(ms) * time.Millisecond) }
	primary := func(sampled time.Time, pos route.LSN) route.NodeState {
		return route.NodeState{Name: "pg1", Addr: "10.0.0.1:5432", Up: true, Role: route.RolePrimary, SampledAt: sampled, WALPosition: pos}
	}
	standby := func(name string, up bool, sampled time.Time, pos route.LSN) route.NodeState {
		return route.NodeState{Name: name, Addr: "10.0.0." + name[2:] + ":5432", Up: up, Role: route.RoleStandby, SampledAt: sampled, WALPosition: pos}
	}
	snap := snapshotOf
	var d standbyDefaults
	if got := d.due(snap(at(0), primary(at(-10), 100))); len(got) != 0 {
		t.Fatalf("nothing followed yet: %v", got)
	}
	d.noticed("app", noticed)

	steps := []struct {
		name string
		snap *route.Snapshot
		want []standbyRetirement
	}{
		{"the primary's sample predates the notice: no position yet, even for a standby far ahead",
			snap(at(5), primary(at(-10), 100), standby("pg2", true, at(4), 500), standby("pg3", true, at(4), 500)), nil},
		{"the first primary sample after the notice fixes the position; pg2 is past it",
			snap(at(260), primary(at(250), 900), standby("pg2", true, at(255), 900), standby("pg3", true, at(255), 700)),
			[]standbyRetirement{{node: "pg2", database: "app", before: at(260)}}},
		{"a later primary position does not move the one fixed; pg2 is not retired twice",
			snap(at(510), primary(at(500), 2000), standby("pg2", true, at(505), 2000), standby("pg3", true, at(505), 899)), nil},
		{"pg3 down, its position past: a node that does not answer is not taken",
			snap(at(760), primary(at(750), 2000), standby("pg2", true, at(755), 2000), standby("pg3", false, at(505), 950)), nil},
		{"pg3 back and past",
			snap(at(1010), primary(at(1000), 2000), standby("pg2", true, at(1005), 2000), standby("pg3", true, at(1005), 950)),
			[]standbyRetirement{{node: "pg3", database: "app", before: at(1010)}}},
		{"every node has replayed it: nothing more",
			snap(at(1260), primary(at(1250), 2000), standby("pg2", true, at(1255), 2000), standby("pg3", true, at(1255), 2000)), nil},
	}
	for _, s := range steps {
		got := d.due(s.snap)
		if !sameRetirements(got, s.want) {
			t.Errorf("%s: got %v, want %v", s.name, got, s.want)
		}
	}

	// A second change while the first is followed starts over: the standby retired for the
	// first must replay the second too.
	d.noticed("app", at(2000))
	d.due(snap(at(2260), primary(at(2250), 3000), standby("pg2", true, at(2255), 2900)))
	d.noticed("app", at(2300))
	if got := d.due(snap(at(2560), primary(at(2550), 3100), standby("pg2", true, at(2555), 3050))); len(got) != 0 {
		t.Errorf("the second change's position is the later sample's: got %v", got)
	}
	if got := d.due(snap(at(2810), primary(at(2800), 3100), standby("pg2", true, at(2805), 3100))); !sameRetirements(got, []standbyRetirement{{node: "pg2", database: "app", before: at(2810)}}) {
		t.Errorf("pg2 past the second change: got %v", got)
	}

	// A standby down for more than an hour is still followed: pool.min_idle dials it as soon
	// as it is back, before it has replayed what it missed.
	d = standbyDefaults{}
	d.noticed("other", at(3000))
	d.due(snap(at(3260), primary(at(3250), 5000), standby("pg2", false, at(2000), 10)))
	back := at(3000).Add(70 * time.Minute)
	if got := d.due(snap(back, primary(back, 9000), standby("pg2", true, back, 600))); len(got) != 0 {
		t.Errorf("pg2 back, not past the change yet: got %v", got)
	}
	caught := back.Add(time.Minute)
	if got := d.due(snap(caught, primary(caught, 9000), standby("pg2", true, caught, 5000))); !sameRetirements(got, []standbyRetirement{{node: "pg2", database: "other", before: caught}}) {
		t.Errorf("pg2 down for 70 minutes, back and past the change: got %v", got)
	}

	// A reload points pg3 at another server while the change is followed: it is followed
	// again there, though the old server had replayed it.
	d = standbyDefaults{}
	d.noticed("moved", at(4000))
	d.due(snap(at(4260), primary(at(4250), 6000), standby("pg2", true, at(4255), 5000), standby("pg3", true, at(4255), 6000)))
	moved := standby("pg3", true, at(4505), 5500)
	moved.Addr = "10.0.0.9:5432"
	if got := d.due(snap(at(4510), primary(at(4500), 6000), standby("pg2", true, at(4505), 5000), moved)); len(got) != 0 {
		t.Errorf("pg3 moved to a server not past the change: got %v", got)
	}
	moved.WALPosition, moved.SampledAt = 6000, at(4755)
	if got := d.due(snap(at(4760), primary(at(4750), 6000), standby("pg2", true, at(4755), 6000), moved)); !sameRetirements(got, []standbyRetirement{{node: "pg2", database: "moved", before: at(4760)}, {node: "pg3", database: "moved", before: at(4760)}}) {
		t.Errorf("pg2 and the moved pg3 past the change: got %v", got)
	}

	// A primary left on an older timeline (a standby was promoted past it) gives no position.
	d = standbyDefaults{}
	d.noticed("split", at(5000))
	stale := primary(at(5250), 99999)
	stale.Timeline = 1
	promoted := route.NodeState{Name: "pg2", Addr: "10.0.0.2:5432", Up: true, Role: route.RolePrimary, Timeline: 2, SampledAt: at(5250), WALPosition: 7000}
	s2 := snap(at(5260), promoted, standby("pg3", true, at(5255), 7000), stale)
	s2.NewestPrimaryTimeline = 2
	if got := d.due(s2); !sameRetirements(got, []standbyRetirement{{node: "pg3", database: "split", before: at(5260)}}) {
		t.Errorf("the position of the primary on the newest timeline: got %v", got)
	}
}

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
	var d standbyDefaults
	d.noticed("app", noticed)
	d.due(snapshotOf(at(260), node("pg1", "10.0.0.1:5432", route.RolePrimary, at(250), 900),
		node("pg2", "10.0.0.2:5432", route.RoleStandby, at(255), 900)))

	// The reload adds pg3, and moves pg2 to another server; neither has replayed the change.
	d.due(snapshotOf(at(510), node("pg1", "10.0.0.1:5432", route.RolePrimary, at(500), 1000),
		node("pg2", "10.0.0.9:5432", route.RoleStandby, at(505), 500),
		node("pg3", "10.0.0.3:5432", route.RoleStandby, at(505), 500)))
	// Both replay it.
	got := d.due(snapshotOf(at(760), node("pg1", "10.0.0.1:5432", route.RolePrimary, at(750), 1000),
		node("pg2", "10.0.0.9:5432", route.RoleStandby, at(755), 1000),
		node("pg3", "10.0.0.3:5432", route.RoleStandby, at(755), 1000)))
	want := []standbyRetirement{{node: "pg2", database: "app", before: at(760)}, {node: "pg3", database: "app", before: at(760)}}
	if !sameRetirements(got, want) && !sameRetirements(got, []standbyRetirement{want[1], want[0]}) {
		t.Errorf("a moved pg2 and an added pg3, both lagging when the reload came after every node had replayed the change, then past it: got %v, want %v", got, want)
	}
}

// snapshotOf is a snapshot of nodes taken at taken.
func snapshotOf(taken time.Time, nodes ...route.NodeState) *route.Snapshot {
	return &route.Snapshot{TakenAt: taken, Nodes: nodes}
}

func sameRetirements(got, want []standbyRetirement) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}
