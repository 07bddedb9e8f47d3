package integration

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/route"
)

// TestReloadKeepsPrimaryMemoryOfKeptNodesAndForgetsRemovedOnes: pg2 is
// promoted (timeline 2) while pg1 goes on as a primary on timeline 1, then
// pg2 dies. pg1 is a stale primary and gets no write. A reload that removes
// only pg3 keeps pg1 stale: the new monitor inherits that pg2 was seen
// primary on timeline 2. A reload that removes pg2 forgets it: pg1 is the
// primary again and takes the write.
func TestReloadKeepsPrimaryMemoryOfKeptNodesAndForgetsRemovedOnes(t *testing.T) {
	c := ownCluster(t, 2)
	pg1, pg2, pg3 := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	o := startOwl(t, c, foConfig(func(cfg *config.Config) { cfg.Routing.PrimaryWait = 500 * time.Millisecond }))
	createTable(t, c, "reload_memory_items", "CREATE TABLE reload_memory_items (id serial PRIMARY KEY, v text)")
	ctx := timeoutCtx(t, 2*time.Minute)

	if err := pg2.Promote(ctx); err != nil {
		t.Fatalf("promote %s: %v", pg2.Name, err)
	}
	o.waitSnapshot(t, 10*time.Second, pg2.Name+" routed primary", routedPrimaryNamed(pg2.Name))
	if port, err := writeThrough(t, o, "on the promoted node"); err != nil || port != pg2.Port {
		t.Fatalf("write after the promotion: port %d (want %s's %d), error %v", port, pg2.Name, pg2.Port, err)
	}
	if err := pg2.Kill(); err != nil {
		t.Fatalf("kill %s: %v", pg2.Name, err)
	}
	o.waitSnapshot(t, 10*time.Second, pg2.Name+" down", func(s *route.Snapshot) bool {
		n := findNode(s, pg2.Name)
		return n != nil && !n.Up
	})
	if port, err := writeThrough(t, o, "stale primary before any reload"); err == nil {
		t.Fatalf("a write ran on port %d although pg1 is a stale primary (%s)", port, foTimelines(o.states.Snapshot()))
	}

	// Remove pg3 only: pg1 and pg2 are kept, so is what pgowl learned about pg2.
	cfg := o.cfg
	cfg.Nodes = slices.DeleteFunc(slices.Clone(cfg.Nodes), func(n config.Node) bool { return n.Name == pg3.Name })
	if err := o.inst.Apply(cfg); err != nil {
		t.Fatalf("reload without %s: %v", pg3.Name, err)
	}
	o.states = o.inst.Nodes()
	s := o.states.Snapshot()
	if findNode(s, pg3.Name) != nil || s.NewestPrimaryTimeline != 2 {
		t.Fatalf("after the reload without %s, want the node gone and the newest primary timeline 2 remembered; snapshot: %s, newest primary timeline %d",
			pg3.Name, foTimelines(s), s.NewestPrimaryTimeline)
	}
	if port, err := writeThrough(t, o, "stale primary after removing a standby"); err == nil {
		t.Errorf("after a reload that removed only %s, a write ran on port %d: the stale primary %s was readmitted (%s)",
			pg3.Name, port, pg1.Name, foTimelines(o.states.Snapshot()))
	}

	// Remove pg2: what pgowl saw of it is forgotten, pg1 is the primary again.
	cfg.Nodes = slices.DeleteFunc(slices.Clone(cfg.Nodes), func(n config.Node) bool { return n.Name == pg2.Name })
	if err := o.inst.Apply(cfg); err != nil {
		t.Fatalf("reload without %s: %v", pg2.Name, err)
	}
	o.states = o.inst.Nodes()
	o.waitSnapshot(t, 5*time.Second, pg1.Name+" routed primary after "+pg2.Name+" was removed", routedPrimaryNamed(pg1.Name))
	if s := o.states.Snapshot(); s.NewestPrimaryTimeline != 1 {
		t.Errorf("after removing %s the newest primary timeline is %d, want 1 (pg1's own)", pg2.Name, s.NewestPrimaryTimeline)
	}
	if port, err := writeThrough(t, o, "after removing the promoted node"); err != nil || port != pg1.Port {
		t.Errorf("write after removing %s: port %d (want %s's %d), error %v", pg2.Name, port, pg1.Name, pg1.Port, err)
	}
}

// routedPrimaryNamed holds when route.Primary picks the node called name.
func routedPrimaryNamed(name string) func(*route.Snapshot) bool {
	return func(s *route.Snapshot) bool {
		i, err := route.Primary(s, route.Policy{DownAfter: foDownAfter}, time.Now())
		return err == nil && s.Nodes[i].Name == name
	}
}

// writeThrough inserts a row through pgowl on a new connection and returns
// the port of the server that ran it.
func writeThrough(t *testing.T, o *owl, v string) (int, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, o.dsn(appUser, appPassword, appDatabase, nil))
	if err != nil {
		t.Fatalf("connect to pgowl: %v", err)
	}
	defer conn.Close(context.Background())
	var port int32
	err = conn.QueryRow(ctx, "INSERT INTO reload_memory_items (v) VALUES ($1) RETURNING inet_server_port()", v).Scan(&port)
	return int(port), err
}
