package proxy

import (
	"fmt"
	"slices"
	"testing"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/route"
)

// TestSettingsTrackerKeyFollowsLoadsAndSets: the key names what a
// connection must carry; it changes with every LOAD and setting recorded, is
// empty with none, and a LOAD is recorded once and at most maxLoads times.
func TestSettingsTrackerKeyFollowsLoadsAndSets(t *testing.T) {
	c := classify.New(classify.Options{})
	var tr settingsTracker
	if tr.key != "" {
		t.Fatalf("a fresh tracker has key %q", tr.key)
	}
	tr.apply(c, []string{"SET work_mem = '8MB'"})
	withSet := tr.key
	if withSet == "" {
		t.Fatal("a recorded SET leaves the key empty")
	}
	if added, full := tr.addLoad("LOAD 'plpgsql'"); !added || full {
		t.Fatalf("first LOAD: added %v, full %v", added, full)
	}
	if tr.key == withSet {
		t.Fatal("a LOAD does not change the key")
	}
	if added, _ := tr.addLoad("LOAD 'plpgsql'"); added {
		t.Fatal("the same LOAD is recorded twice")
	}
	for i := len(tr.loads); i < maxLoads; i++ {
		tr.addLoad(fmt.Sprintf("LOAD 'lib%d'", i))
	}
	if added, full := tr.addLoad("LOAD 'one_too_many'"); added || !full {
		t.Fatalf("LOAD beyond maxLoads: added %v, full %v", added, full)
	}
	if got := tr.replay(); len(got) != maxLoads+1 || got[0] != "LOAD 'plpgsql'" || got[maxLoads] != "SET work_mem = '8MB'" {
		t.Fatalf("replay %q: the LOADs, then the settings", got)
	}
	tr.loads = nil
	tr.pending = []string{"SET search_path TO x"}
	tr.discardAll()
	if tr.key != "" || len(tr.sets) != 0 || len(tr.pending) != 0 {
		t.Fatalf("after DISCARD ALL: key %q, sets %q, pending %q", tr.key, tr.sets, tr.pending)
	}
}

// TestSettingsTrackerReadBack: a read-back asks for the names statements
// named and those recorded, replaces what was recorded, and a serializable
// default read back makes the session need the primary until a read-back
// says otherwise; a serializable default from the login stays.
func TestSettingsTrackerReadBack(t *testing.T) {
	c := classify.New(classify.Options{})
	tr := settingsTracker{primaryOnly: route.SerializableAtLogin}
	tr.noteNames([]string{"app.tenant", "", "app.tenant"})
	tr.apply(c, []string{"SET work_mem = '8MB'"})
	if got := tr.readBackNames(c); !slices.Equal(got, []string{"app.tenant", "work_mem"}) {
		t.Fatalf("read-back names %q", got)
	}
	if !slices.Equal(tr.names, []string{"app.tenant"}) {
		t.Fatalf("readBackNames changed the noted names: %q", tr.names)
	}
	tr.replaceWithReadBack([]string{setConfigReplay("default_transaction_isolation", "serializable")}, true)
	if tr.primaryOnly != route.SerializableAtLogin|route.SerializableReadBack || len(tr.sets) != 1 {
		t.Fatalf("after a serializable read-back: primaryOnly %v, sets %q", tr.primaryOnly, tr.sets)
	}
	tr.replaceWithReadBack(nil, false)
	if tr.primaryOnly != route.SerializableAtLogin || len(tr.sets) != 0 || tr.key != "" {
		t.Fatalf("after a read-back of nothing: primaryOnly %v, sets %q, key %q", tr.primaryOnly, tr.sets, tr.key)
	}
}
