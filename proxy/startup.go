package proxy

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/netip"
	"strings"
	"syscall"
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

// loginMessageLimit is the largest message a client may send before its
// login is over: the password and SASL messages of authentication are far
// shorter. A longer one is refused from its header (FATAL 08P01), so a
// client that has not authenticated cannot make pgowl allocate more than
// this per connection. After the login, limits.max_message_size applies.
const loginMessageLimit = auth.MaxPasswordMessageLen

// admit lets a connection from addr start its login (it then holds a place in the
// login gate, which handle gives back), or says which limit refuses it. It runs in
// the accept loop, before the connection costs a goroutine.
func (s *Server) admit(addr netip.Addr) loginRefusal {
	refusal := s.logins.enter(addr)
	if refusal == admitted && s.clients.Load() >= int64(s.live().cfg.Limits.MaxClientConnections) {
		// The login could only be refused at its end: refuse it before it costs anything.
		s.logins.leave(addr)
		refusal = tooManyClients
	}
	return refusal
}

// handle runs one client connection that admit let in (from addr), from its
// first byte to its close.
func (s *Server) handle(ctx context.Context, conn net.Conn, addr netip.Addr) {
	defer conn.Close()
	connID := s.nextConnID.Add(1)
	log := s.log.With().Uint64("conn_id", connID).Str("client_addr", conn.RemoteAddr().String()).Logger()
	if err := s.live().clientTCP.Apply(conn); err != nil {
		log.Warn().Err(err).Msg("could not set TCP keepalive or user timeout on the client connection")
	}

	inGate := true
	leaveGate := func() {
		if inGate {
			inGate = false
			s.logins.leave(addr)
		}
	}
	defer leaveGate()

	sess := &session{
		srv: s,
		id:  connID,
		log: log,
	}
	sess.client.reset(conn)

	deadline := time.Now().Add(s.live().cfg.Limits.StartupTimeout)
	conn.SetDeadline(deadline)
	startupCtx, cancel := context.WithDeadline(ctx, deadline)
	ok := sess.startup(startupCtx)
	timedOut := !time.Now().Before(deadline)
	cancel()
	leaveGate()
	if !ok {
		if timedOut {
			s.loginLog.note(loginTimedOut, addr, fmt.Sprintf("no complete login within %s", s.live().cfg.Limits.StartupTimeout))
		}
		sess.closeBackends()
		return
	}
	if n := s.clients.Add(1); n > int64(s.live().cfg.Limits.MaxClientConnections) {
		s.clients.Add(-1)
		s.loginLog.note(loginRefused, addr, tooManyClients.String())
		sess.fail(tooManyClientsError(tooManyClients, s.live().cfg.Limits))
		sess.closeBackends()
		return
	}
	defer s.clients.Add(-1)
	// The login is over: from now on a message may be as long as the configured limit.
	sess.client.r.SetMaxBody(s.live().cfg.Limits.MaxMessageSize)
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

// refusedLoginWait bounds how long a refused connection is read for its
// startup packet, so that the client is able to read the refusal.
const refusedLoginWait = time.Second

// maxCourteousRefusals bounds the refused connections that wait for their
// startup packet at once, each in a goroutine of its own. Past it, a refused
// connection gets its 53300 at once and is closed, from the accept loop: a
// flood of sockets then costs no goroutine and no timer each, and does not
// queue thousands of runnable goroutines ahead of the sessions and the node
// monitor (whose samples would age past down_after, and every statement be
// refused, while the flood is being accepted).
const maxCourteousRefusals = 256

// refuseLogin answers a connection that a limit refuses before its login and
// logs the refusal. While fewer than maxCourteousRefusals are being answered, it
// reads the connection's startup packet first (briefly, in a goroutine), so
// that the client reads the refusal rather than a reset; past that, it writes
// the refusal and closes the connection at once.
//
// A connection that turns out to carry a CancelRequest is no login: the request is acted on, as
// PostgreSQL's postmaster acts on one whatever its connection limits, since a client at the
// limit is the one most likely to need to stop a statement.
func (s *Server) refuseLogin(conn net.Conn, addr netip.Addr, refusal loginRefusal) {
	refusalErr := tooManyClientsError(refusal, s.live().cfg.Limits)
	if s.courteousRefusals.Add(1) > maxCourteousRefusals {
		s.courteousRefusals.Add(-1)
		s.loginLog.note(loginRefused, addr, refusal.String())
		conn.SetWriteDeadline(time.Now().Add(refusedLoginWait))
		writeErrorNow(conn, refusalErr)
		conn.Close()
		return
	}
	go func() {
		defer s.courteousRefusals.Add(-1)
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(refusedLoginWait))
		if !s.cancelOrRefuse(conn, refusalErr) {
			s.loginLog.note(loginRefused, addr, refusal.String())
		}
	}()
}

// cancelOrRefuse reads a connection pgowl refuses (a limit, the drain) past its encryption
// requests: a CancelRequest is acted on, and it reports true; anything else gets refusal (a
// silent or broken connection nothing). conn's deadline bounds it; the caller closes conn.
func (s *Server) cancelOrRefuse(conn net.Conn, refusal error) (cancelled bool) {
	answerOn, body, err := s.readPastNegotiation(conn)
	if answerOn != conn {
		defer answerOn.Close()
	}
	if err != nil {
		return false
	}
	if k, ok := cancelRequestKey(body); ok {
		s.cancelFromClient(k)
		return true
	}
	writeErrorNow(answerOn, refusal)
	return false
}

// readPastNegotiation reads a connection pgowl refuses (a limit, the drain), or one to the
// peering listener (servePeer), up to the packet after its encryption requests, as startup does: an SSLRequest gets TLS when it is configured
// (and N when not), a GSSENCRequest gets N. A client that sends its cancel over TLS, as pgx and
// libpq 17 do when their connection used TLS, is then read too. It returns the connection to
// answer on (the TLS one after a handshake, else conn) and that packet. conn's deadline bounds it.
func (s *Server) readPastNegotiation(conn net.Conn) (net.Conn, []byte, error) {
	r := wire.NewReader(conn, 1024, wire.MaxStartupPacketLen)
	answerOn := conn
	var sslDone, gssDone bool
	for {
		body, err := r.ReadUntyped()
		if err != nil {
			return answerOn, nil, err
		}
		switch code := binary.BigEndian.Uint32(body); {
		case code == codeSSLRequest && !sslDone && r.Buffered() == 0:
			sslDone = true
			tlsConfig := s.live().tls
			if tlsConfig == nil {
				answerOn.Write([]byte{wire.SSLRefused})
				continue
			}
			answerOn.Write([]byte{wire.SSLAccepted})
			secured := tls.Server(conn, tlsConfig)
			if err := secured.Handshake(); err != nil {
				return answerOn, nil, err
			}
			answerOn = secured
			r = wire.NewReader(secured, 1024, wire.MaxStartupPacketLen)
		case code == codeGSSENCRequest && !gssDone && !sslDone:
			gssDone = true
			answerOn.Write([]byte{wire.SSLRefused})
		default:
			return answerOn, body, nil
		}
	}
}

// cancelRequestKey returns the key a CancelRequest packet carries (body as ReadUntyped returns
// it: the request code, then the process ID and secret), or false when body is not a
// CancelRequest PostgreSQL would act on (it ignores one of the wrong length).
func cancelRequestKey(body []byte) (cancelKey, bool) {
	if len(body) != 12 || binary.BigEndian.Uint32(body) != codeCancelRequest {
		return cancelKey{}, false
	}
	return cancelKey{pid: binary.BigEndian.Uint32(body[4:]), secret: binary.BigEndian.Uint32(body[8:])}, true
}

// cancelRequestPacket is the CancelRequest for the backend pid with secret (4 bytes in protocol
// 3.0, longer in 3.2), as a client sends it.
func cancelRequestPacket(pid uint32, secret []byte) []byte {
	pkt := make([]byte, 0, 12+len(secret))
	pkt = binary.BigEndian.AppendUint32(pkt, uint32(12+len(secret)))
	pkt = binary.BigEndian.AppendUint32(pkt, codeCancelRequest)
	pkt = binary.BigEndian.AppendUint32(pkt, pid)
	return append(pkt, secret...)
}

// tooManyClientsError is the 53300 a client gets when a connection limit refuses it.
func tooManyClientsError(refusal loginRefusal, limits config.Limits) *clientError {
	var value int
	switch refusal {
	case tooManyLogins:
		value = limits.MaxLoginsInProgress
	case tooManyLoginsFromAddress:
		value = limits.MaxLoginsInProgressPerAddress
	default:
		value = limits.MaxClientConnections
	}
	message := fmt.Sprintf("pgowl: sorry, too many clients already (%s = %d)", refusal, value)
	if refusal != tooManyClients {
		message = fmt.Sprintf("pgowl: sorry, too many logins in progress (%s = %d)", refusal, value)
	}
	return &clientError{Severity: "FATAL", SQLState: sqlstateTooManyConnections, Message: message}
}

// writeErrorNow writes one ErrorResponse straight to a connection.
func writeErrorNow(conn net.Conn, err error) {
	buf, encErr := toErrorResponse(err).Encode(nil)
	if encErr == nil {
		conn.Write(buf)
	}
}

// startup negotiates encryption, reads the startup packet, authenticates the
// client and logs in to a first node. It returns false when the connection
// should be closed; the client has then been told why.
//
// As in PostgreSQL, an SSLRequest and a GSSENCRequest may each come once,
// before the startup packet; a repeated one (an SSLRequest inside TLS
// included) is answered as the unsupported protocol version its code is.
func (sess *session) startup(ctx context.Context) bool {
	var sslDone, gssDone bool
	for {
		body, err := sess.client.r.ReadUntyped()
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
		switch {
		case code == codeSSLRequest && !sslDone:
			if sess.client.r.Buffered() > 0 {
				sess.fail(protocolViolation("received unencrypted data after SSL request"))
				return false
			}
			sslDone = true
			if sess.srv.live().tls == nil {
				sess.client.conn.Write([]byte{wire.SSLRefused})
				continue
			}
			sess.client.conn.Write([]byte{wire.SSLAccepted})
			tlsConn := tls.Server(sess.client.conn, sess.srv.live().tls)
			if err := tlsConn.HandshakeContext(ctx); err != nil {
				sess.log.Info().Err(err).Msg("TLS handshake failed")
				return false
			}
			sess.client.reset(tlsConn)
			sess.client.tls = true
			if state := tlsConn.ConnectionState(); len(state.VerifiedChains) > 0 {
				sess.client.certName = state.PeerCertificates[0].Subject.CommonName
			}
			gssDone = true // no GSSAPI encryption inside TLS
		case code == codeGSSENCRequest && !gssDone:
			if sess.client.r.Buffered() > 0 {
				sess.fail(protocolViolation("received unencrypted data after GSSAPI encryption request"))
				return false
			}
			gssDone = true
			sess.client.conn.Write([]byte{wire.SSLRefused})
		case code == codeCancelRequest:
			if k, ok := cancelRequestKey(body); ok {
				sess.srv.cancelFromClient(k)
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
	// PostgreSQL's rule: the list ends with one NUL, the packet's last byte.
	if len(body) != 1 {
		sess.fail(protocolViolation("invalid startup packet layout: expected terminator as last byte"))
		return false
	}
	if version != protocolV3 || len(unsupported) > 0 {
		// PostgreSQL 15 puts its whole protocol version there (3.0: 196608), and libpq 18 reads
		// the field as a whole version: a 0 would read as protocol 0.0.
		msg := &pgproto3.NegotiateProtocolVersion{NewestMinorProtocol: protocolV3, UnrecognizedOptions: unsupported}
		if err := sess.send(msg); err != nil || sess.client.w.Flush() != nil {
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
	sess.loginApplication = params["application_name"]
	appName := sess.loginApplication
	sess.appName.Store(&appName)
	delete(params, "user")
	delete(params, "database")
	delete(params, "replication")
	logBeforeLogin := sess.log
	sess.log = sess.log.With().Str("user", sess.user).Str("database", sess.database).Str("application_name", sess.loginApplication).Logger()
	if sess.database == config.AdminDatabase && sess.srv.opts.Console != nil {
		return sess.serveConsole()
	}

	if err := sess.authenticate(); err != nil {
		if clientGone(err) {
			// The client left or stayed silent past limits.startup_timeout:
			// as PostgreSQL, say nothing more to it.
			sess.log.Debug().Err(err).Msg("client left during authentication")
			return false
		}
		reason := err.Error()
		var ae *auth.Error
		if errors.As(err, &ae) && ae.Reason != "" {
			reason = ae.Reason
		}
		sess.log.Warn().Str("reason", reason).Msg("client authentication failed")
		sess.fail(err)
		return false
	}
	if err := sess.startupReadAfter(params); err != nil {
		err.Severity = "FATAL"
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
	if reported, ok := sess.serverParams["application_name"]; ok && reported != sess.loginApplication {
		// The node's word: a name given in the startup options (-c application_name=...) or by
		// a role's or the database's default, or the startup one as PostgreSQL keeps it (ASCII,
		// 63 bytes at most).
		sess.loginApplication = reported
		sess.log = logBeforeLogin.With().Str("user", sess.user).Str("database", sess.database).Str("application_name", reported).Logger()
	}
	sess.followApplicationName(sess.loginApplication)
	sess.reported = maps.Clone(sess.serverParams)
	if strings.EqualFold(be.conn.DefaultIsolation, "serializable") {
		// Every node logs the session in with it: a standby would refuse
		// every statement ("cannot use serializable mode in a hot standby").
		sess.settings.primaryOnly |= route.SerializableAtLogin
	}
	sess.releaseIdle(be)
	return true
}

// firstBackend connects to the primary if one is up, else to any up node.
func (sess *session) firstBackend(ctx context.Context) (*backend, error) {
	snap := sess.srv.opts.Nodes.Snapshot()
	order, err := route.PlanLogin(snap)
	if err != nil {
		return nil, err
	}
	var lastErr error
	for _, i := range order {
		n := &snap.Nodes[i]
		be, err := sess.backendFor(ctx, n.Name, n.Role, waitInTurn)
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
	sess.send(&pgproto3.ReadyForQuery{TxStatus: wire.TxIdle})
	if err := sess.client.w.Flush(); err != nil {
		return false
	}
	sess.log.Info().Bool("tls", sess.client.tls).Msg("client connected")
	return true
}

// clientAuthConn adapts a session to auth.Conn.
type clientAuthConn struct{ sess *session }

func (c clientAuthConn) Send(msg pgproto3.BackendMessage) error {
	if err := c.sess.send(msg); err != nil {
		return err
	}
	return c.sess.client.w.Flush()
}

// ReceivePassword reads the client's next authentication message under
// loginMessageLimit; a malformed or oversized frame is a FATAL 08P01, told
// from its header alone.
func (c clientAuthConn) ReceivePassword() ([]byte, error) {
	typ, body, err := c.sess.client.r.ReadFrame()
	if err != nil {
		var fe *wire.FrameError
		switch {
		case errors.Is(err, wire.ErrMessageTooLarge):
			return nil, protocolViolation("invalid authentication message: %v", err)
		case errors.As(err, &fe):
			return nil, protocolViolation("invalid authentication message: %s", fe.Reason)
		}
		return nil, err
	}
	if typ != wire.MsgPasswordMessage {
		return nil, protocolViolation("expected password response, got message type %q", typ)
	}
	return body, nil
}

// clientGone reports an error that means the client cannot read an answer:
// it closed the connection, or did not send in time.
func clientGone(err error) bool {
	var ne net.Error
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || (errors.As(err, &ne) && ne.Timeout())
}

func (s *Server) credentialsFor(user string) string {
	for _, u := range s.live().cfg.Users {
		if u.Name == user {
			return u.Password
		}
	}
	return ""
}

// application returns the session's application_name now.
func (sess *session) application() string {
	if name := sess.appName.Load(); name != nil {
		return *name
	}
	return "" // before the startup packet is read
}

// followApplicationName follows the session's application_name to value, which the node reported
// (ParameterStatus, relayed to the client) after the session changed it: SET, RESET, set_config,
// SET LOCAL and the end of its block, DISCARD ALL. Guards match it, and the admin side's list of
// clients shows it, as pg_stat_activity does.
func (sess *session) followApplicationName(value string) {
	if value != sess.application() {
		sess.appName.Store(&value)
	}
}

// followParameterStatus records that the client is told name's value (a ParameterStatus of the
// node's, passed on), remembering the value before for the block it may belong to
// (restoreReportedParameters), and follows application_name.
func (sess *session) followParameterStatus(name, value string) {
	if sess.reportedBefore == nil {
		sess.reportedBefore = make(map[string]string)
	}
	if _, ok := sess.reportedBefore[name]; !ok {
		sess.reportedBefore[name] = sess.reported[name]
	}
	if sess.reported == nil {
		sess.reported = make(map[string]string)
	}
	sess.reported[name] = value
	if name == "application_name" {
		sess.followApplicationName(value)
	}
}

// restoreReportedParameters follows the loss of the backend of a transaction block: the settings
// the block changed go back to their values before it, and the client, which the node had told
// of the changes, is told of their values again (a ROLLBACK would have told it so).
func (sess *session) restoreReportedParameters() {
	for name, before := range sess.reportedBefore {
		if sess.reported[name] == before {
			continue
		}
		sess.reported[name] = before
		sess.send(&pgproto3.ParameterStatus{Name: name, Value: before})
		if name == "application_name" {
			sess.followApplicationName(before)
		}
	}
	sess.reportedBefore = nil
}

// parameterStatusFields reads a ParameterStatus body: the setting's name and its value.
func parameterStatusFields(body []byte) (name, value string, ok bool) {
	name, rest, found := strings.Cut(string(body), "\x00")
	if !found {
		return "", "", false
	}
	value, _, found = strings.Cut(rest, "\x00")
	return name, value, found
}
