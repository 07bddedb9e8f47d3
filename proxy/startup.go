package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/pool"
	"github.com/pgowl/pgowl/proxy/auth"
	"github.com/pgowl/pgowl/route"
	"github.com/pgowl/pgowl/wire"
)

// Startup-phase request codes (the "protocol version" field of an untyped packet).
const (
	codeSSLRequest    = 80877103
	codeGSSENCRequest = 80877104
	codeCancelRequest = 80877102
	protocolV3        = 3 << 16
)

const (
	clientReadBuffer  = 8 << 10
	clientWriteBuffer = 16 << 10
)

// handle runs one client connection from its first byte to its close.
func (s *Server) handle(ctx context.Context, conn net.Conn) {
	defer conn.Close()
	connID := s.nextConnID.Add(1)
	log := s.log.With().Uint64("conn_id", connID).Str("client_addr", conn.RemoteAddr().String()).Logger()
	if err := s.clientTCP.Apply(conn); err != nil {
		log.Warn().Err(err).Msg("could not set TCP keepalive or user timeout on the client connection")
	}

	if n := s.clients.Add(1); n > int64(s.opts.Config.Limits.MaxClientConnections) {
		s.clients.Add(-1)
		// Read the startup packet first so that the client is able to read our answer.
		conn.SetDeadline(time.Now().Add(time.Second))
		r := wire.NewReader(conn, 1024, 10000)
		r.ReadUntyped()
		writeErrorNow(conn, &clientError{Severity: "FATAL", SQLState: sqlstateTooManyConnections,
			Message: fmt.Sprintf("pgowl: sorry, too many clients already (limits.max_client_connections = %d)", s.opts.Config.Limits.MaxClientConnections)})
		log.Warn().Msg("refused client: limits.max_client_connections reached")
		return
	}
	defer s.clients.Add(-1)

	sess := &session{
		srv:    s,
		id:     connID,
		conn:   conn,
		log:    log,
		notice: s.opts.Config.Routing.Notice,
	}
	sess.resetIO(conn)

	deadline := time.Now().Add(s.opts.Config.Limits.StartupTimeout)
	conn.SetDeadline(deadline)
	startupCtx, cancel := context.WithDeadline(ctx, deadline)
	ok := sess.startup(startupCtx)
	cancel()
	if !ok {
		sess.closeBackends()
		return
	}
	conn.SetDeadline(time.Time{})
	key, err := s.register(sess)
	if err != nil {
		sess.fail(err)
		sess.closeBackends()
		return
	}
	defer s.unregister(key)
	if !sess.finishStartup(key) {
		sess.closeBackends()
		return
	}
	sess.run(ctx)
}

// writeErrorNow writes one ErrorResponse straight to a connection.
func writeErrorNow(conn net.Conn, err error) {
	buf, encErr := toErrorResponse(err).Encode(nil)
	if encErr == nil {
		conn.Write(buf)
	}
}

func (sess *session) resetIO(conn net.Conn) {
	sess.conn = conn
	rw := wire.Direct(conn)
	sess.r = wire.NewReader(rw, clientReadBuffer, sess.srv.opts.Config.Limits.MaxMessageSize)
	sess.w = bufio.NewWriterSize(rw, clientWriteBuffer)
}

// startup negotiates encryption, reads the startup packet, authenticates the
// client and logs in to a first node. It returns false when the connection
// should be closed; the client has then been told why.
func (sess *session) startup(ctx context.Context) bool {
	for {
		body, err := sess.r.ReadUntyped()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				var fe *wire.FrameError
				if errors.As(err, &fe) {
					sess.fail(protocolViolation("invalid startup packet: %s", fe.Reason))
				}
				sess.log.Debug().Err(err).Msg("startup failed")
			}
			return false
		}
		code := binary.BigEndian.Uint32(body)
		switch code {
		case codeSSLRequest:
			if sess.r.Buffered() > 0 {
				sess.fail(protocolViolation("received unencrypted data after SSL request"))
				return false
			}
			if sess.srv.opts.TLS == nil {
				sess.conn.Write([]byte{'N'})
				continue
			}
			sess.conn.Write([]byte{'S'})
			tlsConn := tls.Server(sess.conn, sess.srv.opts.TLS)
			if err := tlsConn.HandshakeContext(ctx); err != nil {
				sess.log.Info().Err(err).Msg("TLS handshake failed")
				return false
			}
			sess.resetIO(tlsConn)
			sess.tls = true
			if state := tlsConn.ConnectionState(); len(state.VerifiedChains) > 0 {
				sess.certName = state.PeerCertificates[0].Subject.CommonName
			}
		case codeGSSENCRequest:
			sess.conn.Write([]byte{'N'})
		case codeCancelRequest:
			if len(body) >= 12 {
				sess.srv.cancelFromClient(cancelKey{pid: binary.BigEndian.Uint32(body[4:]), secret: binary.BigEndian.Uint32(body[8:])})
			}
			return false
		default:
			if code>>16 != 3 {
				sess.fail(&clientError{Severity: "FATAL", SQLState: sqlstateFeatureNotSupported,
					Message: fmt.Sprintf("pgowl: unsupported frontend protocol %d.%d: server supports 3.0", code>>16, code&0xffff)})
				return false
			}
			return sess.acceptStartup(ctx, code, body[4:])
		}
	}
}

// acceptStartup handles a v3 StartupMessage body (after the version field).
func (sess *session) acceptStartup(ctx context.Context, version uint32, body []byte) bool {
	params := make(map[string]string)
	var unsupported []string
	for len(body) > 0 && body[0] != 0 {
		name, rest, err := cstring(body)
		if err != nil {
			sess.fail(protocolViolation("invalid startup packet layout: expected terminator as last byte"))
			return false
		}
		value, rest, err := cstring(rest)
		if err != nil {
			sess.fail(protocolViolation("invalid startup packet layout: expected terminator as last byte"))
			return false
		}
		body = rest
		if strings.HasPrefix(name, "_pq_.") {
			unsupported = append(unsupported, name)
			continue
		}
		params[name] = value
	}
	if version != protocolV3 || len(unsupported) > 0 {
		msg := &pgproto3.NegotiateProtocolVersion{NewestMinorProtocol: 0, UnrecognizedOptions: unsupported}
		if err := sess.send(msg); err != nil || sess.w.Flush() != nil {
			return false
		}
	}
	sess.user = params["user"]
	if sess.user == "" {
		sess.fail(&clientError{Severity: "FATAL", SQLState: sqlstateInvalidAuthSpec, Message: "no PostgreSQL user name specified in startup packet"})
		return false
	}
	sess.database = params["database"]
	if sess.database == "" {
		sess.database = sess.user
	}
	if r := params["replication"]; r != "" && r != "false" && r != "off" && r != "0" && r != "no" {
		sess.fail(&clientError{Severity: "FATAL", SQLState: sqlstateFeatureNotSupported, Message: "pgowl: replication connections are not supported; connect to the node directly"})
		return false
	}
	sess.appName = params["application_name"]
	delete(params, "user")
	delete(params, "database")
	delete(params, "replication")
	sess.log = sess.log.With().Str("user", sess.user).Str("database", sess.database).Str("application_name", sess.appName).Logger()
	if sess.database == config.AdminDatabase && sess.srv.opts.Console != nil {
		return sess.serveConsole()
	}

	if err := sess.authenticate(); err != nil {
		reason := err.Error()
		var ae *auth.Error
		if errors.As(err, &ae) && ae.Reason != "" {
			reason = ae.Reason
		}
		sess.log.Warn().Str("reason", reason).Msg("client authentication failed")
		sess.fail(err)
		return false
	}
	sess.login = sess.nodeLogin(params).Keyed()

	// Log in to a first node: it proves the database exists and gives the
	// server parameters the client expects at startup.
	be, err := sess.firstBackend(ctx)
	if err != nil {
		sess.log.Warn().Err(err).Msg("could not log in to any node")
		sess.fail(err)
		return false
	}
	sess.serverParams = be.conn.ParameterStatus
	if strings.EqualFold(be.conn.DefaultIsolation, "serializable") {
		// Every node logs the session in with it: a standby would refuse
		// every statement ("cannot use serializable mode in a hot standby").
		sess.primaryOnly = "a serializable default isolation level (startup parameter, role or database setting)"
	}
	sess.releaseIdle(be)
	return true
}

// firstBackend connects to the primary if one is up, else to any up node.
func (sess *session) firstBackend(ctx context.Context) (*backend, error) {
	snap := sess.srv.opts.Nodes.Snapshot()
	var order []route.NodeState
	for _, n := range snap.Nodes {
		if n.Up && n.Role == route.RolePrimary {
			order = append(order, n)
		}
	}
	for _, n := range snap.Nodes {
		if n.Up && n.Role != route.RolePrimary {
			order = append(order, n)
		}
	}
	if len(order) == 0 {
		return nil, &route.Error{Code: route.NoPrimary, SQLState: sqlstateCannotConnectNow,
			Message: "pgowl: no node is up to log in to", Hint: "This condition is transient: retry shortly."}
	}
	var lastErr error
	for _, n := range order {
		be, err := sess.backendFor(ctx, n.Name, n.Role)
		if err == nil {
			return be, nil
		}
		if pool.PgError(err) != nil {
			return nil, err // the node answered: wrong database, role, ...
		}
		lastErr = err
	}
	return nil, lastErr
}

// finishStartup completes the login with pgowl's own BackendKeyData.
func (sess *session) finishStartup(key cancelKey) bool {
	// Authenticate has sent AuthenticationOk already.
	for name, value := range sess.serverParams {
		sess.send(&pgproto3.ParameterStatus{Name: name, Value: value})
	}
	secret := make([]byte, 4)
	binary.BigEndian.PutUint32(secret, key.secret)
	sess.send(&pgproto3.BackendKeyData{ProcessID: key.pid, SecretKey: secret})
	sess.send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	if err := sess.w.Flush(); err != nil {
		return false
	}
	sess.log.Info().Bool("tls", sess.tls).Msg("client connected")
	return true
}

// clientAuthConn adapts a session to auth.Conn.
type clientAuthConn struct{ sess *session }

func (c clientAuthConn) Send(msg pgproto3.BackendMessage) error {
	if err := c.sess.send(msg); err != nil {
		return err
	}
	return c.sess.w.Flush()
}

func (c clientAuthConn) ReceivePassword() ([]byte, error) {
	typ, body, err := c.sess.r.ReadFrame()
	if err != nil {
		return nil, err
	}
	if typ != 'p' {
		return nil, protocolViolation("expected password response, got message type %q", typ)
	}
	return body, nil
}

func (s *Server) credentialsFor(user string) string {
	for _, u := range s.opts.Config.Users {
		if u.Name == user {
			return u.Password
		}
	}
	return ""
}
