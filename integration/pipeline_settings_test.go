package integration

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
)

// TestSetConfigLaterInPipelineIsCarried sends a pgx batch (one
// extended-protocol pipeline) whose second statement is a session-level
// set_config with a parameter, and checks that the value holds for the
// session's later reads on every standby, as it does when the call is sent
// alone: an application that keeps its tenant in a setting for row security
// must not lose it because the call was not the batch's first statement.
func TestSetConfigLaterInPipelineIsCarried(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, func(cfg *config.Config) { cfg.Routing.StandbyChoice = config.StandbyRoundRobin })
	conn := o.connect(t, nil)
	ctx := timeoutCtx(t, statementTimeout)

	batch := &pgx.Batch{}
	batch.Queue("SELECT 1")
	batch.Queue("SELECT set_config('app.tenant', $1, false)", "tenant-42")
	if err := conn.SendBatch(ctx, batch).Close(); err != nil {
		t.Fatalf("batch: %v", err)
	}
	conn.routes(t)
	seen := map[string]bool{}
	for i := range 3 {
		var got string
		if err := conn.QueryRow(ctx, "SELECT current_setting('app.tenant', true)").Scan(&got); err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		r := conn.oneRoute(t, "read app.tenant")
		seen[r.Node] = true
		if got != "tenant-42" {
			t.Errorf("read %d on %s: app.tenant = %q, want tenant-42 (set by the second statement of a pipeline)", i, r.Node, got)
		}
	}
	t.Logf("reads ran on %v", seen)
}
