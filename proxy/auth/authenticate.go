package auth

import (
	"bytes"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"io"
	"strconv"

	"github.com/jackc/pgx/v5/pgproto3"
)

// MaxPasswordMessageLen is the largest password-message body Authenticate accepts; Conn implementations should also cap their reads at it.
const MaxPasswordMessageLen = 4096

// Conn is what an authentication exchange needs from the client connection; the proxy implements it over its framing.
type Conn interface {
	// Send encodes, writes and flushes one message to the client.
	Send(msg pgproto3.BackendMessage) error
	// ReceivePassword returns the body of the next client message of type 'p'
	// (PasswordMessage, SASLInitialResponse or SASLResponse), without the type
	// byte and length. It returns an error if the client sent another message
	// type or closed the connection. The body may be reused by the next call.
	ReceivePassword() (body []byte, err error)
}

// Authenticate runs the authentication exchange for the startup user on c.
//
// On success it has sent AuthenticationOk (after AuthenticationSASLFinal for
// SCRAM) and returns nil; the caller continues with ParameterStatus,
// BackendKeyData and ReadyForQuery. On failure it returns an *Error and sends
// nothing more: the caller converts it with Error.ErrorResponse, sends it and
// closes. Errors from c are returned wrapped (errors.As finds an *Error a Conn
// returns). rnd supplies nonces and salts; nil means crypto/rand.Reader.
//
// An unknown user gets a complete fake exchange (SCRAM or md5: see
// fakeMethod) that fails with the same client-visible error as a wrong
// password. No key derivation runs here.
func (s *Store) Authenticate(c Conn, user string, rnd io.Reader) error {
	_, err := s.AuthenticateRequest(c, Request{User: user, Rand: rnd})
	return err
}

// Request is one client's authentication: who it says it is and what its connection offers.
type Request struct {
	// User is the startup user.
	User string
	// Method, when Override is set, replaces the user's configured method (an access rule decided it).
	Method   Method
	Override bool
	// ChannelBinding is the connection's tls-server-end-point data; when set, SCRAM-SHA-256-PLUS is
	// offered next to SCRAM-SHA-256. Nil on a connection without TLS.
	ChannelBinding []byte
	// CertificateName is the common name of the client's TLS certificate, verified against the
	// configured client CAs; empty when the client presented none. MethodCert compares it with User.
	CertificateName string
	// Rand supplies nonces and salts; nil means crypto/rand.Reader.
	Rand io.Reader
}

// Result is what a successful authentication learnt.
type Result struct {
	// Method is the method the client passed.
	Method Method
	// ChannelBound is true when the client passed SCRAM-SHA-256-PLUS.
	ChannelBound bool
	// ClientKey is the SCRAM ClientKey the client's proof revealed (nil for other methods). With the
	// StoredKey it proves knowledge of the password to a node that holds the same verifier.
	ClientKey []byte
}

// AuthenticateRequest is Authenticate for a Request: it may override the method, offer channel
// binding and accept a client certificate, and it returns what the exchange learnt.
//
// A method the user's credentials cannot serve falls back as in PostgreSQL: md5 for a user known
// only by its SCRAM verifier runs SCRAM.
func (s *Store) AuthenticateRequest(c Conn, r Request) (Result, error) {
	rnd := r.Rand
	if rnd == nil {
		rnd = rand.Reader
	}
	creds, ok := s.Lookup(r.User)
	if !ok {
		return Result{}, s.authenticateUnknown(c, r, rnd)
	}
	method := creds.method
	if r.Override {
		method = r.Method
	}
	if method == MethodMD5 && creds.md5Hash == "" {
		method = MethodSCRAMSHA256
	}
	switch method {
	case MethodSCRAMSHA256:
		if !creds.hasSCRAM() {
			return Result{}, passwordFailed(r.User, "the user has no SCRAM verifier")
		}
		x, err := authenticateSCRAM(c, creds, r.ChannelBinding, rnd, false)
		if err != nil {
			return Result{}, err
		}
		return Result{Method: MethodSCRAMSHA256, ChannelBound: x.plus, ClientKey: append([]byte(nil), x.clientKey[:]...)}, nil
	case MethodMD5:
		return Result{Method: MethodMD5}, authenticateMD5(c, creds, rnd)
	case MethodTrust:
		return Result{Method: MethodTrust}, send(c, &pgproto3.AuthenticationOk{})
	case MethodCert:
		if r.CertificateName == "" {
			return Result{}, certificateFailed(r.User, "the client presented no certificate")
		}
		if subtle.ConstantTimeCompare([]byte(r.CertificateName), []byte(r.User)) != 1 {
			return Result{}, certificateFailed(r.User, "the certificate's common name "+strconv.Quote(truncate(r.CertificateName, 64))+" is not the user name")
		}
		return Result{Method: MethodCert}, send(c, &pgproto3.AuthenticationOk{})
	default:
		return Result{}, fmt.Errorf("auth: user %q has unknown method %d", r.User, uint8(method))
	}
}

// authenticateSCRAM runs AuthenticationSASL, SASLContinue and SASLFinal for creds, offering
// SCRAM-SHA-256-PLUS when channelBinding is set; doomed fakes the exchange for an unknown user.
func authenticateSCRAM(c Conn, creds *Credentials, channelBinding []byte, rnd io.Reader, doomed bool) (*scramExchange, error) {
	nonce := make([]byte, serverNonceLen)
	if _, err := io.ReadFull(rnd, nonce); err != nil {
		return nil, fmt.Errorf("auth: generate SCRAM nonce: %w", err)
	}
	x := &scramExchange{creds: creds, serverNonce: base64.StdEncoding.EncodeToString(nonce), doomed: doomed, channelBinding: channelBinding}
	mechanisms := []string{SCRAMSHA256}
	if channelBinding != nil {
		// PostgreSQL lists the -PLUS variant first.
		mechanisms = []string{SCRAMSHA256Plus, SCRAMSHA256}
	}
	if err := send(c, &pgproto3.AuthenticationSASL{AuthMechanisms: mechanisms}); err != nil {
		return nil, err
	}
	body, err := receive(c)
	if err != nil {
		return nil, err
	}
	initial, perr := parseSASLInitialResponse(body)
	if perr != nil {
		return nil, perr
	}
	switch {
	case initial.mechanism == SCRAMSHA256:
	case initial.mechanism == SCRAMSHA256Plus && channelBinding != nil:
		x.plus = true
	default:
		return nil, protocolViolation("client selected an invalid SASL authentication mechanism",
			"mechanism "+strconv.Quote(truncate(initial.mechanism, 32))+" was not offered")
	}
	clientFirst := string(initial.data)
	if !initial.hasData {
		// No initial response: send an empty challenge, the client answers with client-first-message.
		if err := send(c, &pgproto3.AuthenticationSASLContinue{Data: []byte{}}); err != nil {
			return nil, err
		}
		if body, err = receive(c); err != nil {
			return nil, err
		}
		clientFirst = string(body)
	}
	serverFirst, perr := x.clientFirst(clientFirst)
	if perr != nil {
		return nil, perr
	}
	if err := send(c, &pgproto3.AuthenticationSASLContinue{Data: []byte(serverFirst)}); err != nil {
		return nil, err
	}
	if body, err = receive(c); err != nil {
		return nil, err
	}
	serverFinal, perr := x.clientFinal(string(body))
	if perr != nil {
		return nil, perr
	}
	if err := send(c, &pgproto3.AuthenticationSASLFinal{Data: []byte(serverFinal)}); err != nil {
		return nil, err
	}
	return x, send(c, &pgproto3.AuthenticationOk{})
}

// authenticateMD5 sends a random 4-byte salt and checks "md5"+md5hex(md5hex(password+user)+salt).
func authenticateMD5(c Conn, creds *Credentials, rnd io.Reader) error {
	var salt [4]byte
	if _, err := io.ReadFull(rnd, salt[:]); err != nil {
		return fmt.Errorf("auth: generate MD5 salt: %w", err)
	}
	if err := send(c, &pgproto3.AuthenticationMD5Password{Salt: salt}); err != nil {
		return err
	}
	body, err := receive(c)
	if err != nil {
		return err
	}
	nul := bytes.IndexByte(body, 0)
	if nul != len(body)-1 {
		return protocolViolation("invalid password packet size", "password message is not one NUL-terminated string")
	}
	got := body[:nul]
	if len(got) == 0 {
		return passwordFailed(creds.user, creds.failureReason())
	}
	want := "md5" + md5Hex(append([]byte(creds.md5Hash), salt[:]...))
	if creds.unknown || subtle.ConstantTimeCompare(got, []byte(want)) != 1 {
		return passwordFailed(creds.user, creds.failureReason())
	}
	return send(c, &pgproto3.AuthenticationOk{})
}

// send writes one message to the client, wrapping transport errors.
func send(c Conn, msg pgproto3.BackendMessage) error {
	if err := c.Send(msg); err != nil {
		return fmt.Errorf("auth: send %T: %w", msg, err)
	}
	return nil
}

// receive reads the next password-message body and enforces MaxPasswordMessageLen.
func receive(c Conn) ([]byte, error) {
	body, err := c.ReceivePassword()
	if err != nil {
		return nil, fmt.Errorf("auth: receive password message: %w", err)
	}
	if len(body) > MaxPasswordMessageLen {
		return nil, protocolViolation("invalid password packet size",
			"password message of "+strconv.Itoa(len(body))+" bytes exceeds "+strconv.Itoa(MaxPasswordMessageLen))
	}
	return body, nil
}
