package integration

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/internal/cluster"
)

// TestAStatementCancelledAtTheDeadlineIsNoCleanExit: an autocommit statement still running when
// shutdown_timeout passes is cancelled, and its work is lost as surely as an open transaction's.
// pgowl used to count only the transactions it rolled back, so it exited 0 ("stopped cleanly")
// and logged nothing lost, while a client had just been told 57014. It must exit 3 and say so.
func TestAStatementCancelledAtTheDeadlineIsNoCleanExit(t *testing.T) {
	c := sharedClusterFor(t)
	port := freePort(t)
	p := startProcessOwl(t, port, owlYAML(c, port, []string{"pg1", "pg2"}, appPassword, "shutdown_timeout: 1s\n"))
	p.waitLog(t, proxyReadyTimeout, "pgowl serving")
	ctx := timeoutCtx(t, time.Minute)
	conn, err := pgx.Connect(ctx, p.dsn(appPassword, appDatabase))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	running := make(chan error, 1)
	go func() {
		_, err := conn.Exec(ctx, "SELECT pg_sleep(30)")
		running <- err
	}()
	waitUntilRunningOnANode(t, ctx, c.Nodes, "SELECT pg_sleep(30)")
	p.signal(t, syscall.SIGTERM)
	select {
	case err := <-running:
		if pgErr, ok := asPgError(err); !ok || pgErr.Code != "57014" {
			t.Errorf("the running statement ended with %v, want 57014 (cancelled at shutdown_timeout)", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the running statement was not cancelled within 15s of SIGTERM with shutdown_timeout 1s")
	}
	code := p.wait(t, 10*time.Second)
	if code != 3 {
		t.Errorf("pgowl exited with %d, want 3: a running statement was cancelled at shutdown_timeout", code)
	}
	if drained := p.waitLog(t, time.Second, "pgowl drained"); !strings.Contains(drained, `"cancelled":1`) {
		t.Errorf("the drain's last line does not count the cancelled statement: %s", drained)
	}
	p.waitLog(t, time.Second, "1 running statements cancelled")
}

// waitUntilRunningOnANode waits until one of nodes runs a statement whose text is sql.
func waitUntilRunningOnANode(t *testing.T, ctx context.Context, nodes []*cluster.Node, sql string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, node := range nodes {
			var running bool
			err := node.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_stat_activity WHERE query = $1 AND state = 'active')", sql).Scan(&running)
			if err == nil && running {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no node ran %q within 10s", sql)
}
