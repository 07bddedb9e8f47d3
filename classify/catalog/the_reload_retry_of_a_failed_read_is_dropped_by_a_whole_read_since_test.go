package catalog_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/pgowl/pgowl/classify/catalog"
	"github.com/pgowl/pgowl/internal/syncbuf"
)

// TestTheReloadRetryOfAFailedReadIsDroppedByAWholeReadSince: a failed read has the catalogue
// read whole again Options.RetryAfter later (stale); a whole read that succeeds meanwhile is that
// retry. The retry's timer is neither kept nor stopped, so it marks the catalogue stale after the
// successful whole read all the same, and the next statement's look reads it whole again moments
// later: the back-to-back whole read 95a4eea and da0a2d7 removed for the reload's mark.
func TestTheReloadRetryOfAFailedReadIsDroppedByAWholeReadSince(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, connect, _ := startAppDatabase(t, ctx)

	var failing atomic.Bool
	failing.Store(true)
	flaky := func(ctx context.Context, database string) (*pgx.Conn, error) {
		if failing.Load() {
			return nil, errors.New("the primary is not up yet")
		}
		return connect(ctx, database)
	}
	const retryAfter = time.Second
	var logs syncbuf.Buffer
	m := catalog.New(catalog.Options{Connect: flaky, RefreshInterval: time.Hour, RetryAfter: retryAfter, Wait: 10 * time.Second,
		LoadTimeout: 10 * time.Second, Logger: zerolog.New(&logs).Level(zerolog.DebugLevel)})
	defer m.Close()

	// The first read fails: its retry is armed for retryAfter from now.
	if m.Catalogue("app") != nil {
		t.Fatal("a catalogue read over a failing connection")
	}
	// A change told meanwhile (a DDL statement through pgowl) has the next look read the
	// catalogue, whole, at once; it succeeds.
	failing.Store(false)
	m.Changed("app", nil, true)
	if m.Catalogue("app") == nil {
		t.Fatal("no catalogue of app once the primary is up")
	}
	if got := wholeReadsLogged(&logs); got != 1 {
		t.Fatalf("%d whole reads; want 1", got)
	}
	// Statements' looks for twice retryAfter: the catalogue was read whole since the failure,
	// and the reload is an hour away, so none is read.
	for deadline := time.Now().Add(2 * retryAfter); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		m.Held("app")
	}
	time.Sleep(300 * time.Millisecond) // a read started by the last look has logged by now
	if got := wholeReadsLogged(&logs); got != 1 {
		t.Errorf("%d whole reads within %s of a whole read that succeeded after a failed one; want 1: the failed read's retry ran after all",
			got, 2*retryAfter)
	}
}
