//go:build linux

package tcpopt

import (
	"context"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// socketOptions reads back the keepalive and user-timeout options of conn.
func socketOptions(t *testing.T, conn net.Conn) (keepalive, idle, interval, count, userTimeout int) {
	t.Helper()
	raw, err := conn.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var errs []error
	get := func(fd int, level, name int) int {
		v, err := unix.GetsockoptInt(fd, level, name)
		if err != nil {
			errs = append(errs, err)
		}
		return v
	}
	raw.Control(func(fd uintptr) {
		keepalive = get(int(fd), unix.SOL_SOCKET, unix.SO_KEEPALIVE)
		idle = get(int(fd), unix.IPPROTO_TCP, unix.TCP_KEEPIDLE)
		interval = get(int(fd), unix.IPPROTO_TCP, unix.TCP_KEEPINTVL)
		count = get(int(fd), unix.IPPROTO_TCP, unix.TCP_KEEPCNT)
		userTimeout = get(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT)
	})
	if len(errs) > 0 {
		t.Fatalf("getsockopt: %v", errs)
	}
	return
}

// TestOptionsReachTheSocket dials and accepts a loopback connection with
// options and reads them back from the kernel, on both ends.
func TestOptionsReachTheSocket(t *testing.T) {
	opts := Options{KeepaliveIdle: 7 * time.Second, KeepaliveInterval: 3 * time.Second, KeepaliveCount: 4, UserTimeout: 12500 * time.Millisecond}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	dialed, err := opts.DialFunc(time.Second)(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer dialed.Close()
	server, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	defer server.Close()
	if err := opts.Apply(server); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	for name, conn := range map[string]net.Conn{"dialed": dialed, "accepted": server} {
		keepalive, idle, interval, count, user := socketOptions(t, conn)
		if keepalive != 1 || idle != 7 || interval != 3 || count != 4 || user != 12500 {
			t.Errorf("%s: SO_KEEPALIVE %d, TCP_KEEPIDLE %d, TCP_KEEPINTVL %d, TCP_KEEPCNT %d, TCP_USER_TIMEOUT %d; want 1, 7, 3, 4, 12500",
				name, keepalive, idle, interval, count, user)
		}
	}
}

// TestZeroOptionsTurnKeepalivesOff: keepalive_idle 0 means no keepalives (Go
// would otherwise turn them on with its own default), and user_timeout 0
// leaves the system's limit.
func TestZeroOptionsTurnKeepalivesOff(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			defer c.Close()
			time.Sleep(time.Second)
		}
	}()
	conn, err := Options{}.Dialer(time.Second).Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if keepalive, _, _, _, user := socketOptions(t, conn); keepalive != 0 || user != 0 {
		t.Errorf("SO_KEEPALIVE %d, TCP_USER_TIMEOUT %d; want 0, 0", keepalive, user)
	}
}

// TestUnixSocketsAreLeftAlone: a node given as a Unix socket directory
// dials through the same dialer, which must not set TCP options on it.
func TestUnixSocketsAreLeftAlone(t *testing.T) {
	path := t.TempDir() + "/s"
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
		}
	}()
	opts := Options{KeepaliveIdle: time.Second, KeepaliveInterval: time.Second, KeepaliveCount: 1, UserTimeout: time.Second}
	conn, err := opts.DialFunc(time.Second)(context.Background(), "unix", path)
	if err != nil {
		t.Fatalf("dial a Unix socket: %v", err)
	}
	conn.Close()
	if err := opts.Apply(conn); err != nil {
		t.Errorf("Apply on a Unix socket: %v", err)
	}
}
