package admin

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/route"
)

// scriptedNodes hands a fixed sequence of snapshots to WaitFor, then waits for ctx.
type scriptedNodes struct {
	snaps []*route.Snapshot
	done  chan struct{}
}

func (s *scriptedNodes) Snapshot() *route.Snapshot { return s.snaps[len(s.snaps)-1] }

func (s *scriptedNodes) WaitFor(ctx context.Context, cond func(*route.Snapshot) bool) bool {
	for len(s.snaps) > 0 {
		snap := s.snaps[0]
		if len(s.snaps) == 1 {
			close(s.done)
			<-ctx.Done()
			return false
		}
		s.snaps = s.snaps[1:]
		if cond(snap) {
			return true
		}
	}
	return false
}

func twoNodes(pg1, pg2 route.Role, tl1, tl2 uint32) *route.Snapshot {
	now := time.Now()
	return &route.Snapshot{Nodes: []route.NodeState{
		{Name: "pg1", Up: true, Role: pg1, Timeline: tl1, SampledAt: now, LagKnown: true},
		{Name: "pg2", Up: pg2 != route.RoleUnknown, Role: pg2, Timeline: tl2, SampledAt: now, LagKnown: true},
	}}
}

// TestPromotionsAndTimelineChangesAreCounted: a standby seen as the primary
// later is a promotion; a node's timeline changing is a timeline change; a
// node that disappears and comes back with the same role is neither.
func TestPromotionsAndTimelineChangesAreCounted(t *testing.T) {
	nodes := &scriptedNodes{done: make(chan struct{}), snaps: []*route.Snapshot{
		twoNodes(route.RolePrimary, route.RoleStandby, 1, 1),
		twoNodes(route.RolePrimary, route.RoleUnknown, 1, 0), // pg2 down
		twoNodes(route.RolePrimary, route.RoleStandby, 1, 1),
		twoNodes(route.RolePrimary, route.RolePrimary, 1, 2), // pg2 promoted
		twoNodes(route.RoleStandby, route.RolePrimary, 2, 2), // pg1 rewound onto timeline 2
		twoNodes(route.RoleStandby, route.RolePrimary, 2, 2),
	}}
	cfg := config.Default()
	cfg.Nodes = []config.Node{{Name: "pg1"}, {Name: "pg2"}}
	r := New(Sources{Config: cfg, Nodes: nodes, Pool: noPool{}, Policy: route.Policy{MaxReplicaLag: time.Second, DownAfter: time.Second}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.watchRoles(ctx)
	select {
	case <-nodes.done:
	case <-time.After(10 * time.Second):
		t.Fatal("watchRoles did not read the snapshots")
	}
	var b strings.Builder
	rec := newTestResponse(&b)
	r.Handler().ServeHTTP(rec, newTestRequest("/metrics"))
	metrics := b.String()
	for _, want := range []string{
		`pgowl_promotions_total{node="pg1"} 0`, `pgowl_promotions_total{node="pg2"} 1`,
		`pgowl_timeline_changes_total{node="pg1"} 1`, `pgowl_timeline_changes_total{node="pg2"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
