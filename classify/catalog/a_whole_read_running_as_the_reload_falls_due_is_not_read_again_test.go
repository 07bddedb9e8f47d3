package catalog_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/pgowl/pgowl/classify/catalog"
	"github.com/pgowl/pgowl/internal/syncbuf"
)

// TestAWholeReadRunningAsTheReloadFallsDueIsNotReadAgain: a whole read that is running when the
// periodic reload falls due (Options.RefreshInterval after the whole read before it) is the
// reload: once it ends, the next is due an interval later. The reload timer's Store(true) of
// stale during the read outlived the read (beginLoad swapped stale out when the read began, and
// the read's end only re-arms the timer), so the next look at the held catalogue started another
// whole read moments after this one, as the older reads' timers did before there was one timer.
// (Written by a review of 95a4eea.)
func TestAWholeReadRunningAsTheReloadFallsDueIsNotReadAgain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, connect, _ := startAppDatabase(t, ctx)

	// The second whole read's connection is made slow, so that the reload falls due (the first
	// read's interval runs out) while it runs. The interval is well past keepIdle (3 s): the first
	// read's connection is closed by then, and the second read opens one.
	const interval = 5 * time.Second
	const delay = time.Second
	var slow atomic.Bool
	var connects atomic.Int32
	slowConnect := func(ctx context.Context, database string) (*pgx.Conn, error) {
		connects.Add(1)
		if slow.Load() {
			time.Sleep(delay)
		}
		return connect(ctx, database)
	}
	var logs syncbuf.Buffer
	m := catalog.New(catalog.Options{Connect: slowConnect, RefreshInterval: interval, Wait: 20 * time.Second, LoadTimeout: 10 * time.Second,
		Logger: zerolog.New(&logs).Level(zerolog.DebugLevel)})
	defer m.Close()
	wholeReads := func() int { return wholeReadsLogged(&logs) }

	if m.Catalogue("app") == nil {
		t.Fatal("no catalogue of app")
	}
	firstRead := time.Now() // the reload is due at this moment plus interval at the latest

	// A change of everything, told delay/2 before the reload is due: its whole read connects
	// until delay/2 after.
	time.Sleep(time.Until(firstRead.Add(interval - delay/2)))
	slow.Store(true)
	m.Changed("app", nil, true)
	if m.Catalogue("app") == nil {
		t.Fatal("no catalogue of app after a change of everything")
	}
	slow.Store(false)
	secondRead := time.Now()
	if got := connects.Load(); got != 2 {
		t.Fatalf("%d connections opened; want 2 (the second whole read opens its own, slowly)", got)
	}
	if got := wholeReads(); got != 2 {
		t.Fatalf("%d whole reads after the change of everything; want 2", got)
	}
	if secondRead.Before(firstRead.Add(interval)) {
		t.Fatalf("the second whole read ended %s after the first, before the reload fell due", secondRead.Sub(firstRead))
	}

	// The second read ran as the reload fell due, and ended after: the next is due an interval
	// after it. Statements' looks at the held catalogue for half an interval start none.
	for time.Since(secondRead) < interval/2 {
		m.Held("app")
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // a read started by the last look has logged by now
	if got := wholeReads(); got != 2 {
		t.Errorf("%d whole reads within %s after the second, which ended %s after the first; want 2: the second read was the reload",
			got, (time.Since(secondRead)).Round(time.Millisecond), secondRead.Sub(firstRead).Round(time.Millisecond))
		t.Log(fmt.Sprint(logs.String()))
	}
}
