package integration

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/integration/owltest"
)

// TestAnotherSessionsChangeReadOnAStandbyBehindIt reports a known gap next to what 1407429 fixed
// for a session's own changes. Session A replaces oa_app.oa_other_change(), a function that
// writes, by one that reads, while replay is paused on the standbys (their lag stays within
// max_replica_lag). pgowl takes A's change in at once, for every session. Session B, which has
// written nothing, then calls the function: pgowl classifies the call as a read against its
// catalogue, which already holds the new body, and sends it to a standby. That standby has not
// replayed the replace, so it runs the old body, which writes, and B gets 25006. Nothing is
// written in the wrong place. The gap closes when a read whose verdict rests on a catalogue
// change waits for that change's replay, as a session's own reads now do.
func TestAnotherSessionsChangeReadOnAStandbyBehindIt(t *testing.T) {
	c, o := setupAndStart(t, "another session's change", oaSetupSQL, nil)
	const f = "oa_app.oa_other_change"
	a := oaConnect(t, o, pgx.QueryExecModeSimpleProtocol)
	b := oaConnect(t, o, pgx.QueryExecModeSimpleProtocol)
	oaMust(t, a, oaSQLWriter(f, "other-session"))
	catchUp(t, c)
	ctx := timeoutCtx(t, statementTimeout)
	resume := pauseStandbyReplay(t, ctx, c.Nodes[1:])
	defer catchUp(t, c)
	defer resume()
	oaMust(t, a, oaSQLReader(f, 1))
	routes, err := runAndRoutes(t, b, "SELECT "+f+"()")
	t.Logf("B's SELECT %s() right after A's replace by a reader: routes %v, err %v", f, routes, err)
	if err != nil && rvSQLState(err) != "25006" {
		t.Fatalf("B's SELECT %s(): %v, neither a success nor the gap's 25006", f, err)
	}
	owltest.KnownGap(t, rvSQLState(err) == "25006",
		"a read classified with another session's catalogue change goes to a standby that has not replayed it: "+
			"a function replaced there by one that reads still writes on that standby, which refuses it (25006)")
}
