package proxy

import (
	"context"
	"errors"
	"sync"
	"time"
)

// pauseGate holds new units while pgowl is paused (PAUSE in the admin
// console) and releases them on RESUME. Its states: open (the zero value)
// and closed; while closed, released is a channel that RESUME closes.
type pauseGate struct {
	mu       sync.Mutex
	released chan struct{} // nil while open
	since    time.Time
}

// close holds the units that start from now on; it reports false when the gate was already closed.
func (g *pauseGate) close() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.released != nil {
		return false
	}
	g.released = make(chan struct{})
	g.since = time.Now()
	return true
}

// open releases the held units; it reports how long the gate was closed, and false when it was open.
func (g *pauseGate) open() (time.Duration, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.released == nil {
		return 0, false
	}
	close(g.released)
	g.released = nil
	return time.Since(g.since), true
}

// isOpen reports whether the gate is open now.
func (g *pauseGate) isOpen() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.released == nil
}

// wait returns at once while the gate is open, else when it opens, ctx ends or cancelled is
// closed (errCancelledWhileHeld).
func (g *pauseGate) wait(ctx context.Context, cancelled <-chan struct{}) error {
	g.mu.Lock()
	released := g.released
	g.mu.Unlock()
	if released == nil {
		return nil
	}
	select {
	case <-released:
		return nil
	case <-cancelled:
		return errCancelledWhileHeld
	case <-ctx.Done():
		return ctx.Err()
	}
}

// errCancelledWhileHeld: the client's cancel request came while its unit waited at the gate.
var errCancelledWhileHeld = errors.New("cancelled while held by PAUSE")

// passGate lets a unit that starts new work pass the pause gate: at once while it is open, else
// once it opens (RESUME, or a shutdown's drain, which opens it). The session counts as busy from
// before it looks at the gate, so that a PAUSE that closes the gate meanwhile either sees it
// busy, and waits for its unit, or is seen by it, and holds the unit: PAUSE closes the gate
// before it counts busy sessions.
//
// A cancel request while the unit waits ends it without running (errCancelledWhileHeld), as a
// statement waiting on the node (for a lock) would end: a client that cancelled must not have its
// statement run once pgowl resumes.
func (sess *session) passGate(ctx context.Context) error {
	for {
		sess.busy.Store(true)
		if sess.srv.pause.isOpen() {
			return nil
		}
		sess.busy.Store(false)
		cancelled := make(chan struct{})
		sess.heldCancel.Store(&cancelled)
		err := sess.srv.pause.wait(ctx, cancelled)
		if sess.heldCancel.Swap(nil) == nil && err == nil {
			err = errCancelledWhileHeld // the cancel came as the gate opened
		}
		if err != nil {
			return err
		}
	}
}

// cancelHeld ends the unit waiting at the pause gate, if one waits; it reports whether one did.
func (sess *session) cancelHeld() bool {
	held := sess.heldCancel.Swap(nil)
	if held == nil {
		return false
	}
	close(*held)
	sess.log.Info().Msg("cancel request ended a statement held by PAUSE; it did not run")
	return true
}

// Pause holds every unit that starts outside a transaction until Resume;
// units of transactions already open go on. It waits up to timeout for the
// open transactions to finish and returns how many are still open.
func (s *Server) Pause(timeout time.Duration) (busy int, alreadyPaused bool) {
	alreadyPaused = !s.pause.close()
	if s.shutdown.draining.Load() {
		// The drain opened the gate (or will: it sets draining first); closed again now, the
		// units it holds would wait for a RESUME that cannot come.
		s.pause.open()
		return s.busySessions(), alreadyPaused
	}
	if !alreadyPaused {
		s.log.Info().Msg("paused: new units wait until RESUME")
	}
	deadline := time.Now().Add(timeout)
	for {
		busy = s.busySessions()
		if busy == 0 || time.Now().After(deadline) {
			return busy, alreadyPaused
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Resume releases the units held since Pause; they are routed by the node states seen now.
func (s *Server) Resume() (held time.Duration, wasPaused bool) {
	held, wasPaused = s.pause.open()
	if wasPaused {
		s.log.Info().Dur("paused_for", held).Msg("resumed: held units run now")
	}
	return held, wasPaused
}

// busySessions counts the sessions that are in a transaction or running a unit.
func (s *Server) busySessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	busy := 0
	for _, sess := range s.sessions {
		if sess.busy.Load() {
			busy++
		}
	}
	return busy
}
