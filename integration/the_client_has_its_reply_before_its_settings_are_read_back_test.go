package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/internal/cluster"
	"github.com/pgowl/pgowl/route"
)

// TestTheClientHasItsReplyBeforeItsSettingsAreReadBack: after a statement that may have changed
// the session's settings unseen (here a function that runs dynamic SQL, as an audit trigger
// built on EXECUTE format does), pgowl reads the session's settings back from its backend. In
// session scope the client has its reply, ReadyForQuery included, before that read runs: the
// read-back is held on the node (another connection holds pg_settings locked), and the
// statement returns all the same. Its next statement waits for the read-back, and the session
// carries what was read. So it is in user scope, where another session of the user may read once
// the client has its reply: the write position is announced before the reply and read after the
// read-back, and that session's read, which waits routing.read_your_writes_wait for it, then
// counts it as unread (past the first write, never the first write's position).
func TestTheClientHasItsReplyBeforeItsSettingsAreReadBack(t *testing.T) {
	c := sharedClusterFor(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	createDynamicAuditFunction(t, ctx, c)
	catchUp(t, c)
	for _, scope := range []string{config.ReadYourWritesSession, config.ReadYourWritesUser} {
		t.Run(scope, func(t *testing.T) {
			o := startOwl(t, c, func(cfg *config.Config) { cfg.Routing.ReadYourWrites = scope })
			s := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
			readBacks := readBacksOf(o)
			// The catalogue is read and the backend warm, read-back included.
			first, firstPosition := firstDynamicWrite(t, ctx, s, readBacks)

			unlock := lockPgSettings(t, ctx, c)
			defer unlock()

			done := make(chan error, 1)
			go func() {
				_, err := s.Exec(ctx, "SELECT public.rbf_dynamic(1)")
				done <- err
			}()
			returned := false
			select {
			case err := <-done:
				returned = true
				if err != nil {
					t.Fatalf("the statement: %v", err)
				}
				if got := readBacks(); got != 1 {
					t.Errorf("the read-back ran although pg_settings was locked (%d read-backs)", got)
				}
				if scope == config.ReadYourWritesUser {
					// Another session of the user gets a position past the first write's at once:
					// the second's is announced, and still being read after the follow-up, which
					// waits, so it counts as unread (a sample of the primary after it, or the unread
					// position), never the first's.
					other := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
					otherCtx, cancelOther := context.WithTimeout(ctx, 2*time.Second)
					var pos string
					err := other.QueryRow(otherCtx, "SHOW pgowl.write_position").Scan(&pos)
					cancelOther()
					if at, perr := route.ParseLSN(pos); err != nil || perr != nil || at <= firstPosition {
						t.Errorf("another session of the user, while the read-back waits: write position %q (%v), the first statement's %s; want the second's, past it, at once", pos, err, first)
					}
				}
			case <-time.After(3 * time.Second):
				t.Errorf("the client had no reply within 3 s while its settings' read-back waited on the node: it waits for pgowl's follow-up")
			}
			unlock()
			if !returned {
				if err := <-done; err != nil {
					t.Fatalf("the statement, once unlocked: %v", err)
				}
			}
			waitUntilTrue(t, 10*time.Second, "the second read-back", func() bool { return readBacks() == 2 })
			var one int
			if err := s.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
				t.Fatalf("the next statement: %v", err)
			}
		})
	}
}

// createDynamicAuditFunction creates public.rbf_dynamic(n), which inserts n into
// public.rbf_audit through dynamic SQL (EXECUTE format), as audit triggers do: after it pgowl
// reads the session's settings back.
func createDynamicAuditFunction(t *testing.T, ctx context.Context, c *cluster.Cluster) {
	t.Helper()
	if err := c.Nodes[0].Exec(ctx, `
CREATE TABLE IF NOT EXISTS public.rbf_audit (n int);
GRANT INSERT ON public.rbf_audit TO `+appUser+`;
CREATE OR REPLACE FUNCTION public.rbf_dynamic(n int) RETURNS int LANGUAGE plpgsql VOLATILE
  AS $$BEGIN EXECUTE format('INSERT INTO public.rbf_audit VALUES (%s)', n); RETURN n; END$$;
GRANT EXECUTE ON FUNCTION public.rbf_dynamic(int) TO `+appUser); err != nil {
		t.Fatalf("setup: %v", err)
	}
}

// lockPgSettings holds pg_settings locked on c's primary, so that a settings read-back waits
// there, until the returned unlock (called again, it does nothing; the test's end calls it).
func lockPgSettings(t *testing.T, ctx context.Context, c *cluster.Cluster) (unlock func()) {
	t.Helper()
	locker, err := pgx.Connect(ctx, c.Nodes[0].DatabaseDSN(appDatabase))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { locker.Close(context.Background()) })
	if _, err := locker.Exec(ctx, "BEGIN; LOCK TABLE pg_catalog.pg_settings IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	unlocked := false
	unlock = func() {
		if !unlocked {
			unlocked = true
			if _, err := locker.Exec(context.Background(), "COMMIT"); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(unlock)
	return unlock
}

// readBacksOf counts the settings read-backs o logged.
func readBacksOf(o *owl) func() int {
	return func() int { return strings.Count(o.logs.String(), "pgowl read the session's settings back") }
}

// firstDynamicWrite runs public.rbf_dynamic(1) through s, waits for the read-back after it
// (readBacks), and returns the session's write position then.
func firstDynamicWrite(t *testing.T, ctx context.Context, s *client, readBacks func() int) (string, route.LSN) {
	t.Helper()
	if _, err := s.Exec(ctx, "SELECT public.rbf_dynamic(1)"); err != nil {
		t.Fatal(err)
	}
	waitUntilTrue(t, 10*time.Second, "the first read-back", func() bool { return readBacks() == 1 })
	var first string
	if err := s.QueryRow(ctx, "SHOW pgowl.write_position").Scan(&first); err != nil {
		t.Fatal(err)
	}
	position, err := route.ParseLSN(first)
	if err != nil {
		t.Fatalf("SHOW pgowl.write_position %q: %v", first, err)
	}
	return first, position
}

// terminateReadBackWaitingForLock ends the backend of the session named app on c's primary
// while its settings read-back waits there for a lock (lockPgSettings).
func terminateReadBackWaitingForLock(t *testing.T, ctx context.Context, c *cluster.Cluster, app string) {
	t.Helper()
	var pid int32
	waitUntilTrue(t, 10*time.Second, "the read-back waiting for pg_settings", func() bool {
		err := c.Nodes[0].QueryRow(ctx, "SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'", app).Scan(&pid)
		return err == nil
	})
	if err := c.Nodes[0].Exec(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
}

// waitUntilTrue checks done every 20 ms until it holds, and fails t once timeout has passed.
func waitUntilTrue(t *testing.T, timeout time.Duration, what string, done func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !done(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", timeout, what)
		}
	}
}
