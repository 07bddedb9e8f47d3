package catalog_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/classify/catalog"
)

// scansCounted counts the change-marker scans run over the connections it makes: the statements
// that select catalogue rows by the transaction that wrote them.
type scansCounted struct {
	scans atomic.Int64
}

func (c *scansCounted) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if strings.Contains(data.SQL, "pg_catalog.age(p.xmin)") {
		c.scans.Add(1)
	}
	return ctx
}

func (c *scansCounted) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestAPollOfADatabaseNoOneChangesScansNothing: while no transaction ends on the primary, the
// change polls leave their scan of the catalogues out (one small statement each instead). A change
// made past pgowl is still found within a few polls, also when it is committed by a transaction
// that began before others that ended meanwhile (its end moves no upper bound of the snapshot,
// only the list of transactions still running).
func TestAPollOfADatabaseNoOneChangesScansNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, connect, exec := startAppDatabase(t, ctx)
	exec(db, "CREATE FUNCTION reader() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$")

	counted := &scansCounted{}
	countingConnect := func(ctx context.Context, database string) (*pgx.Conn, error) {
		conn, err := connect(ctx, database)
		if err != nil {
			return nil, err
		}
		config := conn.Config()
		conn.Close(ctx)
		config.Tracer = counted
		return pgx.ConnectConfig(ctx, config)
	}
	const poll = 50 * time.Millisecond
	m := catalog.New(catalog.Options{Connect: countingConnect, RefreshInterval: time.Hour, Wait: 20 * time.Second,
		LoadTimeout: 10 * time.Second, ChangePollInterval: poll, ChangePollsWhileUnused: time.Hour})
	defer m.Close()
	if m.Catalogue("app") == nil {
		t.Fatal("no catalogue of app")
	}
	source := func(name string) string { return heldSource(m, "app", name) }

	// Quiet: twenty polls or so, of which at most one may scan (one that began before the load's
	// last transaction ended).
	time.Sleep(100 * time.Millisecond)
	before := counted.scans.Load()
	time.Sleep(20 * poll)
	if scanned := counted.scans.Load() - before; scanned > 1 {
		t.Errorf("%d scans of the change markers in %s of polls every %s with no transaction ending; want at most 1", scanned, 20*poll, poll)
	}

	// A change past pgowl is found.
	exec(db, "CREATE OR REPLACE FUNCTION reader() RETURNS int LANGUAGE sql AS $$ SELECT 2 $$")
	waitUntil(t, 5*time.Second, "reader() replaced past pgowl in the catalogue", func() string { return "polls every " + poll.String() },
		func() bool { return strings.Contains(source("reader"), "2") })

	// An older transaction's change, committed after a younger transaction ended: the
	// snapshot's upper bound stays where the younger one put it.
	older, err := pgx.Connect(ctx, db.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer older.Close(context.Background())
	exec(older, "BEGIN")
	exec(older, "SELECT pg_catalog.txid_current()")
	exec(db, "SELECT pg_catalog.txid_current()") // a younger transaction, ended
	time.Sleep(5 * poll)                         // polls settle on the snapshot with older running
	exec(older, "CREATE OR REPLACE FUNCTION reader() RETURNS int LANGUAGE sql AS $$ SELECT 3 $$")
	exec(older, "COMMIT")
	waitUntil(t, 5*time.Second, "reader() replaced by the older transaction in the catalogue", func() string { return "polls every " + poll.String() },
		func() bool { return strings.Contains(source("reader"), "3") })
}
