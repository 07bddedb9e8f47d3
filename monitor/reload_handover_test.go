package monitor_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/pgowl/pgowl/monitor"
	"github.com/pgowl/pgowl/route"
)

// TestNextMonitorStartsFromTheLastPollsOfTheNodesKept: a reload that adds a node builds a new
// monitor; it starts from the old monitor's last polls of the nodes kept (InheritSamples) and its
// first round waits only for the node added. The kept nodes here are made to answer the new
// monitor's own polls never (their names point at a listener that accepts and stays silent): the
// new monitor is ready all the same, as soon as the added node answered, with the kept nodes as
// the old monitor last saw them and the added standby's lag measured against the primary's
// inherited samples; once the inherited polls age past down_after, the kept nodes are down.
// Without the handover the first round waits for their dial timeout.
func TestNextMonitorStartsFromTheLastPollsOfTheNodesKept(t *testing.T) {
	c := startCluster(t, 2)
	pg1, pg2, pg3 := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	pg2.WaitCaughtUp(t, pg1)
	pg3.WaitCaughtUp(t, pg1)
	old := startMonitor(t, []monitor.NodeAddr{pg1.Addr(), pg2.Addr()}, nil)
	old.waitFor(t, "pg2's lag known", func(s *route.Snapshot) bool { return node(s, pg2.Name).LagKnown })

	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		var held []net.Conn // never answered; closed once the listener is
		defer func() {
			for _, conn := range held {
				conn.Close()
			}
		}()
		for {
			conn, err := silent.Accept()
			if err != nil {
				return
			}
			held = append(held, conn)
		}
	}()
	silentPort := silent.Addr().(*net.TCPAddr).Port
	silentAddr := func(name string) monitor.NodeAddr {
		return monitor.NodeAddr{Name: name, Host: "127.0.0.1", Port: silentPort}
	}
	dialTimeout := 10 * time.Second
	opts := monitor.Options{
		Nodes:        []monitor.NodeAddr{silentAddr(pg1.Name), silentAddr(pg2.Name), pg3.Addr()},
		User:         "postgres",
		Interval:     testInterval,
		DownAfter:    2 * time.Second,
		QueryTimeout: time.Second,
		DialTimeout:  dialTimeout,
		Logger:       zerolog.Nop(),
	}
	next := monitor.New(opts)
	next.InheritSamples(old.Monitor, []string{pg1.Name, pg2.Name})
	before := next.Snapshot()
	if n := node(before, pg1.Name); !n.Up || n.Role != route.RolePrimary {
		t.Fatalf("before its first round the new monitor shows pg1 %+v, want the old monitor's primary", n)
	}
	if n := node(before, pg2.Name); !n.Up || n.Role != route.RoleStandby || !n.LagKnown {
		t.Fatalf("before its first round the new monitor shows pg2 %+v, want the old monitor's standby with its lag", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		next.Run(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	started := time.Now()
	readyCtx, readyCancel := context.WithTimeout(context.Background(), dialTimeout/2)
	defer readyCancel()
	if err := next.Ready(readyCtx); err != nil {
		t.Fatalf("the new monitor's first round waited for the kept nodes' polls: not ready after %s", time.Since(started))
	}
	snap := next.Snapshot()
	if n := node(snap, pg3.Name); !n.Up || n.Role != route.RoleStandby || !n.LagKnown {
		t.Fatalf("after the first round pg3 is %+v, want an up standby with its lag known (against pg1's inherited samples)\n%s", n, describe(snap))
	}
	if n := node(snap, pg1.Name); !n.Up || n.Role != route.RolePrimary {
		t.Fatalf("after the first round pg1 is %+v, want the inherited primary\n%s", n, describe(snap))
	}
	// The kept nodes answer none of the new monitor's polls: past down_after they are down.
	deadline := time.Now().Add(opts.DownAfter + 5*time.Second)
	for !func() bool { s := next.Snapshot(); return !node(s, pg1.Name).Up && !node(s, pg2.Name).Up }() {
		if time.Now().After(deadline) {
			t.Fatalf("the inherited polls did not age: pg1 and pg2 still up %s after down_after\n%s", 5*time.Second, describe(next.Snapshot()))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
