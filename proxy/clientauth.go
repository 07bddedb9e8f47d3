package proxy

import (
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"net"
	"net/netip"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/pool"
	"github.com/pgowl/pgowl/proxy/access"
	"github.com/pgowl/pgowl/proxy/auth"
)

// authenticate applies tls.client_mode and the access rules to the startup user and database,
// then runs the authentication exchange the deciding rule (or the user's method) asks for.
func (sess *session) authenticate() error {
	mode := sess.srv.live().cfg.TLS.ClientMode
	switch mode {
	case config.ClientTLSRequire, config.ClientTLSVerifyCA, config.ClientTLSVerifyFull:
		if !sess.client.tls {
			return &clientError{Severity: "FATAL", SQLState: sqlstateInvalidAuthSpec,
				Message: fmt.Sprintf("pgowl: TLS is required (tls.client_mode = %s): connect with sslmode=require or stronger", mode)}
		}
	}
	if mode == config.ClientTLSVerifyFull && sess.client.certName != sess.user {
		return &clientError{Severity: "FATAL", SQLState: sqlstateInvalidAuthSpec,
			Message: fmt.Sprintf("pgowl: the client certificate's common name does not match user %q (tls.client_mode = verify-full)", sess.user)}
	}
	login := access.Login{Addr: remoteAddr(sess.client.conn), TLS: sess.client.tls, Database: sess.database, User: sess.user}
	decision := sess.srv.live().access.Decide(login)
	request := auth.Request{User: sess.user, CertificateName: sess.client.certName, Rand: rand.Reader}
	if sess.client.tls {
		request.ChannelBinding = sess.srv.live().channelBinding
	}
	switch decision.Method {
	case access.MethodUser:
	case access.MethodReject:
		encryption := "no encryption"
		if sess.client.tls {
			encryption = "TLS"
		}
		what := "no access rule admits"
		if decision.Rule >= 0 {
			what = fmt.Sprintf("access.rules[%d] rejects", decision.Rule)
		}
		sess.log.Info().Int("rule", decision.Rule).Msg("login refused by the access rules")
		return &clientError{Severity: "FATAL", SQLState: sqlstateInvalidAuthSpec,
			Message: fmt.Sprintf("pgowl: %s host %q, user %q, database %q, %s", what, login.Addr, sess.user, sess.database, encryption)}
	default:
		request.Override = true
		request.Method = authMethod(decision.Method)
	}
	result, err := sess.srv.live().auth.AuthenticateRequest(clientAuthConn{sess}, request)
	if err != nil {
		return err
	}
	sess.client.clientKey = result.ClientKey
	sess.log.Debug().Int("rule", decision.Rule).Str("method", result.Method.String()).
		Bool("channel_binding", result.ChannelBound).Msg("client authenticated")
	return nil
}

// authMethod converts a rule's method into the exchange auth runs.
func authMethod(m access.Method) auth.Method {
	switch m {
	case access.MethodMD5:
		return auth.MethodMD5
	case access.MethodTrust:
		return auth.MethodTrust
	case access.MethodCert:
		return auth.MethodCert
	}
	return auth.MethodSCRAMSHA256
}

// remoteAddr returns the IP address of the client, the zero Addr when it has none (a Unix socket).
func remoteAddr(conn net.Conn) netip.Addr {
	if addrPort, err := netip.ParseAddrPort(conn.RemoteAddr().String()); err == nil {
		return addrPort.Addr().Unmap()
	}
	if tcp, ok := conn.RemoteAddr().(*net.TCPAddr); ok {
		addr, _ := netip.AddrFromSlice(tcp.IP)
		return addr.Unmap()
	}
	return netip.Addr{}
}

// nodeLogin returns how the session logs in to the nodes: with the user's password from the users
// list when pgowl has one, otherwise with SCRAM passthrough when the client proved itself with
// SCRAM against a verifier (users file or auth query). A user pgowl knows only by its verifier
// and who logged in without SCRAM (trust or cert) gets no secret: the nodes must trust it.
func (sess *session) nodeLogin(params map[string]string) pool.Login {
	login := pool.Login{User: sess.user, Password: sess.srv.credentialsFor(sess.user), Database: sess.database, Params: params}
	if login.Password != "" || len(sess.client.clientKey) != sha256.Size {
		return login
	}
	creds, ok := sess.srv.live().auth.Lookup(sess.user)
	if !ok || !creds.FromVerifier() {
		return login
	}
	keys := &pool.SCRAMKeys{ServerKey: creds.ServerKey()}
	copy(keys.ClientKey[:], sess.client.clientKey)
	login.SCRAM = keys
	return login
}
