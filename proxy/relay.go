package proxy

import (
	"fmt"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgowl/pgowl/classify/catalog"
	"github.com/pgowl/pgowl/wire"
)

// expectation is one message sent to a backend whose reply is still due.
type expectation struct {
	typ     byte // the client's message: wire.MsgQuery, MsgFunctionCall, MsgParse, MsgBind, MsgDescribe, MsgExecute, MsgClose or MsgSync
	swallow bool // pgowl injected it: its reply is not the client's
	quiet   bool // with swallow, for a Query: its errors and notices are not the client's either
	// synthetic, when set, is the reply type pgowl sends itself in this
	// message's turn: the message was not sent to the node.
	synthetic byte
	// For Parse: what it changed on the connection, undone if the node never
	// ran it, and the client's statement it replaced. For Close of a
	// statement: the unnamed statement (unnamed, prevUnnamed, clientPrev) or
	// the named one (stmt) it closed, brought back if the node skipped it.
	serverName string
	// reparsed: the Parse follows a Close of the same server statement (a
	// client's Parse prepares afresh). Skipped, both were: the old
	// statement is still there. Failed, the Close ran: nothing is.
	reparsed    bool
	unnamed     bool
	prevUnnamed unnamedMark
	stmt        *preparedStmt
	clientOwn   bool
	clientPrev  *preparedStmt
	// duplicateOf, for a Parse, is the client's statement name it repeats:
	// the node refuses it under the managed name, and the client is told
	// its own name (see writeDuplicateParse).
	duplicateOf string
	// catalogueRead, for a Sync, is pgowl's read of a catalogue change sent behind the unit (see
	// sendCatalogueRead): the replies up to that Sync's ReadyForQuery go to it.
	catalogueRead *catalog.SessionRead
}

// expectQueue is a FIFO of expectations that reuses its storage.
type expectQueue struct {
	items []expectation
	head  int
}

func (q *expectQueue) push(e expectation) { q.items = append(q.items, e) }
func (q *expectQueue) len() int           { return len(q.items) - q.head }
func (q *expectQueue) front() *expectation {
	return &q.items[q.head]
}

// hasSync reports whether a Sync is expected.
func (q *expectQueue) hasSync() bool {
	for i := q.head; i < len(q.items); i++ {
		if q.items[i].typ == wire.MsgSync {
			return true
		}
	}
	return false
}

func (q *expectQueue) pop() {
	q.items[q.head] = expectation{}
	q.head++
	if q.head == len(q.items) {
		q.items = q.items[:0]
		q.head = 0
	}
}

// completes reports whether a reply of type typ is the final reply to the
// message e.
func completes(e *expectation, typ byte) bool {
	switch e.typ {
	case wire.MsgParse:
		return typ == wire.MsgParseComplete
	case wire.MsgBind:
		return typ == wire.MsgBindComplete
	case wire.MsgClose:
		return typ == wire.MsgCloseComplete
	case wire.MsgDescribe:
		return typ == wire.MsgRowDescription || typ == wire.MsgNoData
	case wire.MsgExecute:
		return typ == wire.MsgCommandComplete || typ == wire.MsgEmptyQueryResponse || typ == wire.MsgPortalSuspended
	case wire.MsgSync, wire.MsgQuery, wire.MsgFunctionCall:
		return typ == wire.MsgReadyForQuery
	}
	return false
}

// exchange is one relay of a unit's replies from a backend: what the relay
// loop carries from frame to frame, and the outcome it builds.
//
// The unit is not kept in it but passed along: the backend escapes to the
// heap (copyIn's watcher), and a unit stored beside it would too, one
// allocation per unit on the hot path.
type exchange struct {
	sess *session
	be   *backend
	// copying: the client is in COPY FROM STDIN mode, sending data.
	copying bool
	// extendedCopy: the COPY FROM STDIN began in the extended protocol (an Execute).
	extendedCopy bool
	// syncOwed: a COPY FROM STDIN began in the extended protocol, and the batch's Sync reached
	// the node in copy mode, which ignores it: the node answers the batch's expected Sync only
	// at the client's next Sync (libpq sends one after CopyDone), which pgowl forwards
	// (forwardOwedSync).
	syncOwed bool
	// replied: the node's first reply came (see firstReplyCame).
	replied bool
	out     exchangeOutcome
}

// relay streams a backend's replies to the client until every expected reply
// has arrived, and returns what the exchange did; the session's state is
// left to the caller, which applies the outcome (applyOutcome). Frames pass
// through untouched; only ReadyForQuery, ErrorResponse and a few completions
// are looked at. The outcome is partial when relay returns an error.
func (sess *session) relay(be *backend, u *unit) (exchangeOutcome, error) {
	x := exchange{sess: sess, be: be, out: exchangeOutcome{node: be.node}}
	err := x.relayReplies(u)
	x.out.txStatus = be.conn.TxStatus
	return x.out, err
}

// relayReplies is relay's loop, over the expected replies.
func (x *exchange) relayReplies(u *unit) error {
	sess, be := x.sess, x.be
	r := be.conn.Reader
	for be.expect.len() > 0 {
		if be.expect.front().catalogueRead != nil && sess.defersCatalogueRead(be) {
			// The unit's replies are done: its catalogue read is read when the session
			// needs it (catalogue_read_in_flight.go).
			return nil
		}
		if answered, err := x.relayPgowlTurn(u); err != nil {
			return err
		} else if answered {
			continue
		}
		if x.copying {
			// The client is sending COPY data: forward it until the node speaks.
			ended, err := sess.copyIn(be, x)
			if err != nil {
				return err
			}
			x.copying = !ended
		}
		if x.syncOwed && !x.copying && r.Buffered() == 0 && be.expect.front().typ == wire.MsgSync {
			// The node answers the batch's Sync only at the client's next one.
			if err := sess.client.flush(); err != nil {
				return err
			}
			if err := sess.forwardOwedSync(be, x); err != nil {
				return err
			}
		}
		if r.Buffered() == 0 && sess.client.w.Buffered() > 0 {
			// About to wait for the node: let the client have what we have.
			if err := sess.client.flush(); err != nil {
				return err
			}
		}
		typ, _, err := r.PeekHeader()
		if err != nil {
			return err
		}
		if !x.replied {
			x.replied = true
			sess.firstReplyCame()
		}
		if typ == wire.MsgDataRow {
			// The hot path: rows pass through untouched and complete nothing.
			if !u.forwarded {
				sess.startReply(u)
			}
			n, err := r.CopyRun(sess.client.w, wire.MsgDataRow)
			if err == nil && n == 0 {
				_, _, err = r.CopyFrame(sess.client.w)
			}
			if err != nil {
				return &clientSideError{err}
			}
			continue
		}
		if err := x.relayReply(u, typ); err != nil {
			return err
		}
	}
	return nil
}

// relayPgowlTurn handles the expected reply at the head of the queue when it
// is not the node's to give the client: a reply pgowl sends itself, its own
// catalogue read, or a deferred BEGIN sent ahead of the unit. It reports
// whether it did.
func (x *exchange) relayPgowlTurn(u *unit) (bool, error) {
	sess, be := x.sess, x.be
	head := be.expect.front()
	switch {
	case head.synthetic != 0:
		// Every earlier message is answered: this one's turn.
		sess.startReply(u)
		sess.forwardFrame(append(sess.scratch[:0], head.synthetic, 0, 0, 0, 4))
		be.expect.pop()
		return true, nil
	case head.catalogueRead != nil:
		if _, err := sess.relayCatalogueRead(be, head.catalogueRead); err != nil {
			return true, err
		}
		be.expect.pop()
		if sess.cls.readOn == be {
			sess.cls.readOn = nil
			sess.catalogueReadIn()
			sess.finishAhead(u, false, nil)
		}
		return true, nil
	case head.swallow && head.typ == wire.MsgQuery:
		return true, sess.relayDeferredBegin(be, u, &x.out, head.quiet)
	}
	return false, nil
}

// relayReply relays one reply of type typ, other than a DataRow, and
// follows what it completes.
func (x *exchange) relayReply(u *unit, typ byte) error {
	sess, be := x.sess, x.be
	r := be.conn.Reader
	head := be.expect.front()
	switch typ {
	case wire.MsgReadyForQuery:
		return x.relayReady(u, head)
	case wire.MsgErrorResponse:
		return x.relayError(u, head)
	case wire.MsgCommandComplete:
		return x.relayCommandComplete(u, head)
	case wire.MsgNoticeResponse:
		if !u.forwarded {
			if frame, err := r.PeekFrame(); err == nil {
				severity, code, message := errorSeverityFields(frame[wire.HeaderSize:])
				if closing := deadConnectionReply(be, u, wire.MsgNoticeResponse, severity, code, message); closing != nil {
					return closing
				}
			}
		}
	case wire.MsgCopyInResponse:
		x.copying = true
		if head.typ == wire.MsgExecute {
			x.extendedCopy, x.syncOwed = true, be.expect.hasSync()
		}
	case wire.MsgParameterStatus:
		if frame, err := r.PeekFrame(); err == nil {
			if name, value, ok := parameterStatusFields(frame[wire.HeaderSize:]); ok {
				sess.followParameterStatus(name, value)
			}
		}
	case wire.MsgPortalSuspended:
		be.portalSuspended = true
		fallthrough
	default:
		if completes(head, typ) {
			if head.swallow {
				if _, _, err := r.ReadFrame(); err != nil {
					return err
				}
				be.expect.pop()
				return nil
			}
			be.expect.pop()
		}
	}
	sess.startReply(u)
	if _, _, err := r.CopyFrame(sess.client.w); err != nil {
		return &clientSideError{err}
	}
	return nil
}

// relayReady relays a ReadyForQuery, which ends the reply to a Sync, Query or
// FunctionCall (head), with the status the client gets.
func (x *exchange) relayReady(u *unit, head *expectation) error {
	sess, be := x.sess, x.be
	_, body, err := be.conn.Reader.ReadFrame()
	if err != nil {
		return err
	}
	if len(body) != 1 {
		return fmt.Errorf("malformed ReadyForQuery from %s", be.node)
	}
	be.conn.TxStatus = body[0]
	if head.typ != wire.MsgSync && head.typ != wire.MsgQuery && head.typ != wire.MsgFunctionCall {
		return fmt.Errorf("protocol out of step with %s: ReadyForQuery while a %q reply was due", be.node, head.typ)
	}
	be.expect.pop()
	// Any ReadyForQuery ends an unsynced batch: a simple Query after
	// it runs in the batch's implicit transaction and ends it.
	be.openBatch = false
	if head.typ == wire.MsgSync {
		be.skipping = false
	}
	sess.startReply(u)
	return sess.forwardFrame(wireReady(sess.scratch[:0], sess.clientTxStatus(u, x.out.failed(), body[0])))
}

// relayError relays an ErrorResponse to the expected message head, and
// drops the replies the node will now skip.
func (x *exchange) relayError(u *unit, head *expectation) error {
	sess, be := x.sess, x.be
	_, body, err := be.conn.Reader.ReadFrame()
	if err != nil {
		return err
	}
	severity, code, message := errorSeverityFields(body)
	if closing := deadConnectionReply(be, u, wire.MsgErrorResponse, severity, code, message); closing != nil {
		// The node is closing this connection. The client's own
		// connection must survive it: the session reports a lost
		// backend (08006) instead of passing the FATAL on.
		return closing
	}
	x.out.noteError(code)
	// A COPY that failed ends for the node, which drops the data the
	// client still sends (so does the session, outside a COPY).
	x.copying = false
	if head.duplicateOf != "" && code == sqlstateDuplicatePreparedStatement {
		body = duplicateStatementError(body, head.duplicateOf)
	}
	if head.typ != wire.MsgQuery && head.typ != wire.MsgSync && head.typ != wire.MsgFunctionCall {
		// An extended message failed: the node skips the rest of
		// the batch up to Sync, so those replies never come.
		be.undo(sess, head, true)
		be.expect.pop()
		for be.expect.len() > 0 && be.expect.front().typ != wire.MsgSync {
			be.undo(sess, be.expect.front(), false)
			be.expect.pop()
		}
		if be.expect.len() == 0 {
			be.skipping = true
		}
	}
	sess.startReply(u)
	if code == sqlstateQueryCanceled && sess.queryTimedOut.Load() {
		// The cancel was pgowl's (limits.query_timeout): say so, as
		// PostgreSQL's statement_timeout does.
		return sess.forwardFrame(sess.queryTimeoutError(be, body))
	}
	return sess.forwardFrame(appendFrame(sess.scratch[:0], wire.MsgErrorResponse, body))
}

// relayCommandComplete relays a CommandComplete, reading its tag when the
// outcome needs it (readsCommandTags).
func (x *exchange) relayCommandComplete(u *unit, head *expectation) error {
	sess, be := x.sess, x.be
	r := be.conn.Reader
	sess.startReply(u)
	if readsCommandTags(u.effects, len(sess.settings.pending)) {
		_, body, err := r.ReadFrame()
		if err != nil {
			return err
		}
		x.out.noteCommandTag(commandTag(body))
		if err := sess.forwardFrame(appendFrame(sess.scratch[:0], wire.MsgCommandComplete, body)); err != nil {
			return err
		}
	} else if _, _, err := r.CopyFrame(sess.client.w); err != nil {
		return &clientSideError{err}
	}
	x.out.completions++
	if completes(head, wire.MsgCommandComplete) {
		be.expect.pop()
	}
	return nil
}

// duplicateStatementError is the node's 42P05 ErrorResponse body with the
// client's statement name in the message instead of the managed one.
func duplicateStatementError(body []byte, name string) []byte {
	var msg pgproto3.ErrorResponse
	if err := msg.Decode(body); err != nil {
		return body
	}
	msg.Message = "prepared statement \"" + name + "\" already exists"
	frame, err := msg.Encode(nil)
	if err != nil {
		return body
	}
	return frame[wire.HeaderSize:]
}

// deadConnectionReply returns the error an ErrorResponse ('E') or
// NoticeResponse ('N') with these fields stands for when it says the node is
// closing the connection: a FATAL (or PANIC), or, before any reply of the
// unit reached the client, the WARNING with which since PostgreSQL 14 a crash
// restart ends idle backends before closing them (one that comes first was
// there before the request: the dead connection's, not the statement's).
// Otherwise nil.
func deadConnectionReply(be *backend, u *unit, typ byte, severity, code, message string) *backendClosing {
	if typ == wire.MsgErrorResponse && (severity == "FATAL" || severity == "PANIC") || typ == wire.MsgNoticeResponse && !u.forwarded && code == sqlstateCrashShutdown {
		return &backendClosing{node: be.node, code: code, message: message}
	}
	return nil
}

// backendClosing is a FATAL error from a node, which closes the connection.
type backendClosing struct{ node, code, message string }

func (e *backendClosing) Error() string {
	return fmt.Sprintf("%s closed the connection: %s (SQLSTATE %s)", e.node, e.message, e.code)
}

// startReply marks the unit's first reply to the client, sending the
// routing NOTICE right before it.
func (sess *session) startReply(u *unit) {
	if u.forwarded {
		return
	}
	u.forwarded = true
	if u.noticePending {
		u.noticePending = false
		sess.writeNotice(u.decision, &u.guard)
	}
}

// forwardFrame writes a whole frame to the client.
func (sess *session) forwardFrame(frame []byte) error {
	return sess.client.write(frame)
}

// undo reverts what an expected message would have changed, because the node
// skipped it, or ran it and failed (failed). An unnamed Parse that failed
// still dropped the connection's unnamed statement: PostgreSQL releases the
// previous one before it parses, so neither the node nor the client has one.
func (be *backend) undo(sess *session, e *expectation, failed bool) {
	if e.typ == wire.MsgClose && !failed {
		// A skipped Close closed nothing.
		switch {
		case e.unnamed:
			be.restoreUnnamed(e.prevUnnamed)
			sess.statements.restore(e.clientPrev)
		case e.stmt != nil:
			sess.statements.restore(e.stmt)
		}
		return
	}
	if e.typ != wire.MsgParse {
		return
	}
	switch {
	case e.unnamed && failed:
		be.markUnnamed(0)
	case e.unnamed:
		be.restoreUnnamed(e.prevUnnamed)
	case e.serverName != "" && e.reparsed && !failed:
		// The Close before it was skipped too: the old statement stays.
	case e.serverName != "":
		be.statements().drop(e.serverName)
	}
	if e.clientOwn && e.stmt != nil {
		sess.statements.undoParse(e.stmt, e.clientPrev, failed)
	}
}

// forwardOwedSync forwards the client's Sync that the node answers in place of the batch's (see
// exchange.syncOwed), once every reply before it was relayed: Flushes on the way are forwarded,
// COPY data after a failed COPY is dropped, as the node would drop it.
func (sess *session) forwardOwedSync(be *backend, x *exchange) error {
	w := be.conn.Writer
	for x.syncOwed {
		typ, body, err := sess.client.readFrame()
		if err != nil {
			return err
		}
		switch typ {
		case wire.MsgCopyData, wire.MsgCopyDone, wire.MsgCopyFail:
			continue
		case wire.MsgSync:
			x.syncOwed = false
		case wire.MsgFlush:
		default:
			return &clientSideError{protocolViolation("unexpected message type %q after a COPY from stdin in the extended protocol: a Sync must come first", typ)}
		}
		if _, err := w.Write(appendFrame(sess.scratch[:0], typ, body)); err != nil {
			return err
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// copyIn forwards the client's COPY data to the backend until CopyDone or
// CopyFail (ended reports it), or until the node sends something first: an
// ErrorResponse when the COPY failed midway, which the client must see at
// once (a client stops sending its data when it does), or a notice. The
// relay passes that on and, unless it ended the COPY, calls copyIn again.
// While copyIn reads the client, a watcher waits for the node's next frame;
// copyIn looks at it between client messages and returns only once the
// watcher is done with the node's reader.
func (sess *session) copyIn(be *backend, x *exchange) (ended bool, err error) {
	if err := sess.client.flush(); err != nil {
		return false, err
	}
	if be.conn.Reader.Buffered() > 0 {
		return false, nil // the node has spoken already
	}
	var nodeSpoke atomic.Bool
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		be.conn.Reader.PeekHeader() // an error here meets the relay again
		nodeSpoke.Store(true)
	}()
	defer func() { <-watched }()
	w := be.conn.Writer
	for {
		if nodeSpoke.Load() {
			return false, w.Flush()
		}
		typ, body, err := sess.client.readFrame()
		if err != nil {
			// The client is gone: abort the COPY so the node does not wait.
			w.Write(appendFrame(sess.scratch[:0], wire.MsgCopyFail, []byte("client connection lost\x00")))
			w.Flush()
			return true, err
		}
		switch typ {
		case wire.MsgCopyData, wire.MsgFlush, wire.MsgSync, wire.MsgCopyDone, wire.MsgCopyFail:
		default:
			// PostgreSQL ends the connection here (08P01: protocol synchronization lost). The
			// node, which waits for data that will not come (a cancel does not stop a COPY
			// waiting for its client), is told the COPY failed, so that it answers and the
			// backend is free again; the frame is not passed on.
			w.Write(appendFrame(sess.scratch[:0], wire.MsgCopyFail, []byte("pgowl: the client broke the COPY protocol\x00")))
			w.Flush()
			violation := protocolViolation("unexpected message type %q during COPY from stdin", typ)
			sess.fail(violation)
			return true, &clientSideError{violation}
		}
		if _, err := w.Write(appendFrame(sess.scratch[:0], typ, body)); err != nil {
			return true, err
		}
		switch typ {
		case wire.MsgCopyDone, wire.MsgCopyFail:
			if x.extendedCopy {
				// In the extended protocol the node holds its answer to the COPY's end until a
				// Flush or Sync, which the client may send only once it has the answer (a
				// Sync owed is forwarded later: forwardOwedSync). pgowl's own Flush asks for
				// it; it has no reply of its own.
				w.Write(appendFrame(sess.scratch[:0], wire.MsgFlush, nil))
			}
			return true, w.Flush()
		}
	}
}
