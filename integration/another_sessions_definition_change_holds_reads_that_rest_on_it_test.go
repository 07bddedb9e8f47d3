package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/integration/owltest"
)

// TestAnotherSessionsDefinitionChangeHoldsReadsThatRestOnIt: session A replaces
// oa_app.oa_other_change(), a function that writes, by one that reads, while replay is paused on
// the standbys (their lag stays within max_replica_lag). pgowl takes A's change in at once, for
// every session, so session B, which has written nothing, plans its call of the function as a
// read. No standby has replayed the replace: there the old body would run and write, and B would
// get 25006. The call must wait for a standby to replay the change and, when none does within
// routing.read_your_writes_wait, run on the primary with READ_YOUR_WRITES, the NOTICE naming the
// change. So must B's call of a function A creates then, in a transaction block, which no standby
// has (42883 there). B's reads that rest on nothing A changed still go to a standby, and once the standbys
// replay the change the call goes to one too. Nothing is written. Each query protocol runs it.
func TestAnotherSessionsDefinitionChangeHoldsReadsThatRestOnIt(t *testing.T) {
	c, o := setupAndStart(t, "another session's change", oaSetupSQL, nil)
	for _, mode := range oaModes {
		t.Run(mode.name, func(t *testing.T) {
			f := "oa_app.oa_other_change_" + mode.name
			a := oaConnect(t, o, mode.mode)
			b := oaConnect(t, o, mode.mode)
			oaMust(t, a, oaSQLWriter(f, "other-session"))
			catchUp(t, c)
			ctx := timeoutCtx(t, statementTimeout)
			written := func() int64 {
				var n int64
				if err := c.Nodes[0].QueryRow(ctx, "SELECT count(*) FROM oa_app.oa_log WHERE tag = 'other-session'").Scan(&n); err != nil {
					t.Fatalf("count the rows the writer leaves: %v", err)
				}
				return n
			}
			before := written()
			resume := pauseStandbyReplay(t, ctx, c.Nodes[1:])
			defer catchUp(t, c)
			defer resume()
			oaMust(t, a, oaSQLReader(f, 1))

			routes, err := runAndRoutes(t, b, "SELECT "+f+"()")
			if err != nil {
				t.Fatalf("B's SELECT %s() right after A's replace by a reader, replay paused: %v (routes %v); "+
					"a standby behind the change ran the old body", f, err, routes)
			}
			if len(routes) != 1 || routes[0].Role != "primary" || routes[0].Reason != "READ_YOUR_WRITES" {
				t.Fatalf("B's SELECT %s() with no standby past A's change: routes %v; want the primary, READ_YOUR_WRITES", f, routes)
			}
			name := f[strings.LastIndex(f, ".")+1:]
			if msg := routes[0].Raw.Message + " " + routes[0].Raw.Detail; !strings.Contains(msg, "the change of "+name) {
				t.Errorf("B's READ_YOUR_WRITES NOTICE %q does not name the change of %s", msg, name)
			}

			// A function A creates inside a transaction block, which no standby has yet: B's call
			// would fail there with 42883.
			created := f + "_new"
			oaMust(t, a, "BEGIN")
			oaMust(t, a, oaSQLReader(created, 2))
			oaMust(t, a, "COMMIT")
			routes, err = runAndRoutes(t, b, "SELECT "+created+"()")
			if err != nil || len(routes) != 1 || routes[0].Role != "primary" || routes[0].Reason != "READ_YOUR_WRITES" {
				t.Errorf("B's SELECT %s() right after A created it, replay paused: routes %v, err %v; want the primary, READ_YOUR_WRITES", created, routes, err)
			}

			routes, err = runAndRoutes(t, b, "SELECT count(*) FROM oa_app.oa_log")
			if err != nil || len(routes) != 1 || routes[0].Role != "standby" {
				t.Errorf("B's read of a table A did not change, replay paused: routes %v, err %v; want a standby", routes, err)
			}

			resume()
			catchUp(t, c)
			// Once the standbys replay the change the call goes to one, at the latest once the
			// monitor samples them past it (a position read for a change the catalogue found since
			// may be a little later than what catchUp waited for).
			deadline := time.Now().Add(3 * time.Second)
			for {
				routes, err = runAndRoutes(t, b, "SELECT "+f+"()")
				if err == nil && len(routes) == 1 && routes[0].Role == "standby" {
					break
				}
				if err != nil || len(routes) != 1 || routes[0].Reason != "READ_YOUR_WRITES" || time.Now().After(deadline) {
					t.Errorf("B's SELECT %s() once the standbys replayed the change: routes %v, err %v; want a standby", f, routes, err)
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if after := written(); after != before {
				t.Errorf("the writer's rows went from %d to %d: a call ran a body that writes", before, after)
			}
		})
	}
}

// TestDefinitionChangedPastPgowlHoldsReadsOnceTheCatalogueFindsIt: a function created on the
// primary itself, not through pgowl, while replay is paused on the standbys. The session's first
// call names a function its catalogue does not hold, so the catalogue reads that name, finds the
// function and remembers it as a change no standby may have yet: the call runs on the primary
// (READ_YOUR_WRITES) instead of failing on a standby with 42883.
//
// A function replaced on the primary itself, from one that reads to one that writes, is found by
// the catalogue's poll of its change markers (classify.change_poll_interval): a second pgowl that
// polls every 100 ms plans the call as the writer within 3 s, on the primary. The known gap next
// to it is the poll's window: until the poll, a standby that replayed the replace runs the writer
// while pgowl still plans the call as a read, and the call fails there with 25006, nothing
// written. The first pgowl polls once an hour, so that the window is seen in every run.
func TestDefinitionChangedPastPgowlHoldsReadsOnceTheCatalogueFindsIt(t *testing.T) {
	c, o := setupAndStart(t, "a change past pgowl", oaSetupSQL, func(cfg *config.Config) {
		cfg.Classify.RefreshInterval, cfg.Classify.ChangePollInterval = 10*time.Minute, time.Hour
	})
	polled := startOwl(t, c, func(cfg *config.Config) {
		cfg.Classify.RefreshInterval, cfg.Classify.ChangePollInterval = 10*time.Minute, 100*time.Millisecond
	})
	ctx := timeoutCtx(t, statementTimeout)
	const created, replaced = "oa_app.oa_past_created", "oa_app.oa_past_replaced"
	for _, sql := range []string{"DROP FUNCTION IF EXISTS " + created + "()", oaSQLReader(replaced, 1), "ALTER FUNCTION " + replaced + "() OWNER TO app"} {
		if err := c.Nodes[0].Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	catchUp(t, c)
	b := oaConnect(t, o, pgx.QueryExecModeSimpleProtocol) // the catalogue is read here, with replaced in it
	bPolled := oaConnect(t, polled, pgx.QueryExecModeSimpleProtocol)
	for _, conn := range []*client{b, bPolled} {
		if routes, err := runAndRoutes(t, conn, "SELECT "+replaced+"()"); err != nil || len(routes) != 1 || routes[0].Role != "standby" {
			t.Fatalf("the reader %s() before any change: routes %v, err %v; want a standby", replaced, routes, err)
		}
	}

	resume := pauseStandbyReplay(t, ctx, c.Nodes[1:])
	defer catchUp(t, c)
	defer resume()
	if err := c.Nodes[0].Exec(ctx, oaSQLReader(created, 3)); err != nil {
		t.Fatalf("create %s on the primary: %v", created, err)
	}
	routes, err := runAndRoutes(t, b, "SELECT "+created+"()")
	if err != nil || len(routes) != 1 || routes[0].Role != "primary" || routes[0].Reason != "READ_YOUR_WRITES" {
		t.Errorf("SELECT %s() right after it was created on the primary, replay paused: routes %v, err %v; want the primary, READ_YOUR_WRITES", created, routes, err)
	}
	resume()
	catchUp(t, c)

	if err := c.Nodes[0].Exec(ctx, oaSQLWriter(replaced, "past-pgowl")); err != nil {
		t.Fatalf("replace %s on the primary by a writer: %v", replaced, err)
	}
	catchUp(t, c)
	routes, err = runAndRoutes(t, b, "SELECT "+replaced+"()")
	t.Logf("SELECT %s() after it was replaced on the primary by a writer and replayed: routes %v, err %v", replaced, routes, err)
	if err != nil && rvSQLState(err) != "25006" {
		t.Fatalf("SELECT %s(): %v, neither a success nor the gap's 25006", replaced, err)
	}
	owltest.KnownGap(t, rvSQLState(err) == "25006",
		"a function replaced on the primary itself, past pgowl, by one that writes is planned with its old body until the catalogue's "+
			"next poll of its change markers (classify.change_poll_interval): a standby that replayed the replace refuses the call (25006)")

	// The pgowl that polls every 100 ms plans the call as the writer once its poll has found the
	// replace: on the primary, where it writes.
	var last []routeNotice
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		routes, err := runAndRoutes(t, bPolled, "SELECT "+replaced+"()")
		if err != nil && rvSQLState(err) != "25006" {
			t.Fatalf("SELECT %s() through the polling pgowl: %v, neither a success nor the window's 25006", replaced, err)
		}
		if err == nil && len(routes) == 1 && routes[0].Role == "primary" {
			break
		}
		last = routes
		if time.Now().After(deadline) {
			t.Fatalf("SELECT %s() through the pgowl that polls every 100 ms, 3 s after the replace: routes %v, err %v; want the primary",
				replaced, last, err)
		}
	}
}
