package catalog_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/classify/catalog"
)

// TestManagerFailsClosedWithoutServer: when the catalogue cannot be loaded, statements are classified
// without it (unknown functions go to the primary), and later statements do not wait again.
func TestManagerFailsClosedWithoutServer(t *testing.T) {
	var connects atomic.Int32
	m := catalog.New(catalog.Options{
		Connect: func(ctx context.Context, database string) (*pgx.Conn, error) {
			connects.Add(1)
			return nil, errors.New("no primary")
		},
		Wait:       time.Second,
		RetryAfter: time.Hour,
	})
	classifier := classify.New(classify.Options{Catalogues: m})
	ctx := &classify.Context{Database: "app", User: "app"}
	got := classifier.ClassifyIn("SELECT report()", ctx)
	if got.Access != classify.Write || got.Reason != classify.ReasonUnknownEffect {
		t.Errorf("without a catalogue: %v %v, want write UNKNOWN_EFFECT", got.Access, got.Reason)
	}
	started := time.Now()
	for i := 0; i < 100; i++ {
		classifier.ClassifyIn("SELECT report()", ctx)
		classifier.ClassifyIn("SELECT other_report()", ctx)
	}
	if elapsed := time.Since(started); elapsed > 500*time.Millisecond {
		t.Errorf("statements after a failed load waited %s", elapsed)
	}
	if n := connects.Load(); n != 1 {
		t.Errorf("%d connection attempts, want 1 within RetryAfter", n)
	}
	if read := classifier.ClassifyIn("SELECT 1", ctx); read.Access != classify.Read {
		t.Errorf("SELECT 1 without a catalogue: %v", read.Access)
	}
}

// TestManagerAgainstPostgres loads catalogues from a real server: on first use, after a miss (a
// function created behind pgowl's back is found on first use), after an invalidation, and on the
// periodic refresh; a held catalogue costs no I/O.
func TestManagerAgainstPostgres(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	db, connect, exec := startAppDatabase(t, ctx)
	exec(db, "CREATE TABLE audit (msg text)")
	exec(db, "CREATE FUNCTION report() RETURNS bigint LANGUAGE sql AS $$ SELECT count(*) FROM audit $$")
	exec(db, "CREATE FUNCTION refreshed() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$")

	var connects atomic.Int32
	m := catalog.New(catalog.Options{
		Connect: func(ctx context.Context, database string) (*pgx.Conn, error) {
			connects.Add(1)
			return connect(ctx, database)
		},
		RefreshInterval: time.Hour, // the refresh is tested below, with a second manager
		Wait:            10 * time.Second,
	})
	classifier := classify.New(classify.Options{Catalogues: m})
	appCtx := &classify.Context{Database: "app", User: "postgres"}
	want := func(sql string, access classify.Access, reason classify.Reason) {
		t.Helper()
		got := classifier.ClassifyIn(sql, appCtx)
		if got.Access != access || got.Reason != reason {
			t.Errorf("%s: %v %v (%s), want %v %v", sql, got.Access, got.Reason, got.Subject, access, reason)
		}
	}

	want("SELECT report()", classify.Read, classify.ReasonReadOnly)
	if n := connects.Load(); n != 1 {
		t.Fatalf("first use made %d connections, want 1", n)
	}
	first := m.Loaded("app")

	// A held catalogue costs no I/O, cached or not.
	for i := 0; i < 200; i++ {
		classifier.ClassifyIn("SELECT report()", appCtx)
		classifier.ClassifyIn("SELECT report() + "+itoa(i), appCtx)
	}
	if n := connects.Load(); n != 1 {
		t.Errorf("classifying with a held catalogue made %d more connections", n-1)
	}

	// A function created elsewhere after the load is found on its first use.
	exec(db, "CREATE FUNCTION audit_it(m text) RETURNS void LANGUAGE sql AS $$ INSERT INTO audit VALUES (m) $$")
	want("SELECT audit_it('x')", classify.Write, classify.ReasonWritingFunction)
	if n := connects.Load(); n > 2 {
		t.Errorf("the miss made %d connections, want at most 1 (the kept one is reused)", n-1)
	}
	// A name that is nowhere is looked up once, not on every statement.
	want("SELECT nowhere()", classify.Write, classify.ReasonUnknownEffect)
	before := connects.Load()
	want("SELECT nowhere(1)", classify.Write, classify.ReasonUnknownEffect)
	want("SELECT nowhere(2)", classify.Write, classify.ReasonUnknownEffect)
	if n := connects.Load(); n != before {
		t.Errorf("a name known to be missing caused %d more loads", n-before)
	}

	// CREATE OR REPLACE through the classifier invalidates at once.
	ddl := "CREATE OR REPLACE FUNCTION report() RETURNS bigint LANGUAGE sql AS $$ DELETE FROM audit; SELECT 0::bigint $$"
	if eff := classifier.ClassifyIn(ddl, appCtx); !eff.CatalogueChange {
		t.Fatalf("CREATE OR REPLACE FUNCTION: CatalogueChange not set: %+v", eff)
	}
	exec(db, ddl)
	want("SELECT report()", classify.Write, classify.ReasonWritingFunction)

	// A change made elsewhere is picked up by the periodic refresh.
	m = catalog.New(catalog.Options{
		Connect:         connect,
		RefreshInterval: 300 * time.Millisecond,
	})
	classifier = classify.New(classify.Options{Catalogues: m})
	want("SELECT refreshed()", classify.Read, classify.ReasonReadOnly)
	first = m.Loaded("app")
	exec(db, "CREATE SEQUENCE s")
	exec(db, "CREATE OR REPLACE FUNCTION refreshed() RETURNS int LANGUAGE sql AS $$ SELECT nextval('s')::int $$")
	deadline := time.Now().Add(15 * time.Second)
	for {
		got := classifier.ClassifyIn("SELECT refreshed()", appCtx)
		if got.Reason == classify.ReasonWritingFunction {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the periodic refresh did not pick up a changed function: %v %s", got.Reason, got.Subject)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// A refresh that finds nothing new keeps the catalogue (and its version, part of cache keys).
	settled := m.Loaded("app")
	time.Sleep(1500 * time.Millisecond)
	classifier.ClassifyIn("SELECT 1", appCtx)
	time.Sleep(500 * time.Millisecond)
	if now := m.Loaded("app"); now != settled {
		t.Errorf("an unchanged reload replaced the catalogue (version %d -> %d)", settled.Version(), now.Version())
	}
	if settled == first {
		t.Errorf("the catalogue never changed")
	}

	// Databases have catalogues of their own.
	postgresCtx := &classify.Context{Database: "postgres", User: "postgres"}
	if got := classifier.ClassifyIn("SELECT report()", postgresCtx); got.Reason != classify.ReasonUnknownEffect {
		t.Errorf("report() in database postgres: %v, want UNKNOWN_EFFECT (it exists only in app)", got.Reason)
	}
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}
