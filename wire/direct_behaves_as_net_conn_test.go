package wire

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// Review tests: each compares Direct with what the net.Conn it wraps does.

func skipUnlessLinux(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Direct is the connection itself off Linux")
	}
}

// TestDirectConcurrentWritesStayWhole: net.Conn says "multiple
// goroutines may invoke methods on a Conn simultaneously" and each Write is
// written whole (poll.FD.Write holds the write lock across its waits). With
// Direct, a second Write overwrites the shared directCall (buf, n) while the
// first one waits in the poller: the first one's remaining bytes are lost
// and both report success.
func TestDirectConcurrentWritesStayWhole(t *testing.T) {
	skipUnlessLinux(t)
	client, server := tcpPair(t)
	client.(*net.TCPConn).SetWriteBuffer(64 << 10)
	server.(*net.TCPConn).SetReadBuffer(64 << 10)
	d := Direct(client)
	const size = 1 << 20
	a, b := bytes.Repeat([]byte{'a'}, size), bytes.Repeat([]byte{'b'}, size)
	var wg sync.WaitGroup
	results := make([]int, 2)
	errs := make([]error, 2)
	wg.Add(2)
	go func() { defer wg.Done(); results[0], errs[0] = d.Write(a) }()
	time.Sleep(50 * time.Millisecond) // the first write now waits for the peer
	go func() { defer wg.Done(); results[1], errs[1] = d.Write(b) }()
	time.Sleep(50 * time.Millisecond)

	got := make(chan []byte, 1)
	go func() {
		all, _ := io.ReadAll(server)
		got <- all
	}()
	wg.Wait()
	client.Close()
	all := <-got
	t.Logf("Write results: %d, %v and %d, %v; %d bytes arrived", results[0], errs[0], results[1], errs[1], len(all))
	if len(all) != 2*size {
		t.Fatalf("two concurrent Writes of %d bytes each delivered %d bytes, want %d", size, len(all), 2*size)
	}
	first := all[0]
	if !bytes.Equal(all[:size], bytes.Repeat([]byte{first}, size)) || all[size] == first {
		t.Fatalf("concurrent Writes interleaved")
	}
}

// TestDirectConcurrentReadsGetTheirOwnBytes: two Reads in flight at
// once on a net.Conn are serialised, each filling its own buffer. With
// Direct the second Read replaces the shared buffer, so the first fills the
// second's buffer, and the second then reads into a nil buffer and reports
// io.EOF on a live connection.
func TestDirectConcurrentReadsGetTheirOwnBytes(t *testing.T) {
	skipUnlessLinux(t)
	client, server := tcpPair(t)
	d := Direct(client)
	type result struct {
		buf []byte
		n   int
		err error
	}
	results := make(chan result, 2)
	read := func() {
		buf := make([]byte, 4)
		n, err := d.Read(buf)
		results <- result{buf, n, err}
	}
	go read()
	time.Sleep(50 * time.Millisecond) // the first read waits in the poller
	go read()
	time.Sleep(50 * time.Millisecond)
	server.Write([]byte("abcd"))
	time.Sleep(50 * time.Millisecond)
	server.Write([]byte("efgh"))
	for range 2 {
		select {
		case r := <-results:
			if r.err != nil {
				t.Fatalf("concurrent read: %v on a live connection with data sent", r.err)
			}
			if got := string(r.buf[:r.n]); r.n == 0 || (got != "abcd" && got != "efgh") {
				t.Fatalf("concurrent read returned n=%d, buffer %q", r.n, r.buf)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a concurrent read never returned")
		}
	}
}

// TestDirectErrorsReadAsNetConns: net.Conn reports a deadline as
// *net.OpError{Op: "read", Err: os.ErrDeadlineExceeded} ("read tcp A->B: i/o
// timeout") and a closed connection with Err net.ErrClosed. Direct wraps the
// *net.OpError{Op: "raw-read"} that syscall.RawConn.Read returns in a second
// *net.OpError, so the text names the op and the addresses twice and
// OpError.Err is not the sentinel. errors.Is and Timeout still work.
func TestDirectErrorsReadAsNetConns(t *testing.T) {
	skipUnlessLinux(t)
	client, _ := tcpPair(t)
	d := Direct(client)
	buf := make([]byte, 8)

	client.SetReadDeadline(time.Now().Add(-time.Second))
	_, plainErr := client.Read(buf)
	_, directErr := d.Read(buf)
	client.SetReadDeadline(time.Time{})
	check := func(what string, plain, direct error, sentinel error) {
		t.Helper()
		if plain.Error() != direct.Error() {
			t.Errorf("%s: Direct reports %q, net.Conn %q", what, direct, plain)
		}
		var op *net.OpError
		if !errors.As(direct, &op) || op.Err != sentinel {
			t.Errorf("%s: Direct's *net.OpError has Err %#v, want the sentinel %v as net.Conn has", what, op.Err, sentinel)
		}
	}
	check("deadline", plainErr, directErr, os.ErrDeadlineExceeded)

	client.Close()
	_, plainErr = client.Write([]byte("x"))
	_, directErr = d.Write([]byte("x"))
	check("closed", plainErr, directErr, net.ErrClosed)
	if strings.Contains(directErr.Error(), "raw-") {
		t.Logf("Direct's closed-connection error: %q", directErr)
	}
}

// TestDirectZeroLengthReadAfterClose: net.Conn takes the read lock
// before answering a zero-length read, so it reports net.ErrClosed on a
// closed connection; Direct returns 0, nil without looking.
func TestDirectZeroLengthReadAfterClose(t *testing.T) {
	skipUnlessLinux(t)
	client, _ := tcpPair(t)
	d := Direct(client)
	client.Close()
	_, plainErr := client.Read(nil)
	_, directErr := d.Read(nil)
	if !errors.Is(plainErr, net.ErrClosed) {
		t.Fatalf("net.Conn zero-length read after Close: %v", plainErr)
	}
	if !errors.Is(directErr, net.ErrClosed) {
		t.Fatalf("Direct zero-length read after Close: %v, want net.ErrClosed as net.Conn reports", directErr)
	}
}
