package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
)

// TestReadYourWritesAcrossFailover runs write-then-read rounds on one
// session while the primary stops, a standby is promoted (a new timeline)
// and the other standby follows it. A statement that fails during the
// failover is tried again; a write counts once acknowledged. No read may
// return a row older than the last acknowledged write, and no read may wait
// for a standby longer than routing.read_your_writes_wait (plus the
// failover's own retries of a primary, bounded by routing.primary_wait).
// The node's FATAL "the database system is shutting down" at a new backend's
// login reaches the client and closes its connection (known, outside this
// feature): the test then reconnects, in user scope, so that the new
// session carries the user's write position as a pool's next connection would.
func TestReadYourWritesAcrossFailover(t *testing.T) {
	c := ownCluster(t, 2)
	oldPrimary, newPrimary, follower := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	rywTable(t, c)
	o := startOwl(t, c, foConfig(func(cfg *config.Config) { cfg.Routing.ReadYourWrites = config.ReadYourWritesUser }))
	// At synchronous_commit = on reads right after a write can stay on a
	// standby, so that the positions are compared across the new timeline.
	params := map[string]string{"synchronous_commit": "on"}
	conn := o.connect(t, withParams(params))
	ctx := timeoutCtx(t, 5*time.Minute)
	reconnects := 0
	reconnect := func(i int, err error) {
		if !conn.PgConn().IsClosed() {
			return
		}
		reconnects++
		if reconnects > 5 {
			t.Fatalf("round %d: the connection closed %d times; last: %v", i, reconnects, err)
		}
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			notices := &noticeLog{}
			cfg := o.connConfig(t, appUser, appPassword, notices)
			withParams(params)(cfg)
			next, err := pgx.ConnectConfig(ctx, cfg)
			if err == nil {
				t.Cleanup(func() { next.Close(context.Background()) })
				conn = &client{Conn: next, notices: notices}
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: reconnect: %v", i, err)
			}
		}
	}
	key := rywKey(t, conn, "ryw-failover")

	failedOver := make(chan error, 1)
	var ty rywTally
	var writeRetries, readRetries int
	var slowestRead time.Duration
	const failoverAt = 300
	// limit bounds one successful read: the wait for a standby, and a
	// primary that is being replaced (primary_wait), with room for a loaded machine.
	limit := config.DefaultReadYourWritesWait + o.cfg.Routing.PrimaryWait + time.Second
	var writesOnNew int
	failoverDone := false
	for i := 1; i <= rywRounds; i++ {
		if i == failoverAt+300 {
			// The last rounds run on the new timeline, with the follower rewired.
			if err := <-failedOver; err != nil {
				t.Fatalf("failover: %v", err)
			}
			failoverDone = true
		}
		if i == failoverAt {
			go func() {
				if err := oldPrimary.Stop(ctx); err != nil {
					failedOver <- fmt.Errorf("stop %s: %w", oldPrimary.Name, err)
					return
				}
				if err := newPrimary.Promote(ctx); err != nil {
					failedOver <- fmt.Errorf("promote %s: %w", newPrimary.Name, err)
					return
				}
				failedOver <- follower.Rewire(ctx, newPrimary)
			}()
		}
		for deadline := time.Now().Add(30 * time.Second); ; {
			_, err := conn.Exec(ctx, "UPDATE ryw_rows SET v = $1 WHERE k = $2", i, key)
			if err == nil {
				if r := conn.routes(t); len(r) > 0 && r[len(r)-1].Node == newPrimary.Name {
					writesOnNew++
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: write: %v", i, err)
			}
			reconnect(i, err)
			writeRetries++
			time.Sleep(20 * time.Millisecond)
		}
		conn.routes(t)
		for deadline := time.Now().Add(30 * time.Second); ; {
			var got int
			start := time.Now()
			err := conn.QueryRow(ctx, "SELECT v FROM ryw_rows WHERE k = $1", key).Scan(&got)
			took := time.Since(start)
			if err == nil {
				ty.read(fmt.Sprintf("round %d", i), got, i, took)
				slowestRead = max(slowestRead, took)
				if took > limit {
					t.Errorf("round %d: the read took %s, more than read_your_writes_wait + primary_wait (%s)", i, took, limit)
				}
				ty.route(t, fmt.Sprintf("round %d", i), conn.oneRoute(t, "read"))
				break
			}
			conn.routes(t)
			if time.Now().After(deadline) {
				t.Fatalf("round %d: read: %v", i, err)
			}
			reconnect(i, err)
			readRetries++
			time.Sleep(20 * time.Millisecond)
		}
	}
	if !failoverDone {
		t.Fatal("the rounds ended before the failover")
	}
	t.Logf("%d writes ran on the promoted %s", writesOnNew, newPrimary.Name)
	if writesOnNew < rywRounds-failoverAt-300 {
		t.Errorf("only %d writes ran on the promoted primary", writesOnNew)
	}
	t.Logf("failover at round %d: %d writes and %d reads tried again, %d reconnects; slowest read %s", failoverAt, writeRetries, readRetries, reconnects, slowestRead)
	ty.check(t, "across a failover")
	if ty.standby == 0 {
		t.Errorf("no read ran on a standby: %s", &ty)
	}
}
