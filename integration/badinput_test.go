package integration

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgowl/pgowl/config"
)

// readUntilClosed reads everything the peer sends until it closes the
// connection, giving up after limit. closed says whether the peer closed it.
func readUntilClosed(conn net.Conn, limit time.Duration) (data []byte, closed bool, elapsed time.Duration) {
	began := time.Now()
	conn.SetReadDeadline(began.Add(limit))
	var buf bytes.Buffer
	_, err := io.Copy(&buf, conn)
	elapsed = time.Since(began)
	var ne net.Error
	timedOut := errors.As(err, &ne) && ne.Timeout()
	return buf.Bytes(), !timedOut, elapsed
}

// checkErrorOrClose requires that data is empty or starts with a whole
// ErrorResponse, and returns its SQLSTATE ("" if there was none).
func checkErrorOrClose(t *testing.T, what string, data []byte) string {
	t.Helper()
	if len(data) == 0 {
		return ""
	}
	if data[0] != 'E' {
		t.Errorf("%s: pgowl answered with message type %q, want an ErrorResponse or a silent close", what, data[0])
		return ""
	}
	fe := pgproto3.NewFrontend(bytes.NewReader(data), io.Discard)
	msg, err := fe.Receive()
	if err != nil {
		t.Errorf("%s: undecodable answer %q: %v", what, data, err)
		return ""
	}
	er, ok := msg.(*pgproto3.ErrorResponse)
	if !ok {
		t.Errorf("%s: answer is %T, want ErrorResponse", what, msg)
		return ""
	}
	t.Logf("%s: pgowl said %s %s: %s", what, er.Severity, er.Code, er.Message)
	return er.Code
}

// requireServing checks that a connection opened earlier and a new one both still work.
func requireServing(t *testing.T, o *owl, bystander *client, after string) {
	t.Helper()
	if got := queryInt(t, bystander, "bystander after "+after, "SELECT 11"); got != 11 {
		t.Errorf("bystander after %s: SELECT 11 returned %d", after, got)
	}
	fresh := o.connect(t, nil)
	if got := queryInt(t, fresh, "new client after "+after, "SELECT 12"); got != 12 {
		t.Errorf("new client after %s: SELECT 12 returned %d", after, got)
	}
	fresh.Close(context.Background())
}

// TestBadInput sends hostile or broken input and checks that pgowl refuses
// it cleanly and keeps serving everyone else.
func TestBadInput(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, func(cfg *config.Config) {
		cfg.Limits.MaxMessageSize = 1 << 20
		cfg.Limits.StartupTimeout = 500 * time.Millisecond
	})
	bystander := o.connect(t, nil)

	t.Run("huge_startup_length", func(t *testing.T) {
		conn, err := net.DialTimeout("tcp", o.addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		packet := []byte{0x00, 0xFF, 0xFF, 0xFF, 0x00, 0x03, 0x00, 0x00}
		packet = append(packet, "user\x00app\x00\x00"...)
		if _, err := conn.Write(packet); err != nil {
			t.Fatal(err)
		}
		// Well within the startup timeout: a length that large is refused at once.
		data, closed, elapsed := readUntilClosed(conn, 400*time.Millisecond)
		if !closed {
			t.Fatalf("pgowl neither answered nor closed within %s of a startup packet announcing 16 MiB", elapsed)
		}
		if code := checkErrorOrClose(t, "huge startup length", data); code != "" && code != "08P01" {
			t.Errorf("huge startup length: SQLSTATE %s, want 08P01", code)
		}
		requireServing(t, o, bystander, "a huge startup length")
	})

	t.Run("message_over_max_message_size", func(t *testing.T) {
		victim := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
		ctx := timeoutCtx(t, statementTimeout)
		big := "SELECT length('" + strings.Repeat("x", 2<<20) + "')"
		_, err := victim.Exec(ctx, big)
		if err == nil {
			t.Fatalf("a 2 MiB Query passed a 1 MiB limits.max_message_size")
		}
		t.Logf("2 MiB Query failed with: %v", err)
		if pgErr, ok := asPgError(err); ok && pgErr.Code != "08P01" {
			t.Errorf("2 MiB Query: SQLSTATE %s (%s), want 08P01", pgErr.Code, pgErr.Message)
		}
		pingCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		if err := victim.Ping(pingCtx); err == nil {
			t.Errorf("the connection that sent the oversized message still works; pgowl should close it")
		}
		// A message under the limit still passes.
		ok := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
		if got := queryInt(t, ok, "512 KiB Query", "SELECT length('"+strings.Repeat("y", 512<<10)+"')"); got != 512<<10 {
			t.Errorf("512 KiB Query returned %d", got)
		}
		requireServing(t, o, bystander, "an oversized message")
	})

	t.Run("silent_clients_time_out", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			send []byte
		}{
			{"sends_nothing", nil},
			{"half_a_length", []byte{0x00, 0x00}},
			{"partial_startup_packet", []byte{0x00, 0x00, 0x00, 0x40, 0x00, 0x03, 0x00, 0x00, 'u', 's'}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				conn, err := net.DialTimeout("tcp", o.addr, 5*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				if len(tc.send) > 0 {
					if _, err := conn.Write(tc.send); err != nil {
						t.Fatal(err)
					}
				}
				data, closed, elapsed := readUntilClosed(conn, 5*time.Second)
				if !closed {
					t.Fatalf("pgowl kept a silent client for %s, want a close after limits.startup_timeout (500ms)", elapsed)
				}
				if elapsed < 400*time.Millisecond || elapsed > 3*time.Second {
					t.Errorf("closed after %s, want about limits.startup_timeout (500ms)", elapsed.Round(time.Millisecond))
				}
				checkErrorOrClose(t, tc.name, data)
			})
		}
		requireServing(t, o, bystander, "silent clients")
	})

	t.Run("bad_message_after_login", func(t *testing.T) {
		for _, tc := range []struct {
			name         string
			frame        []byte
			requireError bool
		}{
			{"unknown_type", []byte{'y', 0x00, 0x00, 0x00, 0x04}, true},
			{"length_below_four", []byte{'Q', 0x00, 0x00, 0x00, 0x02}, false},
			{"query_without_terminator", []byte{'Q', 0x00, 0x00, 0x00, 0x08, 'S', 'E', 'L', '1'}, false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				victim := o.connect(t, nil)
				hijacked, err := victim.PgConn().Hijack()
				if err != nil {
					t.Fatalf("hijack: %v", err)
				}
				raw := hijacked.Conn
				defer raw.Close()
				if _, err := raw.Write(tc.frame); err != nil {
					t.Fatal(err)
				}
				data, closed, elapsed := readUntilClosed(raw, 5*time.Second)
				if !closed {
					t.Fatalf("pgowl kept the connection open %s after a bad message; answered %q", elapsed, data)
				}
				code := checkErrorOrClose(t, tc.name, data)
				if tc.requireError && code != "08P01" {
					t.Errorf("%s: got SQLSTATE %q, want an ErrorResponse with 08P01 before the close", tc.name, code)
				}
			})
		}
		requireServing(t, o, bystander, "bad messages after login")
	})
}
