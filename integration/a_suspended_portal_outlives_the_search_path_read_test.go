package integration

import (
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

// TestASuspendedPortalOutlivesTheSearchPathRead: inside a block, after a statement that moves
// search_path where its text does not say, pgowl asks the node for the path with a simple Query
// (SHOW search_path), which destroys the connection's unnamed portal. A portal the client left
// suspended (an Execute with a row limit) must still be there for its next Execute, as on a
// direct connection: the read waits until the transaction ends.
func TestASuspendedPortalOutlivesTheSearchPathRead(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, readYourWritesOff)
	conn := o.connect(t, nil)
	ctx := timeoutCtx(t, statementTimeout)
	if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	rawSend(t, conn,
		&pgproto3.Parse{Query: "SELECT g FROM generate_series(1, 5) g"},
		&pgproto3.Bind{},
		&pgproto3.Execute{MaxRows: 2},
		&pgproto3.Sync{})
	replies := rawReceive(t, conn, untilReady(1))
	if got := describeReplies(replies); countType(replies, 'D') != 2 || countType(replies, 's') != 1 {
		t.Fatalf("the first two rows of the unnamed portal: replies %s, want 2 rows and PortalSuspended", got)
	}
	// A statement of another portal that moves the path in a way pgowl reads from the node.
	rawSend(t, conn,
		&pgproto3.Parse{Name: "path_stmt", Query: "SELECT set_config('search_path', 'pg_temp, ' || 'public', true)"},
		&pgproto3.Bind{DestinationPortal: "path_portal", PreparedStatement: "path_stmt"},
		&pgproto3.Execute{Portal: "path_portal"},
		&pgproto3.Sync{})
	if replies := rawReceive(t, conn, untilReady(1)); countType(replies, 'E') != 0 {
		t.Fatalf("set_config: replies %s", describeReplies(replies))
	}
	rawSend(t, conn, &pgproto3.Execute{}, &pgproto3.Sync{})
	replies = rawReceive(t, conn, untilReady(1))
	if countType(replies, 'E') != 0 || countType(replies, 'D') != 3 {
		t.Errorf("the rest of the suspended portal: replies %s, want its 3 remaining rows (a direct connection gives them)", describeReplies(replies))
	}
	if _, err := conn.Exec(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
}

// countType counts the replies of message type typ.
func countType(replies []rawReply, typ byte) int {
	n := 0
	for _, r := range replies {
		if r.typ == typ {
			n++
		}
	}
	return n
}
