package catalog_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/classify/catalog"
)

// Close stops what a Manager does on its own: the read that confirms objects taken from their
// statements does not start, the kept connection is closed, and nothing connects again. Until
// 2026-12-04 the Manager outlived the proxy that owned it, and that read, started after the
// proxy stopped, failed against the stopped node with a warning. What the Manager holds is still
// served until a change makes it stale.
func TestClosedManagerStartsNoRead(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	db, connect, exec := startAppDatabase(t, ctx)
	var mu sync.Mutex
	var opened []*pgx.Conn
	counted := func(ctx context.Context, database string) (*pgx.Conn, error) {
		conn, err := connect(ctx, database)
		if err == nil {
			mu.Lock()
			opened = append(opened, conn)
			mu.Unlock()
		}
		return conn, err
	}
	log := &readLog{}
	const confirmAfter = 100 * time.Millisecond
	m := catalog.New(catalog.Options{Connect: counted, RefreshInterval: time.Hour, Wait: 10 * time.Second,
		ConfirmTakenAfter: confirmAfter, Logger: zerolog.New(log).Level(zerolog.DebugLevel)})
	classifier := classify.New(classify.Options{Catalogues: m})
	session := &classify.Context{Database: "app", User: "postgres"}
	if m.Catalogue("app") == nil {
		t.Fatal("no catalogue")
	}
	sql := "CREATE FUNCTION made_before_close(x integer) RETURNS integer LANGUAGE sql AS $$ SELECT x $$"
	effects := classifier.ClassifyIn(sql, session)
	exec(db, sql)
	if effects.CatalogueChanges == nil || !m.ChangedAndCreated("app", effects.CatalogueChanges, effects.CatalogueChanges.Created, session) {
		t.Fatalf("%s: not taken from the statement", sql)
	}
	readsBefore := len(log.reads(t))

	m.Close()
	m.Close() // twice is as once
	time.Sleep(5 * confirmAfter)

	if reads := log.reads(t); len(reads) != readsBefore {
		t.Errorf("%d reads logged after Close: %+v", len(reads)-readsBefore, reads[readsBefore:])
	}
	mu.Lock()
	defer mu.Unlock()
	if len(opened) != 1 {
		t.Errorf("%d connections opened, want the first read's alone", len(opened))
	}
	for i, conn := range opened {
		if !conn.IsClosed() {
			t.Errorf("connection %d still open after Close", i)
		}
	}
	if f := findFunction(m.Catalogue("app"), "public", "made_before_close", "integer"); f == nil {
		t.Error("the catalogue held, with the function taken before Close, is no longer served")
	}
	// A change told after Close is not read: the catalogue, which misses it, is no longer served
	// (as after a read that failed: unknown functions go to the primary), and without a wait.
	m.Changed("app", &classify.CatalogueChanges{Functions: []string{"made_after_close"}}, true)
	started := time.Now()
	if cat := m.Catalogue("app"); cat != nil {
		t.Error("a catalogue that misses a change told after Close is served")
	}
	if waited := time.Since(started); waited > 5*time.Second {
		t.Errorf("Catalogue waited %v after Close", waited)
	}
	if len(opened) != 1 {
		t.Errorf("%d connections opened once a change was told after Close", len(opened))
	}
}
