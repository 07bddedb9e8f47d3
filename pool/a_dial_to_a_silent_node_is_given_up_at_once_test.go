package pool

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/nodetls"
)

// TestADialToASilentNodeIsGivenUpAtOnce: a node that accepts connections but answers nothing (a
// stopped host whose kernel still acknowledges TCP) holds a dial until AbandonDials, which the
// proxy calls when the monitor finds the node unresponsive; the dial then ends at once with an
// AbandonedError, not at pool.dial_timeout, for a password login (pgconn's) and a SCRAM
// passthrough login (pgowl's own) alike, and whether the dial waits in TLS's negotiation (sslmode
// prefer) or for the login's first answer (sslmode disable, as over a Unix socket).
func TestADialToASilentNodeIsGivenUpAtOnce(t *testing.T) {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close()
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			conn, err := listener.Accept()
			if err != nil {
				return
			}
			accepted <- conn // read nothing, answer nothing
		}
	}()
	defer func() {
		for {
			select {
			case conn := <-accepted:
				conn.Close()
			default:
				return
			}
		}
	}()
	addr := listener.Addr().(*net.TCPAddr)
	target := Target{Node: "silent", Host: addr.IP.String(), Port: addr.Port}
	const dialTimeout = 20 * time.Second
	for _, tc := range []struct {
		name, sslmode string
		login         Login
	}{
		{"password_tls_prefer", config.SSLPrefer, Login{User: "app", Password: "secret", Database: "app"}},
		{"password_tls_disable", config.SSLDisable, Login{User: "app", Password: "secret", Database: "app"}},
		{"scram_passthrough_tls_prefer", config.SSLPrefer, Login{User: "app", Database: "app", SCRAM: &SCRAMKeys{}}},
		{"scram_passthrough_tls_disable", config.SSLDisable, Login{User: "app", Database: "app", SCRAM: &SCRAMKeys{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := New(Options{MaxPerNode: 2, DialTimeout: dialTimeout, AcquireTimeout: dialTimeout, TLS: nodetls.Settings{SSLMode: tc.sslmode}})
			defer p.Close()
			type result struct {
				err  error
				took time.Duration
			}
			done := make(chan result, 1)
			began := time.Now()
			go func() {
				c, err := p.Acquire(context.Background(), target, tc.login)
				if c != nil {
					p.Release(c, false)
				}
				done <- result{err, time.Since(began)}
			}()
			select {
			case conn := <-accepted:
				accepted <- conn // kept open, and closed at the end
			case <-time.After(5 * time.Second):
				t.Fatal("the dial never reached the node")
			}
			time.Sleep(200 * time.Millisecond) // the login waits for the node's first answer
			abandoned := time.Now()
			p.AbandonDials(target.Node)
			select {
			case r := <-done:
				var gaveUp *AbandonedError
				if !errors.As(r.err, &gaveUp) {
					t.Errorf("the abandoned dial ended with %v, want an AbandonedError", r.err)
				}
				if since := time.Since(abandoned); since > time.Second {
					t.Errorf("the dial ended %s after AbandonDials, want at once", since)
				}
			case <-time.After(dialTimeout / 2):
				t.Fatalf("the dial still waits %s after AbandonDials: it would wait for pool.dial_timeout (%s)", dialTimeout/2, dialTimeout)
			}
		})
	}
}
