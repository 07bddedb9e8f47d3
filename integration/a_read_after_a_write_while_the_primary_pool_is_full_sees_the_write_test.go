package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
)

// README, "Read your own writes": "A session that wrote does not read older data from a
// standby ... In session scope the session's next read settles it first: pgowl reads
// pg_current_wal_insert_lsn() on a primary backend". When every primary backend is taken (by
// other sessions' open transactions, pool.max_per_node reached) that read of the position
// cannot get a backend. The session's read must then not go to a standby that lacks the
// write: it should wait, run on the primary or be refused, but never return the row as it was
// before the session's own UPDATE.
func TestAReadAfterAWriteWhileThePrimaryPoolIsFullSeesTheWrite(t *testing.T) {
	c := ownCluster(t, 1)
	createTable(t, c, "rp_full", "CREATE TABLE rp_full (k int PRIMARY KEY, v int NOT NULL); INSERT INTO rp_full SELECT g, 0 FROM generate_series(1, 10) g")
	o := startOwl(t, c, func(cfg *config.Config) {
		cfg.Pool.MaxPerNode = 2
		cfg.Pool.AcquireTimeout = 300 * time.Millisecond
		cfg.Routing.MaxReplicaLag = 10 * time.Minute // the paused standby keeps qualifying
		cfg.Monitor.DownAfter = 10 * time.Second     // no node looks down while the read waits for a backend
	})
	ctx := timeoutCtx(t, time.Minute)
	standby := c.Nodes[1]
	if err := standby.PauseReplay(ctx); err != nil {
		t.Fatalf("pause replay on %s: %v", standby.Name, err)
	}
	t.Cleanup(func() { standby.ResumeReplay(context.Background()) })

	writer := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
	if _, err := writer.Exec(ctx, "UPDATE rp_full SET v = 1 WHERE k = 1"); err != nil {
		t.Fatalf("write: %v", err)
	}
	writer.routes(t)

	// Two other sessions each hold a primary backend in an open transaction: the pool's
	// pool.max_per_node = 2 backends to the primary are taken.
	for i, k := range []string{"2", "3"} {
		h := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
		if _, err := h.Exec(ctx, "BEGIN"); err != nil {
			t.Fatal(err)
		}
		if _, err := h.Exec(ctx, "UPDATE rp_full SET v = 9 WHERE k = "+k); err != nil {
			t.Fatalf("holder %d: %v", i, err)
		}
		t.Cleanup(func() { h.Exec(context.Background(), "ROLLBACK") })
	}

	var v int
	err := writer.QueryRow(ctx, "SELECT v FROM rp_full WHERE k = 1").Scan(&v)
	rs := writer.routes(t)
	if err != nil {
		t.Logf("the read after the write was refused (acceptable): %v; routes %v", err, rs)
		return
	}
	if v != 1 {
		where := ""
		for _, r := range rs {
			where += r.String() + " " + r.Raw.Detail + "; "
		}
		t.Errorf("the session's read right after its own committed UPDATE (v = 1) returned v = %d: it ran on %s "+
			"which had not replayed the write (its replay is paused). The read of the write position found no free primary backend, and the read went to the standby as if the session had never written",
			v, strings.TrimSpace(where))
	}
}
