package auth_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/lib/pq"

	"github.com/pgowl/pgowl/proxy/auth"
)

// backendConn implements auth.Conn over pgproto3.Backend, the way the proxy's framing would.
type backendConn struct {
	backend *pgproto3.Backend
}

// Send writes and flushes one message.
func (c *backendConn) Send(msg pgproto3.BackendMessage) error {
	c.backend.Send(msg)
	return c.backend.Flush()
}

// ReceivePassword returns the raw body of the next 'p' message.
func (c *backendConn) ReceivePassword() ([]byte, error) {
	// With the GSS auth type, pgproto3 decodes 'p' as GSSResponse, which keeps
	// the body verbatim; auth parses the SASL and password layouts itself.
	if err := c.backend.SetAuthType(pgproto3.AuthTypeGSS); err != nil {
		return nil, err
	}
	msg, err := c.backend.Receive()
	if err != nil {
		return nil, err
	}
	resp, ok := msg.(*pgproto3.GSSResponse)
	if !ok {
		return nil, fmt.Errorf("expected a password message, got %T", msg)
	}
	return resp.Data, nil
}

// testServer is a minimal PostgreSQL front door: startup, auth.Store.Authenticate, then an idle session.
type testServer struct {
	addr        string
	results     chan error   // one Authenticate result per connection that got past startup
	sslRequests atomic.Int32 // SSLRequests answered with 'N'
}

// startTestServer listens on 127.0.0.1:0 and serves connections until the test ends.
func startTestServer(t *testing.T, store *auth.Store) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &testServer{addr: ln.Addr().String(), results: make(chan error, 16)}
	done := make(chan struct{})
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	go func() {
		defer close(done)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go srv.serve(conn, store)
		}
	}()
	return srv
}

// serve runs one client connection.
func (s *testServer) serve(netConn net.Conn, store *auth.Store) {
	defer netConn.Close()
	_ = netConn.SetDeadline(time.Now().Add(10 * time.Second))
	backend := pgproto3.NewBackend(netConn, netConn)
	backend.SetMaxBodyLen(auth.MaxPasswordMessageLen)

	var user string
	for user == "" {
		msg, err := backend.ReceiveStartupMessage()
		if err != nil {
			return // e.g. the client dropped the connection after refused TLS
		}
		switch m := msg.(type) {
		case *pgproto3.SSLRequest:
			s.sslRequests.Add(1)
			if _, err := netConn.Write([]byte{'N'}); err != nil {
				return
			}
		case *pgproto3.StartupMessage:
			user = m.Parameters["user"]
			if user == "" {
				return
			}
		default:
			return
		}
	}

	err := store.Authenticate(&backendConn{backend: backend}, user, rand.Reader)
	s.results <- err
	if err != nil {
		var authErr *auth.Error
		if errors.As(err, &authErr) {
			backend.Send(authErr.ErrorResponse())
			_ = backend.Flush()
		}
		return
	}

	backend.Send(&pgproto3.ParameterStatus{Name: "server_version", Value: "17.0"})
	backend.Send(&pgproto3.ParameterStatus{Name: "client_encoding", Value: "UTF8"})
	backend.Send(&pgproto3.BackendKeyData{ProcessID: 4242, SecretKey: []byte{1, 2, 3, 4}})
	backend.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	if backend.Flush() != nil {
		return
	}
	for {
		msg, err := backend.Receive()
		if err != nil {
			return
		}
		switch msg.(type) {
		case *pgproto3.Terminate:
			return
		case *pgproto3.Query: // lib/pq pings with ";"
			backend.Send(&pgproto3.EmptyQueryResponse{})
			backend.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
			if backend.Flush() != nil {
				return
			}
		}
	}
}

// result waits for the Authenticate outcome of the next authenticated connection.
func (s *testServer) result(t *testing.T) error {
	t.Helper()
	select {
	case err := <-s.results:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("server did not run Authenticate")
		return nil
	}
}

// connectPGX logs in with pgx's pgconn and closes the connection again.
func connectPGX(ctx context.Context, dsn string) (code, message string, err error) {
	conn, err := pgconn.Connect(ctx, dsn)
	if err == nil {
		if conn.ParameterStatus("server_version") != "17.0" || conn.PID() != 4242 {
			err = fmt.Errorf("session state not received: version %q pid %d", conn.ParameterStatus("server_version"), conn.PID())
		}
		return "", "", errors.Join(err, conn.Close(ctx))
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code, pgErr.Message, nil
	}
	return "", "", err
}

// connectPQ logs in with lib/pq through database/sql and pings once.
func connectPQ(ctx context.Context, dsn string) (code, message string, err error) {
	db, err := sql.Open("postgres", dsn)
	if err != nil {
		return "", "", err
	}
	defer db.Close()
	db.SetMaxIdleConns(0)
	err = db.PingContext(ctx)
	var pqErr *pq.Error
	if errors.As(err, &pqErr) {
		return string(pqErr.Code), pqErr.Message, nil
	}
	return "", "", err
}

// TestRoundTripRealClients authenticates pgx and lib/pq against Store.Authenticate over TCP.
func TestRoundTripRealClients(t *testing.T) {
	mustCreds := func(user, password string, method auth.Method) *auth.Credentials {
		c, err := auth.NewCredentials(user, password, method)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	store := auth.NewStore(
		mustCreds("scram_user", "correct horse battery staple", auth.MethodSCRAMSHA256),
		mustCreds("scram_unicode", "pass\u00A0w\u00F6rd", auth.MethodSCRAMSHA256),
		mustCreds("md5_user", "md5 secret", auth.MethodMD5),
		mustCreds("trust_user", "", auth.MethodTrust),
	)
	clients := map[string]func(ctx context.Context, dsn string) (string, string, error){
		"pgx": connectPGX,
		"pq":  connectPQ,
	}

	tests := []struct {
		name       string
		client     string
		sslmode    string
		user       string
		password   string
		wantCode   string // empty: login succeeds
		wantReason string
	}{
		{name: "scram good", client: "pgx", sslmode: "disable", user: "scram_user", password: "correct horse battery staple"},
		{name: "scram good after refused TLS", client: "pgx", sslmode: "prefer", user: "scram_user", password: "correct horse battery staple"},
		{name: "scram SASLprep password", client: "pgx", sslmode: "disable", user: "scram_unicode", password: "pass\u00A0w\u00F6rd"},
		{name: "scram wrong password", client: "pgx", sslmode: "disable", user: "scram_user", password: "wrong", wantCode: "28P01", wantReason: auth.ReasonWrongPassword},
		{name: "unknown user", client: "pgx", sslmode: "disable", user: "nobody", password: "whatever", wantCode: "28P01", wantReason: auth.ReasonUnknownUser},
		{name: "md5 good", client: "pgx", sslmode: "disable", user: "md5_user", password: "md5 secret"},
		{name: "md5 wrong password", client: "pgx", sslmode: "disable", user: "md5_user", password: "md5 guess", wantCode: "28P01", wantReason: auth.ReasonWrongPassword},
		{name: "trust", client: "pgx", sslmode: "disable", user: "trust_user", password: "ignored"},

		{name: "scram good", client: "pq", sslmode: "disable", user: "scram_user", password: "correct horse battery staple"},
		{name: "scram good after refused TLS", client: "pq", sslmode: "prefer", user: "scram_user", password: "correct horse battery staple"},
		{name: "scram wrong password", client: "pq", sslmode: "disable", user: "scram_user", password: "wrong", wantCode: "28P01", wantReason: auth.ReasonWrongPassword},
		{name: "unknown user", client: "pq", sslmode: "disable", user: "nobody", password: "whatever", wantCode: "28P01", wantReason: auth.ReasonUnknownUser},
		{name: "md5 good", client: "pq", sslmode: "disable", user: "md5_user", password: "md5 secret"},
		{name: "md5 wrong password", client: "pq", sslmode: "disable", user: "md5_user", password: "md5 guess", wantCode: "28P01", wantReason: auth.ReasonWrongPassword},
		{name: "trust", client: "pq", sslmode: "disable", user: "trust_user", password: "ignored"},
	}
	for _, tt := range tests {
		t.Run(tt.client+"/"+tt.name, func(t *testing.T) {
			srv := startTestServer(t, store)
			host, port, _ := net.SplitHostPort(srv.addr)
			dsn := (&url.URL{
				Scheme:   "postgres",
				User:     url.UserPassword(tt.user, tt.password),
				Host:     net.JoinHostPort(host, port),
				Path:     "/app",
				RawQuery: "sslmode=" + tt.sslmode + "&connect_timeout=5",
			}).String()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()

			code, message, err := clients[tt.client](ctx, dsn)
			if err != nil {
				t.Fatalf("client: %v", err)
			}
			serverErr := srv.result(t)
			if got := srv.sslRequests.Load(); (tt.sslmode == "prefer") != (got > 0) {
				t.Fatalf("sslmode=%s but the server saw %d SSLRequests", tt.sslmode, got)
			}
			if tt.wantCode == "" {
				if code != "" || serverErr != nil {
					t.Fatalf("login failed: client %s %q, server %v", code, message, serverErr)
				}
				return
			}
			wantMessage := `password authentication failed for user "` + tt.user + `"`
			if code != tt.wantCode || message != wantMessage {
				t.Fatalf("client saw %s %q, want %s %q", code, message, tt.wantCode, wantMessage)
			}
			var authErr *auth.Error
			if !errors.As(serverErr, &authErr) || authErr.Reason != tt.wantReason {
				t.Fatalf("server error %v, want reason %q", serverErr, tt.wantReason)
			}
		})
	}
}
