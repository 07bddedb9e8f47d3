package catalog_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/classify/catalog"
	"github.com/pgowl/pgowl/internal/cluster"
)

// scanHook runs before and after each change-marker scan over the connections it makes.
type scanHook struct {
	before func(ctx context.Context)
	after  func(ctx context.Context)
}

type scanKey struct{}

func (h *scanHook) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if strings.Contains(data.SQL, "pg_catalog.age(p.xmin)") {
		h.before(ctx)
		return context.WithValue(ctx, scanKey{}, true)
	}
	return ctx
}

func (h *scanHook) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	if ctx.Value(scanKey{}) != nil {
		h.after(ctx)
	}
}

// TestAnotherPrimaryAtTheSameAddressWhoseSnapshotReadsAsTheOldOnesIsReadWhole: the polls read
// the whole catalogue when the primary behind the same address is another one whose transaction
// IDs went back (wentBack), also when its pg_current_snapshot() happens to read as the text the
// old primary's last scan was preceded by. Here a transaction ended on the old primary between a
// poll's snapshot read and its scan, so the scan's xmin is past that snapshot's; the new primary
// then reads that same snapshot, with a function replaced by a transaction below the old scan's
// xmin. Before the snapshot comparison the first poll on the new primary read an xmin that went
// back and read everything; with it, that poll is left out, and every later one reads an xmin
// that did not go back: the replaced function is never found by the polls.
func TestAnotherPrimaryAtTheSameAddressWhoseSnapshotReadsAsTheOldOnesIsReadWhole(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := func() (*cluster.Node, *pgx.Conn) {
		node := cluster.StartForTest(t, cluster.Options{Settings: map[string]string{"autovacuum": "off"}}).Nodes[0]
		admin, err := pgx.Connect(ctx, node.SuperuserDSN())
		if err != nil {
			t.Fatal(err)
		}
		defer admin.Close(ctx)
		if _, err := admin.Exec(ctx, "CREATE DATABASE app"); err != nil {
			t.Fatal(err)
		}
		db, err := pgx.Connect(ctx, node.DatabaseDSN("app"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close(context.Background()) })
		return node, db
	}
	exec := func(conn *pgx.Conn, sql string) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	text := func(conn *pgx.Conn, sql string) string {
		t.Helper()
		var s string
		if err := conn.QueryRow(ctx, sql).Scan(&s); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return s
	}
	nodeA, dbA := start()
	nodeB, dbB := start()
	exec(dbA, "CREATE FUNCTION reader() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$")
	exec(dbB, "CREATE FUNCTION reader() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$")
	for range 30 {
		exec(dbA, "SELECT pg_catalog.txid_current()")
	}

	var target atomic.Pointer[string]
	dsnA, dsnB := nodeA.DatabaseDSN("app"), nodeB.DatabaseDSN("app")
	target.Store(&dsnA)
	var armed atomic.Bool
	var acted bool // the poll goroutine's alone
	var expected string
	switched := make(chan struct{})
	var once sync.Once
	hook := &scanHook{}
	// The old primary: an older transaction holds x, a younger one (x+1) will end.
	older, err := pgx.Connect(ctx, dsnA)
	if err != nil {
		t.Fatal(err)
	}
	defer older.Close(context.Background())
	exec(older, "BEGIN")
	x := text(older, "SELECT pg_catalog.txid_current()::text")
	var xn int64
	fmt.Sscan(x, &xn)
	expected = fmt.Sprintf("%d:%d:%d", xn, xn+2, xn)
	watcher, err := pgx.Connect(ctx, dsnA)
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close(context.Background())
	hook.before = func(ctx context.Context) {
		if !armed.Load() || acted {
			return
		}
		var now string
		if err := watcher.QueryRow(ctx, "SELECT pg_catalog.pg_current_snapshot()::text").Scan(&now); err != nil || now != expected {
			return
		}
		// The poll read "x:x+2:x" before this scan: the older transaction ends before the scan.
		acted = true
		if _, err := older.Exec(ctx, "COMMIT"); err != nil {
			t.Errorf("COMMIT older: %v", err)
		}
	}
	hook.after = func(context.Context) {
		if !acted {
			return
		}
		once.Do(func() {
			// The old primary goes; another one answers at the same address.
			if err := nodeA.Stop(context.Background()); err != nil {
				t.Errorf("stop the old primary: %v", err)
			}
			target.Store(&dsnB)
			close(switched)
		})
	}
	connect := func(ctx context.Context, database string) (*pgx.Conn, error) {
		config, err := pgx.ParseConfig(*target.Load())
		if err != nil {
			return nil, err
		}
		config.Tracer = hook
		return pgx.ConnectConfig(ctx, config)
	}

	// The new primary: its IDs below the old one's; it reaches the same snapshot text, with
	// reader() replaced by x+1 while x runs.
	for {
		xmax := text(dbB, "SELECT pg_catalog.pg_snapshot_xmax(pg_catalog.pg_current_snapshot())::text")
		if xmax == x {
			break
		}
		var n int64
		fmt.Sscan(xmax, &n)
		if n > xn {
			t.Fatalf("the new primary's xmax %s is past the old one's x %s", xmax, x)
		}
		exec(dbB, "SELECT pg_catalog.txid_current()")
	}
	olderB, err := pgx.Connect(ctx, dsnB)
	if err != nil {
		t.Fatal(err)
	}
	defer olderB.Close(context.Background())
	exec(olderB, "BEGIN")
	if got := text(olderB, "SELECT pg_catalog.txid_current()::text"); got != x {
		t.Fatalf("the new primary's older transaction is %s, want %s", got, x)
	}
	exec(dbB, "CREATE OR REPLACE FUNCTION reader() RETURNS int LANGUAGE sql AS $$ SELECT 2 $$")
	if got := text(dbB, "SELECT pg_catalog.pg_current_snapshot()::text"); got != expected {
		t.Fatalf("the new primary's snapshot reads %s, want %s", got, expected)
	}

	const poll = 50 * time.Millisecond
	m := catalog.New(catalog.Options{Connect: connect, RefreshInterval: time.Hour, Wait: 20 * time.Second,
		LoadTimeout: 10 * time.Second, ChangePollInterval: poll, ChangePollsWhileUnused: time.Hour, RetryAfter: time.Hour})
	defer m.Close()
	if m.Catalogue("app") == nil {
		t.Fatal("no catalogue of app")
	}
	source := func(name string) string { return heldSource(m, "app", name) }
	if !strings.Contains(source("reader"), "1") {
		t.Fatalf("reader() read from the old primary as %q", source("reader"))
	}
	time.Sleep(5 * poll) // polls settle on "x:x+1:" read as "x:x:" (x running, not listed)
	armed.Store(true)
	exec(dbA, "SELECT pg_catalog.txid_current()") // the younger transaction, x+1, ends: "x:x+2:x"
	select {
	case <-switched:
	case <-time.After(20 * time.Second):
		t.Fatal("no poll scanned after reading the snapshot with x running and x+1 ended")
	}
	time.Sleep(20 * poll) // polls on the new primary while its x runs
	exec(olderB, "COMMIT")
	waitUntil(t, 5*time.Second, "reader() as the new primary holds it (SELECT 2)",
		func() string { return "reader() held as " + source("reader") },
		func() bool { return strings.Contains(source("reader"), "2") })
}
