package integration

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/integration/owltest"
)

// TestACancelPassedToAPeerGoesInTLS: a CancelRequest that reaches an instance other than the
// one that holds the session is passed on to that peer's peering listener. It carries the
// session's secret key, so it goes in TLS (peering.tls, as tls.nodes): an SSLRequest first, then
// the cancel inside TLS, verified against the peer's certificate. A relay in front of the peer's
// listener sees how each connection begins. A peer whose certificate the CA does not vouch for
// gets no cancel under verify-full.
func TestACancelPassedToAPeerGoesInTLS(t *testing.T) {
	c := sharedClusterFor(t)
	ca := owltest.NewTestCA(t, "peering")
	peerCert := ca.Issue(t, "owl-2", "owl-2", "127.0.0.1")
	for _, tc := range []struct {
		name   string
		caFile string
		// cancelled: the statement is cancelled, through the peer.
		cancelled bool
	}{
		{"verify-full against the peer's CA", ca.CertFile, true},
		{"verify-full against another CA", owltest.NewTestCA(t, "other").CertFile, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ports := freeLoopbackPorts(t, 1)
			secondPeering := fmt.Sprintf("127.0.0.1:%d", ports[0])
			relay := startFirstBytesRelay(t, secondPeering)
			peers := []config.Peer{
				{Instance: 1, Address: "127.0.0.1:1"}, // instance 1 gets no cancel passed on here
				{Instance: 2, Address: fmt.Sprintf("%s:%d", relay.host, relay.port)},
			}
			first := startOwl(t, c, func(cfg *config.Config) {
				cfg.Peering.Instance, cfg.Peering.Listen, cfg.Peering.Peers = 1, "127.0.0.1:0", peers
				cfg.Peering.TLS = config.PeerTLS{SSLMode: config.SSLVerifyFull, CAFile: tc.caFile}
			})
			second := startOwl(t, c, func(cfg *config.Config) {
				cfg.Peering.Instance, cfg.Peering.Listen, cfg.Peering.Peers = 2, secondPeering, peers
				cfg.TLS.CertFile, cfg.TLS.KeyFile = peerCert.CertFile, peerCert.KeyFile
			})
			conn := second.connect(t, nil)
			if owner := conn.PgConn().PID() >> 24; owner != 2 {
				t.Fatalf("the session's key carries instance %d, want 2", owner)
			}
			marker := "peer_tls_cancel_" + strings.Fields(tc.name)[2]
			done := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
				defer cancel()
				_, err := conn.Exec(ctx, "SELECT pg_sleep(5) /* "+marker+" */", pgx.QueryExecModeSimpleProtocol)
				done <- err
			}()
			waitStatementRunning(t, marker)
			sendCancelTo(t, first.addr, conn.PgConn().PID(), conn.PgConn().SecretKey())
			select {
			case err := <-done:
				if tc.cancelled {
					wantSQLState(t, "the statement cancelled through the first instance", err, "57014")
				} else if err != nil {
					t.Errorf("the statement failed (%v); want it to run to its end, its cancel not passed on to a peer the CA does not vouch for", err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("the statement did not end")
			}
			plain, total := relay.counts([]byte{0, 0, 0, 16, 0x04, 0xd2, 0x16, 0x2e})
			secured, _ := relay.counts([]byte{0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f})
			if plain > 0 || secured != total || total == 0 {
				t.Errorf("of the %d connections to the peer's listener, %d carried a CancelRequest in the clear and %d began with an SSLRequest; want every one to begin with an SSLRequest", total, plain, secured)
			}
			if !tc.cancelled && !strings.Contains(first.logs.String(), "could not pass the cancel request on to its instance") {
				t.Errorf("the first instance did not log the cancel it could not pass on:\n%s", first.logs.Tail(3000))
			}
		})
	}
}

// TestAPeerAskingForAClientCertificateGetsNoCancelWithoutOne: the peer's clients must present a certificate
// (tls.client_mode verify-ca, tls.client_ca_file); the forwarding instance has no
// peering.tls.cert_file. The peer refuses the handshake and the statement is not cancelled; the
// forwarding instance must say it could not pass the cancel on, not that it did.
func TestAPeerAskingForAClientCertificateGetsNoCancelWithoutOne(t *testing.T) {
	c := sharedClusterFor(t)
	files := newClientTLSFiles(t)
	ports := freeLoopbackPorts(t, 1)
	secondPeering := fmt.Sprintf("127.0.0.1:%d", ports[0])
	peers := []config.Peer{{Instance: 1, Address: "127.0.0.1:1"}, {Instance: 2, Address: secondPeering}}
	first := startOwl(t, c, func(cfg *config.Config) {
		cfg.Peering.Instance, cfg.Peering.Listen, cfg.Peering.Peers = 1, "127.0.0.1:0", peers
		cfg.Peering.TLS = config.PeerTLS{SSLMode: config.SSLVerifyFull, CAFile: files.ca.CertFile}
	})
	second := startOwl(t, c, func(cfg *config.Config) {
		files.withClientTLS(config.ClientTLSVerifyCA)(cfg)
		cfg.Peering.Instance, cfg.Peering.Listen, cfg.Peering.Peers = 2, secondPeering, peers
	})
	conn, err := tlsLogin(t, second, appUser, appPassword, files.verifyFull(&files.app), nil)
	if err != nil {
		t.Fatal(err)
	}
	marker := "peer_client_cert"
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
		defer cancel()
		_, err := conn.Exec(ctx, "SELECT pg_sleep(4) /* "+marker+" */", pgx.QueryExecModeSimpleProtocol)
		done <- err
	}()
	waitStatementRunning(t, marker)
	sendCancelTo(t, first.addr, conn.PgConn().PID(), conn.PgConn().SecretKey())
	if err := <-done; err != nil {
		t.Errorf("the statement failed (%v); want it to run to its end: its cancel came without a client certificate", err)
	}
	if !strings.Contains(first.logs.String(), "could not pass the cancel request on to its instance") {
		t.Errorf("the peer refused the cancel's connection, and the first instance did not say it could not pass it on:\n%s", first.logs.Tail(2000))
	}
}

// sendCancelTo sends a CancelRequest for the session with pid and secret to addr, as a client
// that reached another instance than its session's does.
func sendCancelTo(t *testing.T, addr string, pid uint32, secret []byte) {
	t.Helper()
	if len(secret) != 4 {
		t.Fatalf("a secret key of %d bytes; want the protocol 3.0 key of 4", len(secret))
	}
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pkt := binary.BigEndian.AppendUint32(nil, 16)
	pkt = binary.BigEndian.AppendUint32(pkt, 80877102)
	pkt = binary.BigEndian.AppendUint32(pkt, pid)
	pkt = append(pkt, secret...)
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(pkt); err != nil {
		t.Fatal(err)
	}
	var one [1]byte
	c.Read(one[:]) // the instance closes the connection once it passed the cancel on
}
