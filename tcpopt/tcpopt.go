package tcpopt

import (
	"context"
	"net"
	"strings"
	"syscall"
	"time"
)

// Options are the keepalive and user-timeout settings of a TCP connection.
type Options struct {
	// KeepaliveIdle is the idle time before the first keepalive probe; zero
	// turns keepalives off.
	KeepaliveIdle time.Duration
	// KeepaliveInterval is the time between two unanswered probes.
	KeepaliveInterval time.Duration
	// KeepaliveCount is how many unanswered probes close the connection.
	KeepaliveCount int
	// UserTimeout is how long sent data may stay unacknowledged before the
	// kernel closes the connection (TCP_USER_TIMEOUT, Linux only); zero
	// keeps the system's retransmission limit.
	UserTimeout time.Duration
}

// keepAlive returns the Go form of the keepalive settings.
func (o Options) keepAlive() net.KeepAliveConfig {
	if o.KeepaliveIdle <= 0 {
		return net.KeepAliveConfig{Enable: false}
	}
	return net.KeepAliveConfig{Enable: true, Idle: o.KeepaliveIdle, Interval: o.KeepaliveInterval, Count: o.KeepaliveCount}
}

// Dialer returns a dialer that opens connections with these options.
func (o Options) Dialer(timeout time.Duration) *net.Dialer {
	d := &net.Dialer{Timeout: timeout, KeepAliveConfig: o.keepAlive()}
	if !d.KeepAliveConfig.Enable {
		d.KeepAlive = -1 // Go's default would turn them on
	}
	if o.UserTimeout > 0 {
		d.Control = func(network, _ string, raw syscall.RawConn) error {
			if !strings.HasPrefix(network, "tcp") {
				return nil // a node's Unix socket
			}
			return setUserTimeout(raw, o.UserTimeout)
		}
	}
	return d
}

// DialFunc is Dialer(timeout).DialContext, in the form pgconn and pgx take.
func (o Options) DialFunc(timeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return o.Dialer(timeout).DialContext
}

// Apply sets the options on an accepted connection. Connections that are
// not TCP (a Unix socket, a test pipe) are left alone.
func (o Options) Apply(conn net.Conn) error {
	tcp, ok := conn.(*net.TCPConn)
	if !ok {
		return nil
	}
	if err := tcp.SetKeepAliveConfig(o.keepAlive()); err != nil {
		return err
	}
	if o.UserTimeout <= 0 {
		return nil
	}
	raw, err := tcp.SyscallConn()
	if err != nil {
		return err
	}
	return setUserTimeout(raw, o.UserTimeout)
}
