package proxy

import (
	"net"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// TestBackendWaitsForCancelInFlight: a cancel request for a session's
// statement may still be on its way to the node when the statement ends. The
// session must not hand the backend on until the node has taken the request
// (PostgreSQL then ignores it on an idle backend), or the next session's
// statement on that backend could be the one cancelled.
func TestBackendWaitsForCancelInFlight(t *testing.T) {
	node, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := node.Accept()
		if err == nil {
			accepted <- c
		}
	}()

	key := cancelKey{pid: 7, secret: 8}
	sess := &session{log: zerolog.Nop()}
	srv := &Server{sessions: map[cancelKey]*session{key: sess}}
	sess.srv = srv
	sess.running.Store(&runningStatement{node: "pg1", network: "tcp", address: node.Addr().String(), pid: 42, secret: []byte{1, 2, 3, 4}})

	cancelled := make(chan struct{})
	go func() {
		srv.cancel(key)
		close(cancelled)
	}()
	var nodeSide net.Conn
	select {
	case nodeSide = <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("the cancel request never reached the node")
	}
	// The statement ends while the node has not yet taken the request: the
	// session's next statement on the backend, and the backend's release,
	// both wait in statementStopped.
	released := make(chan struct{})
	go func() {
		sess.statementStopped()
		close(released)
	}()
	select {
	case <-released:
		t.Fatal("the backend could run the next statement while the cancel request was still being passed on")
	case <-time.After(200 * time.Millisecond):
	}
	// The node takes the request and closes the connection, as PostgreSQL does.
	buf := make([]byte, 64)
	if n, _ := nodeSide.Read(buf); n != 16 {
		t.Errorf("cancel request of %d bytes, want 16", n)
	}
	nodeSide.Close()
	select {
	case <-released:
	case <-time.After(5 * time.Second):
		t.Fatal("the backend stayed held after the node took the cancel request")
	}
	<-cancelled
}
