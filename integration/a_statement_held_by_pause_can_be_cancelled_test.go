package integration

import (
	"testing"
	"time"

	"github.com/pgowl/pgowl/config"
)

// TestAStatementHeldByPauseCanBeCancelled: a client whose statement PAUSE holds may cancel it, as
// it may cancel one waiting on its node for a lock: the statement ends with 57014 at once and
// does not run when pgowl resumes. Before, the cancel request found nothing running and was
// dropped, and after RESUME the INSERT the client had cancelled ran.
func TestAStatementHeldByPauseCanBeCancelled(t *testing.T) {
	c := sharedClusterFor(t)
	createTable(t, c, "t_held_cancel", "CREATE TABLE t_held_cancel (id int)")
	o := startOwl(t, c, func(cfg *config.Config) { cfg.Admin.Users = []string{appUser} })
	conn := o.connect(t, nil)
	ctx := timeoutCtx(t, time.Minute)
	console := o.console(t)
	if _, err := console.Exec(ctx, "PAUSE"); err != nil {
		t.Fatalf("PAUSE: %v", err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if _, err := console.Exec(ctx, "RESUME"); err != nil {
				t.Errorf("RESUME: %v", err)
			}
		}
	}
	defer resume()
	ended := make(chan error, 1)
	go func() { _, err := conn.Exec(ctx, "INSERT INTO t_held_cancel VALUES (1)"); ended <- err }()
	select {
	case err := <-ended:
		t.Fatalf("the INSERT ran while paused: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	sent := time.Now()
	if err := conn.PgConn().CancelRequest(ctx); err != nil {
		t.Fatalf("send the cancel request: %v", err)
	}
	select {
	case err := <-ended:
		wantSQLState(t, "the INSERT held by PAUSE, cancelled", err, "57014")
		t.Logf("the held INSERT ended %s after its cancel request: %v", time.Since(sent).Round(time.Millisecond), err)
	case <-time.After(5 * time.Second):
		resume()
		err := <-ended
		t.Fatalf("the held INSERT did not end on its cancel request while paused; after RESUME it ended with %v", err)
	}
	resume()
	if got := queryInt(t, conn, "after the cancelled INSERT", "SELECT $1::int + 2", 40); got != 42 {
		t.Errorf("the session's next statement returned %d", got)
	}
	if rows := primaryInt(t, c, "SELECT count(*) FROM t_held_cancel"); rows != 0 {
		t.Errorf("the cancelled INSERT ran after RESUME: %d rows", rows)
	}
}
