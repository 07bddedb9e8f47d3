package proxy

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"time"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/route"
	"github.com/pgowl/pgowl/wire"
)

// idleRelay passes on what a LISTEN-pinned backend sends while the client is
// idle: notifications, notices and parameter changes. A client waiting for a
// notification sends nothing, so the session's own loop, blocked on the
// client, would never see them.
//
// When the backend's connection fails, or the monitor sees its node stop
// being the primary (a promotion elsewhere, the old primary still up), the
// session can no longer receive the notifications of the channels it
// listens to: the client gets a FATAL and its connection is closed, as a
// direct connection to a node that went away would be, so that it connects
// again and listens on the current primary rather than wait for ever.
type idleRelay struct {
	be   *backend
	done chan struct{}
	err  error
	// stopping is set by stop: the read deadline that ends the relay is
	// the session's, not a failure.
	stopping atomic.Bool
	// replaced says why the node is no longer the primary, set by the
	// watcher before it interrupts the relay.
	replaced atomic.Pointer[string]
	// cancelWatch ends the watcher, which closes watchDone when it returns.
	cancelWatch context.CancelFunc
	watchDone   chan struct{}
}

// startIdleRelay starts relaying for a session pinned by LISTEN whose backend
// is idle, and returns nil when there is nothing to watch.
func (sess *session) startIdleRelay() *idleRelay {
	be := sess.held
	// Notifications already read into the connection's buffer (behind the
	// last reply, or behind a query pgowl ran itself) are relayed first.
	if be == nil || !sess.pins.has(classify.SessionListen) || be.conn.TxStatus != wire.TxIdle ||
		be.expect.len() > 0 || be.openBatch || sess.client.w.Buffered() > 0 {
		return nil
	}
	ir := &idleRelay{be: be, done: make(chan struct{}), watchDone: make(chan struct{})}
	var watch context.Context
	watch, ir.cancelWatch = context.WithCancel(context.Background())
	go ir.watch(watch, sess)
	go ir.run(sess)
	return ir
}

// watch interrupts the relay once the monitor sees be's node replaced as
// the primary.
func (ir *idleRelay) watch(ctx context.Context, sess *session) {
	defer close(ir.watchDone)
	var why string
	if !sess.srv.opts.Nodes.WaitFor(ctx, func(s *route.Snapshot) bool {
		why = route.HeldReplaced(s, sess.srv.live().policy, time.Now(), route.HeldNode{Node: ir.be.node, Role: ir.be.role})
		return why != ""
	}) {
		return
	}
	ir.replaced.Store(&why)
	ir.be.conn.NetConn().SetReadDeadline(time.Now())
}

func (ir *idleRelay) run(sess *session) {
	defer close(ir.done)
	r := ir.be.conn.Reader
	for {
		typ, _, err := r.PeekHeader()
		if err != nil {
			ir.err = err
			if !ir.stopping.Load() {
				ir.endSession(sess, err)
			}
			return
		}
		if typ == wire.MsgErrorResponse {
			// Only a FATAL comes unasked: the node is closing the connection
			// (a shutdown, pg_terminate_backend).
			if !ir.stopping.Load() {
				ir.endSession(sess, errors.New("the node sent an error while the session was idle: it is closing the connection"))
			}
			return
		}
		if typ != wire.MsgNotificationResponse && typ != wire.MsgNoticeResponse && typ != wire.MsgParameterStatus {
			return // anything else is for the next unit to meet
		}
		frame, err := r.PeekFrame()
		if err != nil {
			ir.err = err
			return
		}
		if _, err := sess.client.w.Write(frame); err != nil {
			ir.err = err
			return
		}
		r.Discard(len(frame))
		if err := sess.client.w.Flush(); err != nil {
			ir.err = err
			return
		}
	}
}

// endSession tells the client that its listening session is gone and
// closes its connection; the session's loop then ends and drops the backend.
func (ir *idleRelay) endSession(sess *session, cause error) {
	message := "pgowl: terminating connection: the connection to " + ir.be.node + ", where this session listens, was lost"
	if why := ir.replaced.Load(); why != nil {
		message = "pgowl: terminating connection: " + ir.be.node + ", where this session listens, is no longer the primary (" + *why + ")"
	}
	sess.log.Warn().Err(cause).Str("node", ir.be.node).Msg("listening session ended: its node is gone or no longer the primary")
	ir.be.broken = true
	sess.terminateListening(message)
}

// terminateListening tells the client, with a FATAL 57P01, that the session
// can no longer receive the notifications it listens for, and closes its
// connection, so that it connects and listens again.
func (sess *session) terminateListening(message string) {
	sess.send(toErrorResponse(&clientError{Severity: "FATAL", SQLState: sqlstateAdminShutdown, Message: message,
		Hint: "Connect again and LISTEN again: the session will run on the current primary."}))
	sess.client.w.Flush()
	sess.client.conn.Close()
}

// errListeningSessionLost ends a session whose LISTEN backend was lost
// while it ran a statement (see lostBackend).
var errListeningSessionLost = errors.New("the backend where the session listens was lost")

// stop ends the relay before the session uses the backend again.
func (ir *idleRelay) stop() {
	ir.stopping.Store(true)
	ir.cancelWatch()
	<-ir.watchDone // it must not set a deadline after the one cleared below
	conn := ir.be.conn.NetConn()
	conn.SetReadDeadline(time.Now())
	<-ir.done
	conn.SetReadDeadline(time.Time{})
	if errors.Is(ir.err, os.ErrDeadlineExceeded) {
		ir.be.conn.Reader.Rearm()
	}
}
