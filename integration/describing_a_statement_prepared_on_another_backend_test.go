package integration

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// TestDescribingAStatementPreparedOnAnotherBackend prepares a named statement in one batch
// (Parse, Sync: libpq's PQprepare) and describes it in later batches (Describe statement, Sync:
// libpq's PQdescribePrepared). In transaction pooling each batch takes whatever backend is free,
// on any node, so a later Describe lands on a backend that lacks the statement and pgowl prepares
// it there first. A direct connection answers every Describe with ParameterDescription,
// RowDescription and ReadyForQuery, and so must pgowl.
func TestDescribingAStatementPreparedOnAnotherBackend(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, readYourWritesOff)
	conn := o.connect(t, nil)
	// Another client holds a backend on each node in a transaction, so that the batches below
	// cannot all find the first one free.
	pc := conn.PgConn()
	xpSend(t, pc, &pgproto3.Parse{Name: "xds", Query: "SELECT $1::int AS a"}, &pgproto3.Sync{})
	if rs, timedOut := xpReceive(t, pc, 1, 10*time.Second); timedOut || !hasType(rs, '1', "") {
		t.Fatalf("Parse: replies %s", describeReplies(rs))
	}
	others := []*client{}
	for i := 0; i < 6; i++ {
		xpSend(t, pc, &pgproto3.Describe{ObjectType: 'S', Name: "xds"}, &pgproto3.Sync{})
		rs, timedOut := xpReceive(t, pc, 1, 10*time.Second)
		got, msg := "", ""
		for _, r := range rs {
			if r.typ == 'N' {
				continue
			}
			got += r.String() + " "
			if r.typ == 'E' {
				msg = r.msg
			}
		}
		if timedOut || got != "t T Z(I) " {
			t.Fatalf("Describe of the prepared statement xds, round %d: the client got %q (timed out: %v; error %q), want ParameterDescription, RowDescription, ReadyForQuery (\"t T Z(I) \") as on a direct connection", i+1, got, timedOut, msg)
		}
		// Hold the backend just used, so that the next Describe goes to another one.
		other := o.connect(t, nil)
		for _, sql := range []string{"BEGIN READ ONLY", "SELECT 1"} {
			if _, err := other.Exec(timeoutCtx(t, statementTimeout), sql); err != nil {
				t.Fatal(err)
			}
		}
		others = append(others, other)

	}
}
