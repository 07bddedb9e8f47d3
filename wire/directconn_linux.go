//go:build linux && !race

package wire

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"unsafe"
)

// rawIO says whether Direct reads and writes sockets with raw system calls
// in this build: on Linux, except under the race detector, which cannot see
// the buffers such calls fill and drain (syscall.Read and Write tell it).
const rawIO = true

// directConn reads and writes a non-blocking socket with syscall.RawSyscall.
//
// Go's ordinary socket calls enter the runtime's system-call state: the
// processor (P) running the goroutine may be taken by the runtime's monitor
// thread after 20 µs and given to another thread, which must be woken; and
// while such calls keep happening the monitor itself wakes every 20 µs to
// look. On loopback a write runs the receiver's whole TCP path inside the
// call, and the woken receiver often preempts the writer, so writes pass
// 20 µs routinely. A profile of pgbench through pgowl at 16 clients showed
// the monitor, the hand-overs and the sleeping threads they wake at about a
// tenth of pgowl's CPU. A read or write on a non-blocking socket returns
// without waiting for the peer (EAGAIN when it would have to, and then the
// goroutine waits in the poller as usual), so it is made without that state.
//
// The price: the goroutine keeps its P for the call's kernel time, which a
// garbage collection's stop-the-world waits for. That time is the
// loopback delivery of at most one buffer (the proxy's are 8-16 KiB), or
// longer only when the kernel itself must wait for memory.
type directConn struct {
	conn net.Conn
	raw  syscall.RawConn
	// A read and a write may be in flight at once, each from its own
	// goroutine; calls in the same direction take turns, as on a net.Conn.
	r, w directCall
}

// directCall holds the arguments and results of one read or write in
// flight, so that its function (bound once) needs no closure per call.
type directCall struct {
	mu    sync.Mutex
	buf   []byte
	n     int
	errno syscall.Errno
	fn    func(fd uintptr) bool
}

func newDirectConn(conn net.Conn, raw syscall.RawConn) io.ReadWriter {
	d := &directConn{conn: conn, raw: raw}
	d.r.fn = d.r.readOnce
	d.w.fn = d.w.writeSome
	return d
}

// readOnce reads once into c.buf; false asks the poller to wait for data.
func (c *directCall) readOnce(fd uintptr) bool {
	for {
		n, _, errno := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(unsafe.SliceData(c.buf))), uintptr(len(c.buf)))
		switch errno {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		c.n, c.errno = int(n), errno
		return true
	}
}

// writeSome writes what is left of c.buf; false asks the poller to wait
// until the socket takes more.
func (c *directCall) writeSome(fd uintptr) bool {
	for c.n < len(c.buf) {
		rest := c.buf[c.n:]
		n, _, errno := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(unsafe.SliceData(rest))), uintptr(len(rest)))
		switch errno {
		case 0:
			if n == 0 {
				c.errno = syscall.EIO // a socket never takes nothing without saying why
				return true
			}
			c.n += int(n)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			c.errno = errno
			return true
		}
	}
	return true
}

// noWait is a read callback that reads nothing: a zero-length Read still
// reports a closed connection or a passed deadline, as net.Conn's does.
func noWait(uintptr) bool { return true }

func (d *directConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, d.opError("read", d.raw.Read(noWait))
	}
	c := &d.r
	c.mu.Lock()
	c.buf, c.n, c.errno = p, 0, 0
	err := d.raw.Read(c.fn)
	n, errno := c.n, c.errno
	c.buf = nil
	c.mu.Unlock()
	switch {
	case err != nil:
		return 0, d.opError("read", err)
	case errno != 0:
		return 0, d.opError("read", os.NewSyscallError("read", errno))
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

func (d *directConn) Write(p []byte) (int, error) {
	c := &d.w
	c.mu.Lock()
	c.buf, c.n, c.errno = p, 0, 0
	err := d.raw.Write(c.fn)
	n, errno := c.n, c.errno
	c.buf = nil
	c.mu.Unlock()
	switch {
	case err != nil:
		return n, d.opError("write", err)
	case errno != 0:
		return n, d.opError("write", os.NewSyscallError("write", errno))
	}
	return n, nil
}

// opError returns err as net.Conn's Read or Write (op) would: a
// *net.OpError naming op and the connection's addresses. The poller's own
// errors (a deadline, a closed connection) come from syscall.RawConn as a
// *net.OpError already, named after the raw call: renamed, not wrapped
// again. nil stays nil.
func (d *directConn) opError(op string, err error) error {
	if err == nil {
		return nil
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		opErr.Op = op
		return opErr
	}
	network := "tcp"
	if addr := d.conn.LocalAddr(); addr != nil {
		network = addr.Network()
	}
	return &net.OpError{Op: op, Net: network, Source: d.conn.LocalAddr(), Addr: d.conn.RemoteAddr(), Err: err}
}
