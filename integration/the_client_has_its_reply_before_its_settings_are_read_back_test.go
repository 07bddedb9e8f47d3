package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
)

// TestTheClientHasItsReplyBeforeItsSettingsAreReadBack: after a statement that may have changed
// the session's settings unseen (here a function that runs dynamic SQL, as an audit trigger
// built on EXECUTE format does), pgowl reads the session's settings back from its backend. In
// session scope the client has its reply, ReadyForQuery included, before that read runs: the
// read-back is held on the node (another connection holds pg_settings locked), and the
// statement returns all the same. Its next statement waits for the read-back, and the session
// carries what was read. In user scope the reply waits, as another session of the user may read
// once the client has it (the write position is announced first).
func TestTheClientHasItsReplyBeforeItsSettingsAreReadBack(t *testing.T) {
	c := sharedClusterFor(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := c.Nodes[0].Exec(ctx, `
CREATE OR REPLACE FUNCTION public.rbf_dynamic(n int) RETURNS int LANGUAGE plpgsql VOLATILE
  AS $$BEGIN EXECUTE format('SELECT %s', n); RETURN n; END$$;
GRANT EXECUTE ON FUNCTION public.rbf_dynamic(int) TO `+appUser); err != nil {
		t.Fatalf("setup: %v", err)
	}
	catchUp(t, c)
	for _, tc := range []struct {
		scope      string
		replyFirst bool
	}{
		{config.ReadYourWritesSession, true},
		{config.ReadYourWritesUser, false},
	} {
		t.Run(tc.scope, func(t *testing.T) {
			o := startOwl(t, c, func(cfg *config.Config) { cfg.Routing.ReadYourWrites = tc.scope })
			s := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
			readBacks := func() int { return strings.Count(o.logs.String(), "pgowl read the session's settings back") }
			// The catalogue is read and the backend warm, read-back included.
			if _, err := s.Exec(ctx, "SELECT public.rbf_dynamic(1)"); err != nil {
				t.Fatal(err)
			}
			waitUntilTrue(t, 10*time.Second, "the first read-back", func() bool { return readBacks() == 1 })

			locker, err := pgx.Connect(ctx, c.Nodes[0].DatabaseDSN(appDatabase))
			if err != nil {
				t.Fatal(err)
			}
			defer locker.Close(context.Background())
			if _, err := locker.Exec(ctx, "BEGIN; LOCK TABLE pg_catalog.pg_settings IN ACCESS EXCLUSIVE MODE"); err != nil {
				t.Fatal(err)
			}
			unlocked := false
			unlock := func() {
				if !unlocked {
					unlocked = true
					if _, err := locker.Exec(ctx, "COMMIT"); err != nil {
						t.Fatal(err)
					}
				}
			}
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
				if !tc.replyFirst {
					t.Errorf("the client had its reply while the read-back waited for the lock; in user scope the write position must be announced first")
				}
				if got := readBacks(); got != 1 {
					t.Errorf("the read-back ran although pg_settings was locked (%d read-backs)", got)
				}
			case <-time.After(3 * time.Second):
				if tc.replyFirst {
					t.Errorf("the client had no reply within 3 s while its settings' read-back waited on the node: it waits for pgowl's follow-up")
				}
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

// waitUntilTrue checks done every 20 ms until it holds, and fails t once timeout has passed.
func waitUntilTrue(t *testing.T, timeout time.Duration, what string, done func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !done(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", timeout, what)
		}
	}
}
