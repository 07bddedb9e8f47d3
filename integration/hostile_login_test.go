package integration

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// startupPacket is a v3 StartupMessage for user and database, laid out as
// PostgreSQL requires: name/value pairs, then a final NUL.
func startupPacket(user, database string) []byte {
	body := binary.BigEndian.AppendUint32(nil, 3<<16)
	body = append(body, "user\x00"+user+"\x00database\x00"+database+"\x00\x00"...)
	return append(binary.BigEndian.AppendUint32(nil, uint32(4+len(body))), body...)
}

// untypedPacket frames body as an untyped packet (length, then body).
func untypedPacket(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(4+len(body))), body...)
}

// requestPacket is an SSLRequest, GSSENCRequest or CancelRequest with code.
func requestPacket(code uint32) []byte {
	return untypedPacket(binary.BigEndian.AppendUint32(nil, code))
}

// dialOwl opens a raw TCP connection to pgowl, closed when t ends.
func dialOwl(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial pgowl: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// readBackend reads one backend message within limit.
func readBackend(conn net.Conn, limit time.Duration) (pgproto3.BackendMessage, error) {
	conn.SetReadDeadline(time.Now().Add(limit))
	defer conn.SetReadDeadline(time.Time{})
	return pgproto3.NewFrontend(conn, io.Discard).Receive()
}

// readFatal reads messages until an ErrorResponse and returns it, failing t
// when none comes within limit.
func readFatal(t *testing.T, what string, conn net.Conn, limit time.Duration) *pgproto3.ErrorResponse {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(limit))
	defer conn.SetReadDeadline(time.Time{})
	fe := pgproto3.NewFrontend(conn, io.Discard)
	for {
		msg, err := fe.Receive()
		if err != nil {
			t.Fatalf("%s: no ErrorResponse from pgowl: %v", what, err)
		}
		if er, ok := msg.(*pgproto3.ErrorResponse); ok {
			t.Logf("%s: pgowl said %s %s: %s", what, er.Severity, er.Code, er.Message)
			return er
		}
	}
}

// wantFatal requires a FATAL ErrorResponse with code, then the connection's close.
func wantFatal(t *testing.T, what string, conn net.Conn, code string) {
	t.Helper()
	er := readFatal(t, what, conn, 3*time.Second)
	if er.Severity != "FATAL" || er.Code != code {
		t.Errorf("%s: got %s %s (%s), want FATAL %s", what, er.Severity, er.Code, er.Message, code)
	}
	if _, closed, _ := readUntilClosed(conn, 2*time.Second); !closed {
		t.Errorf("%s: pgowl kept the connection open after the FATAL", what)
	}
}

// TestUnauthenticatedHugeMessagesKeepMemoryFlat: 200 connections that
// announce a 64 MiB message, half as their startup packet and half as an
// authentication message after it (then send megabytes of it), are refused
// from the header, and pgowl's
// resident memory, measured on its own process, stays within 20 MiB of
// where it started, at its peak as well as after.
func TestUnauthenticatedHugeMessagesKeepMemoryFlat(t *testing.T) {
	const (
		connections   = 200
		announced     = 64 << 20
		sentPerConn   = 8 << 20 // what an attacker pushes after the header, if pgowl reads it
		allowedGrowth = 20 << 10
	)
	c := sharedClusterFor(t)
	// All 200 come from one address, and may be logging in at once: its share of the logins in
	// progress (100 by default) would refuse some before their header is read, which is another
	// test's subject (TestSilentSocketFloodDoesNotLockOutLogins).
	p := startOwlProcess(t, c, fmt.Sprintf("limits: {max_logins_in_progress_per_address: %d}\n", 2*connections))
	for range 5 { // settle the pool and the runtime before the baseline
		if err := p.runSelect(); err != nil {
			t.Fatalf("warm-up statement: %v", err)
		}
	}
	time.Sleep(500 * time.Millisecond)
	rss0, peak0 := p.memory(t)

	chunk := make([]byte, 256<<10)
	for i := range chunk {
		chunk[i] = byte('a' + i%26)
	}
	header := []byte{'p', 0, 0, 0, 0}
	binary.BigEndian.PutUint32(header[1:], announced+4)

	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		codes   = map[string]int{}
		pushed  int64
		conns   []net.Conn
		dialErr error
	)
	for i := range connections {
		// Every other connection announces its 64 MiB as the startup
		// packet itself, the rest as an authentication message.
		inStartup := i%2 == 0
		conn, err := net.DialTimeout("tcp", p.addr, 5*time.Second)
		if err != nil {
			dialErr = err
			break
		}
		conns = append(conns, conn)
		wg.Add(1)
		go func() {
			defer wg.Done()
			code := "none"
			sent := int64(0)
			defer func() {
				mu.Lock()
				codes[code]++
				pushed += sent
				mu.Unlock()
			}()
			conn.SetDeadline(time.Now().Add(20 * time.Second))
			if inStartup {
				if _, err := conn.Write(header[1:]); err != nil {
					return
				}
			} else {
				if _, err := conn.Write(startupPacket(appUser, appDatabase)); err != nil {
					code = "write startup: " + err.Error()
					return
				}
				msg, err := readBackend(conn, 5*time.Second)
				if _, ok := msg.(*pgproto3.AuthenticationSASL); err != nil || !ok {
					code = "no SASL challenge"
					return
				}
				if _, err := conn.Write(header); err != nil {
					return
				}
			}
			if msg, err := readBackend(conn, 3*time.Second); err == nil {
				if er, ok := msg.(*pgproto3.ErrorResponse); ok {
					code = er.Severity + " " + er.Code
				}
			}
			conn.SetDeadline(time.Now().Add(10 * time.Second))
			for sent < sentPerConn {
				n, err := conn.Write(chunk)
				sent += int64(n)
				if err != nil {
					if errorsIsTimeout(err) {
						code += ", body write timed out"
					}
					return
				}
			}
		}()
	}
	wg.Wait()
	defer func() {
		for _, conn := range conns {
			conn.Close()
		}
	}()
	if dialErr != nil {
		t.Fatalf("opened only %d of %d connections: %v", len(conns), connections, dialErr)
	}
	time.Sleep(time.Second)
	rss1, peak1 := p.memory(t)
	t.Logf("%d connections announcing %d MiB each; answers: %v; body bytes written before the connection failed: %d in all", connections, announced>>20, codes, pushed)
	t.Logf("pgowl RSS %d KiB -> %d KiB (%+d KiB); peak %d KiB -> %d KiB (%+d KiB); allowed growth %d KiB",
		rss0, rss1, rss1-rss0, peak0, peak1, peak1-peak0, allowedGrowth)
	if codes["FATAL 08P01"] != connections {
		t.Errorf("want FATAL 08P01 from the header for all %d connections, got %v", connections, codes)
	}
	if rss1-rss0 > allowedGrowth {
		t.Errorf("pgowl's RSS grew by %d KiB, more than %d KiB", rss1-rss0, allowedGrowth)
	}
	if peak1-peak0 > allowedGrowth {
		t.Errorf("pgowl's peak RSS grew by %d KiB, more than %d KiB", peak1-peak0, allowedGrowth)
	}
	if err := p.runSelect(); err != nil {
		t.Errorf("a legitimate login after the flood failed: %v", err)
	}
}

// TestLoginFramingErrors: malformed input before the login ends gets
// PostgreSQL's answer (FATAL, 08P01 for framing, 0A000 for a repeated
// encryption request) and the connection's close, never an ERROR with Go's
// error text.
func TestLoginFramingErrors(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, nil)
	bystander := o.connect(t, nil)

	v3 := binary.BigEndian.AppendUint32(nil, 3<<16)
	cases := []struct {
		name  string
		sends [][]byte
		// afterChallenge is sent once the SASL challenge has come, when set.
		afterChallenge []byte
		code           string
	}{
		{name: "startup_without_final_nul", code: "08P01",
			sends: [][]byte{untypedPacket(append(append([]byte{}, v3...), "user\x00app\x00database\x00postgres\x00"...))}},
		{name: "startup_with_trailing_bytes", code: "08P01",
			sends: [][]byte{untypedPacket(append(append([]byte{}, v3...), "user\x00app\x00\x00junk"...))}},
		{name: "startup_value_without_nul", code: "08P01",
			sends: [][]byte{untypedPacket(append(append([]byte{}, v3...), "user\x00app"...))}},
		{name: "ssl_request_twice", code: "0A000",
			sends: [][]byte{requestPacket(80877103), requestPacket(80877103)}},
		{name: "gssenc_request_twice", code: "0A000",
			sends: [][]byte{requestPacket(80877104), requestPacket(80877104)}},
		{name: "auth_message_length_below_four", code: "08P01",
			sends: [][]byte{startupPacket(appUser, appDatabase)}, afterChallenge: []byte{'p', 0, 0, 0, 2}},
		{name: "auth_message_over_the_login_limit", code: "08P01",
			sends: [][]byte{startupPacket(appUser, appDatabase)}, afterChallenge: []byte{'p', 0, 0, 0x40, 0}},
		{name: "auth_message_of_another_type", code: "08P01",
			sends: [][]byte{startupPacket(appUser, appDatabase)}, afterChallenge: []byte{'Q', 0, 0, 0, 5, 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			conn := dialOwl(t, o.addr)
			for i, packet := range tc.sends {
				if _, err := conn.Write(packet); err != nil {
					t.Fatal(err)
				}
				if i < len(tc.sends)-1 { // an encryption request's one-byte answer
					var answer [1]byte
					conn.SetReadDeadline(time.Now().Add(3 * time.Second))
					if _, err := io.ReadFull(conn, answer[:]); err != nil || answer[0] != 'N' {
						t.Fatalf("answer to request %d: %q, %v; want N", i, answer[0], err)
					}
				}
			}
			if tc.afterChallenge != nil {
				msg, err := readBackend(conn, 3*time.Second)
				if _, ok := msg.(*pgproto3.AuthenticationSASL); err != nil || !ok {
					t.Fatalf("want the SASL challenge, got %T %v", msg, err)
				}
				if _, err := conn.Write(tc.afterChallenge); err != nil {
					t.Fatal(err)
				}
			}
			wantFatal(t, tc.name, conn, tc.code)
		})
	}

	t.Run("ssl_refused_then_gssenc_then_login", func(t *testing.T) {
		// Either order of the two requests is allowed once each, as in PostgreSQL.
		conn := dialOwl(t, o.addr)
		for _, code := range []uint32{80877103, 80877104} {
			conn.Write(requestPacket(code))
			var answer [1]byte
			conn.SetReadDeadline(time.Now().Add(3 * time.Second))
			if _, err := io.ReadFull(conn, answer[:]); err != nil || answer[0] != 'N' {
				t.Fatalf("answer to request %d: %q, %v; want N", code, answer[0], err)
			}
		}
		conn.Write(startupPacket(appUser, appDatabase))
		msg, err := readBackend(conn, 3*time.Second)
		if _, ok := msg.(*pgproto3.AuthenticationSASL); err != nil || !ok {
			t.Fatalf("want the SASL challenge after SSLRequest and GSSENCRequest, got %T %v", msg, err)
		}
	})

	t.Run("cancel_request_of_wrong_length_is_ignored", func(t *testing.T) {
		conn := dialOwl(t, o.addr)
		conn.Write(untypedPacket(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, 80877102), 42)))
		data, closed, _ := readUntilClosed(conn, 3*time.Second)
		if !closed || len(data) != 0 {
			t.Errorf("a short CancelRequest: closed=%t, answer %q; want a silent close", closed, data)
		}
	})
	requireServing(t, o, bystander, "framing errors during login")
}

// errorsIsTimeout reports a network timeout.
func errorsIsTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestSilentSocketFloodDoesNotLockOutLogins: 20,000 sockets from one
// address that connect and send nothing fill only that address's share of
// the logins in progress; a legitimate login from another address succeeds
// within 1 s while they are open, and again when the flood is repeated. The
// refusals and the flood's login timeouts are logged at info, rate-limited.
//
// pgowl runs as its own process, and the flood comes from two more
// (integration/silentflood), so that no process needs more than the
// machine's open-file limit of 20,000.
func TestSilentSocketFloodDoesNotLockOutLogins(t *testing.T) {
	const (
		floodSockets = 20000
		floods       = 2
		loginBudget  = time.Second
		// Long enough that the whole flood is logging in at once: with
		// logins counted against limits.max_client_connections (10,000),
		// as they were, the legitimate login is refused.
		startup = 30 * time.Second
	)
	c := sharedClusterFor(t)
	p := startOwlProcess(t, c, fmt.Sprintf("limits: {startup_timeout: %s}\n", startup))
	flooder := buildProgram(t, "./integration/silentflood")
	host, port, _ := net.SplitHostPort(p.addr)
	legit, err := pgconn.ParseConfig(fmt.Sprintf("host=%s port=%s user=%s password=%s dbname=%s sslmode=disable", host, port, appUser, appPassword, appDatabase))
	if err != nil {
		t.Fatal(err)
	}
	legitDialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}, Timeout: 5 * time.Second}
	legit.DialFunc = legitDialer.DialContext

	testBegan := time.Now()
	for round := 1; round <= 2; round++ {
		began := time.Now()
		var holders []*silentFlood
		for range floods {
			holders = append(holders, startSilentFlood(t, flooder, p.addr, floodSockets/floods))
		}
		opened := 0
		for _, h := range holders {
			opened += h.waitOpen(t)
		}
		t.Logf("round %d: %d silent sockets from 127.0.0.1 open in %s", round, opened, time.Since(began).Round(time.Millisecond))
		if opened != floodSockets {
			t.Fatalf("round %d: opened only %d of %d silent sockets", round, opened, floodSockets)
		}
		ctx, cancel := context.WithTimeout(context.Background(), loginBudget)
		start := time.Now()
		conn, err := pgconn.ConnectConfig(ctx, legit)
		took := time.Since(start)
		if err != nil {
			t.Errorf("round %d: legitimate login from 127.0.0.2 during the flood failed after %s: %v", round, took, err)
		} else {
			if _, err := conn.Exec(ctx, "SELECT 1").ReadAll(); err != nil {
				t.Errorf("round %d: SELECT 1 after the login: %v", round, err)
			}
			conn.Close(ctx)
			t.Logf("round %d: legitimate login from 127.0.0.2 took %s (budget %s)", round, took.Round(time.Millisecond), loginBudget)
		}
		cancel()
		if round == 2 {
			// Let pgowl end the flood's admitted logins itself, at
			// limits.startup_timeout, so that their timeouts are logged.
			time.Sleep(time.Until(began.Add(startup + 2*time.Second)))
		}
		for _, h := range holders {
			h.release(t) // resets: no TIME_WAIT left to use up the ports
		}
	}

	var refused, timedOut, refusedLines, timedOutLines int
	for _, e := range p.log.Entries(t) {
		n, _ := e["count"].(float64)
		switch e["message"] {
		case "login refused":
			refusedLines++
			refused += int(n)
			if e["level"] != "info" || e["detail"] != "limits.max_logins_in_progress_per_address" {
				t.Errorf("refusal logged as %v", e)
			}
		case "login timed out (limits.startup_timeout)":
			timedOutLines++
			timedOut += int(n)
			if e["level"] != "info" {
				t.Errorf("login timeout logged as %v", e)
			}
		}
	}
	t.Logf("pgowl's log: %d refused logins in %d lines, %d timed-out logins in %d lines", refused, refusedLines, timedOut, timedOutLines)
	if timedOut < 100 {
		t.Errorf("%d login timeouts counted in the log; the second flood's admitted share (100) timed out", timedOut)
	}
	if refused < 2*(floodSockets-200) {
		t.Errorf("%d refused logins counted in the log, want about %d", refused, 2*(floodSockets-100))
	}
	if refusedLines == 0 || timedOutLines == 0 {
		t.Errorf("want refused and timed-out logins in the log at info, got %d and %d lines", refusedLines, timedOutLines)
	}
	// At most one line a second of each kind (and the first of each).
	if most := int(time.Since(testBegan)/time.Second) + 2; refusedLines > most || timedOutLines > most {
		t.Errorf("login refusals and timeouts are not rate-limited: %d and %d lines in %s", refusedLines, timedOutLines, time.Since(testBegan).Round(time.Second))
	}
}

// silentFlood is a running integration/silentflood process.
type silentFlood struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	done  chan struct{}
}

// startSilentFlood starts a flood of count silent sockets to addr; it is
// released when t ends at the latest.
func startSilentFlood(t *testing.T, binary, addr string, count int) *silentFlood {
	t.Helper()
	f := &silentFlood{lines: make(chan string, 4), done: make(chan struct{})}
	f.cmd = exec.Command(binary, "-addr", addr, "-count", strconv.Itoa(count), "-parallel", "8", "-hold", "60s")
	f.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	f.cmd.Stderr = os.Stderr
	var err error
	if f.stdin, err = f.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := f.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.cmd.Start(); err != nil {
		t.Fatalf("start silentflood: %v", err)
	}
	go func() {
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			f.lines <- scanner.Text()
		}
		close(f.lines)
	}()
	go func() { f.cmd.Wait(); close(f.done) }()
	t.Cleanup(func() { f.release(t) })
	return f
}

// waitOpen returns how many sockets the flood opened.
func (f *silentFlood) waitOpen(t *testing.T) int {
	t.Helper()
	select {
	case line := <-f.lines:
		var n int
		if _, err := fmt.Sscanf(line, "open %d", &n); err != nil {
			t.Fatalf("silentflood: %s", line)
		}
		return n
	case <-time.After(60 * time.Second):
		t.Fatalf("silentflood did not report within 60s")
	}
	return 0
}

// release closes the flood's sockets and waits for it to exit.
func (f *silentFlood) release(t *testing.T) {
	f.stdin.Close()
	select {
	case <-f.done:
	case <-time.After(10 * time.Second):
		f.cmd.Process.Kill()
		<-f.done
	}
}
