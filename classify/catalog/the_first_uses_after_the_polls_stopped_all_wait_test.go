package catalog_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/classify/catalog"
	"github.com/pgowl/pgowl/internal/syncbuf"
)

// TestEveryConcurrentFirstUseAfterThePollsStoppedIsNotCurrent: when two sessions make the first
// use of a database whose polls stopped at the same moment, neither may be answered from the
// catalogue held: what changed meanwhile is not read yet. The first session's use starts the
// polls again; the second must not take the catalogue as current while the first is still
// doing so (here the database's lock is held by a read finishing, which delays the first).
func TestEveryConcurrentFirstUseAfterThePollsStoppedIsNotCurrent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, connect, exec := startAppDatabase(t, ctx)
	exec(db, "CREATE FUNCTION looked_up() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$")
	exec(db, "CREATE FUNCTION changed_meanwhile() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$")
	var logs syncbuf.Buffer
	var hold atomic.Bool
	entered, release := make(chan struct{}), make(chan struct{})
	const poll, unused = 20 * time.Millisecond, 100 * time.Millisecond
	m := catalog.New(catalog.Options{Connect: connect, RefreshInterval: time.Hour, Wait: 20 * time.Second, LoadTimeout: 10 * time.Second,
		ChangePollInterval: poll, ChangePollsWhileUnused: unused, Logger: zerolog.New(&logs).Level(zerolog.DebugLevel),
		Found: func(string, *classify.CatalogueChanges) {
			if hold.CompareAndSwap(true, false) { // called with the database's lock held
				close(entered)
				<-release
			}
		}})
	defer m.Close()
	held := m.Catalogue("app")
	if held == nil {
		t.Fatal("no catalogue of app")
	}
	waitForPollsToStop(t, &logs, 1)
	exec(db, "CREATE OR REPLACE FUNCTION looked_up() RETURNS int LANGUAGE sql AS $$ SELECT 2 $$")
	exec(db, "CREATE OR REPLACE FUNCTION changed_meanwhile() RETURNS int LANGUAGE sql AS $$ SELECT 2 $$")

	// A read runs and, as it ends, holds the database's lock (Found).
	hold.Store(true)
	go m.Lookup("app", held, "looked_up")
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the lookup's read did not reach Found")
	}
	// The first session's first use: it notes the use, then waits for the lock to start the polls.
	first := make(chan bool, 1)
	go func() {
		_, current := m.Held("app")
		first <- current
	}()
	time.Sleep(200 * time.Millisecond)
	// The second session's first use, meanwhile.
	_, current := m.Held("app")
	close(release)
	if current {
		t.Error("Held: a first use after the polls stopped got the catalogue held as current while another first use was starting the polls again (changed_meanwhile not read yet)")
	}
	if firstCurrent := <-first; firstCurrent {
		t.Error("Held: the first session's first use after the polls stopped counted as current")
	}
}

// TestTheFirstUseAfterThePollsStoppedWaitsAtMostWait: Catalogue waits at most Options.Wait in all
// for the poll that starts a database's polls again and the read of what it found.
func TestTheFirstUseAfterThePollsStoppedWaitsAtMostWait(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, connect, exec := startAppDatabase(t, ctx)
	exec(db, "CREATE FUNCTION slow_resume() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$")
	var logs syncbuf.Buffer
	var slow atomic.Bool // a slow network: each new connection takes 700 ms
	slowConnect := func(ctx context.Context, database string) (*pgx.Conn, error) {
		if slow.Load() {
			time.Sleep(700 * time.Millisecond)
		}
		return connect(ctx, database)
	}
	const poll, unused, wait = 20 * time.Millisecond, 100 * time.Millisecond, time.Second
	m := catalog.New(catalog.Options{Connect: slowConnect, RefreshInterval: time.Hour, Wait: wait, LoadTimeout: 10 * time.Second,
		ChangePollInterval: poll, ChangePollsWhileUnused: unused, Logger: zerolog.New(&logs).Level(zerolog.DebugLevel)})
	defer m.Close()
	if m.Catalogue("app") == nil {
		t.Fatal("no catalogue of app")
	}
	waitForPollsToStop(t, &logs, 1)
	time.Sleep(4 * time.Second) // past keepIdle: the read's kept connection is closed too
	exec(db, "CREATE OR REPLACE FUNCTION slow_resume() RETURNS int LANGUAGE sql AS $$ SELECT 2 $$")
	slow.Store(true)
	started := time.Now()
	m.Catalogue("app")
	if took := time.Since(started); took > wait+300*time.Millisecond {
		t.Errorf("the first use after the polls stopped waited %s for the catalogue, past Options.Wait (%s)", took.Round(time.Millisecond), wait)
	}
}

// TestACatalogueIsStillServedAtOnceAfterClose: Close leaves the catalogues held served; a database
// whose polls had stopped is not made to wait Options.Wait at each use after it.
func TestACatalogueIsStillServedAtOnceAfterClose(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, connect, _ := startAppDatabase(t, ctx)
	var logs syncbuf.Buffer
	const poll, unused, wait = 20 * time.Millisecond, 100 * time.Millisecond, 2 * time.Second
	m := catalog.New(catalog.Options{Connect: connect, RefreshInterval: time.Hour, Wait: wait, LoadTimeout: 10 * time.Second,
		ChangePollInterval: poll, ChangePollsWhileUnused: unused, Logger: zerolog.New(&logs).Level(zerolog.DebugLevel)})
	if m.Catalogue("app") == nil {
		t.Fatal("no catalogue of app")
	}
	waitForPollsToStop(t, &logs, 1)
	m.Close()
	for i := 0; i < 2; i++ {
		started := time.Now()
		cat := m.Catalogue("app")
		if took := time.Since(started); took > wait/2 {
			t.Errorf("use %d after Close waited %s for the held catalogue", i+1, took.Round(time.Millisecond))
		}
		if cat == nil {
			t.Errorf("use %d after Close: no catalogue", i+1)
		}
		if _, current := m.Held("app"); !current {
			t.Errorf("use %d after Close: Held reports the held catalogue as not current, for good", i+1)
		}
	}
}
