package nodetls

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestApplyPreferStaysOnOneConnection: a node that answers N gets the startup on the same
// connection under prefer (as libpq does), and refuses the dial under require and stronger.
func TestApplyPreferStaysOnOneConnection(t *testing.T) {
	for _, mode := range []string{"prefer", "require", "verify-ca", "verify-full"} {
		t.Run(mode, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			accepted := make(chan []byte, 4)
			go func() {
				for {
					conn, err := ln.Accept()
					if err != nil {
						return
					}
					go func() {
						defer conn.Close()
						conn.SetDeadline(time.Now().Add(5 * time.Second))
						request := make([]byte, 8)
						if _, err := io.ReadFull(conn, request); err != nil {
							return
						}
						conn.Write([]byte{'N'})
						next := make([]byte, 5)
						n, _ := io.ReadFull(conn, next)
						accepted <- append(request, next[:n]...)
					}()
				}
			}()
			addr := ln.Addr().(*net.TCPAddr)
			s := Settings{SSLMode: mode}
			cfg, err := pgconn.ParseConfig(s.ConnString(Param{Key: "host", Value: "127.0.0.1"}, Param{Key: "port", Value: strconv.Itoa(addr.Port)}))
			if err != nil {
				t.Fatal(err)
			}
			s.Apply(cfg)
			if cfg.TLSConfig != nil || len(cfg.Fallbacks) != 0 {
				t.Fatalf("Apply left TLS to pgconn: %v, %d fallbacks", cfg.TLSConfig != nil, len(cfg.Fallbacks))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			conn, err := cfg.DialFunc(ctx, "tcp", addr.String())
			if mode != "prefer" {
				if !errors.Is(err, ErrTLSRefused) {
					t.Fatalf("dial under %s to a node without TLS: %v, want ErrTLSRefused", mode, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.Write([]byte("hello"))
			got := <-accepted
			if string(got[8:]) != "hello" {
				t.Fatalf("the node read %q after SSLRequest, want the next bytes on the same connection", got)
			}
			select {
			case again := <-accepted:
				t.Fatalf("a second connection was opened: %q", again)
			case <-time.After(100 * time.Millisecond):
			}
		})
	}
}
