//go:build !linux || race

package wire

import (
	"io"
	"net"
	"syscall"
)

// rawIO: the raw-call path is written for Linux only, and race builds keep
// the ordinary calls, whose buffers the race detector sees.
const rawIO = false

// newDirectConn returns conn itself.
func newDirectConn(conn net.Conn, _ syscall.RawConn) io.ReadWriter { return conn }
