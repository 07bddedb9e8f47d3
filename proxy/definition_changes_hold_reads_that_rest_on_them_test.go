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
	if _, _, _, unread := d.readAfter("app", reader, snap, now); unread == 0 {
		t.Fatal("a read of f found no change of f whose position is still to read")
	}
	if pos, _, _, unread := d.readAfter("app", other, snap, now); pos.LSN != 0 || unread != 0 {
		t.Errorf("a read of g rests on the change of f: position %v, unread %d", pos, unread)
	}
	if pos, _, _, unread := d.readAfter("other", reader, snap, now); pos.LSN != 0 || unread != 0 {
		t.Errorf("a read of f in another database rests on the change of f: position %v, unread %d", pos, unread)
	}

	upTo := d.lastTold()
	d.settle("app", upTo, route.WritePosition{LSN: 500, Timeline: 1}, route.WritePosition{LSN: 500, Timeline: 1})
	pos, _, name, unread := d.readAfter("app", reader, snap, now)
	if pos.LSN != 500 || name != "f" || unread != 0 {
		t.Errorf("a read of f after the position was read: %v, %q, unread %d; want 0/1F4 for f", pos, name, unread)
	}

	d.tell("app", &classify.CatalogueChanges{Everything: true}, now)
	if _, _, _, unread := d.readAfter("app", other, snap, now); unread == 0 {
		t.Error("after a change of everything, a read of g has no change to wait for")
	}
	if pos, _, _, unread := d.readAfter("app", none, snap, now); pos.LSN != 0 || unread != 0 {
		t.Errorf("after a change of everything, a read of no name waits for %v (unread %d)", pos, unread)
	}
	// A position read before the last change was told does not cover it.
	d.settle("app", upTo, route.WritePosition{LSN: 600, Timeline: 1}, route.WritePosition{LSN: 600, Timeline: 1})
	if _, _, _, unread := d.readAfter("app", other, snap, now); unread == 0 {
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
	d.settle("app", d.lastTold(), route.WritePosition{LSN: 500, Timeline: 1}, route.WritePosition{LSN: 500, Timeline: 1})

	if pos, _, _, _ := d.readAfter("app", reader, twoStandbys(600, 400), now); pos.LSN != 500 {
		t.Fatalf("one standby behind: position %v; want 0/1F4", pos)
	}
	if pos, _, _, _ := d.readAfter("app", reader, twoStandbys(600, 500), now); pos.LSN != 0 {
		t.Errorf("both standbys past the change: position %v; want none", pos)
	}
	if d.pending.Load() != 0 || d.mayConcern(reader) {
		t.Errorf("a forgotten change still counts: pending %d", d.pending.Load())
	}

	d.tell("app", &classify.CatalogueChanges{Functions: []string{"f"}, Definitions: true}, now)
	later := now.Add(definitionChangeMemory + time.Second)
	if pos, _, _, unread := d.readAfter("app", reader, twoStandbys(0, 0), later); pos.LSN != 0 || unread != 0 {
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
	if _, _, _, unread := d.readAfter("app", &classify.Effects{Access: classify.Read, RestsOn: []string{"zz"}}, twoStandbys(0, 0), now); unread == 0 {
		t.Error("after folding, a read of a name never told is not held: the fold lost the changes' names")
	}
}
