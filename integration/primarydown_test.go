package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/pgowl/pgowl/config"
)

// TestStoppedPrimaryStandbyReadsBoundedLag stops the primary and checks that
// reads keep running on the standby while the primary's last WAL sample
// still bounds the standby's staleness, and are refused with
// REPLICA_LAG_EXCEEDED once that bound passes routing.max_replica_lag.
//
// Before the bound was kept, every read was refused as soon as the primary
// had missed monitor.down_after ("lag unknown: no primary"), although the
// standby had replayed everything the primary had when it was last seen: a
// primary that stopped answering for a moment (a restart, a monitor poll
// delayed on a busy machine) failed every read.
func TestStoppedPrimaryStandbyReadsBoundedLag(t *testing.T) {
	const maxLag = 3 * time.Second
	c := ownCluster(t, 1)
	primary, standby := c.Nodes[0], c.Nodes[1]
	o := startOwl(t, c, foConfig(func(cfg *config.Config) { cfg.Routing.MaxReplicaLag = maxLag }))
	createTable(t, c, "pd_items", "CREATE TABLE pd_items (id int PRIMARY KEY); INSERT INTO pd_items SELECT generate_series(1, 10)")
	catchUp(t, c)
	conn := o.connect(t, foSimple)
	ctx := timeoutCtx(t, time.Minute)
	sql := "SELECT count(*) FROM pd_items"
	var n int64
	if r := conn.foMustRead(t, ctx, "read before the stop", sql, &n); r.Node != standby.Name {
		t.Fatalf("read before the stop ran on %s, want %s", r.Node, standby.Name)
	}

	if err := primary.Stop(ctx); err != nil {
		t.Fatalf("stop %s: %v", primary.Name, err)
	}
	stoppedAt := time.Now()

	var (
		lateReads int   // reads that succeeded more than down-after plus a poll after the stop
		lastLagMS int64 // the NOTICE lag of the last successful read
		refused   foResult
	)
	foPoll(t, maxLag+10*time.Second, 100*time.Millisecond, "a read refused with REPLICA_LAG_EXCEEDED", func() (bool, string) {
		res := conn.foTryRead(t, ctx, sql, &n)
		since := res.start.Sub(stoppedAt)
		switch {
		case res.err == nil:
			if res.route.Node != standby.Name {
				t.Errorf("read %s after the stop ran on %s, want %s", since.Round(time.Millisecond), res.route.Node, standby.Name)
			}
			if since > foDownAfter+2*foInterval {
				lateReads++
			}
			lastLagMS = res.route.LagMS
			return false, fmt.Sprintf("read ok %s after the stop, lag_ms %d", since.Round(time.Millisecond), res.route.LagMS)
		case res.owlError("REPLICA_LAG_EXCEEDED"):
			refused = res
			return true, ""
		default:
			return false, fmt.Sprintf("%s after the stop: %s", since.Round(time.Millisecond), res.describe())
		}
	})
	refusedAfter := refused.start.Sub(stoppedAt)
	t.Logf("reads kept running %s after the primary stopped (%d of them past down-after, last lag_ms %d); refused after %s: %s",
		refusedAfter.Round(time.Millisecond), lateReads, lastLagMS, refusedAfter.Round(time.Millisecond), refused.describe()+" detail: "+refusedDetail(refused))
	if lateReads == 0 {
		t.Errorf("no read succeeded once the primary was past down-after (%s); the standby's lag should still be bounded by the primary's last sample", foDownAfter)
	}
	// The bound is the age of a primary sample sent before the stop, so it
	// passes maxLag no later than maxLag after the stop (plus a read's pacing).
	if refusedAfter > maxLag+time.Second {
		t.Errorf("reads were still served %s after the primary stopped, beyond routing.max_replica_lag %s: the staleness bound is not enforced", refusedAfter.Round(time.Millisecond), maxLag)
	}
	if refusedAfter < maxLag-time.Second {
		t.Errorf("reads were refused %s after the primary stopped, well before routing.max_replica_lag %s", refusedAfter.Round(time.Millisecond), maxLag)
	}
	if lastLagMS > maxLag.Milliseconds() {
		t.Errorf("a read with lag_ms %d ran, above routing.max_replica_lag %s", lastLagMS, maxLag)
	}
}

func refusedDetail(r foResult) string {
	if r.pgErr == nil {
		return ""
	}
	return r.pgErr.Detail
}
