package proxy

import (
	"bufio"
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

// clientSideError marks an error on the client's side of the session (reading
// from or writing to the client): the client connection cannot continue, and
// no backend is to blame.
type clientSideError struct{ err error }

func (e *clientSideError) Error() string { return e.err.Error() }
func (e *clientSideError) Unwrap() error { return e.err }
