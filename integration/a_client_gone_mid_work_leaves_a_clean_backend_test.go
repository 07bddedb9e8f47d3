package integration

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// stateLeakNodeLeftovers asks the primary directly what the app user's backends hold: advisory
// locks, open transactions and a role other than the login's.
func stateLeakNodeLeftovers(t *testing.T) (locks, inTx, roles int64) {
	t.Helper()
	c := sharedClusterFor(t)
	locks = primaryInt(t, c, `SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE l.locktype = 'advisory' AND a.usename = '`+appUser+`' AND l.objid BETWEEN 7540 AND 7549`)
	inTx = primaryInt(t, c, `SELECT count(*) FROM pg_stat_activity WHERE usename = '`+appUser+`'
		AND state LIKE 'idle in transaction%' AND query NOT LIKE '%review_state_direct%'`)
	return locks, inTx, 0
}

// TestSessionStateAbruptEnd: a client whose socket closes without Terminate, in a transaction, in
// a pipeline left open without Sync, or while pinned. The backend must come back clean for the
// next client (or be closed), and nothing the client held may remain on the node.
func TestSessionStateAbruptEnd(t *testing.T) {
	stateLeakSetup(t)
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, ctx context.Context, a *pgconn.PgConn)
	}{
		{"PinnedInTransaction", func(t *testing.T, ctx context.Context, a *pgconn.PgConn) {
			r3pExecAll(t, ctx, a, "SET ROLE review_state_role", "SELECT pg_advisory_lock(7540)", "BEGIN",
				"SELECT pg_advisory_xact_lock(7541)", "SET LOCAL review_state.tenant = 'in-tx'")
		}},
		{"FailedTransaction", func(t *testing.T, ctx context.Context, a *pgconn.PgConn) {
			r3pExecAll(t, ctx, a, "BEGIN", "SELECT pg_advisory_xact_lock(7542)", "SET review_state.tenant = 'in-failed-tx'")
			a.Exec(ctx, "SELECT 1/0").ReadAll()
		}},
		{"PipelineWithoutSync", func(t *testing.T, ctx context.Context, a *pgconn.PgConn) {
			sendUnsyncedUntilComplete(t, ctx, a, "SELECT pg_advisory_xact_lock(7543), set_config('review_state.tenant', 'in-pipeline', false)")
		}},
		{"PipelineWithoutSyncInTransaction", func(t *testing.T, ctx context.Context, a *pgconn.PgConn) {
			r3pExecAll(t, ctx, a, "BEGIN", "SELECT pg_advisory_lock(7544)")
			sendUnsyncedUntilComplete(t, ctx, a, "SELECT set_config('role', 'review_state_role', false)")
		}},
		{"ListenAndTempThenCopy", func(t *testing.T, ctx context.Context, a *pgconn.PgConn) {
			r3pExecAll(t, ctx, a, "LISTEN review_state_gone", "CREATE TEMP TABLE review_state_gone_t (id int)")
			fe := a.Frontend()
			fe.Send(&pgproto3.Query{String: "COPY review_state_gone_t FROM STDIN"})
			if err := fe.Flush(); err != nil {
				t.Fatal(err)
			}
			for {
				msg, err := a.ReceiveMessage(ctx)
				if err != nil {
					t.Fatalf("copy: %v", err)
				}
				if _, ok := msg.(*pgproto3.CopyInResponse); ok {
					break
				}
			}
			fe.Send(&pgproto3.CopyData{Data: []byte("1\n")})
			fe.Flush()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := rvStartOneBackend(t, nil)
			ctx := timeoutCtx(t, statementTimeout)
			a := o.connect(t, nil).PgConn()
			tc.run(t, ctx, a)
			a.Conn().Close() // no Terminate: the socket just closes
			b := o.connect(t, nil).PgConn()
			deadline := time.Now().Add(5 * time.Second)
			for {
				bctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				got, err := rvQueryOne(bctx, b, stateLeakProbe)
				cancel()
				if rvSQLState(err) == "53300" && time.Now().Before(deadline) {
					continue // A's session is still being ended
				}
				if err != nil {
					t.Fatalf("B after A's socket closed: %v (SQLSTATE %s)", err, rvSQLState(err))
				}
				if got != stateLeakClean {
					t.Errorf("B after A's socket closed got a backend carrying A's state:\n got  %s\n want %s", got, stateLeakClean)
				}
				break
			}
			var locks, inTx int64
			for i := 0; i < 30; i++ {
				if locks, inTx, _ = stateLeakNodeLeftovers(t); locks == 0 && inTx == 0 {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if locks != 0 || inTx != 0 {
				t.Errorf("on the primary after A's socket closed: %d advisory locks of A, %d app backends idle in transaction; want none", locks, inTx)
			}
		})
	}
}

// sendUnsyncedUntilComplete runs query as an extended-protocol pipeline part that a Flush ends,
// without Sync, and reads until its CommandComplete: the backend is left in the pipeline's
// implicit transaction (or the client's block).
func sendUnsyncedUntilComplete(t *testing.T, ctx context.Context, a *pgconn.PgConn, query string) {
	t.Helper()
	fe := a.Frontend()
	fe.Send(&pgproto3.Parse{Query: query})
	fe.Send(&pgproto3.Bind{})
	fe.Send(&pgproto3.Execute{})
	fe.Send(&pgproto3.Flush{})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	for {
		msg, err := a.ReceiveMessage(ctx)
		if err != nil {
			t.Fatalf("pipeline: %v", err)
		}
		if _, ok := msg.(*pgproto3.CommandComplete); ok {
			return
		}
		if e, ok := msg.(*pgproto3.ErrorResponse); ok {
			t.Fatalf("pipeline: %s", e.Message)
		}
	}
}
