package proxy

import (
	"testing"
	"time"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/route"
)

func twoStandbys(replayed1, replayed2 route.LSN) *route.Snapshot {
	return &route.Snapshot{Nodes: []route.NodeState{
		{Name: "pg1", Role: route.RolePrimary, Timeline: 1, WALPosition: 900},
		{Name: "pg2", Role: route.RoleStandby, Timeline: 1, WALPosition: replayed1},
		{Name: "pg3", Role: route.RoleStandby, Timeline: 1, WALPosition: replayed2},
	}}
}

// A remembered change holds the reads that rest on a name it changed, from the position read
// after it, and no other read; a change that names nothing holds every read that rests on a name.
func TestDefinitionChangesHoldReadsThatRestOnThem(t *testing.T) {
	var d definitionChanges
	now := time.Now()
	snap := twoStandbys(100, 100)
	reader := &classify.Effects{Access: classify.Read, RestsOn: []string{"f", "count"}}
	other := &classify.Effects{Access: classify.Read, RestsOn: []string{"g"}}
	none := &classify.Effects{Access: classify.Read}

	if d.mayConcern(reader) {
		t.Fatal("nothing told, yet a read may be concerned")
	}
	d.tell("app", &classify.CatalogueChanges{Functions: []string{"f"}, Definitions: true}, now)
	d.tell("app", &classify.CatalogueChanges{Relations: []string{"t"}}, now) // a table: no definition
	if !d.mayConcern(reader) || d.mayConcern(none) {
		t.Fatalf("after a change of f: concerns a read of f %v, a read of no name %v; want true, false", d.mayConcern(reader), d.mayConcern(none))
	}
	if _, _, _, unread := d.readAfter("app", reader, snap, now, definitionChangeMemory); unread == 0 {
		t.Fatal("a read of f found no change of f whose position is still to read")
	}
	if pos, _, _, unread := d.readAfter("app", other, snap, now, definitionChangeMemory); pos.LSN != 0 || unread != 0 {
		t.Errorf("a read of g rests on the change of f: position %v, unread %d", pos, unread)
	}
	if pos, _, _, unread := d.readAfter("other", reader, snap, now, definitionChangeMemory); pos.LSN != 0 || unread != 0 {
		t.Errorf("a read of f in another database rests on the change of f: position %v, unread %d", pos, unread)
	}

	upTo := d.lastTold()
	d.settle(upTo, route.WritePosition{LSN: 500, Timeline: 1}, route.WritePosition{LSN: 500, Timeline: 1})
	pos, _, name, unread := d.readAfter("app", reader, snap, now, definitionChangeMemory)
	if pos.LSN != 500 || name != "f" || unread != 0 {
		t.Errorf("a read of f after the position was read: %v, %q, unread %d; want 0/1F4 for f", pos, name, unread)
	}

	d.tell("app", &classify.CatalogueChanges{Everything: true}, now)
	if _, _, _, unread := d.readAfter("app", other, snap, now, definitionChangeMemory); unread == 0 {
		t.Error("after a change of everything, a read of g has no change to wait for")
	}
	if pos, _, _, unread := d.readAfter("app", none, snap, now, definitionChangeMemory); pos.LSN != 0 || unread != 0 {
		t.Errorf("after a change of everything, a read of no name waits for %v (unread %d)", pos, unread)
	}
	// A position read before the last change was told does not cover it.
	d.settle(upTo, route.WritePosition{LSN: 600, Timeline: 1}, route.WritePosition{LSN: 600, Timeline: 1})
	if _, _, _, unread := d.readAfter("app", other, snap, now, definitionChangeMemory); unread == 0 {
		t.Error("a position read before the change of everything was told settled it")
	}
}

// Changes are forgotten once every standby is seen past them, or after definitionChangeMemory;
// until then one standby behind keeps them.
func TestDefinitionChangesAreForgottenOnceEveryStandbyReplayedThem(t *testing.T) {
	var d definitionChanges
	now := time.Now()
	reader := &classify.Effects{Access: classify.Read, RestsOn: []string{"f"}}
	d.tell("app", &classify.CatalogueChanges{Functions: []string{"f"}, Definitions: true}, now)
	d.settle(d.lastTold(), route.WritePosition{LSN: 500, Timeline: 1}, route.WritePosition{LSN: 500, Timeline: 1})

	if pos, _, _, _ := d.readAfter("app", reader, twoStandbys(600, 400), now, definitionChangeMemory); pos.LSN != 500 {
		t.Fatalf("one standby behind: position %v; want 0/1F4", pos)
	}
	if pos, _, _, _ := d.readAfter("app", reader, twoStandbys(600, 500), now, definitionChangeMemory); pos.LSN != 0 {
		t.Errorf("both standbys past the change: position %v; want none", pos)
	}
	if d.pending.Load() != 0 || d.mayConcern(reader) {
		t.Errorf("a forgotten change still counts: pending %d", d.pending.Load())
	}

	d.tell("app", &classify.CatalogueChanges{Functions: []string{"f"}, Definitions: true}, now)
	later := now.Add(definitionChangeMemory + time.Second)
	if pos, _, _, unread := d.readAfter("app", reader, twoStandbys(0, 0), later, definitionChangeMemory); pos.LSN != 0 || unread != 0 {
		t.Errorf("a change told %v ago: position %v, unread %d; want it forgotten", definitionChangeMemory, pos, unread)
	}
}

// Past maxDefinitionChanges, a database's changes fold into one change of every name, still
// counted once each in pending.
func TestDefinitionChangesFoldPastTheirBound(t *testing.T) {
	var d definitionChanges
	now := time.Now()
	for i := range maxDefinitionChanges + 3 {
		d.tell("app", &classify.CatalogueChanges{Functions: []string{"f" + string(rune('a'+i%26))}, Definitions: true}, now)
	}
	if got := len(d.byDatabase["app"]); got > maxDefinitionChanges {
		t.Fatalf("%d changes remembered; want at most %d", got, maxDefinitionChanges)
	}
	if int(d.pending.Load()) != len(d.byDatabase["app"]) {
		t.Errorf("pending %d, remembered %d", d.pending.Load(), len(d.byDatabase["app"]))
	}
	if _, _, _, unread := d.readAfter("app", &classify.Effects{Access: classify.Read, RestsOn: []string{"zz"}}, twoStandbys(0, 0), now, definitionChangeMemory); unread == 0 {
		t.Error("after folding, a read of a name never told is not held: the fold lost the changes' names")
	}
}

// A change no read asked about takes the primary's position from the monitor's first sample sent
// after it was told, and tidy forgets it once every standby is past that, in every database.
func TestDefinitionChangesSettleFromTheMonitorAndAreTidiedAway(t *testing.T) {
	var d definitionChanges
	told := time.Now()
	d.tell("other", &classify.CatalogueChanges{Functions: []string{"f"}, Definitions: true}, told)
	sampled := func(at time.Time, replayed route.LSN) *route.Snapshot {
		snap := twoStandbys(replayed, replayed)
		for i := range snap.Nodes {
			snap.Nodes[i].SampledAt, snap.Nodes[i].Up = at, true
		}
		return snap
	}
	reader := &classify.Effects{Access: classify.Read, RestsOn: []string{"f"}}

	// A sample sent before the change was told does not cover it.
	if _, _, _, unread := d.readAfter("other", reader, sampled(told.Add(-time.Millisecond), 2000), told, definitionChangeMemory); unread == 0 {
		t.Fatal("a sample sent before the change settled it")
	}
	pos, _, _, unread := d.readAfter("other", reader, sampled(told.Add(time.Millisecond), 100), told, definitionChangeMemory)
	if unread != 0 || pos.LSN != 900 {
		t.Fatalf("after a sample sent after the change: position %v, unread %d; want the primary's 0/384", pos, unread)
	}
	d.tidy(sampled(told.Add(2*time.Millisecond), 900), told.Add(time.Second), definitionChangeMemory)
	if d.pending.Load() != 0 || len(d.byDatabase) != 0 {
		t.Errorf("tidy with every standby past the change: %d pending in %d databases; want none", d.pending.Load(), len(d.byDatabase))
	}

	// tidy runs at most every tidyEvery.
	d.tell("other", &classify.CatalogueChanges{Functions: []string{"f"}, Definitions: true}, told)
	d.tidy(sampled(told.Add(3*time.Millisecond), 900), told.Add(time.Second+tidyEvery/2), definitionChangeMemory)
	if d.pending.Load() != 1 {
		t.Errorf("tidy ran again within tidyEvery: %d pending; want 1", d.pending.Load())
	}
}

// How long a change is remembered at most grows with routing.max_replica_lag.
func TestDefinitionChangeMemoryOutlastsTheLagLimit(t *testing.T) {
	if got := changeMemory(route.Policy{MaxReplicaLag: time.Second}); got != definitionChangeMemory {
		t.Errorf("max_replica_lag 1s: remembered %v; want %v", got, definitionChangeMemory)
	}
	if got := changeMemory(route.Policy{MaxReplicaLag: time.Hour}); got != 2*time.Hour {
		t.Errorf("max_replica_lag 1h: remembered %v; want 2h", got)
	}
}
