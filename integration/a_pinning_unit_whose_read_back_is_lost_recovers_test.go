package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestAPinningUnitWhoseReadBackIsLostRecovers: a single statement takes a session
// advisory lock (a pin) and changes a setting pgowl cannot replay (a computed set_config value),
// so pgowl reads the settings back after it. The read-back loses the backend. The session was
// not pinned before the unit, so dropBackend found no held backend to clear, and afterUnit then
// holds the dropped backend (sess.held = be) because the unit's pin says so. The session's next
// statement meets that dead backend; after that one error, the session must work again.
func TestAPinningUnitWhoseReadBackIsLostRecovers(t *testing.T) {
	for name, sql := range map[string]string{
		"advisory lock and computed set_config": "SELECT pg_advisory_lock(424242), set_config('app.pin_read_back', 'v' || '1', false)",
		"temp table and SET in one string":      "CREATE TEMP TABLE pin_read_back_tmp (n int); SET application_name = 'pin-read-back'",
	} {
		t.Run(name, func(t *testing.T) { pinningUnitWhoseReadBackIsLost(t, sql) })
	}
}

func pinningUnitWhoseReadBackIsLost(t *testing.T, sql string) {
	c := sharedClusterFor(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	o := startOwl(t, c, nil)
	const app = "pin-read-back"
	s := o.connect(t, func(cfg *pgx.ConnConfig) {
		withMode(pgx.QueryExecModeSimpleProtocol)(cfg)
		cfg.RuntimeParams["application_name"] = app
	})
	unlock := lockPgSettings(t, ctx, c)
	if _, err := s.Exec(ctx, sql); err != nil {
		t.Fatalf("the pinning unit: %v", err)
	}
	terminateReadBackWaitingForLock(t, ctx, c, app)
	unlock()
	time.Sleep(200 * time.Millisecond)

	var errs []string
	for i := 0; i < 4; i++ {
		var one int
		if err := s.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 1 {
		t.Errorf("after the lost read-back, %d of 4 statements failed; want at most the first: %s", len(errs), strings.Join(errs, " | "))
	}
	if got := primaryInUse(t, ctx, s, c); got != "0" {
		t.Errorf("SHOW pgowl.nodes: %s in_use %q once the session holds nothing there; want 0", c.Nodes[0].Name, got)
	}
}
