package catalog_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/classify/catalog"
	"github.com/pgowl/pgowl/internal/syncbuf"
)

// TestChangesMadePastPgowlArePolledFor: with Options.ChangePollInterval, a function replaced and
// a view made on the primary itself, where no session tells the Manager, are in its catalogue
// within a few polls, and Found is told the definitions that changed; so is a function replaced
// inside a savepoint of a transaction that stayed open across polls, an overload dropped, and a
// role's search_path default set and reset; a
// change a session told of is not read again by a poll, nor is a temporary table; and a
// transaction left open elsewhere does not make the polls find the same rows again and again.
// Without polls the replaced function stays as it was held.
func TestChangesMadePastPgowlArePolledFor(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, connect, exec := startAppDatabase(t, ctx)
	exec(db, "CREATE TABLE audit (msg text)")
	exec(db, "CREATE FUNCTION reader() RETURNS bigint LANGUAGE sql AS $$ SELECT count(*) FROM audit $$")
	exec(db, "CREATE FUNCTION told() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$")

	var logs syncbuf.Buffer
	var mu sync.Mutex
	var found []string
	const poll = 50 * time.Millisecond
	m := catalog.New(catalog.Options{Connect: connect, RefreshInterval: time.Hour, Wait: 20 * time.Second, LoadTimeout: 10 * time.Second,
		ChangePollInterval: poll, Logger: zerolog.New(&logs).Level(zerolog.DebugLevel),
		Found: func(database string, changes *classify.CatalogueChanges) {
			mu.Lock()
			defer mu.Unlock()
			found = append(found, changes.Functions...)
		}})
	defer m.Close()
	unpolled := catalog.New(catalog.Options{Connect: connect, RefreshInterval: time.Hour, Wait: 20 * time.Second, LoadTimeout: 10 * time.Second})
	defer unpolled.Close()
	for _, manager := range []*catalog.Manager{m, unpolled} {
		if manager.Catalogue("app") == nil {
			t.Fatal("no catalogue of app")
		}
	}
	source := func(manager *catalog.Manager, name string) string {
		for _, f := range manager.Loaded("app").Data().Functions {
			if f.Name == name {
				return f.Source
			}
		}
		return ""
	}
	within := func(what string, done func() bool) {
		t.Helper()
		waitUntil(t, 5*time.Second, what, func() string { return "polls every " + poll.String() }, done)
	}

	// A transaction left open elsewhere, from before the changes: its snapshot's horizon stays
	// behind them.
	open, err := pgx.Connect(ctx, db.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close(context.Background())
	exec(open, "BEGIN")
	exec(open, "SELECT pg_catalog.txid_current()")

	exec(db, "CREATE OR REPLACE FUNCTION reader() RETURNS bigint LANGUAGE sql AS $$ INSERT INTO audit VALUES ('x') RETURNING 1::bigint $$")
	exec(db, "CREATE VIEW recent AS SELECT msg FROM audit")
	within("the replaced reader() in the catalogue", func() bool { return strings.Contains(source(m, "reader"), "INSERT") })
	within("the view made past pgowl in the catalogue", func() bool {
		return slices.ContainsFunc(m.Loaded("app").Data().Views, func(v classify.View) bool { return v.Name == "recent" })
	})
	mu.Lock()
	if !slices.Contains(found, "reader") {
		t.Errorf("Found was told %q, not reader", found)
	}
	mu.Unlock()
	if s := source(unpolled, "reader"); strings.Contains(s, "INSERT") {
		t.Errorf("without polls the catalogue has the replaced reader() already: %q", s)
	}

	// A change a session tells of is not read again by a poll; and several polls later, with the
	// transaction still open, none has found the changes above again.
	logs.Reset()
	m.Changed("app", &classify.CatalogueChanges{Functions: []string{"told"}}, false)
	exec(db, "CREATE OR REPLACE FUNCTION told() RETURNS int LANGUAGE sql AS $$ SELECT 2 $$")
	m.Changed("app", &classify.CatalogueChanges{Functions: []string{"told"}}, true)
	within("the told change read", func() bool { return strings.Contains(source(m, "told"), "2") })
	temp, err := pgx.Connect(ctx, db.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer temp.Close(context.Background())
	exec(temp, "CREATE TEMP TABLE scratch (a int)")
	time.Sleep(10 * poll)
	if strings.Contains(logs.String(), "written past pgowl") {
		t.Errorf("polls found rows a session told of, a temporary table, or rows already read again:\n%s", logs.String())
	}
	exec(open, "COMMIT")

	// A function replaced inside a savepoint (its row's xmin is the subtransaction's, which no
	// snapshot lists as running), in a transaction open across several polls.
	exec(db, "CREATE FUNCTION saved() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$")
	within("saved() in the catalogue", func() bool { return source(m, "saved") != "" })
	exec(open, "BEGIN")
	exec(open, "SAVEPOINT s")
	exec(open, "CREATE OR REPLACE FUNCTION saved() RETURNS int LANGUAGE sql AS $$ SELECT 2 $$")
	exec(open, "RELEASE SAVEPOINT s")
	// A later transaction that ends first: the snapshots the polls take meanwhile reach past
	// the savepoint's ID (their xmax), while listing only its parent as running.
	exec(db, "INSERT INTO audit VALUES ('later')")
	time.Sleep(5 * poll)
	exec(open, "COMMIT")
	within("saved() replaced inside a savepoint", func() bool { return strings.Contains(source(m, "saved"), "2") })

	// An overload dropped: the calls of the name may now go to the other one.
	exec(db, "CREATE FUNCTION pick(integer) RETURNS int LANGUAGE sql AS $$ SELECT 1 $$")
	exec(db, "CREATE FUNCTION pick(bigint) RETURNS int LANGUAGE sql AS $$ SELECT 2 $$")
	overloads := func() int {
		n := 0
		for _, f := range m.Loaded("app").Data().Functions {
			if f.Name == "pick" {
				n++
			}
		}
		return n
	}
	within("both pick() overloads in the catalogue", func() bool { return overloads() == 2 })
	exec(db, "DROP FUNCTION pick(integer)")
	within("pick(integer) dropped", func() bool { return overloads() == 1 })

	// A role's search_path default set, then reset (its row deleted), on the primary itself.
	exec(db, "CREATE ROLE polled_role")
	exec(db, "ALTER ROLE polled_role SET search_path = audit_schema, public")
	within("the role's search_path default set", func() bool {
		return slices.Equal(m.Loaded("app").DefaultSearchPath("polled_role"), []string{"audit_schema", "public"})
	})
	exec(db, "ALTER ROLE polled_role RESET search_path")
	within("the role's search_path default reset", func() bool {
		return !slices.Contains(m.Loaded("app").DefaultSearchPath("polled_role"), "audit_schema")
	})
}

// TestChangePollsStopWhileADatabaseIsUnusedAndFindWhatChangedMeanwhile: a database no statement
// uses is not polled; its next use polls from where the polls stopped, so a change made
// meanwhile is found then.
func TestChangePollsStopWhileADatabaseIsUnusedAndFindWhatChangedMeanwhile(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, connect, exec := startAppDatabase(t, ctx)
	exec(db, "CREATE FUNCTION idle_reader() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$")
	var logs syncbuf.Buffer
	const poll, unused = 20 * time.Millisecond, 100 * time.Millisecond
	m := catalog.New(catalog.Options{Connect: connect, RefreshInterval: time.Hour, Wait: 20 * time.Second, LoadTimeout: 10 * time.Second,
		ChangePollInterval: poll, ChangePollsWhileUnused: unused, Logger: zerolog.New(&logs).Level(zerolog.DebugLevel)})
	defer m.Close()
	if m.Catalogue("app") == nil {
		t.Fatal("no catalogue of app")
	}
	waitForPollsToStop(t, &logs, 1)
	exec(db, "CREATE OR REPLACE FUNCTION idle_reader() RETURNS int LANGUAGE sql AS $$ SELECT 2 $$")
	time.Sleep(10 * poll)
	body := func() string {
		for _, f := range m.Loaded("app").Data().Functions {
			if f.Name == "idle_reader" {
				return f.Source
			}
		}
		return ""
	}
	if strings.Contains(body(), "2") {
		t.Fatalf("the change was read while the database was unused: %q", body())
	}
	m.Catalogue("app") // a use
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(body(), "2"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the change made while unused was not read within 5 s of the next use: %q", body())
		}
	}
}

// TestTheFirstUseAfterThePollsStoppedWaitsForWhatChangedMeanwhile: rows written while a database's
// polls were stopped for want of use may be any, so its next use does not answer from the
// catalogue held: Held says it is not current, and Catalogue waits for the poll that starts
// again and for the read of what it found. The first statement then sees a function replaced
// meanwhile, and DefaultsChanged has been told of a role's default set meanwhile before it is
// classified (its session gets a backend with the new default). A use after a pause in which
// nothing changed gets the same catalogue.
func TestTheFirstUseAfterThePollsStoppedWaitsForWhatChangedMeanwhile(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, connect, exec := startAppDatabase(t, ctx)
	exec(db, "CREATE FUNCTION paused_reader() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$")
	exec(db, "CREATE ROLE paused_role")
	var logs syncbuf.Buffer
	var told atomic.Int32
	const poll, unused = 20 * time.Millisecond, 100 * time.Millisecond
	m := catalog.New(catalog.Options{Connect: connect, RefreshInterval: time.Hour, Wait: 20 * time.Second, LoadTimeout: 10 * time.Second,
		ChangePollInterval: poll, ChangePollsWhileUnused: unused, Logger: zerolog.New(&logs).Level(zerolog.DebugLevel),
		DefaultsChanged: func(string) { told.Add(1) }})
	defer m.Close()
	if m.Catalogue("app") == nil {
		t.Fatal("no catalogue of app")
	}
	body := func(cat *classify.Catalogue) string {
		for _, f := range cat.Data().Functions {
			if f.Name == "paused_reader" {
				return f.Source
			}
		}
		return ""
	}

	waitForPollsToStop(t, &logs, 1)
	exec(db, "CREATE OR REPLACE FUNCTION paused_reader() RETURNS int LANGUAGE sql AS $$ SELECT 2 $$")
	exec(db, "ALTER ROLE paused_role SET work_mem = '6MB'")
	if _, current := m.Held("app"); current {
		t.Error("Held: the catalogue counted as current at the first use after the polls stopped")
	}
	cat := m.Catalogue("app")
	if cat == nil || !strings.Contains(body(cat), "2") {
		t.Errorf("the first use after the polls stopped got a catalogue without the function replaced meanwhile")
	}
	if told.Load() == 0 {
		t.Error("the first use after the polls stopped was answered before DefaultsChanged was told of the role's default set meanwhile")
	}

	waitForPollsToStop(t, &logs, 2)
	held := m.Loaded("app")
	if again := m.Catalogue("app"); again != held {
		t.Errorf("a use after a pause in which nothing changed got another catalogue (version %d, held %d)", again.Version(), held.Version())
	}
}

// waitForPollsToStop waits up to 5 s until logs tells, times times in all, that a database's
// change polls stopped for want of use.
func waitForPollsToStop(t *testing.T, logs *syncbuf.Buffer, times int) {
	t.Helper()
	const stopped = "not polled until the database is used again"
	for deadline := time.Now().Add(5 * time.Second); strings.Count(logs.String(), stopped) < times; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("polls did not stop within 5 s of no use:\n%s", logs.String())
		}
	}
}
