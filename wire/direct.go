package wire

import (
	"io"
	"net"
	"syscall"
)

// Direct returns an io.ReadWriter over conn for the proxy's hot path. On
// Linux, for a connection that exposes its socket (plain TCP and Unix
// sockets, not TLS), it reads and writes with raw system calls on the
// non-blocking socket and waits for readiness through Go's poller: a read
// or write there never blocks, so it need not hand the goroutine's
// processor to another thread for the call's length, as an ordinary
// blocking-capable system call does. On a busy proxy each such hand-over
// is a thread wake-up (see directconn_linux.go). Elsewhere, for TLS, and in
// race builds (whose detector sees only the ordinary calls' buffers) it
// returns conn.
//
// Deadlines, Close and the errors a caller sees behave as with conn: a
// closed connection reports net.ErrClosed, a deadline
// os.ErrDeadlineExceeded, the end of the stream io.EOF, and a failed call a
// *net.OpError around the system call's error.
func Direct(conn net.Conn) io.ReadWriter {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return conn
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return conn
	}
	return newDirectConn(conn, raw)
}
