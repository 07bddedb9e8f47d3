package monitor_test

import (
	"context"
	"testing"
	"time"

	"github.com/pgowl/pgowl/internal/cluster"
	"github.com/pgowl/pgowl/monitor"
)

// waitTimeout bounds every wait for an observed server state.
const waitTimeout = 30 * time.Second

// testCluster adapts the shared harness to the monitor tests: node methods
// fail the test instead of returning errors.
type testCluster struct {
	Nodes []*testNode
}

type testNode struct {
	*cluster.Node
}

// startCluster starts a primary "pg1" and standbys "pg2", ... through the
// integration harness, stopped when t ends.
func startCluster(t *testing.T, standbys int) *testCluster {
	t.Helper()
	c := cluster.StartForTest(t, cluster.Options{Standbys: standbys})
	tc := &testCluster{}
	for _, n := range c.Nodes {
		tc.Nodes = append(tc.Nodes, &testNode{n})
	}
	return tc
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

func (n *testNode) Addr() monitor.NodeAddr {
	return monitor.NodeAddr{Name: n.Name, Host: n.Host, Port: n.Port}
}

func (n *testNode) Start(t *testing.T) {
	t.Helper()
	if err := n.Node.Start(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
}

func (n *testNode) Stop(t *testing.T) {
	t.Helper()
	if err := n.Node.Stop(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
}

func (n *testNode) Promote(t *testing.T) {
	t.Helper()
	if err := n.Node.Promote(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
}

func (n *testNode) Exec(t *testing.T, sql string) {
	t.Helper()
	if err := n.Node.Exec(ctxFor(t), sql); err != nil {
		t.Fatalf("%s: %s: %v", n.Name, sql, err)
	}
}

func (n *testNode) QueryString(t *testing.T, sql string) string {
	t.Helper()
	var s string
	if err := n.Node.QueryRow(ctxFor(t), sql).Scan(&s); err != nil {
		t.Fatalf("%s: %s: %v", n.Name, sql, err)
	}
	return s
}

func (n *testNode) WaitCaughtUp(t *testing.T, primary *testNode) {
	t.Helper()
	if err := n.Node.WaitCaughtUp(ctxFor(t), primary.Node); err != nil {
		t.Fatal(err)
	}
}
