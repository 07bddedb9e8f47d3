package proxy

import (
	"errors"
	"net"
	"sync/atomic"
	"time"
)

// shutdownForcedWait is how long sessions have, after shutdown_timeout, to
// roll back and say goodbye before their connections are closed.
const shutdownForcedWait = 3 * time.Second

// shutdownPollInterval is how often the drain looks for sessions that became idle.
const shutdownPollInterval = 20 * time.Millisecond

// Messages of the FATAL 57P01 errors that end sessions during a shutdown.
const (
	shutdownIdleMessage       = "pgowl is shutting down"
	shutdownRolledBackMessage = "pgowl is shutting down: shutdown_timeout passed while your transaction was open; it was rolled back"
)

// shutdownState follows a Server's drain (see Server).
type shutdownState struct {
	// draining is set when Serve's context ends: sessions end at their next message outside a transaction.
	draining atomic.Bool
	// forced is set at shutdown_timeout: open transactions are rolled back.
	forced atomic.Bool
	// rolledBack counts the sessions whose transaction was rolled back at the deadline.
	rolledBack atomic.Int64
	// cancelled counts the statements still running at the deadline whose node took the cancel.
	cancelled atomic.Int64
	// closed counts the sessions whose connection had to be closed without a goodbye.
	closed atomic.Int64
}

// errEndedForShutdown ends a session the drain ended between its message and its unit.
var errEndedForShutdown = errors.New("session ended by the shutdown")

// ShutdownReport says how a drain ended, for the exit code.
type ShutdownReport struct {
	// RolledBack is the number of transactions rolled back at shutdown_timeout.
	RolledBack int64
	// Cancelled is the number of statements cancelled at shutdown_timeout because they were still
	// running, in a transaction or not: an autocommit statement's work is lost as surely as a
	// transaction's.
	Cancelled int64
	// Closed is the number of connections closed without a 57P01 because they did not end in time.
	Closed int64
}

// Clean reports whether every session ended on its own or between statements and transactions.
func (r ShutdownReport) Clean() bool { return r.RolledBack == 0 && r.Cancelled == 0 && r.Closed == 0 }

// Shutdown returns how the last drain ended; zero until Serve has returned.
func (s *Server) Shutdown() ShutdownReport {
	return ShutdownReport{RolledBack: s.shutdown.rolledBack.Load(), Cancelled: s.shutdown.cancelled.Load(), Closed: s.shutdown.closed.Load()}
}

// drain ends the sessions after Serve's context ended: each session ends at
// its first message outside a transaction (idle ones at once), with FATAL
// 57P01. At grace, running statements are cancelled and open transactions
// rolled back; shutdownForcedWait later, the connections left are closed.
func (s *Server) drain(grace time.Duration) {
	s.shutdown.draining.Store(true)
	if held, wasPaused := s.pause.open(); wasPaused {
		// Else the units PAUSE holds would wait for a RESUME that cannot come (the console's
		// sessions end too), and the drain with them, for ever.
		s.log.Warn().Dur("paused_for", held).Msg("shutdown while paused: the held units outside a transaction end with 57P01, those of a transaction run")
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	tick := time.NewTicker(shutdownPollInterval)
	defer tick.Stop()
	for waiting := true; waiting; {
		s.wakeIdleSessions()
		select {
		case <-done:
			return
		case <-tick.C:
		case <-deadline.C:
			waiting = false
		}
	}
	s.shutdown.forced.Store(true)
	s.log.Warn().Dur("shutdown_timeout", grace).Int("sessions", s.sessionCount()).Msg("shutdown_timeout passed: cancelling running statements and rolling back open transactions")
	s.mu.Lock()
	var running []cancelKey
	for k, sess := range s.sessions {
		sess.client.conn.SetReadDeadline(time.Now())
		if sess.running.Load() != nil {
			running = append(running, k)
		}
	}
	s.mu.Unlock()
	for _, k := range running {
		// Counted when the node took the request for a statement still running: one that
		// ended meanwhile lost nothing.
		if s.cancel(k) {
			s.shutdown.cancelled.Add(1)
		}
	}
	select {
	case <-done:
		return
	case <-time.After(shutdownForcedWait):
	}
	s.mu.Lock()
	for _, sess := range s.sessions {
		s.shutdown.closed.Add(1)
		sess.client.conn.Close()
	}
	s.mu.Unlock()
	<-done
}

// wakeIdleSessions makes the sessions waiting for a message outside a
// transaction return from their read, so that they end.
func (s *Server) wakeIdleSessions() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sess := range s.sessions {
		if sess.idleOutsideTransaction.Load() {
			sess.client.conn.SetReadDeadline(time.Now())
		}
	}
}

func (s *Server) sessionCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}

// endForShutdown reports whether the session must end now because pgowl is
// shutting down, and if so tells the client why. A session in a transaction
// goes on until shutdown_timeout; then its transaction is rolled back (by
// closeBackends, as for any client that leaves) and the client is told.
func (sess *session) endForShutdown() bool {
	st := &sess.srv.shutdown
	if !st.draining.Load() {
		return false
	}
	message := shutdownIdleMessage
	if state := sess.txState(); state.inTransaction() || state.workInFlight() {
		if !st.forced.Load() {
			return false
		}
		st.rolledBack.Add(1)
		message = shutdownRolledBackMessage
	}
	sess.client.conn.SetWriteDeadline(time.Now().Add(time.Second))
	sess.fail(&clientError{Severity: "FATAL", SQLState: sqlstateAdminShutdown, Message: message})
	return true
}

// refuseWhileShuttingDown answers a client that connects during the drain
// with FATAL 57P01, after its startup packet so that it reads the answer. A
// CancelRequest is acted on instead: the drain waits for running statements,
// and a client may want to stop one rather than wait.
func (s *Server) refuseWhileShuttingDown(conn net.Conn) {
	conn.SetDeadline(time.Now().Add(time.Second))
	s.cancelOrRefuse(conn, &clientError{Severity: "FATAL", SQLState: sqlstateAdminShutdown, Message: shutdownIdleMessage})
}

// isTimeout reports whether err is a deadline that passed, as the drain sets on idle sessions.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
