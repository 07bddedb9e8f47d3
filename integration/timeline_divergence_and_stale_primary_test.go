package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/internal/cluster"
	"github.com/pgowl/pgowl/route"
)

// r9tCheckpointTimeline reads a node's pg_control_checkpoint().timeline_id.
func r9tCheckpointTimeline(t *testing.T, ctx context.Context, n *cluster.Node) int64 {
	t.Helper()
	var tl int64
	if err := n.QueryRow(ctx, "SELECT timeline_id::bigint FROM pg_control_checkpoint()").Scan(&tl); err != nil {
		t.Fatalf("pg_control_checkpoint on %s: %v", n.Name, err)
	}
	return tl
}

// r9tLSN reads an LSN-valued expression on a node as a byte position.
func r9tLSN(t *testing.T, ctx context.Context, n *cluster.Node, sql string) uint64 {
	t.Helper()
	var text string
	if err := n.QueryRow(ctx, sql).Scan(&text); err != nil {
		t.Fatalf("%s on %s: %v", sql, n.Name, err)
	}
	lsn, err := cluster.ParseLSN(text)
	if err != nil {
		t.Fatalf("parse LSN %q from %s: %v", text, n.Name, err)
	}
	return lsn
}

// TestTimelineDivergedStandbyUnmarkedByRestartpoint: a standby that
// replayed a stale primary's WAL past the fork of the routed primary is
// marked diverged; the mark is meant to stay until the standby is rewound or
// cloned onto the new timeline. It is dropped instead as soon as the
// standby's last restartpoint timeline rises above the (stale) restartpoint
// timeline it had when marked, which happens by a mere restartpoint when the
// standby had crossed an earlier timeline switch without a restartpoint
// since: the standby is still on the stale primary's fork and then serves
// reads with the stale primary's rows and without the routed primary's.
//
// Layout: pg1 primary (TL1) is stopped cleanly and pg2 promoted (TL2); pg3
// and pg4 follow pg2 (their restartpoint timeline stays 1). pg4 is promoted
// (TL3, routed primary) while pg2 stays up and takes writes directly; pg3
// follows pg2 past pg4's fork.
func TestTimelineDivergedStandbyUnmarkedByRestartpoint(t *testing.T) {
	c := ownCluster(t, 3)
	n1, n2, n3, n4 := c.Nodes[0], c.Nodes[1], c.Nodes[2], c.Nodes[3]
	ctx := timeoutCtx(t, 3*time.Minute)
	createTable(t, c, "r9t_items", "CREATE TABLE r9t_items (id bigint PRIMARY KEY, src text)")

	// A clean switchover from pg1 to pg2: pg3 and pg4 cross to timeline 2.
	if err := n1.Stop(ctx); err != nil {
		t.Fatalf("stop %s: %v", n1.Name, err)
	}
	foPoll(t, 20*time.Second, 50*time.Millisecond, "standbys agree on pg1's last position", func() (bool, string) {
		a := r9tLSN(t, ctx, n2, "SELECT pg_last_wal_replay_lsn()::text")
		b := r9tLSN(t, ctx, n3, "SELECT pg_last_wal_replay_lsn()::text")
		d := r9tLSN(t, ctx, n4, "SELECT pg_last_wal_replay_lsn()::text")
		return a == b && b == d, fmt.Sprintf("%x %x %x", a, b, d)
	})
	if err := n2.Promote(ctx); err != nil {
		t.Fatalf("promote %s: %v", n2.Name, err)
	}
	if err := n2.Exec(ctx, "CHECKPOINT"); err != nil {
		t.Fatalf("CHECKPOINT on %s: %v", n2.Name, err)
	}
	for _, s := range []*cluster.Node{n3, n4} {
		if err := s.Rewire(ctx, n2); err != nil {
			t.Fatalf("rewire %s to %s: %v", s.Name, n2.Name, err)
		}
	}
	if tl := r9tCheckpointTimeline(t, ctx, n3); tl != 1 {
		t.Skipf("precondition: %s's restartpoint timeline is already %d", n3.Name, tl)
	}

	o := foStartOwlOn(t, c, []string{n2.Name, n3.Name, n4.Name}, func(cfg *config.Config) {
		cfg.Routing.MaxReplicaLag = 30 * time.Second
	})
	conn := o.connect(t, foSimple)

	// pg4 becomes the routed primary on timeline 3; pg2 stays up (split brain).
	if err := n4.Promote(ctx); err != nil {
		t.Fatalf("promote %s: %v", n4.Name, err)
	}
	o.waitSnapshot(t, 10*time.Second, n4.Name+" routed primary", func(s *route.Snapshot) bool {
		i, err := route.Primary(s, route.Policy{DownAfter: foDownAfter}, time.Now())
		return err == nil && s.Nodes[i].Name == n4.Name
	})
	t.Logf("after promoting %s: %s", n4.Name, foTimelines(o.states.Snapshot()))

	// Direct writes on the stale primary pg2; pg3 replays them past pg4's fork.
	if err := n2.Exec(ctx, "INSERT INTO r9t_items SELECT g, 'stale-pg2' FROM generate_series(1, 2000) g"); err != nil {
		t.Fatalf("direct write on %s: %v", n2.Name, err)
	}
	staleLSN := r9tLSN(t, ctx, n2, "SELECT pg_current_wal_insert_lsn()::text")
	if err := n3.WaitReplayed(ctx, fmt.Sprintf("%X/%X", staleLSN>>32, uint32(staleLSN))); err != nil {
		t.Fatalf("%s replaying %s's direct writes: %v", n3.Name, n2.Name, err)
	}
	o.waitSnapshot(t, 10*time.Second, n3.Name+" marked diverged", func(s *route.Snapshot) bool {
		n := findNode(s, n3.Name)
		return n != nil && !n.LagKnown && strings.Contains(n.LagUnknownReason, "diverged")
	})

	// Writes through pgowl on pg4 pass pg3's replay position.
	if _, err := conn.Exec(ctx, "INSERT INTO r9t_items SELECT g, 'new-pg4' FROM generate_series(100001, 110000) g"); err != nil {
		t.Fatalf("write through pgowl: %v", err)
	}
	if r := conn.oneRoute(t, "write through pgowl"); r.Node != n4.Name {
		t.Fatalf("write through pgowl ran on %s, want %s", r.Node, n4.Name)
	}
	replay := r9tLSN(t, ctx, n3, "SELECT pg_last_wal_replay_lsn()::text")
	inserted := r9tLSN(t, ctx, n4, "SELECT pg_current_wal_insert_lsn()::text")
	if inserted <= replay {
		t.Fatalf("precondition: %s inserted %x, not past %s's replay %x", n4.Name, inserted, n3.Name, replay)
	}
	time.Sleep(5 * foInterval)
	if n := findNode(o.states.Snapshot(), n3.Name); n == nil || n.LagKnown {
		t.Fatalf("precondition: %s should still be diverged: %s", n3.Name, describeSnapshot(o.states.Snapshot()))
	}

	// A restartpoint on pg3: it is still on pg2's fork (timeline 2), not rewound or cloned.
	if err := n3.Exec(ctx, "CHECKPOINT"); err != nil {
		t.Fatalf("CHECKPOINT (restartpoint) on %s: %v", n3.Name, err)
	}
	t.Logf("%s restartpoint timeline now %d", n3.Name, r9tCheckpointTimeline(t, ctx, n3))

	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		snap := o.states.Snapshot()
		if n := findNode(snap, n3.Name); n != nil && n.LagKnown {
			t.Errorf("%s, diverged on %s's fork, has a known lag again after a restartpoint (%s)", n3.Name, n2.Name, describeSnapshot(snap))
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	var stale, fresh int64
	res := conn.foTryRead(t, ctx, "SELECT count(*) FILTER (WHERE src = 'stale-pg2'), count(*) FILTER (WHERE src = 'new-pg4') FROM r9t_items", &stale, &fresh)
	if res.err == nil {
		t.Logf("read ran on %s: %d rows written only on the stale primary, %d rows of the routed primary", res.route.Node, stale, fresh)
		if stale > 0 || fresh != 10000 {
			t.Errorf("read through pgowl on %s returned forked data: %d rows written directly on the stale primary %s, %d of 10000 rows written on the primary %s",
				res.route.Node, stale, n2.Name, fresh, n4.Name)
		}
	} else {
		t.Logf("read refused: %s", res.describe())
	}
}

// TestTimelineStalePrimaryGetsWritesAfterWinnerDies: in a split brain
// pgowl routes writes to the promoted node (timeline 2) and none to the old
// primary (timeline 1). When the promoted node then dies, the old primary is
// the only node claiming primary and pgowl sends writes to it again, although
// it saw it deposed: the rows committed on the promoted node through pgowl are
// missing there, and new writes land on the stale fork.
func TestTimelineStalePrimaryGetsWritesAfterWinnerDies(t *testing.T) {
	c := ownCluster(t, 1)
	oldPrimary, newPrimary := c.Nodes[0], c.Nodes[1]
	o := startOwl(t, c, foConfig(nil))
	createTable(t, c, "r9s_items", "CREATE TABLE r9s_items (id int PRIMARY KEY, v text)")
	conn := o.connect(t, foSimple)
	ctx := timeoutCtx(t, time.Minute)
	if _, err := conn.Exec(ctx, "INSERT INTO r9s_items VALUES (1, 'before')"); err != nil {
		t.Fatalf("write before the promotion: %v", err)
	}
	conn.routes(t)
	catchUp(t, c)

	if err := newPrimary.Promote(ctx); err != nil {
		t.Fatalf("promote %s: %v", newPrimary.Name, err)
	}
	o.waitSnapshot(t, 10*time.Second, newPrimary.Name+" routed primary", func(s *route.Snapshot) bool {
		i, err := route.Primary(s, route.Policy{DownAfter: foDownAfter}, time.Now())
		return err == nil && s.Nodes[i].Name == newPrimary.Name
	})
	if _, err := conn.Exec(ctx, "INSERT INTO r9s_items VALUES (2, 'on the promoted node')"); err != nil {
		t.Fatalf("write after the promotion: %v", err)
	}
	if r := conn.oneRoute(t, "write after the promotion"); r.Node != newPrimary.Name {
		t.Fatalf("write after the promotion ran on %s, want %s", r.Node, newPrimary.Name)
	}

	if err := newPrimary.Kill(); err != nil {
		t.Fatalf("kill %s: %v", newPrimary.Name, err)
	}
	o.waitSnapshot(t, 10*time.Second, newPrimary.Name+" down", func(s *route.Snapshot) bool {
		n := findNode(s, newPrimary.Name)
		return n != nil && !n.Up
	})
	t.Logf("after the kill: %s", foTimelines(o.states.Snapshot()))

	_, err := conn.Exec(ctx, "INSERT INTO r9s_items VALUES (3, 'after the promoted node died')")
	rs := conn.routes(t)
	if err == nil {
		node := "?"
		if len(rs) > 0 {
			node = rs[len(rs)-1].Node
		}
		t.Errorf("write after %s (timeline 2) died ran on %s, the primary pgowl had seen deposed (timeline 1); it lacks row 2 committed through pgowl: %d rows with id 2 there",
			newPrimary.Name, node, foNodeInt(t, oldPrimary, "SELECT count(*) FROM r9s_items WHERE id = 2"))
	} else {
		t.Logf("write refused: %v", err)
	}
}
