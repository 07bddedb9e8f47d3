package wire

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"testing"
	"time"
)

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

func TestDirectUsesRawCallsOnLinuxTCP(t *testing.T) {
	client, _ := tcpPair(t)
	isDirect := Direct(client) != io.ReadWriter(client)
	if isDirect != rawIO {
		t.Fatalf("Direct on %s TCP: raw path %v, want %v", runtime.GOOS, isDirect, rawIO)
	}
	pipeEnd, other := net.Pipe()
	defer pipeEnd.Close()
	defer other.Close()
	if got := Direct(pipeEnd); got != io.ReadWriter(pipeEnd) {
		t.Fatalf("Direct on a connection without a socket returned %T, want the connection itself", got)
	}
}

// TestDirectMovesLargeBuffersBothWays writes more than the socket buffers
// hold at once, in both directions at the same time, so that writes wait
// for the peer and reads wait for data.
func TestDirectMovesLargeBuffersBothWays(t *testing.T) {
	client, server := tcpPair(t)
	a, b := Direct(client), Direct(server)
	payload := bytes.Repeat([]byte("0123456789abcdef"), 1<<18) // 4 MiB
	errs := make(chan error, 4)
	received := make([][]byte, 2)
	for i, pair := range [][2]io.ReadWriter{{a, b}, {b, a}} {
		go func() {
			n, err := pair[0].Write(payload)
			if err == nil && n != len(payload) {
				err = io.ErrShortWrite
			}
			errs <- err
		}()
		go func() {
			buf := make([]byte, len(payload))
			_, err := io.ReadFull(pair[1], buf)
			received[i] = buf
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i, got := range received {
		if !bytes.Equal(got, payload) {
			t.Fatalf("direction %d: received bytes differ from those written", i)
		}
	}
}

func TestDirectReportsEndOfStreamDeadlineAndClose(t *testing.T) {
	client, server := tcpPair(t)
	d := Direct(client)
	buf := make([]byte, 16)

	client.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	_, err := d.Read(buf)
	var netErr net.Error
	if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &netErr) || !netErr.Timeout() {
		t.Fatalf("read past the deadline: %v, want a timeout", err)
	}
	client.SetReadDeadline(time.Time{})

	server.Write([]byte("hello"))
	server.Close()
	n, err := d.Read(buf)
	if err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("read = %q, %v; want hello", buf[:n], err)
	}
	if _, err := d.Read(buf); err != io.EOF {
		t.Fatalf("read after the peer closed: %v, want io.EOF", err)
	}

	// Writing to a peer that is gone fails with the system call's error.
	var werr error
	for range 100 {
		if _, werr = d.Write([]byte("x")); werr != nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	var opErr *net.OpError
	if !errors.As(werr, &opErr) || opErr.Op != "write" {
		t.Fatalf("write to a closed peer: %v, want a *net.OpError for write", werr)
	}

	client.Close()
	if _, err := d.Read(buf); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read on a closed connection: %v, want net.ErrClosed", err)
	}
}

// TestDirectCloseEndsAWaitingRead: closing the connection from another
// goroutine wakes a read that waits for data, as with net.Conn.
func TestDirectCloseEndsAWaitingRead(t *testing.T) {
	client, _ := tcpPair(t)
	d := Direct(client)
	done := make(chan error, 1)
	go func() {
		_, err := d.Read(make([]byte, 8))
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	client.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("read: %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a waiting read did not end when the connection was closed")
	}
}

func BenchmarkDirectRoundTrip(b *testing.B) {
	for _, mode := range []string{"net.Conn", "Direct"} {
		b.Run(mode, func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			defer ln.Close()
			go func() {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				buf := make([]byte, 64)
				for {
					n, err := c.Read(buf)
					if err != nil {
						return
					}
					c.Write(buf[:n])
				}
			}()
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			var rw io.ReadWriter = c
			if mode == "Direct" {
				rw = Direct(c)
			}
			msg, buf := []byte("Q\x00\x00\x00\x0dSELECT 1\x00"), make([]byte, 64)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := rw.Write(msg); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(rw, buf[:len(msg)]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
