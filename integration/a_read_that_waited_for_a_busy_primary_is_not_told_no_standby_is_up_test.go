package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
)

// With the default pool.acquire_timeout (2s) and monitor.down_after (1s): a session wrote, and
// its next read needs the write position, read on a primary backend; every primary backend is
// held by other sessions' open transactions, so that read waits out pool.acquire_timeout. The
// standby is up and within the lag limit the whole time (the monitor polls it every 250ms).
// Whatever pgowl then answers, it must not tell the client, and count in
// pgowl_refusals_total, that no standby is up.
func TestAReadThatWaitedForABusyPrimaryIsNotToldNoStandbyIsUp(t *testing.T) {
	c := ownCluster(t, 1)
	createTable(t, c, "rp_busy", "CREATE TABLE rp_busy (k int PRIMARY KEY, v int NOT NULL); INSERT INTO rp_busy SELECT g, 0 FROM generate_series(1, 10) g")
	o := startOwl(t, c, func(cfg *config.Config) {
		cfg.Pool.MaxPerNode = 2
		cfg.Routing.MaxReplicaLag = 10 * time.Minute
	})
	ctx := timeoutCtx(t, time.Minute)

	writer := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
	if _, err := writer.Exec(ctx, "UPDATE rp_busy SET v = 1 WHERE k = 1"); err != nil {
		t.Fatalf("write: %v", err)
	}
	writer.routes(t)
	for _, k := range []string{"2", "3"} {
		h := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
		if _, err := h.Exec(ctx, "BEGIN"); err != nil {
			t.Fatal(err)
		}
		if _, err := h.Exec(ctx, "UPDATE rp_busy SET v = 9 WHERE k = "+k); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Exec(context.Background(), "ROLLBACK") })
	}

	var v int
	err := writer.QueryRow(ctx, "SELECT v FROM rp_busy WHERE k = 1").Scan(&v)
	if err == nil {
		t.Logf("the read ran and returned v = %d", v)
		return
	}
	pe, ok := asPgError(err)
	if ok && strings.Contains(pe.Message, "NO_READABLE_REPLICA") {
		standby := findNode(o.states.Snapshot(), c.Nodes[1].Name)
		t.Errorf("the read was refused with %q (DETAIL %q) while %s was up (monitor now: up=%t lag=%s): "+
			"the session waited %s for a primary backend to read its write position, then was planned on the node states from before that wait, whose samples had by then aged past monitor.down_after, so every node looked down",
			pe.Message, pe.Detail, c.Nodes[1].Name, standby.Up, standby.Lag, o.cfg.Pool.AcquireTimeout)
	} else {
		t.Logf("the read was refused: %v", err)
	}
}
