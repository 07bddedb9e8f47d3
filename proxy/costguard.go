package proxy

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/route"
	"github.com/pgowl/pgowl/wire"
)

// Guards (config.Guard) keep analytic traffic from hurting business
// traffic. A unit belongs to the first guard that matches it (the AI comment,
// or the session's user, database or application_name); a read is guarded,
// and a write when the guard says so, if it is a query or DML statement
// (not transaction control, SET, SHOW or another utility). A guarded unit:
//
//   - is planned with the guard's busy limits (route.Guard): route.Plan keeps
//     it off nodes at the limits, or refuses it with DATABASE_BUSY;
//   - is counted in flight on its node while it runs (guardState.inFlight);
//   - when the guard (or SET pgowl.max_cost) sets a cost limit, is explained
//     on the node that would run it before it runs (checkCost): over the
//     limit it is refused with QUERY_COST_EXCEEDED (54001) and never sent.
//     The EXPLAIN is bounded as the statement itself is (costCheckBound):
//     limits.query_timeout cancels it on the node, and the unit is refused
//     with 57014 (costCheckCancelled); a client's cancel request reaches it;
//     limits.first_reply_timeout takes it off a node that stopped answering.
//
// Units no guard matches (business traffic) skip all of this.

// unitGuard is a unit's guard and what its cost check found.
type unitGuard struct {
	// cfg is the guard; nil for business traffic.
	cfg *config.Guard
	// limit is the cost limit applied (guard's max_cost tightened by the session); 0: none.
	limit float64
	// verdict is the plan's cost, when it was checked.
	verdict *costVerdict
	// cached: the verdict came from the verdict cache.
	cached bool
	// checkTime is how long the cost check took (EXPLAIN or cache).
	checkTime time.Duration
	// checkCancelled: the node cancelled the EXPLAIN (costCheckCancelled); the unit did not run.
	checkCancelled bool
	// inFlightOn is the node the unit is counted in flight on, while it runs.
	inFlightOn string
}

// guardFor returns the guard a unit belongs to, or nil when it is business
// traffic or the guard does not guard what it does.
func (sess *session) guardFor(u *unit) *config.Guard {
	live := sess.srv.live()
	guards := live.cfg.Guards
	if len(guards) == 0 || u.runsNothing || u.effects.Pgowl != nil {
		return nil
	}
	executed := sess.executedStatements(u)
	prefix := live.cfg.Routing.AICommentPrefix
	ai := false
	if prefix != "" {
		ai = strings.HasPrefix(strings.TrimLeft(u.sql, " \t\r\n"), prefix)
		for _, st := range executed {
			ai = ai || strings.HasPrefix(strings.TrimLeft(st.sql, " \t\r\n"), prefix)
		}
	}
	for i := range guards {
		g := &guards[i]
		if (g.Match.AIComment && ai) || g.MatchesSession(sess.user, sess.database, sess.application()) {
			if unitHasGuardedStatement(u, executed, g) {
				return g
			}
			return nil
		}
	}
	return nil
}

// executedStatements lists the statements an extended-protocol batch executes (its Executes'
// portals bound in it), nil for a simple Query.
func (sess *session) executedStatements(u *unit) []*preparedStmt {
	if u.stmts == nil {
		return nil
	}
	b := &sess.batch
	var executed []*preparedStmt
	for i := range b.msgs {
		if b.msgs[i].typ != wire.MsgExecute {
			continue
		}
		for j := i - 1; j >= 0; j-- {
			if bm := &b.msgs[j]; bm.typ == wire.MsgBind && bm.portal == b.msgs[i].portal {
				if st := sess.batchStatement(j, bm.name); st != nil {
					executed = append(executed, st)
				}
				break
			}
		}
	}
	return executed
}

// unitHasGuardedStatement reports whether u holds a statement g checks: one EXPLAIN can plan that
// is the class's work. Transaction control, SET, SHOW and other utility statements are not: neither
// their cost nor the load concerns them. A simple Query counts by its first statement (a
// multi-statement string gets the busy limits, not the cost check). In an extended-protocol batch
// the statements it executes count each by itself, so that a BEGIN sent with a transaction's first
// query (JDBC with autocommit off), or a write ahead of a read, leaves the query guarded; but not a
// batch that executes other transaction control or changes settings or the catalogue, since the
// cost check explains its statements before any of it runs (a SET search_path would not be in
// force yet, a SET TRANSACTION would come after the EXPLAIN's snapshot, a COMMIT not yet run).
func unitHasGuardedStatement(u *unit, executed []*preparedStmt, g *config.Guard) bool {
	if u.stmts == nil {
		return explainable(u.sql) && guardsStatement(g, &u.effects)
	}
	guarded := false
	for i, st := range executed {
		eff := &st.effects
		switch {
		case i == 0 && (eff.Tx == classify.TxBegin || eff.Tx == classify.TxBeginReadOnly) && eff.Statements == 1 && eff.Session == 0:
			// Runs after the EXPLAIN, as it would before the batch: nothing in between.
		case eff.Tx != classify.TxNone || eff.Session != 0 || len(eff.Settings) > 0 || eff.CatalogueChange:
			return false
		case explainable(st.sql) && guardsStatement(g, eff):
			guarded = true
		}
	}
	return guarded
}

// guardsStatement reports whether g checks a statement of effects eff: no transaction control, and
// a read, a statement whose effect is not known (an EXECUTE of an SQL prepared statement, an
// unknown function: it may well read, and its plan can be checked as a read's), or, with
// guard_writes, a write.
func guardsStatement(g *config.Guard, eff *classify.Effects) bool {
	if eff.Tx != classify.TxNone {
		return false
	}
	return eff.Access == classify.Read || eff.Reason == classify.ReasonUnknownEffect || g.GuardWrites
}

// noteGuard puts a guarded unit's traffic class and busy limits in the plan's
// session facts, with the class's statements in flight on each node.
func (sess *session) noteGuard(u *unit, r *route.PlanRequest, snap *route.Snapshot) {
	g := u.guard.cfg
	if g == nil || (g.Busy.MaxActive <= 0 && g.Busy.MaxActivePercent <= 0 && g.Busy.MaxInFlight <= 0) {
		return
	}
	r.Session.Guard = route.Guard{Name: g.Name, MaxActive: g.Busy.MaxActive, MaxActivePercent: g.Busy.MaxActivePercent,
		MaxInFlight: g.Busy.MaxInFlight, InFlight: sess.srv.guards.counts(g.Name, snap)}
}

// guardState is the server's guard bookkeeping: each class's statements in
// flight per node, and the cost verdicts recently found.
type guardState struct {
	mu       sync.Mutex
	inFlight map[guardNode]int
	verdicts verdictCache
}

type guardNode struct{ guard, node string }

// counts returns guard's statements in flight on each of snap's nodes.
func (g *guardState) counts(guard string, snap *route.Snapshot) []int {
	out := make([]int, len(snap.Nodes))
	g.mu.Lock()
	for i := range snap.Nodes {
		out[i] = g.inFlight[guardNode{guard, snap.Nodes[i].Name}]
	}
	g.mu.Unlock()
	return out
}

// inFlightOn returns every guard's statements in flight on node, as "name=n" pairs.
func (g *guardState) inFlightOn(node string) string {
	var parts []string
	g.mu.Lock()
	for k, n := range g.inFlight {
		if k.node == node && n > 0 {
			parts = append(parts, k.guard+"="+strconv.Itoa(n))
		}
	}
	g.mu.Unlock()
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

func (g *guardState) add(guard, node string, delta int) {
	g.mu.Lock()
	if g.inFlight == nil {
		g.inFlight = make(map[guardNode]int)
	}
	k := guardNode{guard, node}
	if n := g.inFlight[k] + delta; n > 0 {
		g.inFlight[k] = n
	} else {
		delete(g.inFlight, k)
	}
	g.mu.Unlock()
}

// guardStarted counts a guarded unit in flight on be's node.
func (sess *session) guardStarted(u *unit, be *backend) {
	if u.guard.cfg != nil && u.guard.inFlightOn == "" {
		u.guard.inFlightOn = be.node
		sess.srv.guards.add(u.guard.cfg.Name, be.node, 1)
	}
}

// guardEnded ends guardStarted's count.
func (sess *session) guardEnded(u *unit) {
	if u.guard.cfg != nil && u.guard.inFlightOn != "" {
		sess.srv.guards.add(u.guard.cfg.Name, u.guard.inFlightOn, -1)
		u.guard.inFlightOn = ""
	}
}

// costLimit is the cost limit for a unit of guard g: the guard's max_cost,
// tightened by the session's pgowl.max_cost; 0 when neither is set.
func (sess *session) costLimit(g *config.Guard) float64 {
	limit := float64(g.MaxCost)
	if sess.maxCost > 0 && (limit == 0 || sess.maxCost < limit) {
		limit = sess.maxCost
	}
	return limit
}

// explainTarget is one statement of a unit to explain: its text and, for the
// extended protocol, its parameter types and the Bind parameters after the
// names (formats and values; nil for a simple Query).
type explainTarget struct {
	sql        string
	paramTypes []uint32
	bindParams []byte
}

// checkCost asks be's node for the plan of each statement of a guarded unit
// before the unit runs, and returns the refusal that keeps the unit from
// running: QUERY_COST_EXCEEDED when one is over the limit, or 57014 when the
// node cancelled the EXPLAIN (costCheckCancelled). ioErr reports a
// connection that failed meanwhile. A statement the node cannot explain for
// another reason is let through (it fails by itself, or is not plannable);
// so are units inside an unsynced batch (a Sync would end its implicit
// transaction) and in a failed transaction.
func (sess *session) checkCost(be *backend, u *unit) (refusal error, ioErr error) {
	g := u.guard.cfg
	if g == nil {
		return nil, nil
	}
	limit := sess.costLimit(g)
	if limit <= 0 || be.openBatch || be.conn.TxStatus == wire.TxFailed {
		return nil, nil
	}
	targets := sess.explainTargets(u, g)
	if len(targets) == 0 {
		return nil, nil
	}
	start := time.Now()
	defer func() { u.guard.checkTime += time.Since(start) }()
	if err := sess.prepareBackend(be); err != nil {
		return nil, err
	}
	u.guard.limit = limit
	for _, t := range targets {
		v, cached, err := sess.verdictFor(be, g, t)
		var cancelled *costCheckCancelled
		if errors.As(err, &cancelled) {
			cancelled.guard = g.Name
			u.guard.checkCancelled = true
			return cancelled.refusal(), nil
		}
		if err != nil {
			return nil, err
		}
		if v == nil {
			continue
		}
		if u.guard.verdict == nil || v.total > u.guard.verdict.total {
			u.guard.verdict, u.guard.cached = v, cached
		}
		if v.total > limit {
			u.guard.verdict, u.guard.cached = v, cached
			return costRefusal(g.Name, be.node, limit, v), nil
		}
	}
	return nil, nil
}

// explainTargets lists the statements of u that EXPLAIN can plan and g checks.
func (sess *session) explainTargets(u *unit, g *config.Guard) []explainTarget {
	if u.stmts == nil {
		if u.effects.Statements != 1 || !explainable(u.sql) || !guardsStatement(g, &u.effects) {
			return nil
		}
		return []explainTarget{{sql: u.sql}}
	}
	b := &sess.batch
	var targets []explainTarget
	for i := range b.msgs {
		m := &b.msgs[i]
		if m.typ != wire.MsgExecute {
			continue
		}
		bind := -1
		for j := i - 1; j >= 0; j-- {
			if b.msgs[j].typ == wire.MsgBind && b.msgs[j].portal == m.portal {
				bind = j
				break
			}
		}
		if bind < 0 {
			continue // a portal bound by an earlier batch: not explained
		}
		bm := &b.msgs[bind]
		st := sess.batchStatement(bind, bm.name)
		if st == nil || !explainable(st.sql) || !guardsStatement(g, &st.effects) {
			continue
		}
		body := b.buf[bm.off+wire.HeaderSize : bm.end]
		targets = append(targets, explainTarget{sql: st.sql, paramTypes: st.paramTypes, bindParams: body[bm.rest:]})
	}
	return targets
}

// batchStatement returns the statement a Bind at index before names: the
// batch's last Parse of that name ahead of it, or the session's.
func (sess *session) batchStatement(before int, name string) *preparedStmt {
	b := &sess.batch
	for j := before - 1; j >= 0; j-- {
		if m := &b.msgs[j]; m.typ == wire.MsgParse && m.name == name {
			return m.stmt
		}
	}
	return sess.statements.lookup(name)
}

// explainable reports whether sql is one statement EXPLAIN accepts: a
// query or a DML statement, in parentheses or not (after leading comments),
// an EXECUTE of an SQL prepared statement, or a DECLARE of a cursor, both of
// which plan and run a query.
func explainable(sql string) bool {
	switch firstKeyword(sql) {
	case "select", "with", "values", "table", "insert", "update", "delete", "merge", "execute", "declare":
		return true
	}
	return false
}

// firstKeyword returns sql's first keyword in lower case, after comments and opening parentheses.
func firstKeyword(sql string) string {
	s := skipSpaceAndComments(sql)
	for strings.HasPrefix(s, "(") {
		s = skipSpaceAndComments(s[1:])
	}
	end := 0
	for end < len(s) && (s[end] >= 'a' && s[end] <= 'z' || s[end] >= 'A' && s[end] <= 'Z') {
		end++
	}
	return strings.ToLower(s[:end])
}

// skipSpaceAndComments returns sql from its first token.
func skipSpaceAndComments(sql string) string {
	for {
		sql = strings.TrimLeft(sql, " \t\r\n\f")
		switch {
		case strings.HasPrefix(sql, "--"):
			i := strings.IndexByte(sql, '\n')
			if i < 0 {
				return ""
			}
			sql = sql[i+1:]
		case strings.HasPrefix(sql, "/*"):
			depth, i := 1, 2
			for i < len(sql) && depth > 0 {
				switch {
				case strings.HasPrefix(sql[i:], "/*"):
					depth, i = depth+1, i+2
				case strings.HasPrefix(sql[i:], "*/"):
					depth, i = depth-1, i+2
				default:
					i++
				}
			}
			sql = sql[i:]
		default:
			return sql
		}
	}
}

// verdictFor returns the plan cost of t on be's node, from the verdict cache
// when the guard keeps one, or by EXPLAIN. A nil verdict means the node
// could not explain the statement.
func (sess *session) verdictFor(be *backend, g *config.Guard, t explainTarget) (*costVerdict, bool, error) {
	key, cached := "", false
	now := time.Now()
	if g.VerdictCacheTTL > 0 {
		key, cached = sess.verdictKey(be, t)
	}
	if cached {
		if v, ok := sess.srv.guards.verdicts.get(key, now); ok {
			return v, true, nil
		}
	}
	v, err := sess.explainOn(be, t)
	if err != nil || v == nil {
		return nil, false, err
	}
	if cached {
		sess.srv.guards.verdicts.put(key, v, now.Add(g.VerdictCacheTTL))
	}
	return v, false, nil
}

// verdictKey is what a cached plan cost of t on be's node is shared under: the statement's text
// (its shape and literal values) and Bind parameters, and what decides what its names mean and
// what the planner sees: the node, the login (the database, the user, whose $user and role
// settings and row security apply, and the startup parameters, search_path among them) and
// the session's settings. ok is false where the settings are not known as a key says them:
// changes pending in a transaction block (a SET LOCAL search_path), or a path or settings
// changed where pgowl could not follow; such a statement is explained each time.
func (sess *session) verdictKey(be *backend, t explainTarget) (key string, ok bool) {
	st := &sess.settings
	if len(st.pending) > 0 || st.pendingUncertain || st.searchPathUnsure || st.readBackDue {
		return "", false
	}
	if firstKeyword(t.sql) == "execute" {
		// The name says nothing of the statement it runs, which a DEALLOCATE and PREPARE, or
		// another session, may have made another.
		return "", false
	}
	return be.node + "\x00" + sess.login.Key() + "\x00" + st.key + "\x00" + t.sql + "\x00" + string(t.bindParams), true
}

// explainSavepoint protects the client's transaction from a failing EXPLAIN.
const explainSavepoint = "pgowl_cost_check"

// explainOn runs EXPLAIN (FORMAT JSON, VERBOSE) of t on be, with t's
// parameter values bound as the client bound them (the plan is the custom
// plan for those values), and parses the plan's cost. Inside a transaction
// block it runs under a savepoint, so that a statement the node cannot
// explain leaves the transaction as it was. The round trip is bounded
// (costCheckBound); an EXPLAIN the node cancelled returns a
// *costCheckCancelled, with be ready for the next statement.
func (sess *session) explainOn(be *backend, t explainTarget) (*costVerdict, error) {
	inBlock := be.conn.TxStatus == wire.TxInBlock
	if inBlock {
		if code, err := sess.runQuietly(be, "SAVEPOINT "+explainSavepoint); err != nil || code != "" {
			return nil, err
		}
	}
	query := "EXPLAIN (FORMAT JSON, VERBOSE) " + t.sql
	var out []byte
	if t.bindParams == nil {
		be.conn.WriteQuery(query)
	} else {
		bind, err := explainBind(t.bindParams)
		if err != nil {
			return nil, nil // a Bind the node will refuse by itself
		}
		out = appendParse(out[:0], query, t.paramTypes)
		out = wire.AppendFrame(out, wire.MsgBind, bind)
		out = wire.AppendFrame(out, wire.MsgExecute, []byte{0, 0, 0, 0, 0})
		out = wire.AppendFrame(out, wire.MsgSync, nil)
		be.conn.Writer.Write(out)
	}
	// Either way the node's unnamed statement is gone: the client's is parsed again where it runs next.
	be.markUnnamed(0)
	var planJSON []byte
	bound := sess.boundCostCheck(be)
	code, message, err := sess.readUntilReady(be, func(body []byte) {
		if planJSON == nil {
			planJSON = firstColumn(body)
		}
	})
	timedOut, err := bound.end(err)
	if err != nil {
		return nil, err
	}
	if inBlock {
		undo := "RELEASE SAVEPOINT " + explainSavepoint
		if code != "" {
			undo = "ROLLBACK TO SAVEPOINT " + explainSavepoint + "; " + undo
		}
		if _, err := sess.runQuietly(be, undo); err != nil {
			return nil, err
		}
	}
	if code == sqlstateQueryCanceled {
		// limits.query_timeout, the client's cancel request or its own
		// statement_timeout: the statement would have been cancelled too.
		c := &costCheckCancelled{node: be.node, nodeMessage: message}
		if timedOut {
			c.queryTimeout = sess.srv.live().cfg.Limits.QueryTimeout
		}
		return nil, c
	}
	if code != "" || planJSON == nil {
		sess.log.Debug().Str("node", be.node).Str("sqlstate", code).Msg("guard: the node could not explain the statement; it runs unchecked")
		return nil, nil
	}
	v, perr := parseExplainJSON(planJSON)
	if perr != nil {
		sess.log.Warn().Err(perr).Str("node", be.node).Msg("guard: unreadable EXPLAIN output; the statement runs unchecked")
		return nil, nil
	}
	return v, nil
}

// readUntilReady flushes be and reads its replies up to ReadyForQuery,
// passing DataRow bodies to onRow; a notification reaches the client. It
// returns the first error's SQLSTATE and message.
func (sess *session) readUntilReady(be *backend, onRow func(body []byte)) (sqlstate, message string, err error) {
	sess.settleCatalogueReadOn(be) // its replies come before what is buffered here
	if err := be.conn.Writer.Flush(); err != nil {
		return "", "", err
	}
	for first := true; ; first = false {
		typ, body, err := be.conn.Reader.ReadFrame()
		if err != nil {
			return sqlstate, message, err
		}
		if first {
			sess.firstReplyCame()
		}
		switch typ {
		case wire.MsgDataRow:
			onRow(body)
		case wire.MsgNotificationResponse:
			sess.client.w.Write(appendFrame(sess.scratch[:0], typ, body))
		case wire.MsgErrorResponse:
			if code, msg := errorFields(body); sqlstate == "" {
				sqlstate, message = code, msg
			}
		case wire.MsgReadyForQuery:
			be.conn.TxStatus = body[0]
			return sqlstate, message, nil
		}
	}
}

// costCheckBound bounds one EXPLAIN round trip of the cost check as the
// statement's own run is bounded: limits.query_timeout cancels it on its
// node (a CancelRequest, as for the statement), a client's cancel request
// reaches it (the session's running statement is the EXPLAIN meanwhile),
// and limits.first_reply_timeout interrupts it on a node the monitor finds
// unresponsive. Without those limits the EXPLAIN waits as the statement
// would: for a lock the planner needs, as long as another session holds it.
type costCheckBound struct {
	sess  *session
	be    *backend
	timer *time.Timer
	// timedOut: limits.query_timeout passed and the EXPLAIN was cancelled.
	timedOut atomic.Bool
}

// boundCostCheck starts the bounds of an EXPLAIN about to be flushed to be.
func (sess *session) boundCostCheck(be *backend) *costCheckBound {
	b := &costCheckBound{sess: sess, be: be}
	started := sess.statementStarted(be)
	sess.awaitFirstReply(be)
	if limit := sess.srv.live().cfg.Limits.QueryTimeout; limit > 0 {
		node := be.node
		b.timer = time.AfterFunc(limit, func() {
			sess.cancelIfStillRunning(started, func() {
				b.timedOut.Store(true)
				sess.log.Info().Str("node", node).Dur("limit", limit).
					Msg("guard: the cost check (EXPLAIN) ran past limits.query_timeout; cancelling it on its node")
			})
		})
	}
	return b
}

// end ends the bounds once the EXPLAIN's replies have been read (err is
// the read's error). A cancel on its way is waited for, so that it never
// reaches what runs next on the backend (PostgreSQL ignores one that comes
// between statements). It reports whether limits.query_timeout passed, and
// err, as a *nodeUnresponsive when the wait was taken off an unresponsive node.
func (b *costCheckBound) end(err error) (timedOut bool, _ error) {
	if b.timer != nil {
		b.timer.Stop()
	}
	b.sess.statementStopped()
	if b.sess.endAwait(err, b.be) && err != nil {
		err = &nodeUnresponsive{node: b.be.node, limit: b.sess.srv.live().cfg.Limits.FirstReplyTimeout, cause: err}
	}
	return b.timedOut.Load(), err
}

// costCheckCancelled is a cost check whose EXPLAIN the node cancelled
// (57014) before it planned the statement: limits.query_timeout passed, or
// the client's cancel request or its statement_timeout came. The statement
// is not run: it would have waited, and been cancelled, the same way.
type costCheckCancelled struct {
	guard, node string
	// queryTimeout is limits.query_timeout when it is what cancelled the EXPLAIN; 0 otherwise.
	queryTimeout time.Duration
	// nodeMessage is the node's error message.
	nodeMessage string
}

func (e *costCheckCancelled) Error() string { return e.refusal().Message }

// Unwrap gives the refusal, so that the client error it becomes is found in it.
func (e *costCheckCancelled) Unwrap() error { return e.refusal() }

// refusal is the error the client gets, with SQLSTATE 57014 (query_canceled)
// as for a cancelled statement, a HINT, and a DETAIL in the cost refusal's
// key=value form:
//
//	guard=<name> node=<node> cost_check=cancelled [query_timeout=<limit>] node_error=<node's message>
func (e *costCheckCancelled) refusal() *clientError {
	var b []byte
	b = append(b, "guard="...)
	b = appendDetailValue(b, e.guard)
	b = append(b, " node="...)
	b = appendDetailValue(b, e.node)
	b = append(b, " cost_check=cancelled"...)
	if e.queryTimeout > 0 {
		b = append(b, " query_timeout="...)
		b = append(b, e.queryTimeout.String()...)
	}
	b = append(b, " node_error="...)
	b = appendDetailValue(b, e.nodeMessage)
	ce := &clientError{SQLState: sqlstateQueryCanceled, Detail: string(b),
		Hint: "The statement did not run. Its plan could not be made in time: planning waits for the locks of the tables it " +
			"uses, so another session that holds a conflicting lock (an ALTER TABLE, a LOCK TABLE, a VACUUM FULL) delays it, " +
			"as would a node that is overloaded. Retrying once that lock is released can succeed."}
	if e.queryTimeout > 0 {
		ce.Message = "pgowl: canceling statement due to limits.query_timeout (" + e.queryTimeout.String() +
			"): its cost check (EXPLAIN) on " + e.node + " did not finish"
	} else {
		ce.Message = "pgowl: the cost check (EXPLAIN) of the statement was cancelled on " + e.node + ": " + e.nodeMessage
		ce.Hint = "The statement did not run: a cancel request or statement_timeout cancelled its cost check."
	}
	return ce
}

// appendParse appends a Parse of the unnamed statement.
func appendParse(dst []byte, query string, paramTypes []uint32) []byte {
	body := make([]byte, 0, len(query)+8+4*len(paramTypes))
	body = append(body, 0)
	body = append(body, query...)
	body = append(body, 0)
	body = binary.BigEndian.AppendUint16(body, uint16(len(paramTypes)))
	for _, oid := range paramTypes {
		body = binary.BigEndian.AppendUint32(body, oid)
	}
	return wire.AppendFrame(dst, wire.MsgParse, body)
}

// explainBind builds the Bind of the unnamed portal and statement from a
// client Bind's parameters (formats and values), asking for text results.
func explainBind(params []byte) ([]byte, error) {
	p := params
	take := func(n int) ([]byte, error) {
		if n < 0 || len(p) < n {
			return nil, errors.New("short Bind")
		}
		v := p[:n]
		p = p[n:]
		return v, nil
	}
	nf, err := take(2)
	if err != nil {
		return nil, err
	}
	if _, err := take(2 * int(binary.BigEndian.Uint16(nf))); err != nil {
		return nil, err
	}
	np, err := take(2)
	if err != nil {
		return nil, err
	}
	for i := 0; i < int(binary.BigEndian.Uint16(np)); i++ {
		l, err := take(4)
		if err != nil {
			return nil, err
		}
		if n := int32(binary.BigEndian.Uint32(l)); n > 0 {
			if _, err := take(int(n)); err != nil {
				return nil, err
			}
		}
	}
	end := len(params) - len(p)
	bind := make([]byte, 0, 2+end+2)
	bind = append(bind, 0, 0) // portal "", statement ""
	bind = append(bind, params[:end]...)
	return append(bind, 0, 0), nil // no result formats: text
}

// firstColumn returns a copy of the first column of a DataRow body, or nil.
func firstColumn(body []byte) []byte {
	if len(body) < 6 || binary.BigEndian.Uint16(body) < 1 {
		return nil
	}
	n := int32(binary.BigEndian.Uint32(body[2:]))
	if n < 0 || int(n) > len(body)-6 {
		return nil
	}
	return slices.Clone(body[6 : 6+n])
}

// costVerdict is what a plan costs: its total and the nodes that carry most of it.
type costVerdict struct {
	total float64
	// nodes are the plan nodes with the highest own cost, most expensive
	// first, at most maxCostNodes.
	nodes []planNodeCost
}

// planNodeCost is one plan node's share of a plan's cost.
type planNodeCost struct {
	NodeType string  `json:"node_type"`
	Relation string  `json:"relation,omitempty"`
	Index    string  `json:"index,omitempty"`
	Rows     int64   `json:"rows"`
	OwnCost  float64 `json:"own_cost"`
	SharePct float64 `json:"share_pct"`
}

// maxCostNodes bounds the plan nodes a refusal names.
const maxCostNodes = 5

// explainNode is one node of EXPLAIN (FORMAT JSON)'s plan tree.
type explainNode struct {
	NodeType     string        `json:"Node Type"`
	RelationName string        `json:"Relation Name"`
	Schema       string        `json:"Schema"`
	IndexName    string        `json:"Index Name"`
	PlanRows     float64       `json:"Plan Rows"`
	TotalCost    float64       `json:"Total Cost"`
	Plans        []explainNode `json:"Plans"`
}

// parseExplainJSON reads EXPLAIN (FORMAT JSON)'s output: the plan's total
// cost and its nodes by own cost (total minus the children's totals). A
// correlated subquery (a SubPlan) shows the cost of one run while its parent's
// total counts every run, and EXPLAIN does not say how many: its runs stay
// the parent's (README, Limits).
func parseExplainJSON(data []byte) (*costVerdict, error) {
	var doc []struct {
		Plan *explainNode `json:"Plan"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("guard: EXPLAIN output: %w", err)
	}
	if len(doc) == 0 || doc[0].Plan == nil {
		return nil, errors.New("guard: EXPLAIN output has no plan")
	}
	root := doc[0].Plan
	v := &costVerdict{total: root.TotalCost}
	var all []planNodeCost
	var walk func(n *explainNode)
	walk = func(n *explainNode) {
		own := n.TotalCost
		for i := range n.Plans {
			own -= n.Plans[i].TotalCost
			walk(&n.Plans[i])
		}
		own = max(own, 0) // a Limit costs less than its child
		c := planNodeCost{NodeType: n.NodeType, Index: n.IndexName, Rows: int64(math.Round(n.PlanRows)), OwnCost: own}
		if n.RelationName != "" {
			c.Relation = n.RelationName
			if n.Schema != "" {
				c.Relation = n.Schema + "." + n.RelationName
			}
		}
		if v.total > 0 {
			c.SharePct = own / v.total * 100
		}
		all = append(all, c)
	}
	walk(root)
	slices.SortStableFunc(all, func(a, b planNodeCost) int {
		switch {
		case a.OwnCost > b.OwnCost:
			return -1
		case a.OwnCost < b.OwnCost:
			return 1
		}
		return 0
	})
	for _, c := range all {
		if len(v.nodes) == maxCostNodes || (c.OwnCost <= 0 && len(v.nodes) > 0) {
			break
		}
		v.nodes = append(v.nodes, c)
	}
	return v, nil
}

// costRefusal is the QUERY_COST_EXCEEDED error of a statement whose plan
// costs more than limit.
func costRefusal(guard, node string, limit float64, v *costVerdict) *route.Error {
	return &route.Error{
		Code:     route.QueryCostExceeded,
		SQLState: route.QueryCostExceeded.SQLState(),
		Message: "pgowl: QUERY_COST_EXCEEDED: estimated cost " + strconv.FormatInt(int64(math.Round(v.total)), 10) +
			" exceeds the limit " + strconv.FormatInt(int64(math.Round(limit)), 10),
		Detail: v.detail(guard, node, limit),
		Hint: "Make the statement cheaper: the plan nodes in DETAIL carry most of its cost. A sequential scan of a large table " +
			"becomes an index lookup with a selective WHERE condition on an indexed column; a LIMIT, fewer rows joined, sorted or " +
			"aggregated, or a narrower time range cost less. Retrying the same SQL fails again.",
	}
}

// detail renders the verdict as the refusal's DETAIL, one fact per line:
//
//	guard=<name> node=<node> estimated_cost=<cost> limit=<limit>
//	plan_node=<type> relation=<schema.relation|-> index=<name|-> rows=<n> own_cost=<cost> share_pct=<pct>
//
// Values with a space, a quote or '=' are quoted as Go quotes them.
func (v *costVerdict) detail(guard, node string, limit float64) string {
	var b []byte
	b = append(b, "guard="...)
	b = appendDetailValue(b, guard)
	b = append(b, " node="...)
	b = appendDetailValue(b, node)
	b = append(b, " estimated_cost="...)
	b = strconv.AppendFloat(b, v.total, 'f', 2, 64)
	b = append(b, " limit="...)
	b = strconv.AppendFloat(b, limit, 'f', 2, 64)
	for _, n := range v.nodes {
		b = append(b, "\nplan_node="...)
		b = appendDetailValue(b, n.NodeType)
		b = append(b, " relation="...)
		b = appendDetailValue(b, n.Relation)
		b = append(b, " index="...)
		b = appendDetailValue(b, n.Index)
		b = append(b, " rows="...)
		b = strconv.AppendInt(b, n.Rows, 10)
		b = append(b, " own_cost="...)
		b = strconv.AppendFloat(b, n.OwnCost, 'f', 2, 64)
		b = append(b, " share_pct="...)
		b = strconv.AppendFloat(b, n.SharePct, 'f', 1, 64)
	}
	return string(b)
}

// appendDetailValue appends one DETAIL value: "-" when empty, Go-quoted when
// it holds a space, a quote, '=' or a control character.
func appendDetailValue(b []byte, v string) []byte {
	if v == "" {
		return append(b, '-')
	}
	if strings.ContainsAny(v, " \"=\n\r\t") {
		return strconv.AppendQuote(b, v)
	}
	return append(b, v...)
}

// appendNotice appends " guard=<name> cost=<cost>" to a guarded unit's
// NOTICE detail; cost is left out when it was not checked.
func (g *unitGuard) appendNotice(b []byte) []byte {
	if g == nil || g.cfg == nil {
		return b
	}
	b = append(b, " guard="...)
	b = appendDetailValue(b, g.cfg.Name)
	if g.verdict != nil {
		b = append(b, " cost="...)
		b = strconv.AppendFloat(b, g.verdict.total, 'f', 2, 64)
	}
	return b
}

// explainText is the guard's part of SHOW pgowl.explain: the verdict as the
// refusal's DETAIL renders it, or the guard alone.
func (g *unitGuard) explainText(node, outcome string) string {
	if g == nil || g.cfg == nil {
		return ""
	}
	if g.verdict == nil {
		if g.checkCancelled {
			return "guard=" + g.cfg.Name + " cost=unchecked cost_check=cancelled"
		}
		return "guard=" + g.cfg.Name + " cost=unchecked"
	}
	verdict := "ok"
	if outcome == route.QueryCostExceeded.SQLState() {
		verdict = "refused"
	}
	return "verdict=" + verdict + " cached=" + strconv.FormatBool(g.cached) + "\n" + g.verdict.detail(g.cfg.Name, node, g.limit)
}

// verdictCache keeps recent cost verdicts, bounded in number and in age.
type verdictCache struct {
	mu      sync.Mutex
	entries map[string]cachedVerdict
}

type cachedVerdict struct {
	verdict *costVerdict
	expires time.Time
}

// verdictCacheSize bounds the verdicts kept.
const verdictCacheSize = 4096

func (c *verdictCache) get(key string, now time.Time) (*costVerdict, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || !now.Before(e.expires) {
		return nil, false
	}
	return e.verdict, true
}

func (c *verdictCache) put(key string, v *costVerdict, expires time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = make(map[string]cachedVerdict)
	}
	if len(c.entries) >= verdictCacheSize {
		now := time.Now()
		for k, e := range c.entries {
			if !now.Before(e.expires) {
				delete(c.entries, k)
			}
		}
		for k := range c.entries {
			if len(c.entries) < verdictCacheSize {
				break
			}
			delete(c.entries, k) // map order: an arbitrary victim
		}
	}
	c.entries[key] = cachedVerdict{verdict: v, expires: expires}
}

// refuseForCost tells the client a guarded unit was not run: its cost check
// refused it (checkCost's refusal: its plan costs too much, or the check was
// cancelled). The unit's transaction, if any, fails as it would on the node.
func (sess *session) refuseForCost(be *backend, u *unit, dec route.Decision, refusal error) {
	resp := toErrorResponse(refusal)
	switch {
	case u.carriesBegin:
		sess.deferred.aborted = true
	case sess.held == be && be.conn.TxStatus == wire.TxInBlock:
		// As when a statement fails on the node: the transaction is aborted.
		sess.abortBlockOn(be, resp.Code)
	}
	sess.send(resp)
	if u.expectsReady {
		sess.sendReady()
	} else {
		sess.skip = skipToSync
	}
	u.routeErr = refusal
	sess.logUnit(u, dec, resp.Code)
	sess.releaseIdle(be)
}

// abortTransactionSQL is a statement that fails with sqlstate, one of
// pgowl's own codes, and so aborts the transaction block it runs in.
func abortTransactionSQL(sqlstate string) string {
	if len(sqlstate) != 5 || strings.Trim(sqlstate, "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ") != "" {
		sqlstate = route.QueryCostExceeded.SQLState()
	}
	return "DO $$BEGIN RAISE EXCEPTION 'pgowl: the statement was refused before it ran' USING ERRCODE = '" + sqlstate + "'; END$$"
}

// parseMaxCost reads SET pgowl.max_cost: a positive number that can only
// tighten the max_cost of the guard the session's identity matches.
func (sess *session) parseMaxCost(value string) (float64, error) {
	limit, err := strconv.ParseFloat(strings.Trim(strings.TrimSpace(value), "'"), 64)
	if err != nil || math.IsNaN(limit) || math.IsInf(limit, 0) {
		return 0, &clientError{SQLState: sqlstateInvalidParamValue,
			Message: fmt.Sprintf("pgowl: invalid value for parameter \"pgowl.max_cost\": %q", value),
			Hint:    "Use a plan cost, such as 50000."}
	}
	if limit <= 0 {
		return 0, &clientError{SQLState: sqlstateInvalidParamValue,
			Message: fmt.Sprintf("pgowl: pgowl.max_cost must be greater than 0, not %q", value),
			Hint:    "RESET pgowl.max_cost returns to the guard's configured max_cost."}
	}
	guards := sess.srv.live().cfg.Guards
	for i := range guards {
		if g := &guards[i]; g.MatchesSession(sess.user, sess.database, sess.application()) {
			if g.MaxCost > 0 && limit > float64(g.MaxCost) {
				return 0, &clientError{SQLState: sqlstateInvalidParamValue,
					Message: fmt.Sprintf("pgowl: pgowl.max_cost can only tighten guard %s's max_cost (%d), not loosen it to %s", g.Name, g.MaxCost, value)}
			}
			break
		}
	}
	return limit, nil
}

// GuardVerdict judges a plan as a guard with cost limit limit would:
// planJSON is EXPLAIN (FORMAT JSON, VERBOSE) output. It returns whether the
// plan is over the limit, the refusal's message (when it is), and the
// verdict's DETAIL lines; pgowl explain prints them.
func GuardVerdict(planJSON []byte, guard, node string, limit float64) (exceeded bool, message, detail string, err error) {
	v, err := parseExplainJSON(planJSON)
	if err != nil {
		return false, "", "", err
	}
	if v.total > limit {
		message = costRefusal(guard, node, limit, v).Message
	}
	return v.total > limit, message, v.detail(guard, node, limit), nil
}

// busyForGuard reports whether err is a guard's load refusal (route.Plan's
// DATABASE_BUSY): the class waits outside, so a guarded write does not wait
// for routing.primary_wait as it would for a primary to appear.
func busyForGuard(err error) bool {
	var re *route.Error
	return errors.As(err, &re) && re.Code == route.DatabaseBusy
}
