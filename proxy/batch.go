package proxy

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pgowl/pgowl/wire"

	"github.com/pgowl/pgowl/classify"
)

// batch collects an extended-protocol batch until Sync or Flush: the client's
// frames as they came, and what the proxy needs to know about each.
type batch struct {
	buf   []byte
	msgs  []batchMsg
	stmts []*preparedStmt // statements' result, reused
	// newNamed and newNamedBytes count the named Parse messages of the
	// batch and their size, against the session's statement limits.
	newNamed, newNamedBytes int
}

type batchMsg struct {
	typ      byte
	off, end int           // the frame within batch.buf
	name     string        // Parse: new statement; Bind: source statement; Describe/Close: target
	kind     byte          // Describe/Close: wire.TargetStatement or wire.TargetPortal
	portal   string        // Bind: the portal it creates; Execute: the portal it runs
	stmt     *preparedStmt // Parse: the statement it creates
	rest     int           // Bind: where the body continues after the statement name
}

func (b *batch) reset() {
	b.buf = b.buf[:0]
	clear(b.msgs)
	b.msgs = b.msgs[:0]
	clear(b.stmts)
	b.stmts = b.stmts[:0]
	b.newNamed, b.newNamedBytes = 0, 0
	if cap(b.buf) > 4*maxBatchBytes {
		b.buf = nil
	}
}

// add records one client message of the batch.
func (b *batch) add(sess *session, typ byte, body []byte) error {
	m := batchMsg{typ: typ, off: len(b.buf)}
	switch typ {
	case wire.MsgParse:
		pm, err := decodeParse(body)
		if err != nil {
			return err
		}
		if mayNameManagedStatement(pm.query) {
			eff := sess.classify(pm.query, pm.paramTypes)
			if refused := sess.sqlStatementNamesRefused(&eff); refused != nil {
				return refused
			}
		}
		if pm.name != "" {
			if err := sess.checkStatementLimits(len(body)); err != nil {
				return err
			}
			b.newNamed++
			b.newNamedBytes += len(body)
		}
		m.name, m.stmt = pm.name, sess.newStatement(pm, body)
	case wire.MsgBind:
		portal, stmt, err := decodeBindNames(body)
		if err != nil {
			return err
		}
		if err := b.refuseForeign(sess, stmt); err != nil {
			return err
		}
		m.portal, m.name = portal, stmt
		m.rest = len(portal) + 1 + len(stmt) + 1
	case wire.MsgDescribe, wire.MsgClose:
		kind, name, err := decodeTargeted(body)
		if err != nil {
			return err
		}
		if typ == wire.MsgDescribe && kind == wire.TargetStatement {
			if err := b.refuseForeign(sess, name); err != nil {
				return err
			}
		}
		m.kind, m.name = kind, name
	case wire.MsgExecute:
		portal, _, err := cstring(body)
		if err != nil {
			return err
		}
		m.portal = portal
	}
	b.buf = appendFrame(b.buf, typ, body)
	m.end = len(b.buf)
	b.msgs = append(b.msgs, m)
	return nil
}

// changesNoSetting reports whether a part of a batch that only reads changes no setting, so that
// the batch may leave its standby when a later part writes (leaveReadOnlyBatch). A SET holds in
// the implicit transaction the move would end early: a SET LOCAL would not outlive it, and a
// session-level SET would be committed there even when a later part fails, which on a direct
// connection undoes it. So a part with any setting change stays on its node, and a write after
// it fails there with 25006.
func changesNoSetting(eff *classify.Effects) bool {
	return eff.Session == 0 && len(eff.SetConfigNames) == 0 && len(eff.Settings) == 0
}

// leavesNoPortal reports whether the batch ends with an Execute that ran its
// portal to completion and binds no named portal: nothing of it is left on
// the node for a later part of the same pipeline to use.
func (b *batch) leavesNoPortal() bool {
	if len(b.msgs) == 0 || b.msgs[len(b.msgs)-1].typ != wire.MsgExecute {
		return false
	}
	for i := range b.msgs {
		m := &b.msgs[i]
		switch m.typ {
		case wire.MsgBind:
			if m.portal != "" {
				return false
			}
		case wire.MsgExecute:
			// The body is the portal's name and the row limit; 0 runs it to completion.
			body := b.buf[m.off+wire.HeaderSize : m.end]
			if len(body) < len(m.portal)+1+4 || binary.BigEndian.Uint32(body[len(m.portal)+1:]) != 0 {
				return false
			}
		}
	}
	return true
}

// executes reports whether the batch runs anything (Execute).
func (b *batch) executes() bool {
	for i := range b.msgs {
		if b.msgs[i].typ == wire.MsgExecute {
			return true
		}
	}
	return false
}

func (b *batch) addSync() {
	m := batchMsg{typ: wire.MsgSync, off: len(b.buf)}
	b.buf = append(b.buf, wire.MsgSync, 0, 0, 0, 4)
	m.end = len(b.buf)
	b.msgs = append(b.msgs, m)
}

// statements returns, in order, the statements the batch parses or runs.
func (b *batch) statements(sess *session) []*preparedStmt {
	out := b.stmts[:0]
	// A statement the batch itself parses shadows the session's. Short
	// batches look back through their own Parse messages; long pipelines
	// use a map.
	var parsed map[string]*preparedStmt
	if len(b.msgs) > shortBatch {
		parsed = make(map[string]*preparedStmt)
	}
	lookup := func(i int, name string) *preparedStmt {
		if parsed != nil {
			if st, ok := parsed[name]; ok {
				return st
			}
		} else {
			for j := i - 1; j >= 0; j-- {
				if p := &b.msgs[j]; p.typ == wire.MsgParse && p.name == name {
					return p.stmt
				}
			}
		}
		return sess.statements.lookup(name)
	}
	for i := range b.msgs {
		m := &b.msgs[i]
		switch m.typ {
		case wire.MsgParse:
			if parsed != nil {
				parsed[m.name] = m.stmt
			}
			out = append(out, m.stmt)
		case wire.MsgBind:
			if st := lookup(i, m.name); st != nil {
				if !parsedHere(b.msgs[:i], m.name, parsed) {
					// Prepared in an earlier batch: classify it again as it runs
					// now. A function it calls may have changed since (the
					// catalogue reloads), or the session's search_path; a hit in
					// the classifier's cache costs a few hundred nanoseconds.
					st.effects = sess.classify(st.sql, st.paramTypes)
					sess.cls.attachAhead(st)
				}
				out = append(out, st)
			}
		case wire.MsgDescribe:
			if m.kind == wire.TargetStatement {
				if st := lookup(i, m.name); st != nil {
					out = append(out, st)
				}
			}
		}
	}
	b.stmts = out
	return out
}

// parsedHere reports whether the batch messages before a Bind parse the
// statement name it binds (parsed is the batch's map, for long batches).
func parsedHere(before []batchMsg, name string, parsed map[string]*preparedStmt) bool {
	if parsed != nil {
		_, ok := parsed[name]
		return ok
	}
	for j := len(before) - 1; j >= 0; j-- {
		if before[j].typ == wire.MsgParse && before[j].name == name {
			return true
		}
	}
	return false
}

// shortBatch is the most messages a batch has for statements to find its
// own Parse messages by looking back rather than with a map.
const shortBatch = 32

// batchEffects merges the effects of a batch's statements with
// classify.Merge. A statement the batch names more than once (Parse, Bind
// and Describe of the same one) counts once.
func batchEffects(stmts []*preparedStmt) classify.Effects {
	if len(stmts) == 0 {
		return classify.Effects{Access: classify.Read, Reason: classify.ReasonReadOnly, Subject: "protocol bookkeeping"}
	}
	var small [2]classify.Effects // most batches run one statement: no allocation
	parts := small[:0]
	if len(stmts) > len(small) {
		parts = make([]classify.Effects, 0, len(stmts))
	}
	var seen map[*preparedStmt]bool
	if len(stmts) > shortBatch {
		seen = make(map[*preparedStmt]bool, len(stmts))
	}
	for i, st := range stmts {
		switch {
		case seen != nil:
			if seen[st] {
				continue
			}
			seen[st] = true
		case slices.Contains(stmts[:i], st):
			continue
		}
		parts = append(parts, st.effects)
	}
	return classify.Merge(parts)
}

// endsTransaction reports whether every statement of a batch ends a transaction.
func endsTransaction(stmts []*preparedStmt) bool {
	for _, st := range stmts {
		if st.effects.Tx != classify.TxEnd {
			return false
		}
	}
	return len(stmts) > 0
}

// endsNoTransaction reports whether eff is a COMMIT or ROLLBACK while the
// session has no transaction anywhere, such as the ROLLBACK a driver sends
// after its transaction's node was lost: any node answers it alike (a
// warning that no transaction is in progress), so it must not fail for want
// of a standby.
func (sess *session) endsNoTransaction(eff classify.Effects) bool {
	return sess.txState() == txIdle && eff.Tx == classify.TxEnd && eff.Access == classify.Read && eff.Statements == 1
}

// runBatch routes and runs the collected batch. synced says it ends with Sync.
func (sess *session) runBatch(ctx context.Context, synced bool) error {
	b := &sess.batch
	defer b.reset()
	if len(b.msgs) == 0 {
		return nil
	}
	if synced && len(b.msgs) == 1 && sess.held == nil {
		// A lone Sync outside a transaction: nothing to run anywhere.
		sess.sendReady()
		return nil
	}
	stmts := b.statements(sess)
	if handled, err := sess.answerPgowlBatch(stmts, synced); handled {
		return err
	}
	if sess.answerDeallocateBatch(stmts, synced) {
		return nil
	}
	u := unit{start: time.Now(), effects: batchEffects(stmts), expectsReady: synced, stmts: stmts}
	u.runsNothing = !b.executes()
	// Nothing runs: Parse, Describe and Close only prepare and describe,
	// which any node can do that has what the statements name. Such a batch
	// should not wait for the primary: a client that prepares synchronously
	// while its other connections hold every primary backend in open
	// transactions would wait on itself. A write's goes to the primary only
	// when a backend there is free at once (choose, waitNot; a standby may
	// not have replayed what it names), else where a read's would
	// (route.SessionFacts.PrimaryFull). One that only the primary can take
	// waits there, ahead of transactions (waitBriefly).
	u.prepareOnly = u.runsNothing && sess.held == nil && synced
	u.endsNoTransaction = len(stmts) == 1 && synced && sess.endsNoTransaction(stmts[0].effects)
	if d := sess.deferred; d != nil && d.aborted {
		if !endsTransaction(stmts) {
			sess.send(toErrorResponse(abortedTransaction()))
			sess.endRefused(synced)
			return nil
		}
		// Ending the failed transaction, which no node has: the batch runs
		// after a transaction is opened and failed on the node, so that the
		// node answers it as it answers the end of a failed transaction
		// (COMMIT reports ROLLBACK).
		u.replaysFailure = true
	}
	if len(stmts) > 0 {
		u.sql = stmts[0].sql
		if len(stmts) == 1 || (len(stmts) == 2 && stmts[0] == stmts[1]) {
			// settingReplay decides what of it can be replayed (not a
			// statement with parameters as text).
			u.setSQL = stmts[0].sql
		}
	}
	return sess.routeAndRun(ctx, &u, func(be *backend) {
		sess.writeBatch(be, b)
		if !synced {
			// Without Sync the node keeps its replies buffered until a
			// Flush: send one, whatever made pgowl run the batch now.
			be.conn.Writer.Write([]byte{wire.MsgFlush, 0, 0, 0, 4})
			plainRead := u.effects.Access == classify.Read && u.effects.Tx == classify.TxNone && changesNoSetting(&u.effects) &&
				b.leavesNoPortal()
			be.openReadOnly = plainRead && (!be.openBatch || be.openReadOnly)
			be.openBatch = true
		}
	})
}

// writeBatch writes the batch to be, preparing statements the connection
// lacks, and enters each message in be's expectation queue. Named statements
// travel under pgowl-managed names (see newStatement), so Bind and Describe
// are rewritten and a client's Close is answered by pgowl.
func (sess *session) writeBatch(be *backend, b *batch) {
	w := be.conn.Writer
	for i := range b.msgs {
		m := &b.msgs[i]
		frame := b.buf[m.off:m.end]
		if be.skipping {
			// The node discards everything up to Sync after an error.
			w.Write(frame)
			if m.typ == wire.MsgSync {
				be.expect.push(expectation{typ: wire.MsgSync})
			}
			continue
		}
		switch m.typ {
		case wire.MsgParse:
			sess.writeClientParse(be, m)
		case wire.MsgBind:
			st := sess.ensurePrepared(be, m.name)
			be.expect.push(expectation{typ: wire.MsgBind})
			if st != nil && m.name != "" {
				body := frame[wire.HeaderSize:]
				writeFrameParts(w, wire.MsgBind, m.portal, st.serverName, body[m.rest:])
				continue
			}
			w.Write(frame)
		case wire.MsgDescribe:
			// A statement the connection lacks is prepared first: ensurePrepared writes its Parse
			// (and any Close) and queues their expectations, which must come before the
			// Describe's, in the order the node answers them.
			var st *preparedStmt
			if m.kind == wire.TargetStatement {
				st = sess.ensurePrepared(be, m.name)
			}
			be.expect.push(expectation{typ: wire.MsgDescribe})
			if st != nil && m.name != "" {
				w.Write(appendTargetedFrame(sess.scratch[:0], wire.MsgDescribe, wire.TargetStatement, st.serverName))
				continue
			}
			w.Write(frame)
		case wire.MsgExecute:
			be.expect.push(expectation{typ: wire.MsgExecute})
			w.Write(frame)
		case wire.MsgClose:
			if m.kind == wire.TargetStatement && m.name != "" {
				// The node's statement may serve other clients: only the
				// client's name goes. pgowl answers in the node's turn.
				// (If an earlier error makes the node skip it, undo brings
				// the statement back, as the node would have kept it.)
				st := sess.statements.close(m.name)
				be.expect.push(expectation{typ: wire.MsgClose, synthetic: wire.MsgCloseComplete, stmt: st})
				continue
			}
			if m.kind == wire.TargetStatement {
				be.expect.push(expectation{typ: wire.MsgClose, unnamed: true, prevUnnamed: be.markUnnamed(0), clientPrev: sess.statements.close("")})
			} else {
				be.expect.push(expectation{typ: wire.MsgClose})
			}
			w.Write(frame)
		case wire.MsgSync:
			be.expect.push(expectation{typ: wire.MsgSync})
			w.Write(frame)
		}
	}
}

// foreignStatementError refuses a message that names, as its statement, a name of pgowl's that
// the client did not prepare: another session's statement, which the client read in
// pg_prepared_statements. On a direct connection the client has no such statement.
type foreignStatementError struct {
	name string
	// prepares: an SQL PREPARE would make a statement under the name, which pgowl reserves.
	prepares bool
}

func (e *foreignStatementError) Error() string {
	if e.prepares {
		return fmt.Sprintf("pgowl: prepared statement names beginning with %q are reserved for the statements pgowl prepares on the nodes; %q cannot be prepared", managedStatementPrefix, e.name)
	}
	return fmt.Sprintf("prepared statement %q does not exist", e.name)
}

// clientError is what the client sees: ERROR 26000, as PostgreSQL answers for a statement the
// session did not prepare; for a PREPARE under a reserved name 42939 (reserved_name).
func (e *foreignStatementError) clientError() *clientError {
	if e.prepares {
		return &clientError{Severity: "ERROR", SQLState: sqlstateReservedName, Message: e.Error(),
			Hint: "Choose a name that does not begin with " + managedStatementPrefix + "."}
	}
	return &clientError{Severity: "ERROR", SQLState: sqlstateInvalidSQLStatementName, Message: e.Error()}
}

// batchRefusal is an error of batch.add for a message pgowl refuses itself (statementLimitError,
// foreignStatementError): the client gets its error, and the session goes on.
type batchRefusal interface {
	error
	clientError() *clientError
}

// failTransactionForRefusal fails the session's transaction block, if it is in one, for a
// statement pgowl refused itself with sqlstate, as an error fails it on a node: the client's
// later statements get 25P02 and its COMMIT rolls back. A deferred BEGIN fails where it waits;
// a block open on the held backend, between statements, is failed there by a statement that
// raises sqlstate.
func (sess *session) failTransactionForRefusal(sqlstate string) {
	switch be := sess.held; {
	case sess.deferred != nil:
		sess.deferred.aborted = true
	case be != nil && be.conn.TxStatus == wire.TxInBlock && !be.openBatch && be.expect.len() == 0:
		sess.abortBlockOn(be, sqlstate)
	}
}

// sqlStatementNamesRefused returns the refusal of a statement string whose SQL PREPARE, EXECUTE
// or DEALLOCATE names a statement under the managed prefix, or nil. On the nodes those names
// are pgowl's, shared by the sessions of a login (pg_prepared_statements shows them to each):
// an SQL EXECUTE or DEALLOCATE of one would run or drop another session's statement, and a
// PREPARE could take a name pgowl is about to use. A client's own extended-protocol statement
// under such a name is not reached by SQL either: on the node it has another name. A lone
// DEALLOCATE of it is the exception: pgowl answers it (deallocateClientStatement, and in an
// extended batch answerBatchLocally).
func (sess *session) sqlStatementNamesRefused(eff *classify.Effects) *foreignStatementError {
	for _, name := range eff.Prepares {
		if strings.HasPrefix(name, managedStatementPrefix) {
			return &foreignStatementError{name: name, prepares: true}
		}
	}
	for _, name := range eff.UsesPrepared {
		if !strings.HasPrefix(name, managedStatementPrefix) {
			continue
		}
		if own, ok := deallocatedName(*eff); ok && own == name && sess.statements.lookup(name) != nil {
			continue
		}
		return &foreignStatementError{name: name}
	}
	return nil
}

// mayNameManagedStatement reports whether sql may hold a managed statement name: the cheap test
// before a Parse's text is classified for it (sqlStatementNamesRefused). Unquoted names fold to
// lower case; a name spelled with Unicode escapes (U&"\0070...") holds no "pgowl_", so any such
// identifier counts.
func mayNameManagedStatement(sql string) bool {
	if strings.Contains(sql, "U&") || strings.Contains(sql, "u&") {
		return true
	}
	for rest := sql; len(rest) >= len(managedStatementPrefix); {
		i := strings.IndexAny(rest, "pP")
		if i < 0 || len(rest)-i < len(managedStatementPrefix) {
			return false
		}
		if strings.EqualFold(rest[i:i+len(managedStatementPrefix)], managedStatementPrefix) {
			return true
		}
		rest = rest[i+1:]
	}
	return false
}

// foreignStatement reports whether name is a managed name the session did not prepare under that
// name (before this batch, or by a Parse earlier in it).
func (sess *session) foreignStatement(name string, pending []batchMsg) bool {
	if !strings.HasPrefix(name, managedStatementPrefix) || sess.statements.lookup(name) != nil {
		return false
	}
	for i := range pending {
		if pending[i].typ == wire.MsgParse && pending[i].name == name {
			return false
		}
	}
	return true
}

// refuseForeign returns the error that refuses a message naming a foreign statement, or nil.
func (b *batch) refuseForeign(sess *session, name string) error {
	if sess.foreignStatement(name, b.msgs) {
		return &foreignStatementError{name: name}
	}
	return nil
}

// statementLimitError refuses a named Parse beyond the session's limits
// (limits.max_prepared_statements, limits.max_prepared_statement_bytes).
type statementLimitError struct {
	limit string // the configuration key
	value int
}

func (e *statementLimitError) Error() string {
	return fmt.Sprintf("pgowl: too many prepared statements in this session (%s = %d)", e.limit, e.value)
}

// clientError is what the client sees: ERROR 53400 (configuration_limit_exceeded).
func (e *statementLimitError) clientError() *clientError {
	return &clientError{Severity: "ERROR", SQLState: sqlstateConfigurationLimitExceeded, Message: e.Error(),
		Hint: "Deallocate (Close) prepared statements the session no longer uses, or raise the limit."}
}

// checkStatementLimits refuses a named Parse of parseBytes bytes when the
// session's named statements, with those the batch parses already, would
// exceed the configured count or size.
func (sess *session) checkStatementLimits(parseBytes int) error {
	limits := sess.srv.live().cfg.Limits
	if sess.statements.count()+sess.batch.newNamed+1 > limits.MaxPreparedStatements {
		return &statementLimitError{limit: "limits.max_prepared_statements", value: limits.MaxPreparedStatements}
	}
	total := sess.batch.newNamedBytes + parseBytes + sess.statements.size()
	if total > limits.MaxPreparedStatementBytes {
		return &statementLimitError{limit: "limits.max_prepared_statement_bytes", value: limits.MaxPreparedStatementBytes}
	}
	return nil
}

// writeClientParse enters a client's Parse. A named statement the connection
// already holds under its managed name is not parsed again: pgowl answers
// ParseComplete in the node's turn.
func (sess *session) writeClientParse(be *backend, m *batchMsg) {
	st := m.stmt
	c := be.conn
	if m.name == "" {
		be.expect.push(expectation{typ: wire.MsgParse, unnamed: true, prevUnnamed: be.markUnnamed(st.id), clientOwn: true, clientPrev: sess.statements.parse(st), stmt: st})
		c.Writer.Write(st.frame)
		return
	}
	if held := sess.statements.duplicate(m.name); held != nil {
		sess.ensurePrepared(be, m.name)
		sess.writeDuplicateParse(be, held, st)
		return
	}
	prev := sess.statements.parse(st)
	server := be.statements()
	reparsed := server.holds(st.serverName)
	if reparsed {
		// The connection holds the statement, prepared by this or another
		// session, perhaps before a table it reads changed ("cached plan must
		// not change result type"). A client's Parse plans afresh, as it does
		// on the client's own connection: close the old one first.
		c.Writer.Write(appendTargetedFrame(sess.scratch[:0], wire.MsgClose, wire.TargetStatement, st.serverName))
		be.expect.push(expectation{typ: wire.MsgClose, swallow: true})
	}
	server.add(st.serverName)
	be.expect.push(expectation{typ: wire.MsgParse, serverName: st.serverName, reparsed: reparsed, clientOwn: true, clientPrev: prev, stmt: st})
	c.Writer.Write(st.frame)
}

// writeDuplicateParse enters a client's Parse of a name the client already
// holds (held; ensurePrepared made sure be holds it too). PostgreSQL refuses
// it with 42P05 (duplicate_prepared_statement) and skips the rest of the
// batch up to Sync; the node does the same when it is asked to parse the new
// text under held's managed name, after parsing and analysing the text as it
// would for the client (a syntax error in it comes first, as it would). The
// relay puts the client's name into the error's message.
func (sess *session) writeDuplicateParse(be *backend, held, st *preparedStmt) {
	rest := st.frame[wire.HeaderSize+len(st.serverName)+1:] // query, parameter count and types
	n := len(held.serverName) + 1 + len(rest)
	frame := wire.AppendHeader(sess.scratch[:0], wire.MsgParse, n)
	frame = append(append(append(frame, held.serverName...), 0), rest...)
	sess.scratch = frame[:0]
	be.conn.Writer.Write(frame)
	be.expect.push(expectation{typ: wire.MsgParse, duplicateOf: held.name})
}

// ensurePrepared makes sure be holds the client's statement name, preparing
// it there (with its reply swallowed) when it does not. It returns the
// statement, or nil when the client has no statement of that name.
func (sess *session) ensurePrepared(be *backend, name string) *preparedStmt {
	c := be.conn
	st := sess.statements.lookup(name)
	if name == "" {
		if st == nil {
			if be.unnamedID() != 0 {
				// The connection holds another session's unnamed statement:
				// close it, so that this Bind or Describe fails as it would
				// on the client's own connection instead of using it.
				c.Writer.Write(closeUnnamedStatement)
				be.expect.push(expectation{typ: wire.MsgClose, swallow: true})
				be.markUnnamed(0)
			}
			return nil
		}
		if be.unnamedID() == st.id {
			return st
		}
		c.Writer.Write(st.frame)
		be.expect.push(expectation{typ: wire.MsgParse, swallow: true, unnamed: true, prevUnnamed: be.markUnnamed(st.id)})
		return st
	}
	if st == nil {
		return nil
	}
	server := be.statements()
	if server.holds(st.serverName) {
		return st
	}
	c.Writer.Write(st.frame)
	be.expect.push(expectation{typ: wire.MsgParse, swallow: true, serverName: st.serverName})
	server.add(st.serverName)
	return st
}

// closeUnnamedStatement is a Close message for the unnamed prepared statement.
var closeUnnamedStatement = []byte{wire.MsgClose, 0, 0, 0, 6, wire.TargetStatement, 0}

// newStatement records a client's Parse: it is classified, and named for
// backend connections (see managedNames) in the session's current scope.
func (sess *session) newStatement(pm parseMessage, body []byte) *preparedStmt {
	// Classified first: that may bring the session's search_path up to date.
	effects := sess.classify(pm.query, pm.paramTypes)
	ctx := &sess.cls.ctx
	scope := statementScope{searchPath: ctx.SearchPath, searchPathUnknown: ctx.SearchPathUnknown, session: sess.id}
	st := sess.srv.statementNames.newStatement(pm, body, scope)
	st.effects = effects
	sess.cls.attachAhead(st)
	return st
}

// writeFrameParts writes a frame whose body is two C strings and a tail.
func writeFrameParts(w *bufio.Writer, typ byte, first, second string, tail []byte) {
	n := len(first) + 1 + len(second) + 1 + len(tail)
	var hdr [wire.HeaderSize]byte
	w.Write(wire.AppendHeader(hdr[:0], typ, n))
	w.WriteString(first)
	w.WriteByte(0)
	w.WriteString(second)
	w.WriteByte(0)
	w.Write(tail)
}
