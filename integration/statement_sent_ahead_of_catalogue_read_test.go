package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/internal/cluster"
	"github.com/pgowl/pgowl/route"
)

// A session's catalogue change is read on its own connection right behind it; the read's replies
// are read when the session needs them. The session's next statement, when every verdict would
// send it to the same primary (pgowl in front of the primary alone here), is sent before the read
// is read, and classified again with the read while the node runs it: its NOTICE and its routing
// log line give the final verdict, never the provisional one (UNKNOWN_EFFECT). With standbys to
// read on, the next statement waits for the read, as before. A function its CREATE statement
// describes in full is not read at all: the catalogue takes it from the statement while the node
// runs the next one, which is sent ahead in the same way.

const aheadSetupSQL = `
CREATE SCHEMA IF NOT EXISTS sa_app AUTHORIZATION app;
CREATE SEQUENCE IF NOT EXISTS sa_app.sa_seq;
ALTER SEQUENCE sa_app.sa_seq OWNER TO app;
CREATE OR REPLACE FUNCTION sa_app.sa_probe() RETURNS integer LANGUAGE sql STABLE AS $$SELECT 1$$;
`

// startOwlOnPrimaryAlone runs setup on c's primary as the superuser, then starts pgowl in front of
// the primary alone (a statement's verdict then never picks the node), with the whole catalogue
// read only at start (a change is read by the session that makes it), and waits until pgowl
// knows the primary.
func startOwlOnPrimaryAlone(t *testing.T, c *cluster.Cluster, setup string) *owl {
	t.Helper()
	if err := c.Nodes[0].Exec(timeoutCtx(t, statementTimeout), setup); err != nil {
		t.Fatalf("set up: %v", err)
	}
	o := startOwlNoWait(t, c, func(cfg *config.Config) {
		cfg.Nodes = cfg.Nodes[:1]
		cfg.Classify.RefreshInterval = 10 * time.Minute
	})
	o.waitRoles(t, map[string]route.Role{c.Nodes[0].Name: route.RolePrimary})
	return o
}

// aheadLogMessage is pgowl's debug line for a unit sent before its session's catalogue read was read.
const aheadLogMessage = "statement sent before its session's catalogue change was taken in; classified again with it"

func TestStatementSentAheadOfItsCatalogueReadGetsTheFinalVerdict(t *testing.T) {
	o := startOwlOnPrimaryAlone(t, sharedClusterFor(t), aheadSetupSQL)
	for _, mode := range bothProtocols {
		t.Run(mode.name, func(t *testing.T) {
			conn := o.connect(t, withMode(mode.mode))
			aheadMust(t, conn, "SET search_path = sa_app, public")
			// The catalogue is held from here: a change is read, not the whole catalogue.
			aheadMust(t, conn, "SELECT sa_probe()")
			conn.routes(t)
			before, createdBefore, unparsedBefore := aheadLines(t, o), createdWithoutRead(t, o), unparsedAheadLines(t, o)
			uses, selects := 0, 0
			for round := 0; round < 3; round++ {
				writes := fmt.Sprintf("sa_w_%s_%d", mode.name, round)
				reads := fmt.Sprintf("sa_r_%s_%d", mode.name, round)
				view := fmt.Sprintf("sa_v_%s_%d", mode.name, round)
				steps := []struct{ change, use, reason string }{
					{"CREATE FUNCTION " + writes + "() RETURNS bigint LANGUAGE sql VOLATILE AS $$SELECT nextval('sa_app.sa_seq')$$",
						"SELECT " + writes + "()", "WRITING_FUNCTION"},
					{"CREATE FUNCTION " + reads + "() RETURNS bigint LANGUAGE sql STABLE AS $$SELECT 1::bigint$$",
						"SELECT " + reads + "()", "NO_STANDBY_CONFIGURED"},
					{"CREATE VIEW " + view + " AS SELECT " + writes + "() AS n",
						"SELECT n FROM " + view, "WRITING_FUNCTION"},
					// The same function made to read, in place: the verdict follows the change.
					{"CREATE OR REPLACE FUNCTION " + writes + "() RETURNS bigint LANGUAGE sql STABLE AS $$SELECT 2::bigint$$",
						"SELECT " + writes + "()", "NO_STANDBY_CONFIGURED"},
					// A use that does not start with SELECT is parsed before it is sent, still
					// ahead of the change being taken in.
					{"CREATE OR REPLACE FUNCTION " + reads + "() RETURNS bigint LANGUAGE sql VOLATILE AS $$SELECT nextval('sa_app.sa_seq')$$",
						"WITH w AS (SELECT " + reads + "() AS n) SELECT n FROM w", "WRITING_FUNCTION"},
				}
				for _, step := range steps {
					aheadMust(t, conn, step.change)
					conn.routes(t)
					aheadMust(t, conn, step.use)
					uses++
					if strings.HasPrefix(step.use, "SELECT") {
						selects++
					}
					rs := conn.routes(t)
					if len(rs) == 0 {
						t.Errorf("%s after %s: no routing NOTICE", step.use, step.change)
						continue
					}
					got := rs[len(rs)-1]
					if got.Role != "primary" || got.Reason != step.reason {
						t.Errorf("%s right after %s: NOTICE %v, want the primary with %s (the verdict with the change)", step.use, step.change, got, step.reason)
					}
					if reason, ok := loggedReason(t, o, step.use); !ok || reason != step.reason {
						t.Errorf("%s: the routing log says %q (found %v), want %s", step.use, reason, ok, step.reason)
					}
				}
			}
			if sent := aheadLines(t, o) - before; sent < uses {
				t.Errorf("%d of %d statements that used a change were sent before their session's catalogue read was read; want all", sent, uses)
			}
			// Every use that starts with SELECT is sent before it is parsed (classify.ProvisionalSelect),
			// and parsed once the change is taken in, while the node runs it; the WITH is parsed first.
			if unparsed := unparsedAheadLines(t, o) - unparsedBefore; unparsed != selects {
				t.Errorf("%d statements were sent ahead of their session's change before they were parsed; want the %d uses that start with SELECT", unparsed, selects)
			}
			// Four of each round's five changes are functions their statement describes in
			// full: the catalogue takes them without a read.
			if taken := createdWithoutRead(t, o) - createdBefore; taken < 3*4 {
				t.Errorf("%d functions were taken from their CREATE statement without a read; want the 12 this test made so", taken)
			}
		})
	}
	t.Run("beside the read", func(t *testing.T) {
		// search_path as a startup parameter (no SET): a pooled connection of the same login
		// carries the session's settings, so the statement goes beside the read when one is idle.
		// Every statement a simple Query.
		params := func(cfg *pgx.ConnConfig) {
			withParams(map[string]string{"search_path": "sa_app, public"})(cfg)
			withMode(pgx.QueryExecModeSimpleProtocol)(cfg)
		}
		conn, holder := o.connect(t, params), o.connect(t, params)
		aheadMust(t, conn, "SELECT sa_probe()")
		// A second pooled connection of the login: one held in a transaction while the other
		// session runs a statement, then both idle.
		aheadMust(t, holder, "BEGIN")
		aheadMust(t, holder, "SELECT sa_probe()")
		aheadMust(t, conn, "SELECT sa_probe()")
		aheadMust(t, holder, "COMMIT")
		conn.routes(t)
		before := asideLines(t, o)
		for round := 0; round < 3; round++ {
			writes := fmt.Sprintf("sa_wb_%d", round)
			// A SET clause makes the function one the catalogue reads (a function its
			// statement describes in full is taken from the statement, without a read).
			aheadMust(t, conn, "CREATE FUNCTION "+writes+"() RETURNS bigint LANGUAGE sql VOLATILE SET search_path = sa_app, public AS $$SELECT nextval('sa_seq')$$")
			conn.routes(t)
			aheadMust(t, conn, "SELECT "+writes+"()")
			if rs := conn.routes(t); len(rs) != 1 || rs[0].Reason != "WRITING_FUNCTION" {
				t.Errorf("SELECT %s() right after its CREATE: NOTICEs %v, want one on the primary with WRITING_FUNCTION", writes, rs)
			}
		}
		if beside := asideLines(t, o) - before; beside == 0 {
			t.Errorf("no statement went beside its session's catalogue read, with an idle pooled connection of the login free")
		}
	})
	for _, e := range o.logs.Entries(t) {
		if e["level"] == "warn" && strings.Contains(fmt.Sprint(e["message"]), "catalogue read") {
			t.Errorf("warning: %v", e["message"])
		}
	}
}

// With standbys to read on, a statement's verdict decides its node: the statement after a change
// waits for the change's read, and is not sent ahead of it.
func TestStatementWaitsForItsCatalogueReadWhereItsVerdictPicksTheNode(t *testing.T) {
	_, o := setupAndStart(t, "ahead of the read, with standbys", aheadSetupSQL, func(cfg *config.Config) {
		cfg.Classify.RefreshInterval = 10 * time.Minute
		cfg.Routing.ReadYourWrites = config.ReadYourWritesOff
	})
	conn := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
	aheadMust(t, conn, "SET search_path = sa_app, public")
	aheadMust(t, conn, "SELECT sa_probe()")
	before := aheadLines(t, o)
	for round := 0; round < 3; round++ {
		writes := fmt.Sprintf("sa_ws_%d", round)
		createWritingFunction(t, conn, writes)
		runOnPrimary(t, conn, "SELECT "+writes+"()")
		// A read right after a change: its first words would let it go before its parse, but
		// its verdict picks the node, so it is parsed, with the change taken in, and planned as
		// a read (never routed on its provisional verdict, a write). A read goes to a standby,
		// or to the primary with READ_YOUR_WRITES while no standby has replayed the session's
		// change (a session's own change of a function counts even with read_your_writes off).
		createWritingFunction(t, conn, writes+"_next")
		aheadMust(t, conn, "SELECT sa_probe()")
		rs := conn.routes(t)
		asRead := len(rs) == 1 && (rs[0].Role == "standby" && rs[0].Reason == "READ_ONLY" || rs[0].Role == "primary" && rs[0].Reason == "READ_YOUR_WRITES")
		if !asRead {
			t.Errorf("SELECT sa_probe() right after a change, with standbys: NOTICEs %v, want one routed as a read (a standby with READ_ONLY, or the primary with READ_YOUR_WRITES)", rs)
		}
	}
	if sent := aheadLines(t, o) - before; sent != 0 {
		t.Errorf("%d statements were sent ahead of their catalogue read with standbys to read on; want none", sent)
	}
}

// aheadMust runs sql through pgowl in the connection's query exec mode and fails the test on an
// error. (pgx's Exec would send it as a simple Query in every mode: it has no arguments.)
func aheadMust(t *testing.T, conn *client, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), statementTimeout)
	defer cancel()
	if err := runToEnd(ctx, conn, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// createWritingFunction creates, through conn, a function that writes (nextval), and forgets the
// NOTICEs so far.
func createWritingFunction(t *testing.T, conn *client, name string) {
	t.Helper()
	aheadMust(t, conn, "CREATE FUNCTION "+name+"() RETURNS bigint LANGUAGE sql VOLATILE AS $$SELECT nextval('sa_app.sa_seq')$$")
	conn.routes(t)
}

// aheadLines counts pgowl's log lines for units sent ahead of their session's catalogue read.
func aheadLines(t *testing.T, o *owl) int { return aheadLinesWhere(t, o, false) }

// asideLines counts pgowl's log lines for units sent ahead of their session's catalogue read on
// another connection than the read's.
func asideLines(t *testing.T, o *owl) int { return aheadLinesWhere(t, o, true) }

func aheadLinesWhere(t *testing.T, o *owl, besideOnly bool) int {
	t.Helper()
	n := 0
	for _, e := range o.logs.Entries(t) {
		if e["message"] == aheadLogMessage && (!besideOnly || e["beside_read"] == true) {
			n++
		}
	}
	return n
}

// unparsedAheadLines counts pgowl's log lines for units sent ahead of their session's catalogue
// change being taken in before they were parsed.
func unparsedAheadLines(t *testing.T, o *owl) int {
	t.Helper()
	n := 0
	for _, e := range o.logs.Entries(t) {
		if e["message"] == aheadLogMessage && e["parsed_once_sent"] == true {
			n++
		}
	}
	return n
}

// createdWithoutRead counts pgowl's log lines for catalogue changes taken from the statement that
// made them (a created function), without a read.
func createdWithoutRead(t *testing.T, o *owl) int {
	t.Helper()
	return catalogueChangesWhere(t, o, "from_statement")
}

// catalogueChangesWhere counts pgowl's debug lines for catalogue changes taken in ("function
// catalogue read") whose boolean field flag is true.
func catalogueChangesWhere(t *testing.T, o *owl, flag string) int {
	t.Helper()
	n := 0
	for _, e := range o.logs.Entries(t) {
		if e["message"] == "function catalogue read" && e[flag] == true {
			n++
		}
	}
	return n
}

// loggedReason returns the reason of the newest routing log line that ran sql.
func loggedReason(t *testing.T, o *owl, sql string) (string, bool) {
	t.Helper()
	entries := o.logs.Entries(t)
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		if e["message"] == "routed" && e["statement"] == sql && e["outcome"] == "ok" {
			return fmt.Sprint(e["reason"]), true
		}
	}
	return "", false
}

// A session that changes a function and then stays idle leaves the change's read in flight for a
// few milliseconds at most (catalogueReadGrace): other sessions then route by the change, though
// the changing session sends nothing more. The change waits on a row lock while another session's
// statement has the catalogue read, so that the only read that sees it is the changer's own.
func TestOtherSessionsSeeAChangeWhoseSessionWentIdle(t *testing.T) {
	c, o := setupAndStart(t, "a change, then idle", aheadSetupSQL, func(cfg *config.Config) {
		cfg.Classify.RefreshInterval = 10 * time.Minute
	})
	changer := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
	other := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
	aheadMust(t, changer, "SELECT sa_app.sa_probe()")
	ctx := timeoutCtx(t, statementTimeout)
	for round := 0; round < 2; round++ {
		f := fmt.Sprintf("sa_app.sa_idle_%d", round)
		aheadMust(t, changer, "CREATE OR REPLACE FUNCTION "+f+"() RETURNS bigint LANGUAGE sql STABLE AS $$SELECT 1::bigint$$")
		catchUp(t, c)
		aheadMust(t, other, "SELECT "+f+"()") // the other session's catalogue holds f as a read
		// Hold f's catalogue row, so that the changer's CREATE OR REPLACE waits for it.
		locker, err := c.Nodes[0].Connect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := locker.Exec(ctx, "BEGIN"); err != nil {
			t.Fatal(err)
		}
		if _, err := locker.Exec(ctx, "ALTER FUNCTION "+f+"() COST 7"); err != nil {
			t.Fatal(err)
		}
		changed := make(chan error, 1)
		go func() {
			_, err := changer.Exec(ctx, "CREATE OR REPLACE FUNCTION "+f+"() RETURNS bigint LANGUAGE sql VOLATILE AS $$SELECT nextval('sa_app.sa_seq')$$")
			changed <- err
		}()
		time.Sleep(300 * time.Millisecond)
		// While the change waits, the other session's statement has the catalogue read.
		aheadMust(t, other, "SELECT "+f+"()")
		if _, err := locker.Exec(ctx, "ROLLBACK"); err != nil {
			t.Fatal(err)
		}
		locker.Close(ctx)
		if err := <-changed; err != nil {
			t.Fatalf("the change: %v", err)
		}
		other.routes(t)
		time.Sleep(100 * time.Millisecond) // the changer stays idle
		runOnPrimary(t, other, "SELECT "+f+"()")
	}
}

// In read_your_writes user scope, a catalogue change's write position is announced before the
// client has its answer, although the change's catalogue read is read on the writer's connection:
// another connection of the user reads the new view on a node that has it (replay is paused on the
// standbys, so the primary), not on a standby that would answer that it does not exist.
func TestReadYourWritesUserScopeAfterACatalogueChange(t *testing.T) {
	c, o := setupAndStart(t, "user scope after a change", aheadSetupSQL, func(cfg *config.Config) {
		cfg.Classify.RefreshInterval = 10 * time.Minute
		cfg.Routing.ReadYourWrites = config.ReadYourWritesUser
		cfg.Routing.ReadYourWritesWait = 100 * time.Millisecond
	})
	writer := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
	reader := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
	aheadMust(t, writer, "SELECT sa_app.sa_probe()")
	ctx := timeoutCtx(t, statementTimeout)
	pauseStandbyReplay(t, ctx, c.Nodes[1:])
	for round := 0; round < 3; round++ {
		view := fmt.Sprintf("sa_app.sa_ryw_v_%d", round)
		aheadMust(t, writer, "CREATE VIEW "+view+" AS SELECT 1 AS n")
		reader.routes(t)
		var n int
		if err := reader.QueryRow(ctx, "SELECT n FROM "+view).Scan(&n); err != nil || n != 1 {
			t.Errorf("the user's other connection reads %s right after its creation: %d, %v (routes %v)", view, n, err, reader.routes(t))
		}
	}
}
