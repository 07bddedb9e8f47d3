package integration

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestAPeerPassesOnCancelsThroughTheDrain: during a shutdown's drain an instance still takes the
// cancels its peers pass on (peering.listen), as it takes those its clients send: the drain waits
// for running statements, and the cancel for one may land on the other instance of a shared
// port. The peering listener closed with the signal before, and the peer's pass-on was refused.
// The test sends the peer's pass-on itself (a CancelRequest on the peering listener).
func TestAPeerPassesOnCancelsThroughTheDrain(t *testing.T) {
	c := sharedClusterFor(t)
	ports := freeLoopbackPorts(t, 3)
	peering := fmt.Sprintf("peering: {instance: 1, listen: \"127.0.0.1:%d\", peers: [{instance: 1, address: \"127.0.0.1:%d\"}, {instance: 2, address: \"127.0.0.1:%d\"}]}\nshutdown_timeout: 30s\n",
		ports[1], ports[1], ports[2])
	p := startProcessOwl(t, ports[0], owlYAML(c, ports[0], []string{"pg1", "pg2"}, appPassword, peering))
	p.waitLog(t, proxyReadyTimeout, "pgowl serving")
	ctx := timeoutCtx(t, time.Minute)
	conn, err := pgx.Connect(ctx, p.dsn(appPassword, appDatabase)+"&default_query_exec_mode=simple_protocol")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	marker := marker("peer_cancel_drain")
	done := make(chan error, 1)
	go func() {
		_, err := conn.Exec(ctx, "SELECT pg_sleep(30) /* "+marker+" */")
		done <- err
	}()
	waitStatementRunning(t, marker)
	p.signal(t, syscall.SIGTERM)
	p.waitLog(t, 5*time.Second, "pgowl is shutting down")

	passOn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", ports[1]), 2*time.Second)
	if err != nil {
		t.Fatalf("the peering listener refuses the pass-on during the drain: %v", err)
	}
	defer passOn.Close()
	packet := binary.BigEndian.AppendUint32(nil, 16)
	packet = binary.BigEndian.AppendUint32(packet, 80877102)
	packet = binary.BigEndian.AppendUint32(packet, conn.PgConn().PID())
	packet = append(packet, conn.PgConn().SecretKey()...)
	if _, err := passOn.Write(packet); err != nil {
		t.Fatalf("pass the cancel on: %v", err)
	}
	sent := time.Now()
	select {
	case err := <-done:
		wantSQLState(t, "the statement a peer's pass-on cancelled during the drain", err, "57014")
		t.Logf("the statement ended %s after the pass-on", time.Since(sent).Round(time.Millisecond))
	case <-time.After(10 * time.Second):
		t.Fatal("the statement still runs 10s after the peer's pass-on of its cancel")
	}
	if code := p.wait(t, 15*time.Second); code != 0 {
		t.Errorf("pgowl exited with %d, want 0", code)
	}
}
