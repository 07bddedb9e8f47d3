package pool

import (
	"context"
	"testing"
	"time"
)

// TestWarmOpensAnIdleConnectionPerLogin: Warm dials one connection for each
// login given, without MinIdle, and the next Acquire of that login takes it
// instead of dialling; a second Warm while it is idle dials nothing more.
func TestWarmOpensAnIdleConnectionPerLogin(t *testing.T) {
	node, target, login := startPostgres(t)
	p := New(Options{MaxPerNode: 5})
	defer p.Close()

	p.Warm(target, []Login{login})
	waitFor(t, 5*time.Second, "one idle connection after Warm", func() bool {
		_, idle := p.Stats(target.Node)
		return idle == 1
	})
	if got := appBackends(t, node); got != 1 {
		t.Fatalf("pg_stat_activity shows %d backends of app after Warm, want 1", got)
	}
	warmed := idlePIDs(p, target.Node)
	p.Warm(target, []Login{login})
	if got := openCount(p, target.Node); got != 1 {
		t.Fatalf("a second Warm with the connection idle: open = %d, want 1", got)
	}
	c, err := p.Acquire(context.Background(), target, login)
	if err != nil {
		t.Fatal(err)
	}
	if c.PID != warmed[0] {
		t.Errorf("Acquire after Warm got backend %d, want the warmed one %d", c.PID, warmed[0])
	}
	p.Release(c, true)
}
