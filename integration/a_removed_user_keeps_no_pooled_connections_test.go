package integration

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
)

// TestARemovedUserKeepsNoPooledConnections: with pool.min_idle the pool keeps idle connections
// open for every login it has seen. A reload that removes a user from users must end that: its
// idle connections close, and none is dialled again. Before, pgowl kept min_idle connections per
// node as the removed user for ever (re-dialling them at max_lifetime), and copied them to nodes
// a reload added.
func TestARemovedUserKeepsNoPooledConnections(t *testing.T) {
	c := sharedClusterFor(t)
	ctx := timeoutCtx(t, time.Minute)
	for _, sql := range []string{
		"DROP ROLE IF EXISTS owl_leaving",
		"SET password_encryption = 'scram-sha-256'; CREATE ROLE owl_leaving LOGIN PASSWORD 'leaving-secret'",
	} {
		if err := c.Nodes[0].Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	catchUp(t, c)
	o := startOwl(t, c, func(cfg *config.Config) {
		cfg.Pool.MinIdle = 2
		cfg.Users = append(cfg.Users, config.User{Name: "owl_leaving", Password: "leaving-secret", Auth: config.AuthSCRAM})
	})
	conn, err := pgx.ConnectConfig(ctx, o.connConfig(t, "owl_leaving", "leaving-secret", &noticeLog{}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	conn.Close(context.Background())
	backends := func() int64 {
		t.Helper()
		var total int64
		for _, n := range c.Nodes {
			var count int64
			if err := n.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE usename = 'owl_leaving'").Scan(&count); err != nil {
				t.Fatal(err)
			}
			total += count
		}
		return total
	}
	waitUntil := func(what string, cond func(int64) bool) int64 {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			got := backends()
			if cond(got) || time.Now().After(deadline) {
				return got
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if got := waitUntil("min_idle connections", func(n int64) bool { return n >= 2 }); got < 2 {
		t.Fatalf("%d connections as owl_leaving after its login, want pool.min_idle's (2) on the node it used", got)
	}
	cfg := o.cfg
	cfg.Users = slices.DeleteFunc(slices.Clone(cfg.Users), func(u config.User) bool { return u.Name == "owl_leaving" })
	if err := o.inst.Apply(cfg); err != nil {
		t.Fatalf("reload without owl_leaving: %v", err)
	}
	if got := waitUntil("no connections", func(n int64) bool { return n == 0 }); got != 0 {
		t.Errorf("%d connections as owl_leaving 10s after a reload removed the user, want 0", got)
	}
	time.Sleep(2 * time.Second) // the pool's maintenance runs every second or so: nothing re-dials
	if got := backends(); got != 0 {
		t.Errorf("%d connections as owl_leaving re-dialled after the reload removed the user", got)
	}
}
