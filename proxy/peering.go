package proxy

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/nodetls"
)

// Several pgowl instances behind one address (SO_REUSEPORT on one host, a
// TCP load balancer or a Kubernetes Service) each know only their own
// clients' cancel keys, and a CancelRequest comes on a new connection that
// may reach any of them. With peering on, the process id of every
// BackendKeyData an instance hands out carries its instance number in the
// top 7 of its 31 bits (peerInstanceShift); an instance that gets a cancel
// with another instance's number passes the 16 bytes on, unchanged, to that
// peer's peering listener, which handles it as its own and never passes it
// on again (so that a wrong peer list cannot make a loop).
//
// The 16 bytes carry the secret key of the client's session. They go in TLS
// as a cancel to a node does (peering.tls has tls.nodes' meaning: an
// SSLRequest first, then the CancelRequest inside TLS), and the peering
// listener answers an SSLRequest as the client listener does: with TLS when
// it has a certificate (tls.cert_file), N otherwise.

// peerInstanceShift places the instance number in the process id of the key.
const peerInstanceShift = 24

// peerInstanceOf returns the instance number a cancel key carries (0 for
// keys handed out with peering off).
func peerInstanceOf(k cancelKey) int { return int(k.pid >> peerInstanceShift) }

// cancelRequestTimeout bounds passing a cancel on, to a node or to a peer.
const cancelRequestTimeout = 2 * time.Second

// Listen opens the client listener of cfg: with listen_reuse_port, the
// socket is bound with SO_REUSEPORT so that other processes may bind the
// same port and the kernel spreads new connections among them.
func Listen(ctx context.Context, cfg config.Config) (net.Listener, error) {
	lc := net.ListenConfig{}
	if cfg.ListenReusePort {
		lc.Control = reusePort
	}
	ln, err := lc.Listen(ctx, "tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", cfg.Listen, err)
	}
	return ln, nil
}

// reusePort sets SO_REUSEPORT on a socket before it is bound.
func reusePort(_, _ string, raw syscall.RawConn) error {
	var sockErr error
	if err := raw.Control(func(fd uintptr) {
		sockErr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
	}); err != nil {
		return err
	}
	if sockErr != nil {
		return fmt.Errorf("SO_REUSEPORT: %w", sockErr)
	}
	return nil
}

// peerAddresses maps the peers' instance numbers to their peering
// listeners, leaving out this instance's own entry.
func peerAddresses(p config.Peering) map[int]string {
	if p.Instance == 0 {
		return nil
	}
	peers := make(map[int]string, len(p.Peers))
	for _, peer := range p.Peers {
		if peer.Instance != p.Instance {
			peers[peer.Instance] = peer.Address
		}
	}
	return peers
}

// cancelFromClient handles a CancelRequest that came from a client: its
// own keys are cancelled here, another instance's key is passed on to it.
func (s *Server) cancelFromClient(k cancelKey) {
	owner := peerInstanceOf(k)
	if s.instance == 0 || owner == s.instance {
		s.cancel(k)
		return
	}
	addr, known := s.peers[owner]
	if !known {
		s.log.Warn().Int("instance", owner).Msg("cancel request for an instance that is not in peering.peers: dropped")
		return
	}
	if err := s.forwardCancel(addr, k); err != nil {
		s.log.Warn().Err(err).Int("instance", owner).Str("peer", addr).Msg("could not pass the cancel request on to its instance")
		return
	}
	s.log.Info().Int("instance", owner).Str("peer", addr).Msg("cancel request passed on to its instance")
}

// forwardCancel sends the CancelRequest for k to a peer's peering listener
// (in TLS as peering.tls says) and waits for the peer to close the
// connection, which it does once it has passed the request on to the node.
// A peer that ends the connection otherwise (a TLS alert: it wanted a client
// certificate, or did not take this one) did not take the cancel.
func (s *Server) forwardCancel(addr string, k cancelKey) error {
	ctx, cancel := context.WithTimeout(context.Background(), cancelRequestTimeout)
	defer cancel()
	c, err := s.dialPeer(ctx, addr)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(cancelRequestTimeout))
	if _, err := c.Write(cancelRequestPacket(k.pid, binary.BigEndian.AppendUint32(nil, k.secret))); err != nil {
		return err
	}
	var one [1]byte
	_, err = c.Read(one[:])
	var timeout net.Error
	switch {
	case err == nil:
		return errors.New("the peer answered a cancel request")
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return nil // closed: the peer passed it on
	case errors.As(err, &timeout) && timeout.Timeout():
		return nil // the peer is slow to reach its node; it has the request
	default:
		// Under TLS 1.3 the client's handshake ends before the peer has checked the client's
		// certificate: its refusal comes here, as an alert.
		return err
	}
}

// peerTLSAnswerWait bounds the wait for a peer's answer to SSLRequest under peering.tls prefer.
const peerTLSAnswerWait = 500 * time.Millisecond

// dialPeer opens the connection a cancel goes to the peer at addr over, secured as peering.tls
// says; verify-full checks the peer's certificate against addr's host. An instance of a version
// before peering.tls reads the 16 bytes of a CancelRequest at once and never answers an
// SSLRequest: under prefer (the default), a peer that has not answered within peerTLSAnswerWait
// gets the cancel in plain TCP on a new connection, as libpq under prefer tries again without
// TLS, so that cancels keep working through a rolling update. Nothing else falls back: a peer
// that answered and then failed the TLS handshake gets no cancel in the clear.
func (s *Server) dialPeer(ctx context.Context, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	settings := s.peerTLS
	if settings.SSLMode != "" && settings.SSLMode != config.SSLPrefer {
		return settings.DialCancel(ctx, "tcp", addr, host)
	}
	settings.AnswerWait = peerTLSAnswerWait
	c, err := settings.DialCancel(ctx, "tcp", addr, host)
	if err == nil || !errors.Is(err, nodetls.ErrNoSSLAnswer) || ctx.Err() != nil {
		return c, err
	}
	s.log.Info().Str("peer", addr).Msg("the peer did not answer SSLRequest (a version before peering.tls?): the cancel is passed on without TLS, as peering.tls.sslmode prefer allows")
	settings.SSLMode = config.SSLDisable
	return settings.DialCancel(ctx, "tcp", addr, host)
}

// maxPeerConnections bounds the connections the peering listener serves at once. Each holds a
// goroutine, and may cost a TLS handshake, for up to cancelRequestTimeout before it has proved
// anything: past the bound, a new one is closed at once and logged (rate-limited), so that a
// flood on peering.listen costs what the client listener's refusals cost (maxCourteousRefusals).
// Peers pass on one cancel per connection and close it as soon as it is taken.
const maxPeerConnections = 256

// ServePeers takes the cancels passed on by peers on ln until ctx ends.
// It reads one CancelRequest per connection and handles it as this
// instance's own; anything else closes the connection.
func (s *Server) ServePeers(ctx context.Context, ln net.Listener) error {
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	serving := make(chan struct{}, maxPeerConnections)
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			return err
		}
		select {
		case serving <- struct{}{}:
		default:
			s.loginLog.note(loginRefused, clientAddr(conn), "peering listener: maxPeerConnections connections served at once")
			conn.Close()
			continue
		}
		go func() {
			defer func() { <-serving }()
			s.servePeer(conn)
		}()
	}
}

// servePeer reads one passed-on CancelRequest from conn and cancels. Its encryption requests
// are answered as the client listener answers them (readPastNegotiation).
func (s *Server) servePeer(conn net.Conn) {
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(cancelRequestTimeout))
	answerOn, body, err := s.readPastNegotiation(conn)
	if answerOn != conn {
		defer answerOn.Close() // first: its close_notify tells the peer the request was taken
	}
	remote := conn.RemoteAddr().String()
	if err != nil {
		s.log.Info().Err(err).Str("remote", remote).Msg("peering listener: no cancel request read")
		return
	}
	k, ok := cancelRequestKey(body)
	if !ok {
		s.log.Warn().Str("remote", remote).Msg("peering listener: not a cancel request; closing")
		return
	}
	if owner := peerInstanceOf(k); owner != s.instance {
		s.log.Warn().Int("instance", owner).Msg("peering listener: a peer passed on a cancel of another instance; dropped")
		return
	}
	s.cancel(k)
}
