package proxy

import (
	"context"
	"net"
	"sync"
	"time"

	"github.com/pgowl/pgowl/route"
)

// # Moving away from a node that stopped answering
//
// A host that is stopped (SIGSTOP, a hung VM) still acknowledges TCP, so
// keepalives never fire and a statement sent to it waits for ever, and a
// new connection to it waits the whole pool.dial_timeout. The monitor
// notices such a node within monitor.down_after, and routing stops choosing
// it; what is already waiting on it is handled here, by one watcher per
// Server (watchUnresponsiveNodes). Each tick while a node is unresponsive,
// it
//
//   - abandons the dials in flight to the node (pool.AbandonDials): the unit
//     that waited for one is routed again, to another node;
//   - interrupts every session whose unit has waited longer than
//     limits.first_reply_timeout for the node's first reply (a read
//     deadline on the backend connection). The unit is sent again to
//     another node when it cannot have had an effect (nothing reached the
//     node, or it only reads outside a transaction), and ends with 08006
//     otherwise, as for a lost connection.
//
// A session marks the wait with awaitFirstReply before it talks to the node
// for a unit, clears it at the first frame (firstReplyCame) and for good
// with endAwait; replyWait's mutex makes the watcher's interruption and the
// end of the wait exclusive, so a deadline is only ever set on a connection
// that is still waiting, and cleared again if the reply won the race.

// replyWait is a session's wait for a node's first reply, shared with the watcher.
type replyWait struct {
	mu          sync.Mutex
	since       time.Time // zero when not waiting
	node        string
	conn        net.Conn
	interrupted bool
}

// awaitFirstReply marks the start of a wait for be's first reply.
func (sess *session) awaitFirstReply(be *backend) {
	if sess.srv.live().cfg.Limits.FirstReplyTimeout <= 0 {
		return
	}
	w := &sess.replyWait
	w.mu.Lock()
	w.since, w.node, w.conn, w.interrupted = time.Now(), be.node, be.conn.NetConn(), false
	w.mu.Unlock()
}

// firstReplyCame ends the wait: the node answers.
func (sess *session) firstReplyCame() {
	if sess.srv.live().cfg.Limits.FirstReplyTimeout <= 0 {
		return
	}
	w := &sess.replyWait
	w.mu.Lock()
	w.since, w.conn = time.Time{}, nil
	w.mu.Unlock()
}

// endAwait ends the unit's wait and reports whether the watcher interrupted
// it; when it did and the unit completed all the same, conn's deadline is
// cleared so that the connection stays usable.
func (sess *session) endAwait(unitErr error, be *backend) (interrupted bool) {
	if sess.srv.live().cfg.Limits.FirstReplyTimeout <= 0 {
		return false
	}
	w := &sess.replyWait
	w.mu.Lock()
	interrupted = w.interrupted
	w.since, w.conn, w.interrupted = time.Time{}, nil, false
	w.mu.Unlock()
	if interrupted && unitErr == nil {
		be.conn.NetConn().SetReadDeadline(time.Time{})
	}
	return interrupted
}

// interruptIfWaitingOn interrupts the session's wait when it is for one of
// the unresponsive nodes and began before cutoff.
func (sess *session) interruptIfWaitingOn(unresponsive map[string]bool, cutoff time.Time) {
	w := &sess.replyWait
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.conn == nil || w.since.IsZero() || w.since.After(cutoff) || !unresponsive[w.node] || w.interrupted {
		return
	}
	w.interrupted = true
	w.conn.SetReadDeadline(time.Now())
	sess.log.Info().Str("node", w.node).Dur("waited", time.Since(w.since)).
		Msg("no reply from a node the monitor finds unresponsive within limits.first_reply_timeout; taking the statement off it")
}

// nodeUnresponsive is the error of a unit taken off an unresponsive node.
type nodeUnresponsive struct {
	node  string
	limit time.Duration
	cause error
}

func (e *nodeUnresponsive) Error() string {
	return "pgowl: " + e.node + " gave no reply within limits.first_reply_timeout (" + e.limit.String() +
		") and the monitor finds it unresponsive (" + e.cause.Error() + ")"
}

func (e *nodeUnresponsive) Unwrap() error { return e.cause }

// stallClock remembers when pgowl itself last resumed from a stall: a tick
// of the watcher that comes far later than its period means the process (or
// the whole machine) did not run for a while. Every sample the monitor took
// then looks old, and every statement looks as if it waited, though no node
// was slow; so for one down_after after the resumption, a sample's age is
// counted from the resumption, giving the monitor the same time to answer
// as it would have had without the stall.
type stallClock struct {
	lastTick time.Time
	resumed  time.Time
}

// tick records a watcher tick at now, for a ticker of the given period.
func (c *stallClock) tick(now time.Time, period time.Duration) {
	if !c.lastTick.IsZero() && now.Sub(c.lastTick) > 2*period+50*time.Millisecond {
		c.resumed = now
	}
	c.lastTick = now
}

// excuses reports whether a sample taken at sampledAt is old only because
// of a stall pgowl resumed from less than downAfter ago.
func (c *stallClock) excuses(sampledAt time.Time, downAfter time.Duration, now time.Time) bool {
	return !c.resumed.IsZero() && sampledAt.Before(c.resumed) && now.Sub(c.resumed) <= downAfter
}

// unresponsive reports whether the monitor, having reached n before, now
// finds it down or has had no answer from it within downAfter.
func unresponsive(n *route.NodeState, downAfter time.Duration, now time.Time) bool {
	if n.SampledAt.IsZero() {
		return false // never reached: nothing is known, and nothing waits on it for long
	}
	return !n.Up || now.Sub(n.SampledAt) > downAfter
}

// watchUnresponsiveNodes runs until ctx ends, taking waits off the nodes
// the monitor finds unresponsive (see the comment at the top of the file).
func (s *Server) watchUnresponsiveNodes(ctx context.Context) {
	limit := s.live().cfg.Limits.FirstReplyTimeout
	if limit <= 0 {
		return
	}
	period := min(limit/4, 100*time.Millisecond)
	tick := time.NewTicker(period)
	defer tick.Stop()
	down := map[string]bool{}
	var sessions []*session
	var stall stallClock
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := time.Now()
		stall.tick(now, period)
		snap := s.opts.Nodes.Snapshot()
		if snap == nil {
			continue
		}
		clear(down)
		downAfter := s.live().policy.DownAfter
		for i := range snap.Nodes {
			if n := &snap.Nodes[i]; unresponsive(n, downAfter, now) && !stall.excuses(n.SampledAt, downAfter, now) {
				down[n.Name] = true
				s.opts.Pool.AbandonDials(n.Name)
			}
		}
		if len(down) == 0 {
			continue
		}
		sessions = sessions[:0]
		s.mu.Lock()
		for _, sess := range s.sessions {
			sessions = append(sessions, sess)
		}
		s.mu.Unlock()
		cutoff := now.Add(-limit)
		for _, sess := range sessions {
			sess.interruptIfWaitingOn(down, cutoff)
		}
		clear(sessions)
	}
}
