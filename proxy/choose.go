package proxy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"slices"
	"strings"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/pool"
	"github.com/pgowl/pgowl/route"
)

// unit is one routed unit: a simple Query or an extended batch.
type unit struct {
	start   time.Time
	effects classify.Effects
	// decideTime is from start to the node being chosen, without waits (for metrics).
	decideTime time.Duration
	sql        string // for the log's ai marker; never logged raw
	// setSQL is the statement to replay on other nodes when the unit changed a setting.
	setSQL string
	// stmts are the prepared statements of an extended batch (nil for a simple Query).
	stmts []*preparedStmt
	// expectsReady says the unit ends with ReadyForQuery (Query or Sync).
	expectsReady bool

	errCode   string // SQLSTATE of the first error the node returned
	committed bool   // a COMMIT in the unit ended the transaction (and no ROLLBACK after it)

	decision      route.Decision
	routeErr      error          // why no node could run the unit
	noticePending bool           // the routing NOTICE is still to be sent
	forwarded     bool           // some reply of the unit reached the client's buffer
	runsNothing   bool           // only Parse/Describe/Close: no statement runs
	anyNode       bool           // runs nothing and holds no backend: any up node may serve it
	carriesBegin  bool           // the session's deferred BEGIN is sent ahead of the unit
	beginDecision route.Decision // with carriesBegin: the decision as BEGIN reports it
	beginReported bool           // BEGIN's NOTICE was written
	beginLogged   bool           // BEGIN's routing-log line was written
	// beginFollowsStatement: with carriesBegin, a READ ONLY transaction went
	// where its first statement had to run (the primary), not where BEGIN
	// READ ONLY alone would have gone.
	beginFollowsStatement bool
	// replaysFailure: the unit ends a failed deferred transaction; a failed
	// transaction is opened on the node first (see failedTransactionQuery).
	replaysFailure bool
}

func (u *unit) failed() bool { return u.errCode != "" }

// routeRequest maps a classification to the router's request.
func routeRequest(eff classify.Effects) route.Request {
	req := route.Request{Subject: eff.Subject}
	if eff.Access == classify.Read {
		req.Access = route.AccessRead
	} else {
		req.Access = route.AccessWrite
	}
	if eff.Session&pinningEffects != 0 {
		// The statement takes state that ties the session to its node: that
		// node must be able to run whatever the session does next.
		req.Access = route.AccessWrite
		req.Reason = route.ReasonSessionPinned
		req.Subject = describePin(eff.Session&pinningEffects) + " pins the session"
		return req
	}
	reason, ok := routeReason(eff.Reason)
	if !ok {
		req.Access, reason = route.AccessWrite, route.ReasonUnknownEffect
	}
	req.Reason = reason
	return req
}

// choose decides where a unit runs and returns the session's backend there.
func (sess *session) choose(ctx context.Context, u *unit) (*backend, route.Decision, error) {
	snap := sess.srv.opts.Nodes.Snapshot()
	if be := sess.held; be != nil && sess.canLeaveReadOnlyBatch(be, u) {
		sess.leaveReadOnlyBatch(be)
	}
	if be := sess.held; be != nil {
		dec := route.Decision{Node: be.node, Role: be.role, Reason: route.ReasonInTransaction, Subject: u.effects.Subject, NodeIndex: -1}
		what := "the transaction"
		if sess.pinBits != 0 {
			dec.Reason = route.ReasonSessionPinned
			dec.Subject = describePin(sess.pinBits)
			what = "the session's " + describePin(sess.pinBits)
		}
		if why := sess.primaryReplaced(snap, be); why != "" {
			// What the session holds there would be written to a node that is
			// no longer the primary: lost at best, split brain at worst.
			sess.dropBackend(be)
			return nil, dec, &clientError{SQLState: sqlstateConnectionFailure,
				Message: "pgowl: " + be.node + " is no longer the primary (" + why + "); " + what + " on " + be.node + " is gone",
				Hint:    "Retry the transaction; it will run on the current primary."}
		}
		for i, n := range snap.Nodes {
			if n.Name == be.node {
				dec.NodeIndex = i
				dec.LagBytes, dec.LagKnown = n.LagBytes, n.LagKnown
				if n.Role != route.RoleUnknown {
					dec.Role = n.Role // a standby promoted under a read-only transaction is the primary now
				}
				if n.Role == route.RoleStandby && n.LagKnown {
					// As for a fresh decision: measured lag plus the sample's age.
					dec.Lag = n.Lag + time.Since(n.SampledAt)
				}
			}
		}
		u.decideTime = time.Since(u.start)
		return be, dec, nil
	}
	req := routeRequest(sess.routingEffects(u))
	if req.Access == route.AccessRead {
		switch {
		case sess.primaryOnly != "":
			req.Access, req.Reason, req.Subject = route.AccessWrite, route.ReasonSessionPinned, sess.primaryOnly
		case sess.serializableReadBack:
			req.Access, req.Reason, req.Subject = route.AccessWrite, route.ReasonSessionPinned, "a serializable default isolation level (read back from the node)"
		}
	}
	req.SessionMaxLag = sess.maxLag
	sess.turn++
	req.Turn = sess.turn
	pol := sess.srv.live().policy
	if u.anyNode {
		// Nothing executes: when no standby qualifies, the primary can serve it.
		pol.WhenNoStandby = route.UsePrimary
	}
	wait := sess.srv.live().cfg.Routing.PrimaryWait
	now := time.Now()
	deadline := now.Add(wait)
	for {
		dec, err := route.Decide(req, snap, pol, now)
		if u.decideTime == 0 {
			u.decideTime = time.Since(u.start)
		}
		if err != nil && req.Access == route.AccessWrite && time.Now().Before(deadline) {
			// No primary right now: a switchover may be under way. Wait for one.
			req, pol := req, pol // copies for the closure: the fast path stays on the stack
			snap = sess.awaitSnapshot(ctx, deadline, snap, func(s *route.Snapshot) bool {
				_, err := route.Decide(req, s, pol, time.Now())
				return err == nil
			})
			dec, err = route.Decide(req, snap, pol, time.Now())
		}
		if err != nil {
			return nil, dec, err
		}
		if dec.Role == route.RoleStandby && sess.backendOn(dec.Node) == nil {
			dec = sess.spreadReads(req, snap, pol, dec)
		}
		be, err := sess.backendFor(ctx, dec.Node, dec.Role)
		if err == nil || !connectFailure(err) || !time.Now().Before(deadline) {
			return be, dec, err
		}
		// The chosen node did not answer although the monitor last saw it up:
		// it may be dying. Wait for the monitor to see it down, or to choose
		// another node, then decide again (bounded by routing.primary_wait).
		req, pol, failed := req, pol, dec.Node
		snap = sess.awaitSnapshot(ctx, deadline, snap, func(s *route.Snapshot) bool {
			for _, n := range s.Nodes {
				if n.Name == failed && !n.Up {
					return true
				}
			}
			d, err := route.Decide(req, s, pol, time.Now())
			return err != nil || d.Node != failed
		})
		if ctx.Err() != nil {
			return nil, dec, ctx.Err()
		}
		now = time.Now()
	}
}

// primaryReplaced says why be's node is no longer the primary when be was
// taken on the primary and the monitor has since seen another node become
// the primary (a promotion, whether the old primary still answers or not),
// or be's node go into recovery. It returns "" without such evidence: a node
// the monitor cannot reach, or two primaries on one timeline, leave the
// session where it is (its connection fails by itself if the node is gone).
func (sess *session) primaryReplaced(snap *route.Snapshot, be *backend) string {
	if be.role != route.RolePrimary {
		return ""
	}
	now := time.Now()
	if i, err := route.Primary(snap, sess.srv.live().policy, now); err == nil && snap.Nodes[i].Name != be.node {
		return snap.Nodes[i].Name + " is the primary now"
	}
	for i := range snap.Nodes {
		if n := &snap.Nodes[i]; n.Name == be.node && n.Up && n.Role == route.RoleStandby {
			return be.node + " is in recovery now"
		}
	}
	return ""
}

// awaitSnapshot waits until deadline for a node snapshot that satisfies
// cond and returns the last snapshot seen (snap if none came). It is kept
// out of choose so that the closures' captures do not move choose's
// variables to the heap on the path that never waits.
//
//go:noinline
func (sess *session) awaitSnapshot(ctx context.Context, deadline time.Time, snap *route.Snapshot, cond func(*route.Snapshot) bool) *route.Snapshot {
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	sess.srv.opts.Nodes.WaitFor(wctx, func(s *route.Snapshot) bool {
		snap = s
		return cond(s)
	})
	return snap
}

// spreadReads moves a read off a standby whose pool is exhausted to another
// qualifying standby that has room, so that reads do not queue on one node
// while another sits idle. Without such a standby the first choice stands.
func (sess *session) spreadReads(req route.Request, snap *route.Snapshot, pol route.Policy, dec route.Decision) route.Decision {
	p := sess.srv.opts.Pool
	for tries := 0; tries < len(snap.Nodes) && dec.NodeIndex >= 0 && dec.NodeIndex < 64 && p.Saturated(dec.Node); tries++ {
		req.Avoid |= 1 << uint(dec.NodeIndex)
		next, err := route.Decide(req, snap, pol, time.Now())
		if err != nil || next.Role != route.RoleStandby || req.Avoid&(1<<uint(next.NodeIndex)) != 0 {
			break
		}
		dec = next
	}
	return dec
}

// connectFailure reports whether err means a node could not be reached (as
// opposed to the node refusing the login, or the pool being busy).
func connectFailure(err error) bool {
	var ce *clientError
	return errors.As(err, &ce) && ce.SQLState == sqlstateConnectionFailure
}

// backendFor returns a backend connection to node for the session: the one
// the session holds there (in session pool mode, or while a transaction, an
// open batch or a pin keeps it), or else one from the pool.
func (sess *session) backendFor(ctx context.Context, node string, role route.Role) (*backend, error) {
	if be := sess.backendOn(node); be != nil {
		be.role = role
		return be, nil
	}
	target, ok := sess.srv.live().targets[node]
	if !ok {
		return nil, &clientError{SQLState: sqlstateInternalError, Message: "pgowl: unknown node " + node}
	}
	// The pool bounds the wait (acquire_timeout) and the dial (dial_timeout) itself.
	c, err := sess.srv.opts.Pool.Acquire(ctx, target, sess.login)
	if err != nil {
		if pool.PgError(err) == nil {
			if _, busy := err.(*pool.BusyError); !busy {
				err = &clientError{SQLState: sqlstateConnectionFailure, Message: "pgowl: could not connect to " + node + ": " + err.Error(),
					Hint: "This condition is transient: retry shortly."}
			}
		}
		return nil, err
	}
	be := sess.spare
	if be == nil {
		be = &backend{}
	}
	sess.spare = nil
	*be = backend{
		conn:    c,
		node:    node,
		role:    role,
		running: runningStatement{node: node, addr: c.Addr, pid: c.PID, secret: c.Secret},
		expect:  expectQueue{items: be.expect.items[:0]},
	}
	sess.backends = append(sess.backends, be)
	return be, nil
}

// releaseIdle gives a backend back to the pool after a unit that left nothing
// on it the session needs, in transaction pool mode. Its prepared statements
// and settings are recorded on the connection, so the next client that gets it
// knows what it holds.
func (sess *session) releaseIdle(be *backend) {
	if !sess.srv.transactionPooling || sess.held == be || be.broken || be.expect.len() > 0 {
		return
	}
	sess.forgetBackend(be)
	if be.dirty {
		// What the connection holds is not known: start it afresh.
		code, err := sess.runQuietly(be, "DISCARD ALL")
		if err != nil || code != "" || be.conn.TxStatus != 'I' {
			sess.srv.opts.Pool.Release(be.conn, false)
			be.conn = nil
			return
		}
		clear(be.conn.Prepared)
		be.conn.Unnamed = 0
		be.conn.Settings = ""
	}
	if len(be.conn.Prepared) > maxPreparedPerConn {
		// Bound what a long-lived connection accumulates.
		if _, err := sess.runQuietly(be, "DEALLOCATE ALL"); err != nil {
			sess.srv.opts.Pool.Release(be.conn, false)
			return
		}
		clear(be.conn.Prepared)
		be.conn.Unnamed = 0
	}
	sess.waitForCancel()
	sess.srv.opts.Pool.Release(be.conn, true)
	// In transaction pooling a session takes a backend for every unit: the
	// next one reuses this struct and its expectation queue.
	be.conn = nil
	sess.spare = be
}

// canLeaveReadOnlyBatch reports whether the next part of a batch, which
// needs the primary, may leave the standby that ran the batch's first,
// unsynced part: that part only read, outside a transaction block, without
// an error (after one the node skips up to Sync, and so must the rest), and
// nothing else holds the session there. At PostgreSQL's default READ
// COMMITTED each statement of an implicit transaction takes its own snapshot,
// so the reads having run on a standby (within the lag limit) is what any
// read through pgowl is.
func (sess *session) canLeaveReadOnlyBatch(be *backend, u *unit) bool {
	return be.openBatch && be.openReadOnly && !be.skipping && be.role == route.RoleStandby &&
		sess.pinBits == 0 && sess.deferred == nil && be.conn.TxStatus == 'I' && be.expect.len() == 0 &&
		routeRequest(u.effects).Access == route.AccessWrite && !sess.setsIsolation()
}

// setsIsolation reports whether the session set a default isolation level:
// above READ COMMITTED an implicit transaction's statements share one
// snapshot, which a split across nodes would not keep. (A default set for
// the role or database is not seen here.)
func (sess *session) setsIsolation() bool {
	for _, s := range sess.sets {
		if strings.Contains(strings.ToLower(s), "isolation") {
			return true
		}
	}
	return false
}

// leaveReadOnlyBatch ends the batch's implicit read-only transaction on be with
// a Sync whose reply the client does not see, and hands be back, so that the
// rest of the batch is routed on its own. A backend that fails here is dropped.
func (sess *session) leaveReadOnlyBatch(be *backend) {
	sess.held = nil
	c := be.conn
	if _, err := c.Writer.Write([]byte{'S', 0, 0, 0, 4}); err == nil {
		err = c.Writer.Flush()
		for err == nil {
			var typ byte
			var body []byte
			if typ, body, err = c.Reader.ReadFrame(); err == nil && typ == 'Z' && len(body) == 1 {
				c.TxStatus = body[0]
				be.openBatch, be.openReadOnly = false, false
				sess.log.Debug().Str("node", be.node).Msg("batch leaves the standby: its first part only read, the rest needs the primary")
				sess.releaseIdle(be)
				return
			}
		}
	}
	sess.dropBackend(be)
}

// waitForCancel returns once no cancel request of the session is being passed
// on. PostgreSQL ignores a cancel that reaches a backend between statements,
// so a backend the node has already been told to cancel is safe to hand on.
func (sess *session) waitForCancel() {
	sess.cancelling.Lock()
	sess.cancelling.Unlock() //nolint:staticcheck // an empty critical section: waiting is the point
}

// maxPreparedPerConn bounds the pgowl-managed statements kept on one backend connection.
const maxPreparedPerConn = 2000

// prepareBackend brings a backend's session settings in line with the
// session's: the startup parameters come with the pooled connection, and the
// SETs the session made since are applied on top (after RESET ALL when the
// connection carries another session's).
func (sess *session) prepareBackend(be *backend) error {
	c := be.conn
	if c.Settings == sess.settingsKey || be.openBatch || c.TxStatus != 'I' {
		// Settings are applied between transactions and batches only: a
		// query here would end the implicit transaction of an open batch.
		return nil
	}
	if !sess.setsChangeLexing() {
		var q strings.Builder
		if c.Settings != "" {
			q.WriteString("RESET ALL;\n")
		}
		for _, s := range sess.loads {
			q.WriteString(s)
			q.WriteString(";\n")
		}
		for _, s := range sess.sets {
			q.WriteString(s)
			q.WriteString(";\n")
		}
		code, err := sess.runQuietly(be, q.String())
		if err != nil || code == "" {
			if err == nil {
				c.Settings = sess.settingsKey
			}
			return err
		}
	}
	// Statement by statement: after a failure (one statement failed, and the
	// string ran as one transaction: its RESET ALL is undone too, so whatever
	// the connection carried is still in force), or when a recorded SET
	// changes how later statements are read (standard_conforming_strings,
	// client_encoding): a string is read whole before any of it runs.
	// Start from the defaults alone, then apply what applies.
	if code, err := sess.runQuietly(be, "RESET ALL"); err != nil || code != "" {
		if err == nil {
			err = fmt.Errorf("RESET ALL failed on %s (%s)", be.node, code)
		}
		return err
	}
	c.Settings = ""
	failed := false
	for _, s := range slices.Concat(sess.loads, sess.sets) {
		code, err := sess.runQuietly(be, s)
		if err != nil {
			return err
		}
		failed = failed || code != ""
	}
	if failed {
		// Make the next use try again.
		c.Settings = "\x00failed"
		return nil
	}
	c.Settings = sess.settingsKey
	return nil
}

// setsChangeLexing reports whether the session's recorded settings include one
// that changes how the statements after it are read.
func (sess *session) setsChangeLexing() bool {
	for _, s := range sess.sets {
		if name, _, ok := recordedSettingName(s); ok && lexerSettings[name] {
			return true
		}
	}
	return false
}

// runQuietly runs a statement the client does not see and consumes its
// reply. It returns the SQLSTATE of the first error the node reported, and an
// error only when the connection failed.
func (sess *session) runQuietly(be *backend, sql string) (sqlstate string, err error) {
	return sess.runOnBackend(be, sql, nil)
}

// runOnBackend runs sql, pgowl's own, on be as a simple Query and passes each
// DataRow body to onRow (if not nil). Its results and notices do not reach the
// client; a notification that arrives meanwhile does. It returns the first
// error's SQLSTATE ("" when none) or the I/O error that broke the connection.
func (sess *session) runOnBackend(be *backend, sql string, onRow func(body []byte)) (sqlstate string, err error) {
	// The client's unnamed statement stays the client's: it is parsed again
	// where it runs next.
	be.conn.WriteQuery(sql)
	if err := be.conn.Writer.Flush(); err != nil {
		return "", err
	}
	for {
		typ, body, err := be.conn.Reader.ReadFrame()
		if err != nil {
			return sqlstate, err
		}
		switch typ {
		case 'D':
			if onRow != nil {
				onRow(body)
			}
		case 'A':
			sess.w.Write(appendFrame(sess.scratch[:0], typ, body))
		case 'E':
			code, msg := errorFields(body)
			if sqlstate == "" {
				sqlstate = code
			}
			sess.log.Warn().Str("node", be.node).Str("sqlstate", code).Str("error", msg).Str("statement", firstWords(sql)).Msg("a statement pgowl ran for the session failed")
		case 'Z':
			be.conn.TxStatus = body[0]
			return sqlstate, nil
		}
	}
}

// resetTimeout bounds how long returning a connection clean may take.
const resetTimeout = 5 * time.Second

// dropBackend forgets a broken backend connection.
func (sess *session) dropBackend(be *backend) {
	be.broken = true
	sess.forgetBackend(be)
	if sess.held == be {
		sess.held = nil
		sess.pinBits = 0
		// A transaction block on it is gone: rolled back.
		sess.endPgowlTransaction(false)
	}
	sess.srv.opts.Pool.Release(be.conn, false)
}

// closeBackends returns the session's connections to the pool, clean.
func (sess *session) closeBackends() {
	for _, be := range sess.backends {
		reusable := !be.broken && !be.openBatch && be.expect.len() == 0
		if reusable {
			be.conn.NetConn().SetDeadline(time.Now().Add(resetTimeout))
			if be.conn.TxStatus != 'I' {
				code, err := sess.runQuietly(be, "ROLLBACK")
				reusable = err == nil && code == ""
			}
			if reusable && (sess.pinBits != 0 || !sess.srv.transactionPooling || be.dirty) {
				// State that cannot be tracked may be left: start afresh.
				code, err := sess.runQuietly(be, "DISCARD ALL")
				reusable = err == nil && code == ""
				clear(be.conn.Prepared)
				be.conn.Unnamed = 0
				be.conn.Settings = ""
			}
			reusable = reusable && be.conn.TxStatus == 'I'
			be.conn.NetConn().SetDeadline(time.Time{})
		}
		sess.waitForCancel()
		sess.srv.opts.Pool.Release(be.conn, reusable)
	}
	clear(sess.backends)
	sess.backends = sess.backends[:0]
	sess.held = nil
}

// backendOn returns the session's connection to node, or nil.
func (sess *session) backendOn(node string) *backend {
	for _, be := range sess.backends {
		if be.node == node {
			return be
		}
	}
	return nil
}

// forgetBackend removes be from the session's connections.
func (sess *session) forgetBackend(be *backend) {
	for i, other := range sess.backends {
		if other == be {
			last := len(sess.backends) - 1
			sess.backends[i] = sess.backends[last]
			sess.backends[last] = nil
			sess.backends = sess.backends[:last]
			return
		}
	}
}
