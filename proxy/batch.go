package proxy

import (
	"context"
	"time"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/route"
)

// batch collects an extended-protocol batch until Sync or Flush: the client's
// frames as they came, and what the proxy needs to know about each.
type batch struct {
	buf  []byte
	msgs []batchMsg
}

type batchMsg struct {
	typ      byte
	off, end int           // the frame within batch.buf
	name     string        // Parse: new statement; Bind: source statement; Describe/Close: target
	kind     byte          // Describe/Close: 'S' or 'P'
	portal   string        // Bind: the portal it creates; Execute: the portal it runs
	stmt     *preparedStmt // Parse: the statement it creates
}

func (b *batch) reset() {
	b.buf = b.buf[:0]
	clear(b.msgs)
	b.msgs = b.msgs[:0]
	if cap(b.buf) > 4*maxBatchBytes {
		b.buf = nil
	}
}

// add records one client message of the batch.
func (b *batch) add(sess *session, typ byte, body []byte) error {
	m := batchMsg{typ: typ, off: len(b.buf)}
	switch typ {
	case 'P':
		pm, err := decodeParse(body)
		if err != nil {
			return err
		}
		st := &preparedStmt{name: pm.name, sql: pm.query, paramTypes: pm.paramTypes}
		st.frame = appendFrame(make([]byte, 0, len(body)+5), 'P', body)
		st.effects = sess.classify(pm.query, pm.paramTypes)
		m.name, m.stmt = pm.name, st
	case 'B':
		portal, stmt, err := decodeBindNames(body)
		if err != nil {
			return err
		}
		m.portal, m.name = portal, stmt
	case 'D', 'C':
		kind, name, err := decodeTargeted(body)
		if err != nil {
			return err
		}
		m.kind, m.name = kind, name
	case 'E':
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

func (b *batch) addSync() {
	m := batchMsg{typ: 'S', off: len(b.buf)}
	b.buf = append(b.buf, 'S', 0, 0, 0, 4)
	m.end = len(b.buf)
	b.msgs = append(b.msgs, m)
}

// statements returns, in order, the statements the batch parses or runs.
func (b *batch) statements(sess *session) []*preparedStmt {
	var out []*preparedStmt
	parsed := map[string]*preparedStmt(nil)
	portals := map[string]*preparedStmt(nil)
	lookup := func(name string) *preparedStmt {
		if st, ok := parsed[name]; ok {
			return st
		}
		if name == "" {
			return sess.unnamed
		}
		return sess.stmts[name]
	}
	for i := range b.msgs {
		m := &b.msgs[i]
		switch m.typ {
		case 'P':
			if parsed == nil {
				parsed = make(map[string]*preparedStmt, 2)
			}
			parsed[m.name] = m.stmt
			out = append(out, m.stmt)
		case 'B':
			if st := lookup(m.name); st != nil {
				if portals == nil {
					portals = make(map[string]*preparedStmt, 2)
				}
				portals[m.portal] = st
				out = append(out, st)
			}
		case 'D':
			if m.kind == 'S' {
				if st := lookup(m.name); st != nil {
					out = append(out, st)
				}
			}
		}
	}
	return out
}

// combine merges the effects of a batch's statements: it reads only when
// every statement reads, and the first writer gives the reason.
func combine(stmts []*preparedStmt) classify.Effects {
	if len(stmts) == 0 {
		return classify.Effects{Access: classify.Read, Reason: classify.ReasonReadOnly, Subject: "protocol bookkeeping"}
	}
	eff := stmts[0].effects
	for _, st := range stmts[1:] {
		e := st.effects
		if st == stmts[0] {
			continue
		}
		if eff.Access == classify.Read && e.Access == classify.Write {
			eff.Access, eff.Reason, eff.Subject = e.Access, e.Reason, e.Subject
		}
		eff.Session |= e.Session
		if eff.Tx == classify.TxNone {
			eff.Tx = e.Tx
		}
		eff.Statements += e.Statements
	}
	return eff
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
	u := unit{start: time.Now(), effects: combine(stmts), expectsReady: synced}
	if len(stmts) > 0 {
		u.sql = stmts[0].sql
		if len(stmts) == 1 || (len(stmts) == 2 && stmts[0] == stmts[1]) {
			if len(stmts[0].paramTypes) == 0 {
				u.setSQL = stmts[0].sql
			}
		}
	}
	return sess.routeAndRun(ctx, &u, func(be *backend) {
		sess.writeBatch(be, b)
		if !synced {
			be.openBatch = true
		}
	})
}

// writeBatch writes the batch to be, preparing statements be lacks, and
// enters each message in be's expectation queue.
func (sess *session) writeBatch(be *backend, b *batch) {
	w := be.conn.Writer
	for i := range b.msgs {
		m := &b.msgs[i]
		frame := b.buf[m.off:m.end]
		if be.skipping {
			// The node discards everything up to Sync after an error.
			w.Write(frame)
			if m.typ == 'S' {
				be.expect.push(expectation{typ: 'S'})
			}
			continue
		}
		switch m.typ {
		case 'P':
			sess.writeClientParse(be, m)
		case 'B':
			sess.ensurePrepared(be, m.name)
			be.expect.push(expectation{typ: 'B'})
		case 'D':
			if m.kind == 'S' {
				sess.ensurePrepared(be, m.name)
			}
			be.expect.push(expectation{typ: 'D'})
		case 'E':
			be.expect.push(expectation{typ: 'E'})
		case 'C':
			e := expectation{typ: 'C'}
			if m.kind == 'S' {
				e.closesStm, e.stmtName = true, m.name
				if m.name == "" {
					be.unnamed, sess.unnamed = nil, nil
				} else {
					e.prevStmt = be.stmts[m.name]
					delete(be.stmts, m.name)
					delete(sess.stmts, m.name)
				}
			}
			be.expect.push(e)
		case 'S':
			be.expect.push(expectation{typ: 'S'})
		}
		w.Write(frame)
	}
}

// writeClientParse enters a client's Parse, first closing a stale statement
// of the same name that an earlier use left on this backend.
func (sess *session) writeClientParse(be *backend, m *batchMsg) {
	st := m.stmt
	if m.name == "" {
		be.expect.push(expectation{typ: 'P', unnamed: true, stmt: st, prevStmt: be.unnamed, clientOwn: true, clientPrev: sess.unnamed})
		be.unnamed, sess.unnamed = st, st
		return
	}
	if sess.stmts == nil {
		sess.stmts = make(map[string]*preparedStmt)
	}
	live := sess.stmts[m.name]
	if cur := be.stmts[m.name]; cur != nil && cur != live {
		sess.injectClose(be, m.name, cur)
	}
	if live != nil {
		// The client parses a name it has not closed: the node will refuse it
		// where it holds the statement, as PostgreSQL does.
		if be.stmts[m.name] == live {
			be.expect.push(expectation{typ: 'P', stmtName: m.name, stmt: nil, prevStmt: live})
			return
		}
	}
	be.expect.push(expectation{typ: 'P', stmtName: m.name, stmt: st, prevStmt: be.stmts[m.name], clientOwn: true, clientPrev: live})
	be.stmts[m.name] = st
	sess.stmts[m.name] = st
}

// ensurePrepared makes sure be holds the client's statement name, preparing
// it there (with its reply swallowed) when it does not.
func (sess *session) ensurePrepared(be *backend, name string) {
	w := be.conn.Writer
	if name == "" {
		st := sess.unnamed
		if st == nil || be.unnamed == st {
			return
		}
		w.Write(st.frame)
		be.expect.push(expectation{typ: 'P', swallow: true, unnamed: true, stmt: st, prevStmt: be.unnamed})
		be.unnamed = st
		return
	}
	st := sess.stmts[name]
	if st == nil || be.stmts[name] == st {
		return
	}
	if cur := be.stmts[name]; cur != nil {
		sess.injectClose(be, name, cur)
	}
	w.Write(st.frame)
	be.expect.push(expectation{typ: 'P', swallow: true, stmtName: name, stmt: st})
	be.stmts[name] = st
}

// injectClose closes a statement on be that the client no longer has under that name.
func (sess *session) injectClose(be *backend, name string, cur *preparedStmt) {
	be.conn.Writer.Write(appendTargetedFrame(sess.scratch[:0], 'C', 'S', name))
	be.expect.push(expectation{typ: 'C', swallow: true, closesStm: true, stmtName: name, prevStmt: cur})
	delete(be.stmts, name)
}

var _ = route.ReasonInTransaction
