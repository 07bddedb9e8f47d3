package proxy

import (
	"errors"
	"os"
	"time"

	"github.com/pgowl/pgowl/classify"
)

// idleRelay passes on what a LISTEN-pinned backend sends while the client is
// idle: notifications, notices and parameter changes. A client waiting for a
// notification sends nothing, so the session's own loop, blocked on the
// client, would never see them.
type idleRelay struct {
	be   *backend
	done chan struct{}
	err  error
}

// startIdleRelay starts relaying for a session pinned by LISTEN whose backend
// is idle, and returns nil when there is nothing to watch.
func (sess *session) startIdleRelay() *idleRelay {
	be := sess.held
	// Notifications already read into the connection's buffer (behind the
	// last reply, or behind a query pgowl ran itself) are relayed first.
	if be == nil || sess.pinBits&classify.SessionListen == 0 || be.conn.TxStatus != 'I' ||
		be.expect.len() > 0 || be.openBatch || sess.w.Buffered() > 0 {
		return nil
	}
	ir := &idleRelay{be: be, done: make(chan struct{})}
	go ir.run(sess)
	return ir
}

func (ir *idleRelay) run(sess *session) {
	defer close(ir.done)
	r := ir.be.conn.Reader
	for {
		typ, _, err := r.PeekHeader()
		if err != nil {
			ir.err = err
			return
		}
		if typ != 'A' && typ != 'N' && typ != 'S' {
			return // anything else (a FATAL before a shutdown) is for the next unit to meet
		}
		frame, err := r.PeekFrame()
		if err != nil {
			ir.err = err
			return
		}
		if _, err := sess.w.Write(frame); err != nil {
			ir.err = err
			return
		}
		r.Discard(len(frame))
		if err := sess.w.Flush(); err != nil {
			ir.err = err
			return
		}
	}
}

// stop ends the relay before the session uses the backend again.
func (ir *idleRelay) stop() {
	conn := ir.be.conn.NetConn()
	conn.SetReadDeadline(time.Now())
	<-ir.done
	conn.SetReadDeadline(time.Time{})
	if errors.Is(ir.err, os.ErrDeadlineExceeded) {
		ir.be.conn.Reader.Rearm()
	}
}
