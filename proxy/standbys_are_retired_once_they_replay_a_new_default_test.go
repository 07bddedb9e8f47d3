package proxy

import (
	"testing"
	"time"

	"github.com/pgowl/pgowl/route"
)

// TestStandbysAreRetiredOnceTheyReplayANewDefault: a change of defaults the catalogue noticed is
// followed until each standby's replay reaches the primary's WAL position of the first sample
// taken after the change was noticed; each standby's connections are then retired once, up to
// the sample that showed it there. A later change of the same database starts over; a change
// every node has replayed, or one followed for an hour, is forgotten.
func TestStandbysAreRetiredOnceTheyReplayANewDefault(t *testing.T) {
	noticed := time.Date(2026, 12, 7, 4, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return noticed.Add(time.Duration(ms) * time.Millisecond) }
	primary := func(sampled time.Time, pos route.LSN) route.NodeState {
		return route.NodeState{Name: "pg1", Up: true, Role: route.RolePrimary, SampledAt: sampled, WALPosition: pos}
	}
	standby := func(name string, up bool, sampled time.Time, pos route.LSN) route.NodeState {
		return route.NodeState{Name: name, Up: up, Role: route.RoleStandby, SampledAt: sampled, WALPosition: pos}
	}
	snap := func(taken time.Time, nodes ...route.NodeState) *route.Snapshot {
		return &route.Snapshot{TakenAt: taken, Nodes: nodes}
	}
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
			[]standbyRetirement{{node: "pg2", database: "app", before: at(255)}}},
		{"a later primary position does not move the one fixed; pg2 is not retired twice",
			snap(at(510), primary(at(500), 2000), standby("pg2", true, at(505), 2000), standby("pg3", true, at(505), 899)), nil},
		{"pg3 down, its position past: a node that does not answer is not taken",
			snap(at(760), primary(at(750), 2000), standby("pg2", true, at(755), 2000), standby("pg3", false, at(505), 950)), nil},
		{"pg3 back and past",
			snap(at(1010), primary(at(1000), 2000), standby("pg2", true, at(1005), 2000), standby("pg3", true, at(1005), 950)),
			[]standbyRetirement{{node: "pg3", database: "app", before: at(1005)}}},
		{"every node has replayed it: forgotten",
			snap(at(1260), primary(at(1250), 2000), standby("pg2", true, at(1255), 2000), standby("pg3", true, at(1255), 2000)), nil},
	}
	for _, s := range steps {
		got := d.due(s.snap)
		if !sameRetirements(got, s.want) {
			t.Errorf("%s: got %v, want %v", s.name, got, s.want)
		}
	}
	if len(d.pending) != 0 {
		t.Errorf("after every node replayed it, still followed: %v", d.pending)
	}

	// A second change while the first is followed starts over: the standby retired for the
	// first must replay the second too.
	d.noticed("app", at(2000))
	d.due(snap(at(2260), primary(at(2250), 3000), standby("pg2", true, at(2255), 2900)))
	d.noticed("app", at(2300))
	if got := d.due(snap(at(2560), primary(at(2550), 3100), standby("pg2", true, at(2555), 3050))); len(got) != 0 {
		t.Errorf("the second change's position is the later sample's: got %v", got)
	}
	if got := d.due(snap(at(2810), primary(at(2800), 3100), standby("pg2", true, at(2805), 3100))); !sameRetirements(got, []standbyRetirement{{node: "pg2", database: "app", before: at(2805)}}) {
		t.Errorf("pg2 past the second change: got %v", got)
	}

	// A standby that never catches up is followed for an hour, then forgotten.
	d.noticed("other", at(3000))
	d.due(snap(at(3260), primary(at(3250), 5000), standby("pg2", true, at(3255), 10)))
	if got := d.due(snap(at(3000).Add(maxFollowDefaults+time.Second), primary(at(3250), 5000), standby("pg2", true, at(3255), 6000))); len(got) != 0 {
		t.Errorf("after an hour: got %v, want the change forgotten", got)
	}
	if _, ok := d.pending["other"]; ok {
		t.Error("a change followed for an hour is still followed")
	}
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
