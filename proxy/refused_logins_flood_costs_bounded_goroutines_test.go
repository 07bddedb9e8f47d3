package proxy

import (
	"io"
	"net"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/rs/zerolog"

	"github.com/pgowl/pgowl/config"
)

// TestRefusedLoginFloodCostsBoundedGoroutines: every refused connection used
// to wait for its startup packet in a goroutine of its own, for up to
// refusedLoginWait. A flood of silent sockets then queued thousands of
// goroutines and timers ahead of the sessions and the node monitor (in CI the
// monitor's samples aged past down_after while a flood of 20,000 was being
// accepted, and SELECT 1 was refused). Past maxCourteousRefusals a refused
// connection gets its 53300 at once and is closed, without a goroutine.
func TestRefusedLoginFloodCostsBoundedGoroutines(t *testing.T) {
	const flood = maxCourteousRefusals + 200
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	srv := &Server{loginLog: &loginLog{log: zerolog.Nop()}}
	srv.settings.Store(&liveSettings{cfg: config.Default()})

	clients := make([]net.Conn, 0, flood)
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	before := runtime.NumGoroutine()
	addr := netip.MustParseAddr("127.0.0.1")
	for range flood {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
		server, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		srv.refuseLogin(server, addr, tooManyLoginsFromAddress)
	}
	if grew := runtime.NumGoroutine() - before; grew > maxCourteousRefusals+20 {
		t.Errorf("%d refused silent connections hold %d more goroutines, want at most %d", flood, grew, maxCourteousRefusals)
	}
	if n := srv.courteousRefusals.Load(); n != maxCourteousRefusals {
		t.Errorf("%d refusals wait for a startup packet, want %d", n, maxCourteousRefusals)
	}

	// A connection past the bound has its refusal and is closed, though it sent nothing.
	last := clients[len(clients)-1]
	last.SetReadDeadline(time.Now().Add(5 * time.Second))
	frontend := pgproto3.NewFrontend(last, io.Discard)
	msg, err := frontend.Receive()
	if err != nil {
		t.Fatalf("a connection refused past the bound got no refusal: %v", err)
	}
	if e, ok := msg.(*pgproto3.ErrorResponse); !ok || e.Code != sqlstateTooManyConnections {
		t.Fatalf("a connection refused past the bound got %#v, want a 53300 ErrorResponse", msg)
	}
	if _, err := frontend.Receive(); err == nil {
		t.Error("a connection refused past the bound stayed open after its refusal")
	}

	// A connection within the bound still reads its refusal after its startup packet.
	first := clients[0]
	startup, err := (&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersionNumber, Parameters: map[string]string{"user": "app"}}).Encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Write(startup); err != nil {
		t.Fatal(err)
	}
	first.SetReadDeadline(time.Now().Add(5 * time.Second))
	msg, err = pgproto3.NewFrontend(first, io.Discard).Receive()
	if e, ok := msg.(*pgproto3.ErrorResponse); err != nil || !ok || e.Code != sqlstateTooManyConnections {
		t.Fatalf("a connection refused within the bound got %#v, %v after its startup packet, want a 53300 ErrorResponse", msg, err)
	}
}
