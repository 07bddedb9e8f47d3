package proxy

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/nodetls"
)

type peerTestCA struct {
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	dir    string
	file   string
	serial int64
}

func newPeerTestCA(t *testing.T) *peerTestCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "peer-test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	dir := t.TempDir()
	ca := &peerTestCA{cert: cert, key: key, dir: dir, file: filepath.Join(dir, "ca.crt"), serial: 1}
	os.WriteFile(ca.file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	return ca
}

func (ca *peerTestCA) issue(t *testing.T, name string, usages []x509.ExtKeyUsage, ips ...string) (certFile, keyFile string) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca.serial++
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(ca.serial), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: usages}
	for _, ip := range ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalPKCS8PrivateKey(key)
	certFile, keyFile = filepath.Join(ca.dir, name+".crt"), filepath.Join(ca.dir, name+".key")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600)
	return certFile, keyFile
}

// startPeerPair starts instance 2 (a session with a running statement on a fake node, a peering
// listener with the client TLS config clientTLS) and returns instance 1, which passes cancels on
// to it with sender, the key of instance 2's session, and a channel the fake node reports on.
func startPeerPair(t *testing.T, clientTLS *tls.Config, sender nodetls.Settings) (first *Server, firstLog *syncBuffer, k cancelKey, reached chan struct{}, secondLog *syncBuffer) {
	t.Helper()
	node, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Close() })
	reached = make(chan struct{}, 1)
	go func() {
		for {
			c, err := node.Accept()
			if err != nil {
				return
			}
			var pkt [16]byte
			c.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.ReadFull(c, pkt[:]); err == nil {
				reached <- struct{}{}
			}
			c.Close()
		}
	}()
	cfg := config.Default()
	cfg.TLS.Nodes.SSLMode = config.SSLDisable
	k = cancelKey{pid: 2<<peerInstanceShift | 5, secret: 9}
	secondLog = &syncBuffer{}
	second := &Server{instance: 2, log: zerolog.New(secondLog), sessions: map[cancelKey]*session{},
		loginLog: &loginLog{log: zerolog.New(secondLog)}}
	second.settings.Store(&liveSettings{cfg: cfg, tls: clientTLS})
	sess := &session{log: zerolog.Nop(), srv: second}
	sess.running.Store(&runningStatement{node: "pg1", network: "tcp", address: node.Addr().String(), pid: 42, secret: []byte{1, 2, 3, 4}})
	second.sessions[k] = sess
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go second.ServePeers(ctx, ln)

	firstLog = &syncBuffer{}
	first = &Server{instance: 1, log: zerolog.New(firstLog), peers: map[int]string{2: ln.Addr().String()}, peerTLS: sender}
	first.settings.Store(&liveSettings{cfg: config.Default()})
	return first, firstLog, k, reached, secondLog
}

func waitReached(reached chan struct{}) bool {
	select {
	case <-reached:
		return true
	case <-time.After(3 * time.Second):
		return false
	}
}

// TestAPeerRequiringAClientCertificateGetsNoCancelWithoutOneAndItIsLogged: the peer's client TLS config
// requires a client certificate (tls.client_mode verify-ca with tls.client_ca_file) and the
// forwarding instance has no peering.tls.cert_file. The peer refuses the handshake, the cancel
// never reaches the node; the forwarding instance must not log it as passed on.
func TestAPeerRequiringAClientCertificateGetsNoCancelWithoutOneAndItIsLogged(t *testing.T) {
	ca := newPeerTestCA(t)
	certFile, keyFile := ca.issue(t, "owl-2", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, "127.0.0.1")
	clientTLS, err := ClientTLSConfig(config.TLS{CertFile: certFile, KeyFile: keyFile, ClientCAFile: ca.file,
		ClientMode: config.ClientTLSVerifyCA, MinVersion: config.TLSVersion12})
	if err != nil {
		t.Fatal(err)
	}
	first, firstLog, k, reached, secondLog := startPeerPair(t, clientTLS, nodetls.ForPeers(config.PeerTLS{SSLMode: config.SSLVerifyFull, CAFile: ca.file}))
	first.cancelFromClient(k)
	if waitReached(reached) {
		t.Fatal("the cancel reached the node although the peer requires a client certificate")
	}
	t.Logf("second instance's log: %s", secondLog.String())
	t.Logf("first instance's log: %s", firstLog.String())
	if !strings.Contains(firstLog.String(), "could not pass the cancel request on to its instance") {
		t.Errorf("the peer refused the forward's TLS handshake (no client certificate) and the node got no cancel, but the forwarding instance logged it as a success")
	}
}

// TestAPeerRequiringAClientCertificateGetsTheCancelWithOne: the same with peering.tls.cert_file:
// the cancel reaches the node, whatever pgowl's environment (PGSSLCERTMODE=disable, which
// pgconn.ParseConfig reads, does not keep the certificate back).
func TestAPeerRequiringAClientCertificateGetsTheCancelWithOne(t *testing.T) {
	for _, certMode := range []string{"", "disable"} {
		t.Run("PGSSLCERTMODE="+certMode, func(t *testing.T) {
			t.Setenv("PGSSLCERTMODE", certMode)
			ca := newPeerTestCA(t)
			both := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
			certFile, keyFile := ca.issue(t, "owl-2", both, "127.0.0.1")
			clientCert, clientKey := ca.issue(t, "owl-1", both)
			clientTLS, err := ClientTLSConfig(config.TLS{CertFile: certFile, KeyFile: keyFile, ClientCAFile: ca.file,
				ClientMode: config.ClientTLSVerifyFull, MinVersion: config.TLSVersion12})
			if err != nil {
				t.Fatal(err)
			}
			first, firstLog, k, reached, _ := startPeerPair(t, clientTLS, nodetls.ForPeers(config.PeerTLS{SSLMode: config.SSLVerifyFull, CAFile: ca.file, CertFile: clientCert, KeyFile: clientKey}))
			first.cancelFromClient(k)
			if !waitReached(reached) {
				t.Fatalf("the cancel did not reach the node with peering.tls.cert_file; log: %s", firstLog.String())
			}
		})
	}
}

// TestAPeerWithoutTLSUnderRequireIsNamedAsAPeer: the peer has no client TLS (answers N); the forward under
// peering.tls.sslmode require fails. Its log should name peering.tls, not tls.nodes.
func TestAPeerWithoutTLSUnderRequireIsNamedAsAPeer(t *testing.T) {
	first, firstLog, k, reached, _ := startPeerPair(t, nil, nodetls.ForPeers(config.PeerTLS{SSLMode: config.SSLRequire}))
	first.cancelFromClient(k)
	if waitReached(reached) {
		t.Fatal("the cancel went in the clear under require")
	}
	t.Logf("first instance's log: %s", firstLog.String())
	if strings.Contains(firstLog.String(), "tls.nodes") {
		t.Errorf("the failure of a forward under peering.tls.sslmode names tls.nodes")
	}
}

// TestAStalledPeerConnectionEndsAtTheCancelTimeout: a connection that sends SSLRequest, then stalls in the
// TLS handshake, or after it, is closed by the peering listener by cancelRequestTimeout.
func TestAStalledPeerConnectionEndsAtTheCancelTimeout(t *testing.T) {
	ca := newPeerTestCA(t)
	certFile, keyFile := ca.issue(t, "owl-2", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, "127.0.0.1")
	clientTLS, err := ClientTLSConfig(config.TLS{CertFile: certFile, KeyFile: keyFile, ClientMode: config.ClientTLSPrefer, MinVersion: config.TLSVersion12})
	if err != nil {
		t.Fatal(err)
	}
	first, _, _, _, _ := startPeerPair(t, clientTLS, nodetls.ForPeers(config.PeerTLS{}))
	addr := first.peers[2]
	ssl := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, 8), codeSSLRequest)
	for _, afterHandshake := range []bool{false, true} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		c.Write(ssl)
		var one [1]byte
		io.ReadFull(c, one[:])
		var r io.Reader = c
		if afterHandshake {
			tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true})
			if err := tc.Handshake(); err != nil {
				t.Fatal(err)
			}
			r = tc
		}
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err = io.ReadAll(r)
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("afterHandshake=%v: closed after %v (%v)", afterHandshake, d, err)
		} else {
			t.Logf("afterHandshake=%v: closed after %v (%v)", afterHandshake, d, err)
		}
		c.Close()
	}
}

// TestACancelReachesAPeerOfThePreviousReleaseUnderPrefer: during a rolling update the peer may
// still run the release before peering.tls, whose peering listener read 16 bytes at once from
// each connection and never answered an SSLRequest. Under the default sslmode prefer the forward
// gives up waiting for the answer and passes the cancel on in plain TCP on a new connection.
func TestACancelReachesAPeerOfThePreviousReleaseUnderPrefer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan struct{}, 1)
	go func() { // the previous release's servePeer, for every connection
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				conn.SetDeadline(time.Now().Add(cancelRequestTimeout))
				var pkt [16]byte
				if _, err := io.ReadFull(conn, pkt[:]); err == nil && binary.BigEndian.Uint32(pkt[4:]) == codeCancelRequest {
					got <- struct{}{}
				}
			}()
		}
	}()
	log := &syncBuffer{}
	first := &Server{instance: 1, log: zerolog.New(log), peers: map[int]string{2: ln.Addr().String()},
		peerTLS: nodetls.ForPeers(config.Default().Peering.TLS)}
	first.settings.Store(&liveSettings{cfg: config.Default()})
	started := time.Now()
	first.cancelFromClient(cancelKey{pid: 2<<peerInstanceShift | 5, secret: 9})
	select {
	case <-got:
		t.Logf("the peer had the cancel %s after it was passed on", time.Since(started).Round(time.Millisecond))
	case <-time.After(3 * time.Second):
		t.Errorf("a peer of the previous release got no CancelRequest under the default peering.tls.sslmode prefer; log: %s", log.String())
	}
}

// TestAServerOnlyCertificateIsRefusedByAPeerAskingForAClientOne: peering.tls.cert_file is the
// instance's own server certificate (extended key usage serverAuth only), and the peer asks for
// client certificates: the peer refuses it, the cancel does not reach the node, and the
// forwarding instance says so.
func TestAServerOnlyCertificateIsRefusedByAPeerAskingForAClientOne(t *testing.T) {
	ca := newPeerTestCA(t)
	serverOnly := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	certFile, keyFile := ca.issue(t, "owl-2", serverOnly, "127.0.0.1")
	ownCert, ownKey := ca.issue(t, "owl-1", serverOnly, "127.0.0.1")
	clientTLS, err := ClientTLSConfig(config.TLS{CertFile: certFile, KeyFile: keyFile, ClientCAFile: ca.file,
		ClientMode: config.ClientTLSVerifyCA, MinVersion: config.TLSVersion12})
	if err != nil {
		t.Fatal(err)
	}
	first, firstLog, k, reached, _ := startPeerPair(t, clientTLS, nodetls.ForPeers(config.PeerTLS{SSLMode: config.SSLVerifyFull, CAFile: ca.file, CertFile: ownCert, KeyFile: ownKey}))
	first.cancelFromClient(k)
	if waitReached(reached) {
		t.Fatal("the cancel reached the node through a peer that asks for a client certificate, with a server-only one")
	}
	if !strings.Contains(firstLog.String(), "could not pass the cancel request on to its instance") {
		t.Errorf("the peer refused the certificate and the node got no cancel, but the forwarding instance did not say so: %s", firstLog.String())
	}
}

// TestUnderPreferOnlyASilentPeerGetsTheCancelInTheClear: dialPeer documents that under prefer only a peer
// that has not answered the SSLRequest within peerTLSAnswerWait gets the cancel in plain TCP. A
// peer that answers S at once and whose TLS handshake then fails (here: it closes) must not get
// the secret key in the clear on a second connection.
func TestUnderPreferOnlyASilentPeerGetsTheCancelInTheClear(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var conns, plainCancels atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(3 * time.Second))
				var head [8]byte
				if _, err := io.ReadFull(c, head[:]); err != nil {
					return
				}
				switch binary.BigEndian.Uint32(head[4:]) {
				case codeSSLRequest:
					c.Write([]byte{'S'}) // answered at once; the handshake then fails
				case codeCancelRequest:
					plainCancels.Add(1)
					io.ReadFull(c, head[:])
				}
			}()
		}
	}()
	log := &syncBuffer{}
	first := &Server{instance: 1, log: zerolog.New(log), peers: map[int]string{2: ln.Addr().String()},
		peerTLS: nodetls.ForPeers(config.PeerTLS{SSLMode: config.SSLPrefer})}
	first.settings.Store(&liveSettings{cfg: config.Default()})
	start := time.Now()
	first.cancelFromClient(cancelKey{pid: 2<<peerInstanceShift | 5, secret: 9})
	took := time.Since(start).Round(time.Millisecond)
	t.Logf("log: %s", log.String())
	time.Sleep(100 * time.Millisecond)
	if n := plainCancels.Load(); n > 0 {
		t.Errorf("the peer answered S at once (the forward took %v in all), yet %d of %d connections carried the CancelRequest in plain TCP", took, n, conns.Load())
	}
}

// TestUnderPreferAPeerThatIsDownIsNotDialledAgain: a peer that is down (connection refused) under
// prefer is not taken for one that did not answer SSLRequest, nor dialled again in plain TCP.
func TestUnderPreferAPeerThatIsDownIsNotDialledAgain(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	log := &syncBuffer{}
	first := &Server{instance: 1, log: zerolog.New(log), peers: map[int]string{2: addr},
		peerTLS: nodetls.ForPeers(config.PeerTLS{SSLMode: config.SSLPrefer})}
	first.settings.Store(&liveSettings{cfg: config.Default()})
	first.cancelFromClient(cancelKey{pid: 2<<peerInstanceShift | 5, secret: 9})
	t.Logf("log: %s", log.String())
	if strings.Contains(log.String(), "did not answer SSLRequest") {
		t.Errorf("a refused connection (within ms) is logged as a peer that did not answer SSLRequest within 0.5s and dialled again in plain TCP")
	}
}

// TestPassingACancelOnOverTLS12: under TLS 1.2 a peer's close is read as a clean close
// (close_notify, io.EOF); and a TLS 1.2 peer that requires a client certificate fails the
// forward's handshake inside dialPeer, which under prefer must not send the key in plain then.
func TestPassingACancelOnOverTLS12(t *testing.T) {
	ca := newPeerTestCA(t)
	both := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	certFile, keyFile := ca.issue(t, "owl-2", both, "127.0.0.1")
	t.Run("success is success", func(t *testing.T) {
		clientTLS, _ := ClientTLSConfig(config.TLS{CertFile: certFile, KeyFile: keyFile, ClientMode: config.ClientTLSPrefer, MinVersion: config.TLSVersion12})
		clientTLS.MaxVersion = tls.VersionTLS12
		first, firstLog, k, reached, _ := startPeerPair(t, clientTLS, nodetls.ForPeers(config.PeerTLS{SSLMode: config.SSLVerifyFull, CAFile: ca.file}))
		first.cancelFromClient(k)
		if !waitReached(reached) || !strings.Contains(firstLog.String(), "passed on to its instance") || strings.Contains(firstLog.String(), "could not") {
			t.Errorf("log: %s", firstLog.String())
		}
	})
	t.Run("client certificate required, prefer, none", func(t *testing.T) {
		clientTLS, _ := ClientTLSConfig(config.TLS{CertFile: certFile, KeyFile: keyFile, ClientCAFile: ca.file, ClientMode: config.ClientTLSVerifyCA, MinVersion: config.TLSVersion12})
		clientTLS.MaxVersion = tls.VersionTLS12
		first, firstLog, k, reached, _ := startPeerPair(t, clientTLS, nodetls.ForPeers(config.PeerTLS{SSLMode: config.SSLPrefer}))
		first.cancelFromClient(k)
		if waitReached(reached) {
			t.Errorf("the peer refused the handshake (no client certificate) and the forward sent the key again in plain TCP, which the peer took; log: %s", firstLog.String())
		}
	})
}

// TestAPeerDialEndedByItsOwnDeadlineIsNotTakenForASilentPeer: a dial whose own deadline (less
// than peerTLSAnswerWait left) ends the wait for the answer is not a peer that left the
// SSLRequest unanswered for 0.5s: no fallback, no such log.
func TestAPeerDialEndedByItsOwnDeadlineIsNotTakenForASilentPeer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); c.SetDeadline(time.Now().Add(3 * time.Second)); io.Copy(io.Discard, c) }()
		}
	}()
	log := &syncBuffer{}
	s := &Server{instance: 1, log: zerolog.New(log), peerTLS: nodetls.ForPeers(config.PeerTLS{SSLMode: config.SSLPrefer})}
	wrong := 0
	for i := 0; i < 40; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		c, err := s.dialPeer(ctx, ln.Addr().String())
		if c != nil {
			t.Logf("plain connection opened after the deadline: %v", c.RemoteAddr())
			c.Close()
		} else if i < 3 {
			t.Logf("err: %v", err)
		}
		cancel()
	}
	wrong = strings.Count(log.String(), "did not answer SSLRequest")
	if wrong > 0 {
		t.Errorf("%d of 40 dials ended by their own 30ms deadline were logged as a peer that did not answer within 0.5s and dialled again in plain TCP; log: %.400s", wrong, log.String())
	}
}

// TestThePeeringListenerServesABoundedNumberOfConnections: connections to peering.listen that
// send nothing hold a goroutine each until cancelRequestTimeout. Past maxPeerConnections at
// once, a new one is closed at once and the refusal logged; once the held ones are gone, a cancel
// passed on by a peer is taken again.
func TestThePeeringListenerServesABoundedNumberOfConnections(t *testing.T) {
	first, firstLog, k, reached, secondLog := startPeerPair(t, nil, nodetls.ForPeers(config.PeerTLS{SSLMode: config.SSLDisable}))
	addr := first.peers[2]
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for range maxPeerConnections {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	closedAtOnce := 0
	for range 10 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(time.Second))
		var one [1]byte
		if _, err := c.Read(one[:]); errors.Is(err, io.EOF) {
			closedAtOnce++
		}
		c.Close()
	}
	if closedAtOnce != 10 {
		t.Errorf("%d of 10 connections past the %d held were closed at once; want all", closedAtOnce, maxPeerConnections)
	}
	if !strings.Contains(secondLog.String(), "maxPeerConnections") {
		t.Errorf("the refused connections were not logged: %s", secondLog.String())
	}
	for _, c := range held {
		c.Close()
	}
	held = nil
	time.Sleep(200 * time.Millisecond) // the listener sees the held ones close
	first.cancelFromClient(k)
	if !waitReached(reached) {
		t.Errorf("a cancel passed on after the held connections closed did not reach the node; log: %s", firstLog.String())
	}
}
