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
		primaryMovesUnderTheManager(t, primaryMove{refuseFirst: true, poll: 50 * time.Millisecond})
	})
	t.Run("noticed by a read by name, then by a poll", func(t *testing.T) {
		primaryMovesUnderTheManager(t, primaryMove{readFirst: true, poll: 300 * time.Millisecond})
	})
	// The old primary goes down before the new one is found: no kept connection is left to
	// notice anything, and the first connection opened after is to the new primary.
	t.Run("the old primary down before the new one is found", func(t *testing.T) {
		primaryMovesUnderTheManager(t, primaryMove{downFirst: true, poll: 50 * time.Millisecond})
	})
	// A poll that was connecting to the new primary when a read by name noticed the move notices
	// it too, before the catalogue is read from the new primary (the queries there are held until
	// then): the second notice of the same move is not taken again.
	t.Run("noticed by a read by name, then by a poll before the new primary is read", func(t *testing.T) {
		primaryMovesUnderTheManager(t, primaryMove{pollNoticesDuringRead: true, poll: 50 * time.Millisecond})
	})
}

// primaryMove is how the primary moves under the Manager in primaryMovesUnderTheManager.
type primaryMove struct {
	refuseFirst bool // the first connection asked for after the switch is refused
	readFirst   bool // a read by name notices the move before the polls do
	downFirst   bool // the old primary's backends end, and no primary is found for a while
	// pollNoticesDuringRead: the poll's connection to the new primary (the first asked for after
	// the switch) opens only once a read by name, asked for meanwhile, has noticed the move, and
	// the queries on connections to the new primary wait until the poll has noticed it too.
	pollNoticesDuringRead bool
	poll                  time.Duration // Options.ChangePollInterval
}

// queryGate holds the queries of the connections it traces while it is shut, but for the
// settings and the primary check that openingQuery lets through.
type queryGate struct {
	mu   sync.Mutex
	shut chan struct{} // nil: open
	// traced reports whether the gate holds conn's queries (set before the gate first shuts).
	traced func(conn *pgx.Conn) bool
}

// openingQuery reports whether sql is let through the gate: the check that the node is a primary
// and the settings, which the Manager runs as it opens a connection, before it names the
// connection's node (any other SET passes too).
func openingQuery(sql string) bool {
	return strings.Contains(sql, "pg_is_in_recovery()") || strings.HasPrefix(sql, "SET ")
}

func (g *queryGate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.shut = make(chan struct{})
}

func (g *queryGate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shut != nil {
		close(g.shut)
		g.shut = nil
	}
}

func (g *queryGate) wait(ctx context.Context, conn *pgx.Conn) {
	if !g.traced(conn) {
		return
	}
	g.mu.Lock()
	shut := g.shut
	g.mu.Unlock()
	if shut != nil {
		select {
		case <-shut:
		case <-ctx.Done():
		}
	}
}

func (g *queryGate) TraceQueryStart(ctx context.Context, conn *pgx.Conn, query pgx.TraceQueryStartData) context.Context {
	if !openingQuery(query.SQL) {
		g.wait(ctx, conn)
	}
	return ctx
}

func (g *queryGate) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (g *queryGate) TraceBatchStart(ctx context.Context, conn *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	g.wait(ctx, conn)
	return ctx
}

func (g *queryGate) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (g *queryGate) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func primaryMovesUnderTheManager(t *testing.T, move primaryMove) {
	refuseFirst, readFirst, downFirst, poll := move.refuseFirst, move.readFirst, move.downFirst, move.poll
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, connect, exec := startAppDatabase(t, ctx)
	gate := &queryGate{}
	defer gate.open()
	pollConnecting, pollMayConnect := make(chan struct{}), make(chan struct{})
	defer func() {
		select {
		case <-pollMayConnect:
		default:
			close(pollMayConnect)
		}
	}()
	if move.pollNoticesDuringRead {
		// The connections are traced by the gate.
		connect = func(ctx context.Context, database string) (*pgx.Conn, error) {
			config, err := pgx.ParseConfig(db.Config().ConnString())
			if err != nil {
				return nil, err
			}
			config.Database, config.Tracer = database, gate
			return pgx.ConnectConfig(ctx, config)
		}
	}
	exec(db, "CREATE FUNCTION before_switch() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$")

	var mu sync.Mutex
	var opened []uint32           // backend PIDs of the connections the Manager opened
	nodeOf := map[uint32]string{} // the node each stands for: the primary when it was opened
	primary := "old"              // the node the monitor finds primary
	switchedAt := 0               // connections asked for since the switch (0: none yet)
	named := map[uint32]bool{}    // the connections the Manager asked the node of
	var pollPID uint32            // pollNoticesDuringRead: the poll's connection to the new primary
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
		case attempt == 1 && move.pollNoticesDuringRead:
			close(pollConnecting)
			<-pollMayConnect
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
			if attempt == 1 && move.pollNoticesDuringRead {
				pollPID = conn.PgConn().PID()
			}
			mu.Unlock()
		}
		return conn, err
	}
	gate.traced = func(conn *pgx.Conn) bool {
		mu.Lock()
		defer mu.Unlock()
		return nodeOf[conn.PgConn().PID()] == "new"
	}
	connectedNode := func(conn *pgx.Conn) string {
		mu.Lock()
		defer mu.Unlock()
		named[conn.PgConn().PID()] = true
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

	if move.pollNoticesDuringRead {
		gate.close()
	}
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
	if move.pollNoticesDuringRead {
		within("the poll's connection to the new primary asked for", func() bool {
			select {
			case <-pollConnecting:
				return true
			default:
				return false
			}
		})
		m.Changed("app", &classify.CatalogueChanges{Functions: []string{"before_switch"}}, true)
		within("the move noticed by the read by name", func() bool { return strings.Contains(logs.String(), "the primary moved") })
		close(pollMayConnect)
		within("the poll's connection to the new primary named", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return pollPID != 0 && named[pollPID]
		})
		within("the poll's notice of the move not taken again", func() bool {
			return strings.Contains(logs.String(), "catalog: the primary's move is already being read")
		})
		if n := wholeReads() - wholeBefore; n != 0 {
			t.Fatalf("%d whole reads ended while their queries were held", n)
		}
		gate.open()
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
	// Both connections noticed the move; one whole read was enough, and the move is told once.
	if n := wholeReads() - wholeBefore; n != 1 {
		t.Errorf("%d whole reads after the switch, want 1:\n%s", n, logs.String())
	}
	if n := strings.Count(logs.String(), "catalog: the primary moved"); n != 1 {
		t.Errorf("the move was taken %d times, want once:\n%s", n, logs.String())
	}
}
