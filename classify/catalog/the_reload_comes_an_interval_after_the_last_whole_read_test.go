package catalog_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/pgowl/pgowl/classify/catalog"
	"github.com/pgowl/pgowl/internal/syncbuf"
)

// TestTheReloadComesAnIntervalAfterTheLastWholeRead: the periodic whole read is due
// Options.RefreshInterval after the last whole read, not after each one. A catalogue read whole
// for a change of everything (a schema dropped past pgowl, as a migration's harness does before
// each run) used to arm a reload of its own beside the older read's, so that the older one's ran
// out moments after the newer read, and the read ran again. In integration/migrationbench that
// put a whole read (30-40 ms, which the session's next take-in waited for) inside about half of
// the runs through pgowl once a sitting passed 30 s.
func TestTheReloadComesAnIntervalAfterTheLastWholeRead(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, connect, _ := startAppDatabase(t, ctx)

	var logs syncbuf.Buffer
	const interval = time.Second
	m := catalog.New(catalog.Options{Connect: connect, RefreshInterval: interval, Wait: 20 * time.Second, LoadTimeout: 10 * time.Second,
		Logger: zerolog.New(&logs).Level(zerolog.DebugLevel)})
	defer m.Close()
	wholeReads := func() int { return wholeReadsLogged(&logs) }
	if m.Catalogue("app") == nil {
		t.Fatal("no catalogue of app")
	}
	time.Sleep(interval * 7 / 10)
	// A change of everything (nil), committed: read whole, and waited for.
	m.Changed("app", nil, true)
	if m.Catalogue("app") == nil {
		t.Fatal("no catalogue of app after a change of everything")
	}
	secondRead := time.Now()
	if got := wholeReads(); got != 2 {
		t.Fatalf("%d whole reads after the change of everything; want 2", got)
	}

	// A statement's look at the held catalogue starts the reload once it is due (Held). Until an
	// interval has passed since the second read, none is.
	for time.Since(secondRead) < interval-150*time.Millisecond {
		m.Held("app")
		time.Sleep(10 * time.Millisecond)
	}
	if got := wholeReads(); got != 2 {
		t.Errorf("%d whole reads %s after the second, %s after the first; want 2: the reload is due %s after the last",
			got, time.Since(secondRead).Round(time.Millisecond), (time.Since(secondRead) + interval*7/10).Round(time.Millisecond), interval)
	}
	// Once it has, the next look starts it.
	waitUntil(t, 5*time.Second, "the periodic reload an interval after the second read", func() string {
		return fmt.Sprintf("%d whole reads", wholeReads())
	}, func() bool {
		m.Held("app")
		return wholeReads() == 3
	})
}
