//go:build unix

package pool

import (
	"crypto/tls"
	"syscall"

	"golang.org/x/sys/unix"
)

// quiet reports whether nothing is waiting to be read on c, which the caller
// owns and which is idle: one non-blocking peek at the socket, nothing
// consumed. Buffered bytes, bytes in the socket, an end of stream or an error
// all mean the connection is not quietly idle.
func (c *Conn) quiet() bool {
	if c.Reader.Buffered() > 0 {
		return false
	}
	netConn := c.netConn
	if tlsConn, ok := netConn.(*tls.Conn); ok {
		// Any byte in the socket under TLS is a record the node sent: an
		// alert, or a message, and neither is quiet.
		netConn = tlsConn.NetConn()
	}
	sc, ok := netConn.(syscall.Conn)
	if !ok {
		return true // no socket to look at (a test's pipe)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var buf [1]byte
	var peekErr error
	if err := raw.Read(func(fd uintptr) bool {
		_, _, peekErr = unix.Recvfrom(int(fd), buf[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		return true // never wait for the socket: "would block" is the answer wanted
	}); err != nil {
		return false
	}
	// Only "would block" is quiet: a byte is something the node sent, and a
	// peek of nothing without an error is the end of the stream.
	return peekErr == unix.EAGAIN
}
