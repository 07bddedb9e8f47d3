package catalog_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/classify/catalog"
	"github.com/pgowl/pgowl/internal/syncbuf"
)

// TestAConnectionToANodeNoLongerPrimaryIsLeftForTheNewPrimary: once Options.PrimaryNode names
// another node than a kept connection's, the Manager closes that connection (the
// read's and the polls') at its next use, opens one to the primary, reads the catalogue whole
// there once (though the first connection to it failed), reports the catalogue not current
// until then, and finds the changes made after over the new connections. When a read by name
// notices the move before the polls do, the polls' noticing it after does not read it again.
// The test's one server plays both nodes: the connections opened before the switch stand for the
// old primary.
func TestAConnectionToANodeNoLongerPrimaryIsLeftForTheNewPrimary(t *testing.T) {
	t.Run("noticed by a poll, the first connection to the new primary refused", func(t *testing.T) {
		primaryMovesUnderTheManager(t, true, false, false, 50*time.Millisecond)
	})
	t.Run("noticed by a read by name, then by a poll", func(t *testing.T) {
		primaryMovesUnderTheManager(t, false, true, false, 300*time.Millisecond)
	})
	// The old primary goes down before the new one is found: no kept connection is left to
	// notice anything, and the first connection opened after is to the new primary.
	t.Run("the old primary down before the new one is found", func(t *testing.T) {
		primaryMovesUnderTheManager(t, false, false, true, 50*time.Millisecond)
	})
}

func primaryMovesUnderTheManager(t *testing.T, refuseFirst, readFirst, downFirst bool, poll time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, connect, exec := startAppDatabase(t, ctx)
	exec(db, "CREATE FUNCTION before_switch() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$")

	var mu sync.Mutex
	var opened []uint32           // backend PIDs of the connections the Manager opened
	nodeOf := map[uint32]string{} // the node each stands for: the primary when it was opened
	primary := "old"              // the node the monitor finds primary
	switchedAt := 0               // connections asked for since the switch (0: none yet)
	counting := func(ctx context.Context, database string) (*pgx.Conn, error) {
		mu.Lock()
		if primary == "" {
			mu.Unlock()
			return nil, errors.New("no primary")
		}
		if primary != "old" {
			switchedAt++
		}
		attempt := switchedAt
		mu.Unlock()
		switch {
		case attempt == 1 && refuseFirst:
			return nil, errors.New("the new primary does not take connections yet")
		case attempt > 1:
			time.Sleep(300 * time.Millisecond) // a whole read slow enough to be waited for
		}
		conn, err := connect(ctx, database)
		if err == nil {
			mu.Lock()
			opened = append(opened, conn.PgConn().PID())
			nodeOf[conn.PgConn().PID()] = primary
			mu.Unlock()
		}
		return conn, err
	}
	connectedNode := func(conn *pgx.Conn) string {
		mu.Lock()
		defer mu.Unlock()
		return nodeOf[conn.PgConn().PID()]
	}
	primaryNode := func() (string, bool) {
		mu.Lock()
		defer mu.Unlock()
		return primary, primary != ""
	}
	var logs syncbuf.Buffer
	m := catalog.New(catalog.Options{Connect: counting, NodeOf: connectedNode, PrimaryNode: primaryNode, RefreshInterval: time.Hour,
		Wait: 20 * time.Second, LoadTimeout: 10 * time.Second, ChangePollInterval: poll,
		Logger: zerolog.New(&logs).Level(zerolog.DebugLevel)})
	defer m.Close()
	if m.Catalogue("app") == nil {
		t.Fatal("no catalogue of app")
	}
	holds := func(name string) bool {
		for _, f := range m.Loaded("app").Data().Functions {
			if f.Name == name {
				return true
			}
		}
		return false
	}
	sawWaiting := false // Held reported the catalogue not current after the switch
	within := func(what string, done func() bool) {
		t.Helper()
		waitUntil(t, 10*time.Second, what, func() string { return "polls every " + poll.String() + "; log:\n" + logs.String() }, func() bool {
			if _, current := m.Held("app"); !current { // a use, as a statement's
				sawWaiting = true
			}
			return done()
		})
	}
	// Both the read's connection and the polls' are open before the switch.
	within("a poll connection opened beside the read's", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(opened) >= 2
	})
	wholeReads := func() int { // whole reads that succeeded, whether or not they found changes
		n := 0
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, `"whole":true`) && strings.Contains(line, `"message":"function catalogue read`) {
				n++
			}
		}
		return n
	}
	wholeBefore := wholeReads()

	mu.Lock()
	left := slices.Clone(opened)
	if downFirst {
		primary = "" // none found while the old one is down
	} else {
		primary = "new"
	}
	mu.Unlock()
	if downFirst {
		if _, err := db.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid", left); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * poll) // polls fail meanwhile: their connection is gone, and none can be opened
		mu.Lock()
		primary = "new"
		mu.Unlock()
	}
	if readFirst { // a committed change told: read by name at once, before the next poll
		m.Changed("app", &classify.CatalogueChanges{Functions: []string{"before_switch"}}, true)
	}

	within("the connections to the old primary closed", func() bool {
		var still int
		if err := db.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1)", left).Scan(&still); err != nil {
			t.Fatal(err)
		}
		return still == 0
	})
	// Where the first connection to the new primary failed, the move is not forgotten for it.
	within("a whole read on the new primary", func() bool { return wholeReads() > wholeBefore })
	if !sawWaiting {
		t.Error("Held reported the old primary's catalogue as current while the new one's was read")
	}
	if !strings.Contains(logs.String(), "no longer the primary") {
		t.Errorf("no line says the connection's node is no longer the primary:\n%s", logs.String())
	}
	exec(db, "CREATE FUNCTION after_switch() RETURNS int LANGUAGE sql AS $$ SELECT 2 $$")
	within("a function made after the switch found by the polls", func() bool { return holds("after_switch") })
	// Both connections noticed the move; one whole read was enough.
	if n := wholeReads() - wholeBefore; n != 1 {
		t.Errorf("%d whole reads after the switch, want 1:\n%s", n, logs.String())
	}
}
