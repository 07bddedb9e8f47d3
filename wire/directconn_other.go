//go:build !linux

package wire

import (
	"io"
	"net"
	"syscall"
)

// newDirectConn returns conn: the raw-call path is written for Linux only.
func newDirectConn(conn net.Conn, _ syscall.RawConn) io.ReadWriter { return conn }
