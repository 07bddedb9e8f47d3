package nodetls

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/wire"
)

// sslRequestCode is the protocol code of an SSLRequest.
const sslRequestCode = 80877103

// ErrTLSRefused is returned (wrapped) when a node, or a peer, answers SSLRequest with N and the
// mode requires TLS.
var ErrTLSRefused = errors.New("TLS refused")

// tlsRefused is ErrTLSRefused naming what refused it and the section whose mode requires it.
type tlsRefused struct{ what, key string }

func (e *tlsRefused) Error() string {
	return "the " + e.what + " refused TLS (it answered N to SSLRequest), and " + e.key + ".sslmode requires it"
}

func (e *tlsRefused) Is(target error) bool { return target == ErrTLSRefused }

// ErrNoSSLAnswer is returned (wrapped) when Settings.AnswerWait passed without an answer to
// SSLRequest.
var ErrNoSSLAnswer = errors.New("no answer to SSLRequest")

// Apply makes cfg, parsed from a ConnString of s, negotiate TLS on the connection it dials, as
// libpq does: pgconn would answer a node that refuses TLS under prefer by opening a second
// connection, and a backend process is started for each attempt. Apply moves the TLS
// configuration pgconn built for the mode into cfg.DialFunc, which sends SSLRequest on the new
// connection and, under prefer, goes on in plain TCP on the same connection when the node
// answers N. Call it after setting cfg.DialFunc; connections over Unix sockets stay plain. It
// also drops the time zone and options pgconn took from PGTZ and PGOPTIONS.
func (s Settings) Apply(cfg *pgconn.Config) {
	// pgconn takes the session's time zone and command-line options from PGTZ and PGOPTIONS
	// when the connection string leaves them out, as node connection strings always do: a
	// node connection's settings come from the configuration (and for a client's backend, from
	// the client), not from pgowl's environment.
	delete(cfg.RuntimeParams, "timezone")
	delete(cfg.RuntimeParams, "options")
	tlsConfig := cfg.TLSConfig
	cfg.TLSConfig = nil
	cfg.Fallbacks = nil
	if tlsConfig == nil {
		return
	}
	required := s.SSLMode != "" && s.SSLMode != config.SSLPrefer
	dial := cfg.DialFunc
	if dial == nil {
		dialer := &net.Dialer{KeepAlive: 5 * time.Minute}
		dial = dialer.DialContext
	}
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil || network == "unix" {
			return conn, err
		}
		secured, err := s.negotiate(ctx, conn, tlsConfig, required)
		if err != nil {
			conn.Close()
			return nil, err
		}
		return secured, nil
	}
}

// negotiate sends SSLRequest on conn and returns the TLS connection, or conn itself when the node
// (or peer) answers N and TLS is not required.
func (s Settings) negotiate(ctx context.Context, conn net.Conn, tlsConfig *tls.Config, required bool) (net.Conn, error) {
	what, key := s.toward()
	deadline, hasDeadline := ctx.Deadline()
	if hasDeadline {
		conn.SetDeadline(deadline)
	}
	// The answer's own bound, when it is tighter than the dial's: set before a cancel can set
	// its past deadline (below), which must not be overwritten.
	answerLimited := false
	if s.AnswerWait > 0 {
		if limit := time.Now().Add(s.AnswerWait); !hasDeadline || limit.Before(deadline) {
			conn.SetReadDeadline(limit)
			answerLimited = true
		}
	}
	// A cancelled dial (pool.AbandonDials, for a node that stopped answering) must end the
	// wait for the node's answer at once, not at the dial's deadline.
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer func() {
		if stop() {
			conn.SetDeadline(time.Time{})
		}
	}()
	request := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, 8), sslRequestCode)
	if _, err := conn.Write(request); err != nil {
		return nil, fmt.Errorf("send SSLRequest: %w", err)
	}
	var answer [1]byte
	if _, err := conn.Read(answer[:]); err != nil {
		var timeout net.Error
		switch {
		case ctx.Err() != nil:
			err = fmt.Errorf("%w (%w)", ctx.Err(), err)
		case answerLimited && errors.As(err, &timeout) && timeout.Timeout():
			return nil, fmt.Errorf("%w within %s: %w", ErrNoSSLAnswer, s.AnswerWait, err)
		}
		return nil, fmt.Errorf("read the answer to SSLRequest: %w", err)
	}
	if answerLimited {
		conn.SetReadDeadline(deadline) // the dial's again (the zero time: none)
	}
	switch answer[0] {
	case wire.SSLAccepted:
		tlsConn := tls.Client(conn, tlsConfig)
		if err := tlsConn.HandshakeContext(ctx); err != nil {
			return nil, fmt.Errorf("TLS handshake with the %s: %w", what, err)
		}
		return tlsConn, nil
	case wire.SSLRefused:
		if required {
			return nil, &tlsRefused{what: what, key: key}
		}
		return conn, nil
	default:
		return nil, fmt.Errorf("the %s answered SSLRequest with %q, not S or N", what, answer[0])
	}
}

// DialCancel opens the connection a CancelRequest for a backend on address goes over, secured as
// every other connection to the node is: under prefer, require and the verify modes it sends
// SSLRequest first and the request goes inside TLS (PostgreSQL reads a CancelRequest after an
// SSLRequest as after none), so that the backend's secret key never crosses the network in the
// clear; under prefer a node that answers N gets it in plain TCP on the same connection, as it
// gets the other connections. libpq before PostgreSQL 17 sends cancels without TLS. Unix
// sockets and sslmode disable stay plain. address is where the backend's connection went (an
// IP address); host is the node's host as configured, which verify-full checks the node's
// certificate against, as for every other connection ("": address's host).
func (s Settings) DialCancel(ctx context.Context, network, address, host string) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, address)
	if err != nil || network == "unix" || s.SSLMode == config.SSLDisable {
		return conn, err
	}
	addressHost, port, err := net.SplitHostPort(address)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if host == "" {
		host = addressHost
	}
	parsed, err := pgconn.ParseConfig(s.ConnString(Param{Key: "host", Value: host}, Param{Key: "port", Value: port}))
	if err != nil {
		conn.Close()
		_, key := s.toward()
		return nil, fmt.Errorf("%s settings for a cancel request: %w", key, err)
	}
	if parsed.TLSConfig == nil {
		return conn, nil
	}
	required := s.SSLMode != "" && s.SSLMode != config.SSLPrefer
	secured, err := s.negotiate(ctx, conn, parsed.TLSConfig, required)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return secured, nil
}
