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

// TestSettingsTrackerLocalSearchPathEndsWithTheBlock: a SET LOCAL search_path is kept in order
// with the block's other changes, for the classifier, and ends with the block: it never joins the
// session's settings, a ROLLBACK TO a savepoint set before it drops it, and the block's other
// changes are not made uncertain by it.
func TestSettingsTrackerLocalSearchPathEndsWithTheBlock(t *testing.T) {
	var tr settingsTracker
	tr.addPending("SET work_mem = '8MB'")
	tr.addLocal("SET LOCAL search_path = pg_temp, public")
	tr.addPending("SET statement_timeout = '5s'")
	if !tr.hasPending() || len(tr.pending) != 3 {
		t.Fatalf("pending %q: want the three changes in order", tr.pending)
	}
	committed, unknown := tr.settlePending(pendingSettled, true)
	if unknown || !slices.Equal(committed, []string{"SET work_mem = '8MB'", "SET statement_timeout = '5s'"}) {
		t.Fatalf("commit: sets %q (unknown %v), want the two session-level changes without the local one", committed, unknown)
	}
	if len(tr.pending) != 0 || len(tr.pendingLocal) != 0 {
		t.Fatalf("after the block: pending %q, local %v", tr.pending, tr.pendingLocal)
	}

	// A ROLLBACK TO a savepoint set before the local change drops it.
	tr.addPending("SET work_mem = '8MB'")
	savepoint := &classify.TransactionStatement{Kind: classify.TxKindSavepoint, Savepoint: "s"}
	if !tr.followSavepoint(savepoint) {
		t.Fatal("SAVEPOINT s not followed")
	}
	tr.addLocal("SET LOCAL search_path = pg_temp, public")
	if !tr.followSavepoint(&classify.TransactionStatement{Kind: classify.TxKindRollbackToSavepoint, Savepoint: "s"}) {
		t.Fatal("ROLLBACK TO s not followed")
	}
	if !slices.Equal(tr.pending, []string{"SET work_mem = '8MB'"}) || slices.Contains(tr.pendingLocal, true) {
		t.Fatalf("after ROLLBACK TO s: pending %q, local %v", tr.pending, tr.pendingLocal)
	}

	// A block whose only changes were local, made uncertain, ends with nothing unknown.
	tr.endBlock()
	tr.settlePending(pendingSettled, false)
	tr.addLocal("SET LOCAL search_path = app")
	tr.settlePending(pendingKeptUncertain, false)
	if committed, unknown := tr.settlePending(pendingSettled, true); unknown || len(committed) != 0 {
		t.Fatalf("a block of local changes only: sets %q, unknown %v", committed, unknown)
	}
}
