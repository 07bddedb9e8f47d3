package proxy

import (
	"net"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/pgowl/pgowl/config"
)

// TestALateQueryTimeoutCancelsOnlyItsOwnStatement: limits.query_timeout's timer is stopped
// once the statement's replies have ended, but a timer that fires just then has already started
// its function, and Stop cannot take it back. That function used to cancel whatever the session
// ran by the time it got to it: the session's next statement, or a unit waiting at PAUSE's gate
// (which then ended with 57014 without running). It must act on its own statement only.
func TestALateQueryTimeoutCancelsOnlyItsOwnStatement(t *testing.T) {
	node, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	cancels := make(chan struct{}, 4)
	go func() {
		for {
			c, err := node.Accept()
			if err != nil {
				return
			}
			cancels <- struct{}{}
			c.Close() // as PostgreSQL does once it has taken the request
		}
	}()
	const limit = 50 * time.Millisecond
	newSession := func() *session {
		srv := &Server{}
		cfg := config.Config{}
		cfg.Limits.QueryTimeout = limit
		srv.settings.Store(&liveSettings{cfg: cfg})
		return &session{srv: srv, log: zerolog.Nop()}
	}
	newBackend := func() *backend {
		return &backend{node: "pg1", running: runningStatement{node: "pg1", network: "tcp", address: node.Addr().String(), pid: 42, secret: []byte{1, 2, 3, 4}}}
	}
	noCancelWithin := func(t *testing.T, d time.Duration) {
		t.Helper()
		select {
		case <-cancels:
			t.Fatal("a cancel request reached the node for a statement that had not run past the limit")
		case <-time.After(d):
		}
	}

	t.Run("StatementRunningPastTheLimit", func(t *testing.T) {
		sess, be := newSession(), newBackend()
		timer := sess.armQueryTimeout(be, sess.statementStarted(be))
		defer timer.Stop()
		select {
		case <-cancels:
		case <-time.After(5 * time.Second):
			t.Fatal("the statement ran past limits.query_timeout and no cancel request reached its node")
		}
		if !sess.queryTimedOut.Load() {
			t.Error("the cancel was not recorded as limits.query_timeout's")
		}
		sess.statementStopped()
	})

	t.Run("NextStatementOfTheSession", func(t *testing.T) {
		sess, be := newSession(), newBackend()
		// The first statement ends before its timer fires, and the timer is not stopped in
		// time: it fires while the next statement runs on the same backend.
		late := sess.armQueryTimeout(be, sess.statementStarted(be))
		defer late.Stop()
		sess.statementStopped()
		sess.statementStarted(be)
		noCancelWithin(t, 4*limit)
		if sess.queryTimedOut.Load() {
			t.Error("the next statement would be reported as cancelled by limits.query_timeout")
		}
		sess.statementStopped()
	})

	t.Run("UnitHeldByPause", func(t *testing.T) {
		sess, be := newSession(), newBackend()
		late := sess.armQueryTimeout(be, sess.statementStarted(be))
		defer late.Stop()
		sess.statementStopped()
		held := make(chan struct{})
		sess.heldCancel.Store(&held)
		time.Sleep(4 * limit)
		select {
		case <-held:
			t.Fatal("a late limits.query_timeout ended the unit PAUSE holds: it would end with 57014 without running")
		default:
		}
	})
}
