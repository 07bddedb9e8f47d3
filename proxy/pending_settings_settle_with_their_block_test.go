package proxy

import (
	"slices"
	"testing"
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
