package wire

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"
)

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
// tenth of pgowl's CPU. A read or write on a non-blocking socket returns at
// once (EAGAIN when it would block, and then the goroutine waits in the
// poller as usual), so it is safe to make without that state.
type directConn struct {
	conn net.Conn
	raw  syscall.RawConn
	// A read and a write may be in flight at once, each from its own goroutine.
	r, w directCall
}

// directCall holds the arguments and results of one read or write in
// flight, so that its function (bound once) needs no closure per call.
type directCall struct {
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

// readOnce reads once into d.buf; false asks the poller to wait for data.
func (d *directCall) readOnce(fd uintptr) bool {
	n, _, errno := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(unsafe.SliceData(d.buf))), uintptr(len(d.buf)))
	if errno == syscall.EINTR {
		return d.readOnce(fd)
	}
	if errno == syscall.EAGAIN {
		return false
	}
	d.n, d.errno = int(n), errno
	return true
}

// writeSome writes what is left of d.buf; false asks the poller to wait
// until the socket takes more.
func (d *directCall) writeSome(fd uintptr) bool {
	for d.n < len(d.buf) {
		rest := d.buf[d.n:]
		n, _, errno := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(unsafe.SliceData(rest))), uintptr(len(rest)))
		switch errno {
		case 0:
			d.n += int(n)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			d.errno = errno
			return true
		}
	}
	return true
}

func (d *directConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c := &d.r
	c.buf, c.n, c.errno = p, 0, 0
	err := d.raw.Read(c.fn)
	n, errno := c.n, c.errno
	c.buf = nil
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
	c.buf, c.n, c.errno = p, 0, 0
	err := d.raw.Write(c.fn)
	n, errno := c.n, c.errno
	c.buf = nil
	switch {
	case err != nil:
		return n, d.opError("write", err)
	case errno != 0:
		return n, d.opError("write", os.NewSyscallError("write", errno))
	}
	return n, nil
}

// opError wraps err as the net package would for a call on d.conn. A
// deadline or a closed connection is reported as the poller reported it.
func (d *directConn) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: d.conn.LocalAddr().Network(), Source: d.conn.LocalAddr(), Addr: d.conn.RemoteAddr(), Err: err}
}
