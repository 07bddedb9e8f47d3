package integration

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// TestACloseInABatchOfPgowlCommandsForgetsTheStatement: pgowl answers an extended-protocol batch
// of its own commands (SHOW pgowl.*) itself. A Close of a statement in such a batch was answered
// CloseComplete but the statement stayed, so a later Bind of the name ran the command again where
// PostgreSQL answers 26000: the statement no longer exists.
func TestACloseInABatchOfPgowlCommandsForgetsTheStatement(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, readYourWritesOff)
	conn := o.connect(t, nil)
	pc := conn.PgConn()
	xpSend(t, pc, &pgproto3.Parse{Name: "xp_nodes", Query: "SHOW pgowl.nodes"}, &pgproto3.Bind{PreparedStatement: "xp_nodes"},
		&pgproto3.Execute{}, &pgproto3.Close{ObjectType: 'S', Name: "xp_nodes"}, &pgproto3.Sync{})
	rs, timedOut := xpReceive(t, pc, 1, 10*time.Second)
	if timedOut || hasType(rs, 'E', "") || !hasType(rs, '3', "") {
		t.Fatalf("SHOW pgowl.nodes then Close of its statement: %s", describeReplies(rs))
	}
	xpSend(t, pc, &pgproto3.Bind{PreparedStatement: "xp_nodes"}, &pgproto3.Execute{}, &pgproto3.Sync{})
	rs, _ = xpReceive(t, pc, 1, 10*time.Second)
	if !hasType(rs, 'E', "26000") {
		t.Errorf("after Close of statement xp_nodes, a Bind of it got %s; PostgreSQL says 26000 (it no longer exists)", describeReplies(rs))
	}
}
