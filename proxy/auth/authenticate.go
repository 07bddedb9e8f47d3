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
	if rnd == nil {
		rnd = rand.Reader
	}
	creds, ok := s.Lookup(user)
	if !ok {
		return s.authenticateUnknown(c, user, rnd)
	}
	switch creds.method {
	case MethodSCRAMSHA256:
		return authenticateSCRAM(c, creds, rnd, false)
	case MethodMD5:
		return authenticateMD5(c, creds, rnd)
	case MethodTrust:
		return send(c, &pgproto3.AuthenticationOk{})
	default:
		return fmt.Errorf("auth: user %q has unknown method %d", user, uint8(creds.method))
	}
}

// authenticateSCRAM runs AuthenticationSASL, SASLContinue and SASLFinal for creds; doomed fakes the exchange for an unknown user.
func authenticateSCRAM(c Conn, creds *Credentials, rnd io.Reader, doomed bool) error {
	nonce := make([]byte, serverNonceLen)
	if _, err := io.ReadFull(rnd, nonce); err != nil {
		return fmt.Errorf("auth: generate SCRAM nonce: %w", err)
	}
	x := &scramExchange{creds: creds, serverNonce: base64.StdEncoding.EncodeToString(nonce), doomed: doomed}

	if err := send(c, &pgproto3.AuthenticationSASL{AuthMechanisms: []string{SCRAMSHA256}}); err != nil {
		return err
	}
	body, err := receive(c)
	if err != nil {
		return err
	}
	initial, perr := parseSASLInitialResponse(body)
	if perr != nil {
		return perr
	}
	if initial.mechanism != SCRAMSHA256 {
		return protocolViolation("client selected an invalid SASL authentication mechanism",
			"mechanism "+strconv.Quote(truncate(initial.mechanism, 32))+" was not offered")
	}
	clientFirst := string(initial.data)
	if !initial.hasData {
		// No initial response: send an empty challenge, the client answers with client-first-message.
		if err := send(c, &pgproto3.AuthenticationSASLContinue{Data: []byte{}}); err != nil {
			return err
		}
		if body, err = receive(c); err != nil {
			return err
		}
		clientFirst = string(body)
	}

	serverFirst, perr := x.clientFirst(clientFirst)
	if perr != nil {
		return perr
	}
	if err := send(c, &pgproto3.AuthenticationSASLContinue{Data: []byte(serverFirst)}); err != nil {
		return err
	}
	if body, err = receive(c); err != nil {
		return err
	}
	serverFinal, perr := x.clientFinal(string(body))
	if perr != nil {
		return perr
	}
	if err := send(c, &pgproto3.AuthenticationSASLFinal{Data: []byte(serverFinal)}); err != nil {
		return err
	}
	return send(c, &pgproto3.AuthenticationOk{})
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
	if subtle.ConstantTimeCompare(got, []byte(want)) != 1 {
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
