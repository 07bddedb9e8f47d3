package proxy

import (
	"bufio"
	"errors"
	"net"

	"github.com/pgowl/pgowl/wire"
)

// clientConn is the session's client connection: the socket, the framed
// reader and buffered writer over it, and what the login learnt about it.
// Its state is set once by the login (TLS may replace the socket before the
// startup packet) and then only used.
type clientConn struct {
	conn net.Conn
	r    *wire.Reader
	w    *bufio.Writer
	tls  bool
	// certName is the common name of the client's verified TLS certificate, "" without one.
	certName string
	// clientKey is the SCRAM ClientKey the client's proof revealed, for SCRAM passthrough to the nodes.
	clientKey []byte
}

// reset makes conn the client connection, with a fresh reader (bounded by
// loginMessageLimit until the login is over) and writer: at accept, and
// again when TLS replaces the plain socket.
func (c *clientConn) reset(conn net.Conn) {
	c.conn = conn
	rw := wire.Direct(conn)
	c.r = wire.NewReader(rw, clientReadBuffer, loginMessageLimit)
	c.w = bufio.NewWriterSize(rw, clientWriteBuffer)
}

// clientSideError marks an error on the client's side of the session (reading
// from or writing to the client): the client connection cannot continue, and
// no backend is to blame.
type clientSideError struct{ err error }

func (e *clientSideError) Error() string { return e.err.Error() }
func (e *clientSideError) Unwrap() error { return e.err }

// clientSide reports whether err happened on the client's side of the
// session (see clientSideError).
func clientSide(err error) bool {
	var cs *clientSideError
	return errors.As(err, &cs)
}

// write appends frame to what the client is sent; an error is the client's side.
func (c *clientConn) write(frame []byte) error {
	if _, err := c.w.Write(frame); err != nil {
		return &clientSideError{err}
	}
	return nil
}

// flush sends the client what is buffered for it; an error is the client's side.
func (c *clientConn) flush() error {
	if err := c.w.Flush(); err != nil {
		return &clientSideError{err}
	}
	return nil
}

// readFrame reads the client's next message; an error is the client's side.
// The body is valid until the next read.
func (c *clientConn) readFrame() (typ byte, body []byte, err error) {
	typ, body, err = c.r.ReadFrame()
	if err != nil {
		return typ, nil, &clientSideError{err}
	}
	return typ, body, nil
}
