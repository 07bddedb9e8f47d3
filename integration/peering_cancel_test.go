package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
)

// cancelTries is how many statements TestCancelThroughEitherInstance cancels.
const cancelTries = 20

// TestCancelThroughEitherInstance runs two pgowl instances on one port
// (listen_reuse_port) with peering: the kernel hands every new connection,
// sessions and CancelRequests alike, to either instance. Each of cancelTries
// pg_sleep(30) statements must fail with 57014 within one second of its
// client sending the CancelRequest, whichever instance took the cancel; the
// log must show that some cancels were passed on to the other instance.
func TestCancelThroughEitherInstance(t *testing.T) {
	c := sharedClusterFor(t)
	ports := freeLoopbackPorts(t, 3)
	shared := fmt.Sprintf("127.0.0.1:%d", ports[0])
	peers := []config.Peer{
		{Instance: 1, Address: fmt.Sprintf("127.0.0.1:%d", ports[1])},
		{Instance: 2, Address: fmt.Sprintf("127.0.0.1:%d", ports[2])},
	}
	instance := func(number int) func(*config.Config) {
		return func(cfg *config.Config) {
			cfg.Listen = shared
			cfg.ListenReusePort = true
			cfg.Peering.Instance, cfg.Peering.Listen, cfg.Peering.Peers = number, peers[number-1].Address, peers
		}
	}
	owls := []*owl{startOwl(t, c, instance(1)), startOwl(t, c, instance(2))}
	if owls[0].addr != owls[1].addr {
		t.Fatalf("the instances listen on %s and %s, want one shared port", owls[0].addr, owls[1].addr)
	}

	sessionsOn := map[int]int{}
	var slowest time.Duration
	for try := range cancelTries {
		conn := owls[0].connect(t, nil)
		owner := int(conn.PgConn().PID() >> 24)
		sessionsOn[owner]++
		marker := fmt.Sprintf("peer_cancel_%d", try)
		done := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
			defer cancel()
			_, err := conn.Exec(ctx, "SELECT pg_sleep(30) /* "+marker+" */", pgx.QueryExecModeSimpleProtocol)
			done <- err
		}()
		waitStatementRunning(t, marker)
		cancelCtx := timeoutCtx(t, 5*time.Second)
		sent := time.Now()
		// pgconn dials the address it connected to, the shared port: the
		// kernel picks the instance.
		if err := conn.PgConn().CancelRequest(cancelCtx); err != nil {
			t.Fatalf("try %d: send the CancelRequest: %v", try, err)
		}
		var err error
		select {
		case err = <-done:
		case <-time.After(35 * time.Second):
			t.Fatalf("try %d: the statement did not end", try)
		}
		elapsed := time.Since(sent)
		slowest = max(slowest, elapsed)
		wantSQLState(t, fmt.Sprintf("try %d (session on instance %d)", try, owner), err, "57014")
		if elapsed > time.Second {
			t.Errorf("try %d (session on instance %d): the statement failed %s after the cancel, want within 1s", try, owner, elapsed.Round(time.Millisecond))
		}
		conn.Close(context.Background())
	}
	forwarded := 0
	for _, o := range owls {
		forwarded += strings.Count(o.logs.String(), "cancel request passed on to its instance")
	}
	t.Logf("%d of %d cancels ended their statement within 1s (slowest %s); sessions per instance %v; %d cancels reached the other instance and were passed on",
		cancelTries, cancelTries, slowest.Round(time.Millisecond), sessionsOn, forwarded)
	if len(sessionsOn) != 2 || sessionsOn[1]+sessionsOn[2] != cancelTries {
		t.Errorf("sessions per instance %v: want both instances 1 and 2 to have taken sessions through the shared port", sessionsOn)
	}
	if forwarded == 0 {
		t.Errorf("no cancel reached the instance that does not own its session: the forwarding path was not exercised")
	}
}

// waitStatementRunning waits until a node runs a statement containing marker.
func waitStatementRunning(t *testing.T, marker string) {
	t.Helper()
	c := sharedClusterFor(t)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, n := range c.Nodes {
			var running int64
			ctx := timeoutCtx(t, statementTimeout)
			err := n.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%' || $1 || '%' AND pid <> pg_backend_pid()", marker).Scan(&running)
			if err != nil {
				t.Fatalf("pg_stat_activity on %s: %v", n.Name, err)
			}
			if running > 0 {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no node runs the statement marked %s after 10s", marker)
}

// freeLoopbackPorts returns count distinct free ports on 127.0.0.1, for addresses a test must
// name before the listener is bound (peering.listen and its peers). The ports come from below the
// kernel's ephemeral range (net.ipv4.ip_local_port_range): a port picked by a bind to port 0 is
// from that range, and the local end of any connection made before the test binds it (pgx's, a
// node's, pgowl's own) could take it, as happened once in CI ("bind: address already in use").
func freeLoopbackPorts(t *testing.T, count int) []int {
	t.Helper()
	low := ephemeralPortsFrom(t)
	const first = 10000
	if low <= first+count {
		t.Fatalf("the ephemeral port range starts at %d, leaving no ports below it from %d", low, first)
	}
	var ports []int
	taken := map[int]bool{}
	for try := 0; len(ports) < count; try++ {
		if try == 1000 {
			t.Fatalf("found %d of %d free ports in [%d, %d) after %d tries", len(ports), count, first, low, try)
		}
		port := first + rand.IntN(low-first)
		if taken[port] {
			continue
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue // in use: try another
		}
		defer ln.Close()
		taken[port] = true
		ports = append(ports, port)
	}
	return ports
}

// ephemeralPortsFrom returns the first port of the kernel's ephemeral range.
func ephemeralPortsFrom(t *testing.T) int {
	t.Helper()
	raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		t.Fatalf("read the ephemeral port range: %v", err)
	}
	fields := strings.Fields(string(raw))
	if len(fields) != 2 {
		t.Fatalf("ip_local_port_range is %q, want two ports", raw)
	}
	low, err := strconv.Atoi(fields[0])
	if err != nil {
		t.Fatalf("ip_local_port_range is %q: %v", raw, err)
	}
	return low
}
