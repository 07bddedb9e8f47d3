package proxy

import (
	"slices"
	"testing"

	"github.com/pgowl/pgowl/classify"
)

// TestPendingSettingsSettleWithTheirBlock walks settingsTracker's pending
// states: changes made in a block wait while it goes on, count when it
// commits, are dropped when it rolls back, and leave the backend's settings
// unknown when a ROLLBACK TO SAVEPOINT (or a string pgowl could not follow)
// came between.
func TestPendingSettingsSettleWithTheirBlock(t *testing.T) {
	type step struct {
		fate      pendingSetsFate
		committed bool
		wantSets  []string
		unknown   bool
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"kept, then committed", []step{{fate: pendingKept}, {fate: pendingSettled, committed: true, wantSets: []string{"SET a = 1", "SET b = 2"}}}},
		{"rolled back", []step{{fate: pendingSettled}}},
		{"uncertain, then committed", []step{{fate: pendingKeptUncertain}, {fate: pendingKept}, {fate: pendingSettled, committed: true, unknown: true}}},
		{"uncertain, then rolled back", []step{{fate: pendingKeptUncertain}, {fate: pendingSettled, unknown: true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tr settingsTracker
			tr.addPending("SET a = 1")
			tr.addPending("SET b = 2")
			for i, s := range tc.steps {
				if !tr.hasPending() {
					t.Fatalf("step %d: nothing pending before the block ended", i)
				}
				sets, unknown := tr.settlePending(s.fate, s.committed)
				if !slices.Equal(sets, s.wantSets) || unknown != s.unknown {
					t.Fatalf("step %d (fate %d, committed %v): sets %q, unknown %v; want %q, %v", i, s.fate, s.committed, sets, unknown, s.wantSets, s.unknown)
				}
			}
			if tr.hasPending() || tr.pendingUncertain {
				t.Fatalf("after the block ended: pending %q, uncertain %v; want none", tr.pending, tr.pendingUncertain)
			}
		})
	}
	var tr settingsTracker
	tr.pendingUncertain = true
	if tr.hasPending() || tr.pendingUncertain {
		t.Fatal("with nothing pending the uncertain mark stays")
	}
}

// TestPendingSettingsFollowSavepoints: a ROLLBACK TO a savepoint the tracker
// saw set keeps the changes made before it and drops the later ones, as
// PostgreSQL does; RELEASE keeps them; a name set twice counts from the newer
// savepoint; a savepoint it did not see is not followed.
func TestPendingSettingsFollowSavepoints(t *testing.T) {
	sp := func(kind classify.TxKind, name string) *classify.TransactionStatement {
		return &classify.TransactionStatement{Kind: kind, Savepoint: name}
	}
	var tr settingsTracker
	tr.addPending("SET a = 1")
	tr.followSavepoint(sp(classify.TxKindSavepoint, "s"))
	tr.addPending("SET b = 2")
	tr.followSavepoint(sp(classify.TxKindSavepoint, "s"))
	tr.addPending("SET c = 3")
	if !tr.followSavepoint(sp(classify.TxKindRollbackToSavepoint, "s")) || !slices.Equal(tr.pending, []string{"SET a = 1", "SET b = 2"}) {
		t.Fatalf("ROLLBACK TO the newer s: pending %q, want a and b", tr.pending)
	}
	if !tr.followSavepoint(sp(classify.TxKindRelease, "s")) || !tr.followSavepoint(sp(classify.TxKindRollbackToSavepoint, "s")) ||
		!slices.Equal(tr.pending, []string{"SET a = 1"}) {
		t.Fatalf("RELEASE the newer s, ROLLBACK TO the older: pending %q, want a", tr.pending)
	}
	if tr.followSavepoint(sp(classify.TxKindRollbackToSavepoint, "unseen")) {
		t.Error("a ROLLBACK TO a savepoint the tracker did not see set was followed")
	}
	// The certainty of the savepoint's moment comes back with it.
	tr.followSavepoint(sp(classify.TxKindSavepoint, "t"))
	tr.pendingUncertain = true
	tr.followSavepoint(sp(classify.TxKindRollbackToSavepoint, "t"))
	if tr.pendingUncertain {
		t.Error("ROLLBACK TO a savepoint set while certain left the pending changes uncertain")
	}
	tr.endBlock()
	if tr.followSavepoint(sp(classify.TxKindRollbackToSavepoint, "s")) {
		t.Error("a savepoint outlived the end of its block")
	}
}
