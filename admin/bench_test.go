package admin

import (
	"context"
	"testing"
	"time"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/pool"
	"github.com/pgowl/pgowl/route"
)

// staticNodes is a NodeStates that always returns one snapshot.
type staticNodes struct{ snap *route.Snapshot }

func (s staticNodes) Snapshot() *route.Snapshot { return s.snap }
func (s staticNodes) WaitFor(ctx context.Context, _ func(*route.Snapshot) bool) bool {
	<-ctx.Done()
	return false
}

// nodesFor is a snapshot of cfg's nodes: the first a primary, the others standbys 40ms behind.
func nodesFor(cfg config.Config) staticNodes {
	snap := &route.Snapshot{TakenAt: time.Now()}
	for i, n := range cfg.Nodes {
		st := route.NodeState{Name: n.Name, Up: true, Role: route.RoleStandby, LagKnown: true, Lag: 40 * time.Millisecond, SampledAt: time.Now(), Timeline: 1}
		if i == 0 {
			st.Role, st.Lag = route.RolePrimary, 0
		}
		snap.Nodes = append(snap.Nodes, st)
	}
	return staticNodes{snap}
}

type noPool struct{}

func (noPool) NodeStats(string) pool.NodeStats { return pool.NodeStats{} }

func benchUnit() Unit {
	return Unit{Time: time.Now(), ConnID: 7, User: "app", Database: "postgres", Application: "pgbench",
		Node: "pg2", Role: route.RoleStandby, Reason: "READ_ONLY", Lag: 40 * time.Millisecond, Outcome: "ok",
		Duration: 300 * time.Microsecond, Decision: 2 * time.Microsecond, Fingerprint: "a8bad63458afc7d8",
		Statement: "SELECT abalance FROM pgbench_accounts WHERE aid = $1"}
}

// BenchmarkHistoryAdd is the history's share of a routed unit's cost, with
// every core writing (the ring's contended case).
func BenchmarkHistoryAdd(b *testing.B) {
	h := NewHistory(10000)
	u := benchUnit()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			h.Add(&u)
		}
	})
}

// BenchmarkRecorderRouted is what the proxy pays per routed unit for the
// admin side: the metrics, the history and the per-database totals.
func BenchmarkRecorderRouted(b *testing.B) {
	cfg := config.Default()
	cfg.Nodes = []config.Node{{Name: "pg1"}, {Name: "pg2"}}
	r := New(Sources{Config: cfg, Nodes: nodesFor(cfg), Pool: noPool{}})
	u := benchUnit()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r.Routed(u)
		}
	})
}
