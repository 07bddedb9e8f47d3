package auth

import (
	"bytes"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

// errClientGaveUp is returned by scriptedClient when its script has no answer for the last message.
var errClientGaveUp = errors.New("scripted client has no answer")

// scriptedClient is a Conn whose answers are computed from the last message the server sent.
type scriptedClient struct {
	sent   []pgproto3.BackendMessage
	answer func(last pgproto3.BackendMessage) ([]byte, error)
}

// Send records msg after checking that it encodes.
func (c *scriptedClient) Send(msg pgproto3.BackendMessage) error {
	if _, err := msg.Encode(nil); err != nil {
		return err
	}
	c.sent = append(c.sent, msg)
	return nil
}

// ReceivePassword asks the script for the answer to the last message sent.
func (c *scriptedClient) ReceivePassword() ([]byte, error) {
	if len(c.sent) == 0 {
		return nil, errClientGaveUp
	}
	return c.answer(c.sent[len(c.sent)-1])
}

// sentTypes lists the Go types of the messages the server sent, for transcript comparisons.
func (c *scriptedClient) sentTypes() []string {
	types := make([]string, len(c.sent))
	for i, m := range c.sent {
		types[i] = fmt.Sprintf("%T", m)
	}
	return types
}

// serverFirst returns the data of the last non-empty SASLContinue the server sent.
func (c *scriptedClient) serverFirst() string {
	for i := len(c.sent) - 1; i >= 0; i-- {
		if m, ok := c.sent[i].(*pgproto3.AuthenticationSASLContinue); ok && len(m.Data) > 0 {
			return string(m.Data)
		}
	}
	return ""
}

// saslInitialBody encodes a SASLInitialResponse body: mechanism, NUL, Int32 length, data.
func saslInitialBody(mechanism string, data string) []byte {
	body := append([]byte(mechanism), 0)
	body = binary.BigEndian.AppendUint32(body, uint32(len(data)))
	return append(body, data...)
}

// testSCRAMClient is an independent client-side SCRAM-SHA-256 implementation used to drive the server.
type testSCRAMClient struct {
	password  string
	gs2Header string // "n,," or "y,,"
	nonce     string
	// userName goes into n=; libpq and pgx leave it empty because the server uses the startup user.
	userName string
	// extensions is appended to the client-first-message-bare, e.g. ",x=ext".
	extensions string
	// finalExtensions is inserted before the proof of the client-final-message, e.g. ",y=ext".
	finalExtensions string
	// saltedPassword, when set, replaces the PBKDF2 result so tests can skip key derivation.
	saltedPassword []byte
	// bindingData follows the gs2 header in c= (tls-server-end-point data for "p=..." headers).
	bindingData []byte
}

// clientFirst returns the client-first-message.
func (tc *testSCRAMClient) clientFirst() string {
	return tc.gs2Header + "n=" + tc.userName + ",r=" + tc.nonce + tc.extensions
}

// clientFinal computes the client-final-message for serverFirst and the server signature to expect.
func (tc *testSCRAMClient) clientFinal(t testing.TB, serverFirst string) (final, wantServerFinal string) {
	t.Helper()
	fields := strings.Split(serverFirst, ",")
	if len(fields) != 3 || !strings.HasPrefix(fields[0], "r=") || !strings.HasPrefix(fields[1], "s=") || !strings.HasPrefix(fields[2], "i=") {
		t.Fatalf("unexpected server-first-message %q", serverFirst)
	}
	nonce := fields[0][2:]
	salt, err := base64.StdEncoding.DecodeString(fields[1][2:])
	if err != nil {
		t.Fatalf("salt in %q: %v", serverFirst, err)
	}
	iterations, err := strconv.Atoi(fields[2][2:])
	if err != nil {
		t.Fatalf("iterations in %q: %v", serverFirst, err)
	}
	if !strings.HasPrefix(nonce, tc.nonce) || len(nonce) == len(tc.nonce) {
		t.Fatalf("server nonce %q does not extend client nonce %q", nonce, tc.nonce)
	}
	salted := tc.saltedPassword
	if salted == nil {
		salted, err = pbkdf2.Key(sha256.New, tc.password, salt, iterations, sha256.Size)
		if err != nil {
			t.Fatal(err)
		}
	}
	mac := func(key []byte, msg string) []byte {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(msg))
		return h.Sum(nil)
	}
	clientKey := mac(salted, "Client Key")
	storedKey := sha256.Sum256(clientKey)
	withoutProof := "c=" + base64.StdEncoding.EncodeToString(append([]byte(tc.gs2Header), tc.bindingData...)) + ",r=" + nonce + tc.finalExtensions
	authMessage := strings.TrimPrefix(tc.clientFirst(), tc.gs2Header) + "," + serverFirst + "," + withoutProof
	signature := mac(storedKey[:], authMessage)
	proof := make([]byte, len(clientKey))
	for i := range clientKey {
		proof[i] = clientKey[i] ^ signature[i]
	}
	serverSignature := mac(mac(salted, "Server Key"), authMessage)
	return withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof),
		"v=" + base64.StdEncoding.EncodeToString(serverSignature)
}

// scramScript answers AuthenticationSASL with initial and the server-first-message with final(serverFirst).
func scramScript(initial []byte, final func(serverFirst string) string) func(pgproto3.BackendMessage) ([]byte, error) {
	return func(last pgproto3.BackendMessage) ([]byte, error) {
		switch m := last.(type) {
		case *pgproto3.AuthenticationSASL:
			return initial, nil
		case *pgproto3.AuthenticationSASLContinue:
			return []byte(final(string(m.Data))), nil
		}
		return nil, errClientGaveUp
	}
}

// mustSCRAMCredentials builds SCRAM credentials with a fixed salt, failing the test on error.
func mustSCRAMCredentials(t testing.TB, user, password string, salt []byte, iterations int) *Credentials {
	t.Helper()
	creds, err := newSCRAMCredentials(user, password, salt, iterations)
	if err != nil {
		t.Fatal(err)
	}
	return creds
}

// authError asserts that err is an *Error and returns it.
func authError(t testing.TB, err error) *Error {
	t.Helper()
	var ae *Error
	if !errors.As(err, &ae) {
		t.Fatalf("want *auth.Error, got %T: %v", err, err)
	}
	return ae
}

// zeroReader yields zero bytes, making nonces and salts predictable.
type zeroReader struct{}

// Read fills p with zeros.
func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// zeroNonce returns the server nonce Authenticate derives from zeroReader.
func zeroNonce() string {
	return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0}, serverNonceLen))
}

// mustSaltedPassword runs PBKDF2-HMAC-SHA-256 for the test client, failing the test on error.
func mustSaltedPassword(t testing.TB, password string, salt []byte, iterations int) []byte {
	t.Helper()
	salted, err := pbkdf2.Key(sha256.New, password, salt, iterations, sha256.Size)
	if err != nil {
		t.Fatal(err)
	}
	return salted
}
