package integration

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/route"
)

// TestAWriteKeepsItsPositionWhenItsFollowUpLosesTheBackend: a statement wrote (through dynamic
// SQL, so pgowl reads the session's settings back after it), and the backend is lost during that
// read-back. The write committed all the same, and the session's reads must still wait for it:
// its write position is the one after the write. pgowl noted the position after the follow-ups,
// and skipped it when they had lost the backend. The lost backend goes back to the pool once.
func TestAWriteKeepsItsPositionWhenItsFollowUpLosesTheBackend(t *testing.T) {
	c := sharedClusterFor(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	createDynamicAuditFunction(t, ctx, c)
	catchUp(t, c)
	o := startOwl(t, c, nil)
	const app = "follow-up-lost"
	s := o.connect(t, func(cfg *pgx.ConnConfig) {
		withMode(pgx.QueryExecModeSimpleProtocol)(cfg)
		cfg.RuntimeParams["application_name"] = app
	})
	first, firstPosition := firstDynamicWrite(t, ctx, s, readBacksOf(o))

	unlock := lockPgSettings(t, ctx, c)
	if _, err := s.Exec(ctx, "SELECT public.rbf_dynamic(2)"); err != nil {
		t.Fatalf("the second write: %v", err)
	}
	terminateReadBackWaitingForLock(t, ctx, c, app)
	unlock()

	var written int
	if err := c.Nodes[0].QueryRow(ctx, "SELECT count(*) FROM public.rbf_audit WHERE n = 2").Scan(&written); err != nil || written == 0 {
		t.Fatalf("the second write is not on the primary (%d rows, %v)", written, err)
	}
	var after string
	if err := s.QueryRow(ctx, "SHOW pgowl.write_position").Scan(&after); err != nil {
		t.Fatalf("the session after its backend was lost: %v", err)
	}
	if at, err := route.ParseLSN(after); err != nil || at <= firstPosition {
		t.Errorf("the session's write position after the second write is %q, the first write's %s: its reads would not wait for the second (%v)", after, first, err)
	}
	// The pin check after the read-back met the lost connection too: it went back to the pool
	// once.
	if got := primaryInUse(t, ctx, s, c); got != "0" {
		t.Errorf("SHOW pgowl.nodes: %s in_use %q once the session's backend there was lost; want 0 (the lost backend was released to the pool more than once)", c.Nodes[0].Name, got)
	}
}
