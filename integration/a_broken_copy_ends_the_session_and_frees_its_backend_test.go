package integration

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
)

// TestACopyInterruptedByAnotherMessageEndsTheSessionAndFreesItsBackend: a client in COPY FROM
// STDIN (simple protocol) sends a Query (or a Parse) instead of CopyData.
// PostgreSQL answers ERROR 08P01 "unexpected message type 0x51 during COPY
// from stdin", then FATAL 08P01, and closes. pgowl must answer too, and free
// the backend. With pool.max_per_node 2, two such clients must not lock
// every other client out of the primary.
func TestACopyInterruptedByAnotherMessageEndsTheSessionAndFreesItsBackend(t *testing.T) {
	c := sharedClusterFor(t)
	createTable(t, c, "rv_copy2", "CREATE TABLE rv_copy2 (a int)")
	o := startOwl(t, c, func(cfg *config.Config) {
		cfg.Pool.MaxPerNode = 2
		cfg.Pool.AcquireTimeout = 2 * time.Second
		cfg.ShutdownTimeout = 2 * time.Second
	})
	writer := o.connect(t, nil)

	for i, intruder := range [][]byte{rvQuery("SELECT 1"), rvParse("", "SELECT 1")} {
		conn := rvLogin(t, o.rvDSN())
		conn.send(t, rvQuery("COPY rv_copy2 FROM STDIN"))
		rvAwaitCopyIn(t, conn)
		conn.send(t, rvJoin(rvFrame('d', []byte("1\n")), intruder))
		res := conn.recv(1, 5*time.Second)
		t.Logf("client %d, intruder %q: pgowl answered %s", i, intruder[0], res)
		if res.timedOut {
			t.Errorf("client %d: pgowl neither answered nor closed within 5s of a %q message during COPY FROM STDIN (PostgreSQL: ERROR 08P01 unexpected message type, then FATAL 08P01 and close)", i, intruder[0])
		}
		// The client gives up and closes its socket.
		conn.conn.Close()
	}
	time.Sleep(2 * time.Second)
	if s := rvLeftovers(t, c); s != "" {
		t.Errorf("2s after both clients closed their sockets, their backends are still in COPY: %s", s)
	}
	var stuck int
	buf := make([]byte, 4<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "proxy.(*session).copyIn") {
			stuck++
			if stuck == 1 {
				t.Logf("a session goroutine still in copyIn:\n%s", g)
			}
		}
	}
	if stuck > 0 {
		t.Errorf("%d session goroutine(s) still in copyIn after their clients left", stuck)
	}

	// Everyone else: a write needs a primary backend.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := writer.Exec(ctx, "INSERT INTO rv_copy2 VALUES (42)")
	if err != nil {
		t.Errorf("a normal client's INSERT after two broken COPY clients: %v", err)
	}
	fresh, err := pgx.Connect(ctx, o.rvDSN())
	if err != nil {
		t.Errorf("a new client cannot log in after two broken COPY clients: %v", err)
	} else {
		fresh.Close(ctx)
	}
}

// TestATerminateDuringCopyFreesTheBackend: a client that ends its connection
// with Terminate in the middle of COPY FROM STDIN (pgconn does so when a
// CopyFrom's context ends and it closes the connection) must free its
// backend, as a client that just closes its socket does.
func TestATerminateDuringCopyFreesTheBackend(t *testing.T) {
	c := sharedClusterFor(t)
	createTable(t, c, "rv_copy3", "CREATE TABLE rv_copy3 (a int)")
	o := startOwl(t, c, nil)

	t.Run("pgx_copyfrom_context_ends", func(t *testing.T) {
		client := o.connect(t, nil)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		produced := 0
		rows := pgx.CopyFromFunc(func() ([]any, error) {
			if produced == 10 {
				return nil, nil
			}
			produced++
			time.Sleep(300 * time.Millisecond) // a slow producer: the context ends first
			return []any{int32(1)}, nil
		})
		done := make(chan error, 1)
		go func() {
			_, err := client.CopyFrom(ctx, pgx.Identifier{"rv_copy3"}, []string{"a"}, rows)
			done <- err
		}()
		select {
		case err := <-done:
			t.Logf("CopyFrom: %v", err)
		case <-time.After(15 * time.Second):
			t.Fatalf("CopyFrom did not return within 15s")
		}
		client.Close(context.Background())
		if s := rvWaitNoLeftovers(t, c, 5*time.Second); s != "" {
			t.Errorf("5s after the client gave up its CopyFrom, the backend is still in COPY: %s", s)
		}
	})
	t.Run("raw_terminate", func(t *testing.T) {
		conn := rvLogin(t, o.rvDSN())
		conn.send(t, rvQuery("COPY rv_copy3 FROM STDIN"))
		rvAwaitCopyIn(t, conn)
		conn.send(t, rvJoin(rvFrame('d', []byte("1\n")), rvTerminate))
		conn.conn.Close()
		if s := rvWaitNoLeftovers(t, c, 5*time.Second); s != "" {
			t.Errorf("5s after Terminate during COPY, the backend is still in it: %s", s)
		}
	})

}
