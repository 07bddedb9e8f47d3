package auth

import (
	"bytes"
	"crypto/sha256"
	"reflect"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

// TestChannelBinding drives SCRAM-SHA-256-PLUS and its refusals through AuthenticateRequest.
func TestChannelBinding(t *testing.T) {
	salt := []byte("channel-binding!")
	store := NewStore(mustSCRAMCredentials(t, "alice", "pw", salt, SCRAMIterations))
	binding := bytes.Repeat([]byte{7}, sha256.Size)
	plusHeader := "p=tls-server-end-point,,"
	tests := []struct {
		name       string
		binding    []byte // what the server has; nil: no TLS
		mechanism  string
		client     testSCRAMClient
		wantState  string
		wantReason string
	}{
		{name: "PLUS with the right data", binding: binding, mechanism: SCRAMSHA256Plus,
			client: testSCRAMClient{password: "pw", gs2Header: plusHeader, nonce: "c1", bindingData: binding}},
		{name: "plain SCRAM over TLS with n", binding: binding, mechanism: SCRAMSHA256,
			client: testSCRAMClient{password: "pw", gs2Header: "n,,", nonce: "c2"}},
		{name: "PLUS with other data", binding: binding, mechanism: SCRAMSHA256Plus,
			client:    testSCRAMClient{password: "pw", gs2Header: plusHeader, nonce: "c3", bindingData: bytes.Repeat([]byte{8}, sha256.Size)},
			wantState: SQLStateProtocolViolation, wantReason: "tls-server-end-point"},
		{name: "y flag when PLUS was offered is a downgrade", binding: binding, mechanism: SCRAMSHA256,
			client:    testSCRAMClient{password: "pw", gs2Header: "y,,", nonce: "c4"},
			wantState: SQLStateProtocolViolation, wantReason: "thinks the server does not"},
		{name: "PLUS selected without binding data", binding: binding, mechanism: SCRAMSHA256Plus,
			client:    testSCRAMClient{password: "pw", gs2Header: "n,,", nonce: "c5"},
			wantState: SQLStateProtocolViolation, wantReason: "does not include channel binding"},
		{name: "unknown binding type", binding: binding, mechanism: SCRAMSHA256Plus,
			client:    testSCRAMClient{password: "pw", gs2Header: "p=tls-unique,,", nonce: "c6"},
			wantState: SQLStateProtocolViolation, wantReason: "tls-unique"},
		{name: "PLUS without TLS", binding: nil, mechanism: SCRAMSHA256Plus,
			client:    testSCRAMClient{password: "pw", gs2Header: plusHeader, nonce: "c7", bindingData: binding},
			wantState: SQLStateProtocolViolation, wantReason: "was not offered"},
		{name: "wrong password with PLUS", binding: binding, mechanism: SCRAMSHA256Plus,
			client:    testSCRAMClient{password: "nope", gs2Header: plusHeader, nonce: "c8", bindingData: binding},
			wantState: SQLStateInvalidPassword, wantReason: ReasonWrongPassword},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			client := test.client
			conn := &scriptedClient{answer: scramScript(saslInitialBody(test.mechanism, client.clientFirst()), func(sf string) string {
				final, _ := client.clientFinal(t, sf)
				return final
			})}
			result, err := store.AuthenticateRequest(conn, Request{User: "alice", ChannelBinding: test.binding})
			wantMechanisms := []string{SCRAMSHA256}
			if test.binding != nil {
				wantMechanisms = []string{SCRAMSHA256Plus, SCRAMSHA256}
			}
			if first, ok := conn.sent[0].(*pgproto3.AuthenticationSASL); !ok || !reflect.DeepEqual(first.AuthMechanisms, wantMechanisms) {
				t.Fatalf("offered %v, want %v", conn.sent[0], wantMechanisms)
			}
			if test.wantState == "" {
				if err != nil {
					t.Fatal(err)
				}
				if result.ChannelBound != (test.mechanism == SCRAMSHA256Plus) {
					t.Errorf("ChannelBound = %v", result.ChannelBound)
				}
				salted := mustSaltedPassword(t, "pw", salt, SCRAMIterations)
				if want := hmacSHA256(salted, "Client Key"); !bytes.Equal(result.ClientKey, want[:]) {
					t.Errorf("ClientKey is not the client's")
				}
				return
			}
			ae := authError(t, err)
			if ae.SQLState != test.wantState || !strings.Contains(ae.Reason+ae.Message, test.wantReason) {
				t.Fatalf("got %v, want %s / %q", ae, test.wantState, test.wantReason)
			}
		})
	}
}

// TestCertificateMethod checks the cert method against the certificate's common name, for known and unknown users.
func TestCertificateMethod(t *testing.T) {
	creds, err := NewCredentials("bob", "pw", MethodSCRAMSHA256)
	if err != nil {
		t.Fatal(err)
	}
	store := NewStore(creds)
	tests := []struct {
		user, certName string
		wantOK         bool
	}{
		{"bob", "bob", true},
		{"bob", "", false},
		{"bob", "alice", false},
		{"ghost", "ghost", false},
	}
	for _, test := range tests {
		conn := &scriptedClient{answer: func(pgproto3.BackendMessage) ([]byte, error) {
			t.Fatal("the cert method must not read a password")
			return nil, nil
		}}
		_, err := store.AuthenticateRequest(conn, Request{User: test.user, Method: MethodCert, Override: true, CertificateName: test.certName})
		if test.wantOK {
			if err != nil {
				t.Errorf("%s with certificate %q: %v", test.user, test.certName, err)
			}
			continue
		}
		if ae := authError(t, err); ae.SQLState != SQLStateInvalidAuthorization {
			t.Errorf("%s with certificate %q: %v, want 28000", test.user, test.certName, ae)
		}
	}
}

// TestMethodOverride checks that a rule's method replaces the user's, md5 falling back to SCRAM
// for a user without an MD5 hash.
func TestMethodOverride(t *testing.T) {
	md5User, err := NewCredentials("mia", "pw", MethodMD5)
	if err != nil {
		t.Fatal(err)
	}
	verifierOnly := mustSCRAMCredentials(t, "vera", "pw", []byte("verifier-only-16"), SCRAMIterations)
	store := NewStore(md5User, verifierOnly)
	firstRequest := func(user string, method Method) pgproto3.BackendMessage {
		conn := &scriptedClient{answer: func(pgproto3.BackendMessage) ([]byte, error) { return nil, errClientGaveUp }}
		store.AuthenticateRequest(conn, Request{User: user, Method: method, Override: true})
		return conn.sent[0]
	}
	if _, ok := firstRequest("mia", MethodSCRAMSHA256).(*pgproto3.AuthenticationSASL); !ok {
		t.Error("an md5 user asked for SCRAM by a rule did not get SCRAM")
	}
	if _, ok := firstRequest("mia", MethodMD5).(*pgproto3.AuthenticationMD5Password); !ok {
		t.Error("an md5 user asked for md5 by a rule did not get md5")
	}
	if _, ok := firstRequest("vera", MethodMD5).(*pgproto3.AuthenticationSASL); !ok {
		t.Error("a user known by its SCRAM verifier only, asked for md5, did not get SCRAM")
	}
	if _, ok := firstRequest("mia", MethodTrust).(*pgproto3.AuthenticationOk); !ok {
		t.Error("trust did not let the user in")
	}
}

// TestMD5RuleAsksUnknownUsersForMD5Too checks that under a rule asking for md5, an unknown user
// meets the same challenge as a configured one and the same refusal as a wrong password.
func TestMD5RuleAsksUnknownUsersForMD5Too(t *testing.T) {
	creds, err := NewCredentials("mia", "pw", MethodSCRAMSHA256)
	if err != nil {
		t.Fatal(err)
	}
	store := NewStore(creds)
	var refusals []*Error
	for _, user := range []string{"mia", "ghost"} {
		conn := &scriptedClient{answer: func(last pgproto3.BackendMessage) ([]byte, error) {
			if _, ok := last.(*pgproto3.AuthenticationMD5Password); ok {
				return []byte("md5" + strings.Repeat("0", 32) + "\x00"), nil
			}
			return nil, errClientGaveUp
		}}
		_, err := store.AuthenticateRequest(conn, Request{User: user, Method: MethodMD5, Override: true})
		if _, ok := conn.sent[0].(*pgproto3.AuthenticationMD5Password); !ok {
			t.Fatalf("%s was asked %T, want an MD5 challenge", user, conn.sent[0])
		}
		refusals = append(refusals, authError(t, err))
	}
	if refusals[0].SQLState != refusals[1].SQLState || refusals[1].Reason != ReasonUnknownUser ||
		refusals[0].Message != strings.Replace(refusals[1].Message, "ghost", "mia", 1) {
		t.Fatalf("refusals differ: %v / %v", refusals[0], refusals[1])
	}
}
