package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

// Fuzz inputs use this user, password and salt; the seed corpus in
// testdata/fuzz/FuzzSCRAMExchange contains valid proofs for them with the
// zeroReader server nonce.
const (
	fuzzUser     = "alice"
	fuzzPassword = "secret"
	fuzzSalt     = "fuzz-salt-16byte"
)

// FuzzSCRAMExchange feeds arbitrary SASLInitialResponse and SASLResponse bodies to Store.Authenticate.
//
// Properties: no panic; failures are *Error values with one of the documented
// SQLSTATEs (or the scripted client giving up) and never follow an
// AuthenticationOk; success happens only for the configured user and only with
// a proof that an independent computation accepts.
func FuzzSCRAMExchange(f *testing.F) {
	creds := mustSCRAMCredentials(f, fuzzUser, fuzzPassword, []byte(fuzzSalt), SCRAMIterations)
	salted := mustSaltedPassword(f, fuzzPassword, []byte(fuzzSalt), SCRAMIterations)
	store := NewStore(creds)

	f.Fuzz(func(t *testing.T, initial, final []byte) {
		for _, user := range []string{fuzzUser, "nobody"} {
			answers := [][]byte{initial, final}
			conn := &scriptedClient{answer: func(pgproto3.BackendMessage) ([]byte, error) {
				if len(answers) == 0 {
					return nil, errClientGaveUp
				}
				next := answers[0]
				answers = answers[1:]
				return next, nil
			}}
			err := store.Authenticate(conn, user, zeroReader{})
			if err == nil {
				if user != fuzzUser {
					t.Fatalf("unknown user authenticated with %q / %q", initial, final)
				}
				checkAcceptedProof(t, salted, conn, string(initial), string(final))
				continue
			}
			for _, m := range conn.sent {
				if _, ok := m.(*pgproto3.AuthenticationOk); ok {
					t.Fatalf("AuthenticationOk sent before failure %v", err)
				}
			}
			if errors.Is(err, errClientGaveUp) {
				continue
			}
			var ae *Error
			if !errors.As(err, &ae) {
				t.Fatalf("failure is %T, not *Error: %v", err, err)
			}
			switch ae.SQLState {
			case SQLStateInvalidPassword:
				want := ReasonWrongPassword
				if user != fuzzUser {
					want = ReasonUnknownUser
				}
				if ae.Reason != want || ae.Message != `password authentication failed for user "`+user+`"` {
					t.Fatalf("user %q: %v", user, ae)
				}
			case SQLStateProtocolViolation, SQLStateFeatureNotSupported:
				if ae.Message == "" || ae.Reason == "" {
					t.Fatalf("incomplete error %#v", ae)
				}
			default:
				t.Fatalf("unexpected SQLSTATE in %v", ae)
			}
		}
	})
}

// checkAcceptedProof recomputes, independently of the server code, the proof and signature of an accepted exchange.
func checkAcceptedProof(t *testing.T, salted []byte, conn *scriptedClient, initial, final string) {
	t.Helper()
	if len(conn.sent) < 2 {
		t.Fatalf("success after %v", conn.sentTypes())
	}
	serverFinal, ok := conn.sent[len(conn.sent)-2].(*pgproto3.AuthenticationSASLFinal)
	if !ok {
		t.Fatalf("success without SASLFinal: %v", conn.sentTypes())
	}
	// Success needs the initial response inline: mechanism, NUL, 4-byte length, then the gs2 header and the bare message.
	nul := strings.IndexByte(initial, 0)
	if nul < 0 || len(initial) < nul+5+3 {
		t.Fatalf("accepted SASLInitialResponse %q", initial)
	}
	clientFirst := initial[nul+5:]
	if gs2 := clientFirst[:3]; gs2 != "n,," && gs2 != "y,," {
		t.Fatalf("accepted gs2 header %q", gs2)
	}
	proofAt := strings.LastIndex(final, ",p=")
	if proofAt < 0 {
		t.Fatalf("accepted final message without proof: %q", final)
	}
	proof, err := base64.StdEncoding.DecodeString(final[proofAt+3:])
	if err != nil || len(proof) != sha256.Size {
		t.Fatalf("accepted malformed proof in %q", final)
	}
	mac := func(key []byte, msg string) []byte {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(msg))
		return h.Sum(nil)
	}
	clientKey := mac(salted, "Client Key")
	storedKey := sha256.Sum256(clientKey)
	authMessage := clientFirst[3:] + "," + conn.serverFirst() + "," + final[:proofAt]
	signature := mac(storedKey[:], authMessage)
	for i := range proof {
		proof[i] ^= signature[i]
	}
	if !hmac.Equal(proof, clientKey) {
		t.Fatalf("server accepted a proof that does not match the password: %q", final)
	}
	wantServerFinal := "v=" + base64.StdEncoding.EncodeToString(mac(mac(salted, "Server Key"), authMessage))
	if string(serverFinal.Data) != wantServerFinal {
		t.Fatalf("server-final %q, want %q", serverFinal.Data, wantServerFinal)
	}
}

// FuzzSCRAMPlusExchange is FuzzSCRAMExchange on a TLS connection, where SCRAM-SHA-256-PLUS is
// offered: arbitrary SASLInitialResponse and SASLResponse bodies, and a channel binding the
// client may or may not repeat.
//
// Properties: no panic; failures are *Error values with a documented SQLSTATE and never follow
// an AuthenticationOk; success happens only for the configured user, with c= holding the gs2
// header and, for -PLUS, this connection's binding data, and with a proof of the password.
func FuzzSCRAMPlusExchange(f *testing.F) {
	creds := mustSCRAMCredentials(f, fuzzUser, fuzzPassword, []byte(fuzzSalt), SCRAMIterations)
	salted := mustSaltedPassword(f, fuzzPassword, []byte(fuzzSalt), SCRAMIterations)
	store := NewStore(creds)
	binding := []byte("0123456789abcdef0123456789abcdef")
	plus := &testSCRAMClient{gs2Header: "p=tls-server-end-point,,", nonce: "fuzz", saltedPassword: salted, bindingData: binding}
	serverFirst := "r=fuzz" + zeroNonce() + ",s=" + base64.StdEncoding.EncodeToString([]byte(fuzzSalt)) + ",i=4096"
	final, _ := plus.clientFinal(f, serverFirst)
	f.Add(saslInitialBody(SCRAMSHA256Plus, plus.clientFirst()), []byte(final))
	f.Add(saslInitialBody(SCRAMSHA256, "y,,n=,r=fuzz"), []byte(final))
	f.Add(saslInitialBody(SCRAMSHA256Plus, "p=tls-unique,,n=,r=fuzz"), []byte(final))

	f.Fuzz(func(t *testing.T, initial, final []byte) {
		for _, user := range []string{fuzzUser, "nobody"} {
			answers := [][]byte{initial, final}
			conn := &scriptedClient{answer: func(pgproto3.BackendMessage) ([]byte, error) {
				if len(answers) == 0 {
					return nil, errClientGaveUp
				}
				next := answers[0]
				answers = answers[1:]
				return next, nil
			}}
			result, err := store.AuthenticateRequest(conn, Request{User: user, ChannelBinding: binding, Rand: zeroReader{}})
			if err == nil {
				if user != fuzzUser {
					t.Fatalf("unknown user authenticated with %q / %q", initial, final)
				}
				nul := strings.IndexByte(string(initial), 0)
				clientFirst := string(initial[nul+5:])
				gs2End := strings.Index(clientFirst, ",,") + 2
				want := []byte(clientFirst[:gs2End])
				if result.ChannelBound {
					want = append(want, binding...)
				}
				if !strings.HasPrefix(string(final), "c="+base64.StdEncoding.EncodeToString(want)+",") {
					t.Fatalf("accepted c= without the gs2 header and binding: %q", final)
				}
				if hmac.Equal(result.ClientKey, nil) || !hmac.Equal(result.ClientKey, mac256(salted, "Client Key")) {
					t.Fatalf("accepted a proof that is not the password's")
				}
				continue
			}
			for _, m := range conn.sent {
				if _, ok := m.(*pgproto3.AuthenticationOk); ok {
					t.Fatalf("AuthenticationOk sent before failure %v", err)
				}
			}
			if errors.Is(err, errClientGaveUp) {
				continue
			}
			var ae *Error
			if !errors.As(err, &ae) {
				t.Fatalf("failure is %T, not *Error: %v", err, err)
			}
			switch ae.SQLState {
			case SQLStateInvalidPassword, SQLStateProtocolViolation, SQLStateFeatureNotSupported:
			default:
				t.Fatalf("unexpected SQLSTATE in %v", ae)
			}
		}
	})
}

// mac256 returns HMAC-SHA-256(key, message).
func mac256(key []byte, message string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(message))
	return h.Sum(nil)
}
