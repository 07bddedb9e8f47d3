package nodetls

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// silentPeer listens on loopback and reads whatever comes, answering nothing, as a peer of a
// version that reads a CancelRequest whole does with an SSLRequest.
func silentPeer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); c.SetDeadline(time.Now().Add(5 * time.Second)); io.Copy(io.Discard, c) }()
		}
	}()
	return ln.Addr().String()
}

// TestADialEndedByItsOwnDeadlineIsNotASilentPeer: the context's deadline, not AnswerWait, ended
// the wait for the answer: that is not ErrNoSSLAnswer.
func TestADialEndedByItsOwnDeadlineIsNotASilentPeer(t *testing.T) {
	addr := silentPeer(t)
	wrong := 0
	const runs = 40
	for i := 0; i < runs; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Settings{SSLMode: "prefer", AnswerWait: time.Second}.negotiate(ctx, c, &tls.Config{InsecureSkipVerify: true}, false)
		if errors.Is(err, ErrNoSSLAnswer) {
			wrong++
			if wrong == 1 {
				t.Logf("e.g.: %v", err)
			}
		}
		c.Close()
		cancel()
	}
	if wrong > 0 {
		t.Errorf("%d of %d dials that the context's 30ms deadline ended were reported as ErrNoSSLAnswer (AnswerWait 1s)", wrong, runs)
	}
}

// cancelOnWrite cancels the dial's context once the SSLRequest is written, and lets the
// AfterFunc run, as a cancel arriving at that moment would.
type cancelOnWrite struct {
	net.Conn
	cancel context.CancelFunc
}

func (c cancelOnWrite) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.cancel()
	time.Sleep(20 * time.Millisecond)
	return n, err
}

// TestADialCancelledWhileTheSSLRequestGoesOutEndsAtOnce: a dial cancelled while the SSLRequest
// goes out ends at once, with AnswerWait as without.
func TestADialCancelledWhileTheSSLRequestGoesOutEndsAtOnce(t *testing.T) {
	addr := silentPeer(t)
	for _, wait := range []time.Duration{0, 2 * time.Second} {
		ctx, cancel := context.WithCancel(context.Background())
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = Settings{SSLMode: "prefer", AnswerWait: wait}.negotiate(ctx, cancelOnWrite{c, cancel}, &tls.Config{InsecureSkipVerify: true}, false)
		took := time.Since(start)
		c.Close()
		if took > 500*time.Millisecond {
			t.Errorf("AnswerWait %v: the dial cancelled while sending SSLRequest ended after %v (%v), not at once", wait, took.Round(time.Millisecond), err)
		} else {
			t.Logf("AnswerWait %v: ended after %v: %v", wait, took.Round(time.Millisecond), err)
		}
	}
}

// TestPGSSLNEGOTIATIONDoesNotChangeTheDial: node and peer connections depend on the configuration
// alone (Params): PGSSLNEGOTIATION=direct in pgowl's environment changes nothing.
func TestPGSSLNEGOTIATIONDoesNotChangeTheDial(t *testing.T) {
	parse := func() *tls.Config {
		cfg, err := pgconn.ParseConfig(Settings{SSLMode: "prefer"}.ConnString(Param{Key: "host", Value: "localhost"}))
		if err != nil {
			t.Fatal(err)
		}
		return cfg.TLSConfig
	}
	before := parse()
	t.Setenv("PGSSLNEGOTIATION", "direct")
	after := parse()
	if len(before.NextProtos) != len(after.NextProtos) {
		t.Errorf("PGSSLNEGOTIATION=direct changed the TLS config of a prefer dial: ALPN %v -> %v", before.NextProtos, after.NextProtos)
	}
}
