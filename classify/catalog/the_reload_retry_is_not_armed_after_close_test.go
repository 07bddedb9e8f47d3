package catalog

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/classify"
)

// TestTheReloadRetryIsNotArmedAfterClose: Close stops the timers that would have a read start;
// the retry a failed read arms (RetryAfter, marking the catalogue stale) is not kept, so Close
// cannot stop it: it marks the catalogue stale after Close, and the next look starts a read of a
// closed Manager (which fails at once, unlogged).
func TestTheReloadRetryIsNotArmedAfterClose(t *testing.T) {
	const retryAfter = 100 * time.Millisecond
	m := New(Options{RefreshInterval: time.Hour, RetryAfter: retryAfter, Wait: time.Second,
		Connect: func(context.Context, string) (*pgx.Conn, error) { return nil, errors.New("down") }})
	db := m.state("app")
	// A catalogue is held (as read before the node went down), and a read of it fails: stale
	// is armed for retryAfter later.
	db.cat.Store(classify.NewCatalogue(classify.CatalogueData{Database: "app"}))
	if _, looked := m.Lookup("app", nil, "f"); looked {
		t.Fatal("a read over a failing connection")
	}
	db.mu.Lock()
	failedBefore := db.failedAt
	db.mu.Unlock()
	if failedBefore.IsZero() {
		t.Fatal("the read did not fail")
	}

	m.Close()
	time.Sleep(3 * retryAfter)
	if db.stale.Load() {
		t.Error("the failed read's retry marked the catalogue stale after Close")
	}
	// A statement's look at the held catalogue now: nothing should start.
	m.Held("app")
	time.Sleep(50 * time.Millisecond)
	db.mu.Lock()
	defer db.mu.Unlock()
	if !db.failedAt.Equal(failedBefore) {
		t.Errorf("a read ran (and failed) %s after Close", db.failedAt.Sub(failedBefore).Round(time.Millisecond))
	}
}
