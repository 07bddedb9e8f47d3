package admin

import (
	"fmt"
	"sync"
	"testing"
)

// TestHistoryKeepsTheLatestUnits: the ring keeps the last Size units, gives
// them newest first, and filters them.
func TestHistoryKeepsTheLatestUnits(t *testing.T) {
	h := NewHistory(4)
	for i := 1; i <= 6; i++ {
		node := "pg1"
		if i%2 == 0 {
			node = "pg2"
		}
		h.Add(&Unit{ConnID: uint64(i), Node: node, Reason: "READ_ONLY", Outcome: "ok", AI: i == 5})
	}
	got := h.Latest(Filter{}, 10)
	if len(got) != 4 {
		t.Fatalf("Latest kept %d units, want 4", len(got))
	}
	for i, want := range []uint64{6, 5, 4, 3} {
		if got[i].ConnID != want {
			t.Errorf("Latest[%d] = unit %d, want %d", i, got[i].ConnID, want)
		}
	}
	if got := h.Latest(Filter{Node: "pg2"}, 10); len(got) != 2 || got[0].ConnID != 6 || got[1].ConnID != 4 {
		t.Errorf("node=pg2: %+v", got)
	}
	ai := true
	if got := h.Latest(Filter{AI: &ai}, 10); len(got) != 1 || got[0].ConnID != 5 {
		t.Errorf("ai=true: %+v", got)
	}
	if got := h.Latest(Filter{}, 1); len(got) != 1 || got[0].ConnID != 6 {
		t.Errorf("limit 1: %+v", got)
	}
	if got := NewHistory(0); got.Latest(Filter{}, 10) != nil {
		t.Error("a history of size 0 kept something")
	}
}

// TestHistoryConcurrentWriters: writers on many goroutines lose no unit
// while the ring has room, and readers see only whole units (run with -race).
func TestHistoryConcurrentWriters(t *testing.T) {
	const writers, each = 8, 500
	h := NewHistory(writers * each)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				h.Add(&Unit{ConnID: uint64(w), Statement: fmt.Sprintf("w%d-%d", w, i), Reason: fmt.Sprintf("w%d-%d", w, i)})
			}
		}()
	}
	go func() {
		for range 20 {
			for _, u := range h.Latest(Filter{}, 100) {
				if u.Statement != u.Reason {
					t.Errorf("torn unit: %+v", u)
				}
			}
		}
	}()
	wg.Wait()
	if got := len(h.Latest(Filter{}, writers*each)); got != writers*each {
		t.Errorf("kept %d units, want %d", got, writers*each)
	}
}
