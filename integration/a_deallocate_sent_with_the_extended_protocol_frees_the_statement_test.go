package integration

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgowl/pgowl/integration/owltest"
)

// TestADeallocateSentWithTheExtendedProtocolFreesTheStatement: a client prepares a named
// statement (Parse) and later frees it with the SQL command DEALLOCATE sent in the extended
// protocol (Parse, Bind, Execute, Sync with no parameters), as psycopg 3 does when its prepared
// statement cache evicts one (_exec_command uses PQsendQueryParams). On a direct connection the
// DEALLOCATE succeeds and the name is free. pgowl answered a DEALLOCATE of a client's statement
// itself only when it came as a lone simple Query; sent otherwise it reached the node, which
// knows the statement under pgowl's managed name only, and failed with 26000. Inside a
// multi-statement string it still does: a known gap (README, Limits).
func TestADeallocateSentWithTheExtendedProtocolFreesTheStatement(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, readYourWritesOff)
	for _, tc := range []struct {
		name string
		free []pgproto3.FrontendMessage
	}{
		{"extended", []pgproto3.FrontendMessage{&pgproto3.Parse{Query: "DEALLOCATE xp_evicted"}, &pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Sync{}}},
		{"multi_statement_string", []pgproto3.FrontendMessage{&pgproto3.Query{String: "DEALLOCATE xp_evicted; SELECT 1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := o.connect(t, nil)
			pc := conn.PgConn()
			xpSend(t, pc, &pgproto3.Parse{Name: "xp_evicted", Query: "SELECT 1"}, &pgproto3.Sync{})
			if rs, timedOut := xpReceive(t, pc, 1, 10*time.Second); timedOut || hasType(rs, 'E', "") {
				t.Fatalf("Parse: %s", describeReplies(rs))
			}
			xpSend(t, pc, tc.free...)
			rs, timedOut := xpReceive(t, pc, 1, 10*time.Second)
			if timedOut || hasType(rs, 'E', "") || !hasType(rs, 'C', "DEALLOCATE") {
				msg := ""
				for _, r := range rs {
					if r.typ == 'E' {
						msg = r.code + " " + r.msg
					}
				}
				failure := "DEALLOCATE xp_evicted of the client's own prepared statement: the client got " + describeReplies(rs) + " (error " + msg + "); a direct connection answers CommandComplete DEALLOCATE"
				if tc.name == "multi_statement_string" {
					owltest.KnownGap(t, true, failure)
					return
				}
				t.Error(failure)
			} else if tc.name == "multi_statement_string" {
				owltest.KnownGap(t, false, "a DEALLOCATE of a protocol-level statement in a multi-statement string fails with 26000")
			}
			// The name is free again on a direct connection: a Bind of it fails with 26000.
			xpSend(t, pc, &pgproto3.Bind{PreparedStatement: "xp_evicted"}, &pgproto3.Execute{}, &pgproto3.Sync{})
			rs, _ = xpReceive(t, pc, 1, 10*time.Second)
			if !hasType(rs, 'E', "26000") {
				t.Errorf("after DEALLOCATE xp_evicted, a Bind of it got %s; a direct connection says 26000 (it no longer exists)", describeReplies(rs))
			}
		})
	}
}
