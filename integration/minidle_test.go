package integration

import (
	"testing"
	"time"

	"github.com/pgowl/pgowl/config"
)

// TestMinIdleThroughPgowl checks pool.min_idle end to end: once a client's
// login has used a node, pgowl keeps that many idle backends of the login
// open there, and pool.idle_timeout closes the extra ones.
func TestMinIdleThroughPgowl(t *testing.T) {
	c := sharedClusterFor(t)
	const minIdle = 3
	o := startOwl(t, c, func(cfg *config.Config) {
		cfg.Pool.MinIdle = minIdle
		cfg.Pool.IdleTimeout = 2 * time.Second
		cfg.Routing.Notice = false
	})
	conn := o.connect(t, withParams(map[string]string{"application_name": "pgowl-min-idle"}))
	ctx := timeoutCtx(t, statementTimeout)
	// A write: the login uses the primary once.
	if _, err := conn.Exec(ctx, "CREATE TABLE IF NOT EXISTS t_min_idle (x int)"); err != nil {
		t.Fatal(err)
	}
	primary := c.Nodes[0]
	backends := func() int64 {
		var n int64
		if err := primary.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgowl-min-idle'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	deadline := time.Now().Add(10 * time.Second)
	for backends() < minIdle {
		if time.Now().After(deadline) {
			t.Fatalf("after 10s the primary has %d backends of the login, want pool.min_idle = %d", backends(), minIdle)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Well past idle_timeout, min_idle connections stay open.
	time.Sleep(3 * time.Second)
	if got := backends(); got < minIdle {
		t.Errorf("after idle_timeout the primary has %d backends of the login, want at least %d", got, minIdle)
	}
	// And they serve the client.
	var one int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Errorf("SELECT 1 after the refill: %d, %v", one, err)
	}
}
