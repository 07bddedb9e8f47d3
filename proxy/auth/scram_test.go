package auth

import (
	"encoding/base64"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// TestSCRAMRFC7677Vector replays the SCRAM-SHA-256 example of RFC 7677 section 3 through the server exchange.
func TestSCRAMRFC7677Vector(t *testing.T) {
	const (
		clientFirst = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
		serverNonce = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
		serverFirst = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
		clientFinal = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
		serverFinal = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
	)
	salt, err := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	if err != nil {
		t.Fatal(err)
	}
	creds := mustSCRAMCredentials(t, "user", "pencil", salt, 4096)

	tests := []struct {
		name        string
		clientFinal string
		wantFinal   string
		wantReason  string
	}{
		{name: "valid proof", clientFinal: clientFinal, wantFinal: serverFinal},
		{
			name:        "proof with one byte changed",
			clientFinal: strings.Replace(clientFinal, "p=dHzb", "p=eHzb", 1),
			wantReason:  ReasonWrongPassword,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := &scramExchange{creds: creds, serverNonce: serverNonce}
			gotFirst, perr := x.clientFirst(clientFirst)
			if perr != nil {
				t.Fatalf("clientFirst: %v", perr)
			}
			if gotFirst != serverFirst {
				t.Fatalf("server-first-message\n got %q\nwant %q", gotFirst, serverFirst)
			}
			gotFinal, perr := x.clientFinal(tt.clientFinal)
			if tt.wantReason != "" {
				if perr == nil || perr.Reason != tt.wantReason || perr.SQLState != SQLStateInvalidPassword {
					t.Fatalf("want 28P01 %q, got final %q err %v", tt.wantReason, gotFinal, perr)
				}
				return
			}
			if perr != nil {
				t.Fatalf("clientFinal: %v", perr)
			}
			if gotFinal != tt.wantFinal {
				t.Fatalf("server-final-message\n got %q\nwant %q", gotFinal, tt.wantFinal)
			}
		})
	}
}

// TestDoomedExchangeFailsWithValidProof checks that the fake exchange for unknown users fails even on a correct proof.
func TestDoomedExchangeFailsWithValidProof(t *testing.T) {
	creds := mustSCRAMCredentials(t, "ghost", "boo", []byte("0123456789abcdef"), 1)
	client := &testSCRAMClient{password: "boo", gs2Header: "n,,", nonce: "clientnonce"}
	x := &scramExchange{creds: creds, serverNonce: "servernonce", doomed: true}
	first, perr := x.clientFirst(client.clientFirst())
	if perr != nil {
		t.Fatal(perr)
	}
	final, _ := client.clientFinal(t, first)
	if _, perr := x.clientFinal(final); perr == nil || perr.Reason != ReasonUnknownUser {
		t.Fatalf("want failure with reason %q, got %v", ReasonUnknownUser, perr)
	}
}

// TestAuthenticateSCRAM drives Store.Authenticate with a scripted client through good and malformed exchanges.
func TestAuthenticateSCRAM(t *testing.T) {
	const user, password = "alice", "s3cret"
	store := NewStore(mustSCRAMCredentials(t, user, password, []byte("fixed-salt-bytes"), SCRAMIterations))
	good := &testSCRAMClient{password: password, gs2Header: "n,,", nonce: "cnonce"}
	goodFinal := func(serverFirst string) string {
		final, _ := good.clientFinal(t, serverFirst)
		return final
	}
	wrong := &testSCRAMClient{password: "not-" + password, gs2Header: "n,,", nonce: "cnonce"}
	wrongFinal := func(serverFirst string) string {
		final, _ := wrong.clientFinal(t, serverFirst)
		return final
	}
	// rewriteFinal builds a final-message producer that edits the correct final message.
	rewriteFinal := func(edit func(string) string) func(string) string {
		return func(serverFirst string) string { return edit(goodFinal(serverFirst)) }
	}
	nonce := "r=cnonce" + zeroNonce()
	initial := saslInitialBody(SCRAMSHA256, good.clientFirst())

	tests := []struct {
		name       string
		user       string
		initial    []byte
		final      func(serverFirst string) string
		wantState  string // empty means success
		wantReason string // substring of Error.Reason
	}{
		{name: "good password", initial: initial, final: goodFinal},
		{
			name:    "gs2 y flag accepted",
			initial: saslInitialBody(SCRAMSHA256, "y,,n=,r=cnonce"),
			final: func(serverFirst string) string {
				y := &testSCRAMClient{password: password, gs2Header: "y,,", nonce: "cnonce"}
				final, _ := y.clientFinal(t, serverFirst)
				return final
			},
		},
		{
			name:    "user name in client-first-message is ignored",
			initial: saslInitialBody(SCRAMSHA256, "n,,n=mallory,r=cnonce"),
			final: func(serverFirst string) string {
				c := &testSCRAMClient{password: password, gs2Header: "n,,", nonce: "cnonce", userName: "mallory"}
				final, _ := c.clientFinal(t, serverFirst)
				return final
			},
		},
		{name: "wrong password", initial: initial, final: wrongFinal, wantState: SQLStateInvalidPassword, wantReason: ReasonWrongPassword},
		{name: "unknown user", user: "mallory", initial: initial, final: goodFinal, wantState: SQLStateInvalidPassword, wantReason: ReasonUnknownUser},
		{name: "unknown mechanism", initial: saslInitialBody("SCRAM-SHA-1", good.clientFirst()), wantState: SQLStateProtocolViolation, wantReason: "was not offered"},
		{name: "PLUS mechanism not offered", initial: saslInitialBody("SCRAM-SHA-256-PLUS", "p=tls-server-end-point,,n=,r=cnonce"), wantState: SQLStateProtocolViolation, wantReason: "was not offered"},
		{name: "mechanism without NUL", initial: []byte(SCRAMSHA256), wantState: SQLStateProtocolViolation, wantReason: "NUL-terminated"},
		{name: "missing length", initial: []byte(SCRAMSHA256 + "\x00\x00\x00"), wantState: SQLStateProtocolViolation, wantReason: "missing initial response length"},
		{name: "length mismatch", initial: append(saslInitialBody(SCRAMSHA256, "n,,n=,r=cnonce"), 'x'), wantState: SQLStateProtocolViolation, wantReason: "does not match"},
		{name: "negative length with data", initial: []byte(SCRAMSHA256 + "\x00\xff\xff\xff\xfen"), wantState: SQLStateProtocolViolation, wantReason: "does not match"},
		{name: "empty client-first-message", initial: saslInitialBody(SCRAMSHA256, ""), wantState: SQLStateProtocolViolation, wantReason: "empty client-first-message"},
		{name: "channel binding requested", initial: saslInitialBody(SCRAMSHA256, "p=tls-server-end-point,,n=,r=cnonce"), wantState: SQLStateProtocolViolation, wantReason: "channel binding data"},
		{name: "bad channel binding flag", initial: saslInitialBody(SCRAMSHA256, "x,,n=,r=cnonce"), wantState: SQLStateProtocolViolation, wantReason: "channel-binding flag"},
		{name: "flag without comma", initial: saslInitialBody(SCRAMSHA256, "n"), wantState: SQLStateProtocolViolation, wantReason: "comma expected"},
		{name: "authorization identity", initial: saslInitialBody(SCRAMSHA256, "n,a=bob,n=,r=cnonce"), wantState: SQLStateFeatureNotSupported, wantReason: "authorization identity"},
		{name: "garbage authzid field", initial: saslInitialBody(SCRAMSHA256, "n,x,n=,r=cnonce"), wantState: SQLStateProtocolViolation, wantReason: "comma expected"},
		{name: "mandatory extension", initial: saslInitialBody(SCRAMSHA256, "n,,m=ext,n=,r=cnonce"), wantState: SQLStateFeatureNotSupported, wantReason: "extension"},
		{name: "missing user attribute", initial: saslInitialBody(SCRAMSHA256, "n,,r=cnonce"), wantState: SQLStateProtocolViolation, wantReason: `"n"`},
		{name: "missing nonce", initial: saslInitialBody(SCRAMSHA256, "n,,n="), wantState: SQLStateProtocolViolation, wantReason: `"r"`},
		{name: "empty nonce", initial: saslInitialBody(SCRAMSHA256, "n,,n=,r="), wantState: SQLStateProtocolViolation, wantReason: "nonce"},
		{name: "non-printable nonce", initial: saslInitialBody(SCRAMSHA256, "n,,n=,r=ab\x7fc"), wantState: SQLStateProtocolViolation, wantReason: "nonce"},
		{name: "NUL in client-first-message", initial: saslInitialBody(SCRAMSHA256, "n,,n=\x00,r=cnonce"), wantState: SQLStateProtocolViolation, wantReason: "NUL"},
		{name: "bad attribute name", initial: saslInitialBody(SCRAMSHA256, "n,,n=,r=cnonce,1=x"), wantState: SQLStateProtocolViolation, wantReason: "attribute expected"},
		{name: "attribute without value separator", initial: saslInitialBody(SCRAMSHA256, "n,,n=,r=cnonce,,"), wantState: SQLStateProtocolViolation, wantReason: "attribute expected"},
		{
			name:    "optional extension in client-first-message is ignored",
			initial: saslInitialBody(SCRAMSHA256, "n,,n=,r=cnonce,x=ext"),
			final: func(serverFirst string) string {
				c := &testSCRAMClient{password: password, gs2Header: "n,,", nonce: "cnonce", extensions: ",x=ext"}
				final, _ := c.clientFinal(t, serverFirst)
				return final
			},
		},
		{
			name:    "optional extension before the proof",
			initial: initial,
			final: func(serverFirst string) string {
				// The extension is part of client-final-message-without-proof and so of the AuthMessage.
				c := &testSCRAMClient{password: password, gs2Header: "n,,", nonce: "cnonce", finalExtensions: ",y=ext"}
				final, _ := c.clientFinal(t, serverFirst)
				return final
			},
		},
		{
			name:    "proof signed over a different AuthMessage",
			initial: initial,
			final: rewriteFinal(func(final string) string {
				i := strings.Index(final, ",p=")
				return final[:i] + ",y=ext" + final[i:]
			}),
			wantState: SQLStateInvalidPassword, wantReason: ReasonWrongPassword,
		},
		{
			name:    "wrong final nonce",
			initial: initial,
			final: rewriteFinal(func(final string) string {
				return strings.Replace(final, nonce, nonce+"x", 1)
			}),
			wantState: SQLStateProtocolViolation, wantReason: "final nonce does not match",
		},
		{
			name:    "channel binding flag changed in final",
			initial: initial,
			final: rewriteFinal(func(final string) string {
				return strings.Replace(final, "c=biws", "c=eSws", 1)
			}),
			wantState: SQLStateProtocolViolation, wantReason: "gs2 header",
		},
		{
			name:      "final message starts with nonce",
			initial:   initial,
			final:     func(string) string { return nonce + ",c=biws,p=AAAA" },
			wantState: SQLStateProtocolViolation, wantReason: `"c"`,
		},
		{
			name:      "final message without nonce",
			initial:   initial,
			final:     func(string) string { return "c=biws" },
			wantState: SQLStateProtocolViolation, wantReason: `"r"`,
		},
		{
			name:      "missing proof",
			initial:   initial,
			final:     func(string) string { return "c=biws," + nonce },
			wantState: SQLStateProtocolViolation, wantReason: "could not find proof",
		},
		{
			name:      "proof is not base64",
			initial:   initial,
			final:     func(string) string { return "c=biws," + nonce + ",p=!!!!" },
			wantState: SQLStateProtocolViolation, wantReason: "malformed proof",
		},
		{
			name:      "proof too short",
			initial:   initial,
			final:     func(string) string { return "c=biws," + nonce + ",p=AAAA" },
			wantState: SQLStateProtocolViolation, wantReason: "malformed proof",
		},
		{
			name:      "attribute after proof",
			initial:   initial,
			final:     rewriteFinal(func(final string) string { return final + ",x=1" }),
			wantState: SQLStateProtocolViolation, wantReason: "garbage found",
		},
		{
			name:      "NUL in final message",
			initial:   initial,
			final:     rewriteFinal(func(final string) string { return final + "\x00" }),
			wantState: SQLStateProtocolViolation, wantReason: "NUL",
		},
		{
			name:      "oversized final message",
			initial:   initial,
			final:     func(string) string { return strings.Repeat("x", MaxPasswordMessageLen+1) },
			wantState: SQLStateProtocolViolation, wantReason: "exceeds",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			authUser := user
			if tt.user != "" {
				authUser = tt.user
			}
			client := &scriptedClient{answer: scramScript(tt.initial, tt.final)}
			err := store.Authenticate(client, authUser, zeroReader{})
			if tt.wantState == "" {
				if err != nil {
					t.Fatalf("Authenticate: %v", err)
				}
				want := []string{"*pgproto3.AuthenticationSASL", "*pgproto3.AuthenticationSASLContinue", "*pgproto3.AuthenticationSASLFinal", "*pgproto3.AuthenticationOk"}
				if got := client.sentTypes(); !reflect.DeepEqual(got, want) {
					t.Fatalf("sent %v, want %v", got, want)
				}
				return
			}
			ae := authError(t, err)
			if ae.SQLState != tt.wantState || !strings.Contains(ae.Reason, tt.wantReason) {
				t.Fatalf("got %v, want SQLSTATE %s with reason containing %q", ae, tt.wantState, tt.wantReason)
			}
			if tt.wantState == SQLStateInvalidPassword && ae.Message != `password authentication failed for user "`+authUser+`"` {
				t.Fatalf("client-visible message %q", ae.Message)
			}
			for _, m := range client.sent {
				switch m.(type) {
				case *pgproto3.AuthenticationOk, *pgproto3.AuthenticationSASLFinal:
					t.Fatalf("sent %T on a failed exchange", m)
				}
			}
		})
	}
}

// TestAuthenticateSCRAMTranscript checks the exact messages of a successful exchange, including the server signature.
func TestAuthenticateSCRAMTranscript(t *testing.T) {
	salt := []byte("transcript-salt!")
	store := NewStore(mustSCRAMCredentials(t, "bob", "hunter2", salt, SCRAMIterations))
	client := &testSCRAMClient{password: "hunter2", gs2Header: "n,,", nonce: "fyko+d2lbbFgONRv9qkxdawL"}
	var wantServerFinal string
	conn := &scriptedClient{answer: scramScript(saslInitialBody(SCRAMSHA256, client.clientFirst()), func(serverFirst string) string {
		var final string
		final, wantServerFinal = client.clientFinal(t, serverFirst)
		return final
	})}
	if err := store.Authenticate(conn, "bob", zeroReader{}); err != nil {
		t.Fatal(err)
	}
	want := []pgproto3.BackendMessage{
		&pgproto3.AuthenticationSASL{AuthMechanisms: []string{"SCRAM-SHA-256"}},
		&pgproto3.AuthenticationSASLContinue{Data: []byte("r=" + client.nonce + zeroNonce() + ",s=" + base64.StdEncoding.EncodeToString(salt) + ",i=4096")},
		&pgproto3.AuthenticationSASLFinal{Data: []byte(wantServerFinal)},
		&pgproto3.AuthenticationOk{},
	}
	if !reflect.DeepEqual(conn.sent, want) {
		t.Fatalf("transcript mismatch\n got %#v\nwant %#v", conn.sent, want)
	}
}

// TestAuthenticateSCRAMWithoutInitialResponse covers a SASLInitialResponse with length -1, answered with an empty challenge.
func TestAuthenticateSCRAMWithoutInitialResponse(t *testing.T) {
	store := NewStore(mustSCRAMCredentials(t, "carol", "pw", []byte("another-salt-16b"), SCRAMIterations))
	client := &testSCRAMClient{password: "pw", gs2Header: "n,,", nonce: "abc"}
	conn := &scriptedClient{answer: func(last pgproto3.BackendMessage) ([]byte, error) {
		switch m := last.(type) {
		case *pgproto3.AuthenticationSASL:
			return []byte(SCRAMSHA256 + "\x00\xff\xff\xff\xff"), nil
		case *pgproto3.AuthenticationSASLContinue:
			if len(m.Data) == 0 {
				return []byte(client.clientFirst()), nil
			}
			final, _ := client.clientFinal(t, string(m.Data))
			return []byte(final), nil
		}
		return nil, errClientGaveUp
	}}
	if err := store.Authenticate(conn, "carol", nil); err != nil {
		t.Fatal(err)
	}
	if got := len(conn.sent); got != 5 {
		t.Fatalf("sent %d messages (%v), want SASL, empty SASLContinue, SASLContinue, SASLFinal, Ok", got, conn.sentTypes())
	}
}

// TestUnknownUserLooksLikeKnownUser compares the fake exchange with a real one as the client sees it.
func TestUnknownUserLooksLikeKnownUser(t *testing.T) {
	store := NewStore(mustSCRAMCredentials(t, "alice", "pw", []byte("0123456789abcdef"), SCRAMIterations))
	run := func(s *Store, user string) (*scriptedClient, *Error) {
		t.Helper()
		client := &testSCRAMClient{password: "guess", gs2Header: "n,,", nonce: "nonce"}
		conn := &scriptedClient{answer: scramScript(saslInitialBody(SCRAMSHA256, client.clientFirst()), func(sf string) string {
			final, _ := client.clientFinal(t, sf)
			return final
		})}
		return conn, authError(t, s.Authenticate(conn, user, nil))
	}
	saltOf := func(c *scriptedClient) string {
		t.Helper()
		fields := strings.Split(c.serverFirst(), ",")
		if len(fields) != 3 {
			t.Fatalf("server-first %q", c.serverFirst())
		}
		return fields[1]
	}

	known, knownErr := run(store, "alice")
	ghost1, ghostErr := run(store, "ghost")
	ghost2, _ := run(store, "ghost")
	other, _ := run(store, "other-ghost")
	ghostElsewhere, _ := run(NewStore(), "ghost")

	if !reflect.DeepEqual(known.sentTypes(), ghost1.sentTypes()) {
		t.Errorf("message types differ: known %v, unknown %v", known.sentTypes(), ghost1.sentTypes())
	}
	if knownErr.SQLState != ghostErr.SQLState || knownErr.Message != strings.Replace(ghostErr.Message, "ghost", "alice", 1) {
		t.Errorf("client-visible errors differ: %q vs %q", knownErr.Message, ghostErr.Message)
	}
	if knownErr.Reason != ReasonWrongPassword || ghostErr.Reason != ReasonUnknownUser {
		t.Errorf("reasons: known %q, unknown %q", knownErr.Reason, ghostErr.Reason)
	}
	if saltOf(ghost1) != saltOf(ghost2) {
		t.Errorf("fake salt changed between attempts: %s vs %s", saltOf(ghost1), saltOf(ghost2))
	}
	if saltOf(ghost1) == saltOf(other) || saltOf(ghost1) == saltOf(ghostElsewhere) {
		t.Errorf("fake salt does not depend on user and store secret")
	}
	if salt, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(saltOf(ghost1), "s=")); len(salt) != SCRAMSaltLen {
		t.Errorf("fake salt has %d bytes, want %d", len(salt), SCRAMSaltLen)
	}
	if !strings.HasSuffix(ghost1.serverFirst(), ",i=4096") {
		t.Errorf("fake iteration count: %q", ghost1.serverFirst())
	}
}

// TestAuthenticateRunsNoKeyDerivation makes PBKDF2 at connection time impossibly slow and checks Authenticate still finishes.
func TestAuthenticateRunsNoKeyDerivation(t *testing.T) {
	creds := mustSCRAMCredentials(t, "dave", "pw", []byte("derive-only-once"), SCRAMIterations)
	salted := mustSaltedPassword(t, "pw", []byte("derive-only-once"), SCRAMIterations)
	// Advertise an iteration count that would take minutes if anything derived keys now.
	creds.iterations = 1 << 30
	store := NewStore(creds)
	client := &testSCRAMClient{gs2Header: "n,,", nonce: "n0nce", saltedPassword: salted}

	for _, user := range []string{"dave", "unknown"} {
		conn := &scriptedClient{answer: scramScript(saslInitialBody(SCRAMSHA256, client.clientFirst()), func(sf string) string {
			final, _ := client.clientFinal(t, sf)
			return final
		})}
		start := time.Now()
		err := store.Authenticate(conn, user, nil)
		if elapsed := time.Since(start); elapsed > time.Second {
			t.Fatalf("%s: Authenticate took %v", user, elapsed)
		}
		if user == "dave" && err != nil {
			t.Fatalf("%s: %v", user, err)
		}
		if user == "unknown" && err == nil {
			t.Fatalf("%s: unknown user authenticated", user)
		}
	}
}

// TestAuthenticateMD5 covers the md5 challenge with a known salt.
func TestAuthenticateMD5(t *testing.T) {
	creds, err := NewCredentials("erin", "md5pass", MethodMD5)
	if err != nil {
		t.Fatal(err)
	}
	store := NewStore(creds)
	// zeroReader makes the salt four zero bytes.
	inner := md5Hex([]byte("md5pass" + "erin"))
	good := "md5" + md5Hex(append([]byte(inner), 0, 0, 0, 0))

	tests := []struct {
		name       string
		body       string
		wantState  string
		wantReason string
	}{
		{name: "good", body: good + "\x00"},
		{name: "wrong password", body: "md5" + md5Hex([]byte(md5Hex([]byte("nope"+"erin"))+"\x00\x00\x00\x00")) + "\x00", wantState: SQLStateInvalidPassword, wantReason: ReasonWrongPassword},
		{name: "upper-case hex", body: strings.ToUpper(good) + "\x00", wantState: SQLStateInvalidPassword, wantReason: ReasonWrongPassword},
		{name: "cleartext password", body: "md5pass\x00", wantState: SQLStateInvalidPassword, wantReason: ReasonWrongPassword},
		{name: "empty password", body: "\x00", wantState: SQLStateInvalidPassword, wantReason: ReasonWrongPassword},
		{name: "not terminated", body: good, wantState: SQLStateProtocolViolation, wantReason: "NUL-terminated"},
		{name: "embedded NUL", body: good + "\x00x\x00", wantState: SQLStateProtocolViolation, wantReason: "NUL-terminated"},
		{name: "oversized", body: strings.Repeat("a", MaxPasswordMessageLen) + "\x00", wantState: SQLStateProtocolViolation, wantReason: "exceeds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn := &scriptedClient{answer: func(last pgproto3.BackendMessage) ([]byte, error) {
				if m, ok := last.(*pgproto3.AuthenticationMD5Password); ok && m.Salt == [4]byte{} {
					return []byte(tt.body), nil
				}
				return nil, errClientGaveUp
			}}
			err := store.Authenticate(conn, "erin", zeroReader{})
			if tt.wantState == "" {
				if err != nil {
					t.Fatal(err)
				}
				if got, want := conn.sentTypes(), []string{"*pgproto3.AuthenticationMD5Password", "*pgproto3.AuthenticationOk"}; !reflect.DeepEqual(got, want) {
					t.Fatalf("sent %v, want %v", got, want)
				}
				return
			}
			ae := authError(t, err)
			if ae.SQLState != tt.wantState || !strings.Contains(ae.Reason, tt.wantReason) {
				t.Fatalf("got %v, want %s / %q", ae, tt.wantState, tt.wantReason)
			}
			if len(conn.sent) != 1 {
				t.Fatalf("sent %v after failure", conn.sentTypes())
			}
		})
	}
}

// TestAuthenticateTrust checks that trust sends only AuthenticationOk and reads nothing.
func TestAuthenticateTrust(t *testing.T) {
	creds, err := NewCredentials("frank", "", MethodTrust)
	if err != nil {
		t.Fatal(err)
	}
	conn := &scriptedClient{answer: func(pgproto3.BackendMessage) ([]byte, error) {
		t.Fatal("trust must not read a password")
		return nil, nil
	}}
	if err := NewStore(creds).Authenticate(conn, "frank", nil); err != nil {
		t.Fatal(err)
	}
	if got, want := conn.sentTypes(), []string{"*pgproto3.AuthenticationOk"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("sent %v, want %v", got, want)
	}
}

// TestAuthenticateTransportErrors checks that Conn failures come back wrapped, not as client-visible *Error values.
func TestAuthenticateTransportErrors(t *testing.T) {
	store := NewStore()
	conn := &scriptedClient{answer: func(pgproto3.BackendMessage) ([]byte, error) { return nil, io.ErrUnexpectedEOF }}
	err := store.Authenticate(conn, "anyone", nil)
	var ae *Error
	if !errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &ae) {
		t.Fatalf("want wrapped io.ErrUnexpectedEOF, got %v", err)
	}

	// A Conn may itself answer with an *Error, e.g. when the client sent a message of the wrong type.
	violation := &Error{SQLState: SQLStateProtocolViolation, Message: "expected password response", Reason: "protocol violation: got 'Q'"}
	conn = &scriptedClient{answer: func(pgproto3.BackendMessage) ([]byte, error) { return nil, violation }}
	if err := store.Authenticate(conn, "anyone", nil); !errors.As(err, &ae) || ae != violation {
		t.Fatalf("want the Conn's *Error, got %v", err)
	}

	if err := store.Authenticate(&scriptedClient{}, "anyone", failingReader{}); err == nil || !strings.Contains(err.Error(), "nonce") {
		t.Fatalf("want nonce generation error, got %v", err)
	}
}

// failingReader is a random source that always fails.
type failingReader struct{}

// Read returns an error.
func (failingReader) Read([]byte) (int, error) { return 0, errors.New("entropy exhausted") }

// BenchmarkAuthenticateSCRAM measures one full server-side exchange for a known and an unknown user.
func BenchmarkAuthenticateSCRAM(b *testing.B) {
	store := NewStore(mustSCRAMCredentials(b, "alice", "pw", []byte("0123456789abcdef"), SCRAMIterations))
	salted := mustSaltedPassword(b, "pw", []byte("0123456789abcdef"), SCRAMIterations)
	client := &testSCRAMClient{gs2Header: "n,,", nonce: "nonce", saltedPassword: salted}
	initial := saslInitialBody(SCRAMSHA256, client.clientFirst())
	for _, user := range []string{"alice", "unknown"} {
		b.Run(user, func(b *testing.B) {
			for b.Loop() {
				conn := &scriptedClient{answer: scramScript(initial, func(sf string) string {
					final, _ := client.clientFinal(b, sf)
					return final
				})}
				err := store.Authenticate(conn, user, nil)
				if (err == nil) != (user == "alice") {
					b.Fatalf("%s: %v", user, err)
				}
			}
		})
	}
}
