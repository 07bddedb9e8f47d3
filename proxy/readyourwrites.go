package proxy

import (
	"context"
	"encoding/binary"
	"strings"
	"sync"
	"time"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/route"
	"github.com/pgowl/pgowl/wire"
)

// Read your writes (routing.read_your_writes). The rules, decided in
// route.Plan from the session fact SessionFacts.ReadAfter; this file does
// the I/O they need:
//
//   - After a unit that ran on the primary and may have written, the
//     session's position is unsettled. In session scope the next read
//     settles it first: it reads pg_current_wal_insert_lsn() on a primary
//     backend (the session's, or one from the pool), which covers the
//     write; a session that only writes never runs it. A monitor sample of
//     the primary sent after the write covers it as well: that settles it
//     without the round trip, also when no primary backend became free
//     within pool.acquire_timeout (the read would otherwise go to the
//     primary and wait for a backend a second time). In user scope it is
//     read at once on the unit's backend, once that is idle, after the
//     client's replies are flushed (the client is not kept waiting). A unit "may have written" when it ran on the
//     primary and the classifier found a write, a writing or unknown
//     function, or could not tell (unitMayWrite); inside a transaction
//     block that counts when the block commits, and not when it rolls back.
//     These units skip it: every unit on a standby; a read-only unit on the
//     primary (a fallback, NODE_LOCAL_STATS, a /*pgowl:primary*/ read); a
//     row lock; a lone BEGIN, COMMIT or ROLLBACK; a unit that only prepares.
//   - A read then goes only to a standby known to have replayed that
//     position. The monitor's samples are older than a fresh write, so the
//     proxy asks the chosen standby's backend for pg_last_wal_replay_lsn()
//     (one round trip, only while the known position is behind), and asks
//     again, with growing pauses, until routing.read_your_writes_wait has
//     passed. Then the plan sends the read to the primary
//     (READ_YOUR_WRITES) or refuses it.
//   - A standby replays only what its primary has flushed. A position past
//     the primary's flush position as last seen (by the read of the
//     position, or by the monitor's latest sample, which reads the
//     primary's pg_current_wal_flush_lsn()) cannot be on a standby yet:
//     with synchronous_commit = off the WAL writer flushes it up to
//     wal_writer_delay later. Such a read asks no standby and goes to the
//     primary (READ_YOUR_WRITES) unless a standby is already seen past it.
//     While the session's last position read is in that state, a newer
//     write's position is not read either (settleCanWait): the read goes
//     to the primary whatever it is. A session that writes faster than the
//     WAL writer flushes thus reads on the primary at the cost of a read.
//   - In user scope the position is shared by the sessions of one user and
//     database (userWritePositions): a writing session announces that a
//     position is being read before its client gets the ReadyForQuery, and
//     a read of another session of the user waits for it (bounded by
//     read_your_writes_wait), so that a write on one pooled connection and
//     a read on the next are ordered.

// readYourWrites is the session's part that keeps the WAL position its
// reads must see. It never takes *session.
type readYourWrites struct {
	// own is the position after the session's last writing unit.
	own route.WritePosition
	// token is the position set with pgowl.read_after (SET or startup option).
	token route.WritePosition
	// flushSeen is the primary's flush position when own was read. With
	// synchronous_commit = off a commit is past it until the WAL writer
	// flushes it, and no standby can have it before then (see notYetFlushed).
	flushSeen route.WritePosition
	// unsettled: a unit may have written on the primary since own was read. unsettledSince is
	// when the last such unit's replies were in: a sample of the primary's position sent after
	// it covers the write (settleWritePosition).
	unsettled      bool
	unsettledSince time.Time
	// inTransaction: a unit may have written inside the open transaction
	// block; it counts once the block commits, and not if it rolls back.
	inTransaction bool
	// learned are standbys' replay positions asked of them, with when; an
	// entry counts until the monitor has a sample of the node taken later.
	learned   []route.NodeReplay
	learnedAt []time.Time
}

// learn records what node answered it had replayed.
func (r *readYourWrites) learn(node string, lsn route.LSN, at time.Time) {
	for i := range r.learned {
		if r.learned[i].Node == node {
			if lsn > r.learned[i].LSN {
				r.learned[i].LSN = lsn
			}
			r.learnedAt[i] = at
			return
		}
	}
	r.learned = append(r.learned, route.NodeReplay{Node: node, LSN: lsn})
	r.learnedAt = append(r.learnedAt, at)
}

// fresh drops the learned positions the snapshot has newer samples of, and
// returns the rest.
func (r *readYourWrites) fresh(snap *route.Snapshot) []route.NodeReplay {
	kept := 0
	for i := range r.learned {
		stale := false
		for j := range snap.Nodes {
			if n := &snap.Nodes[j]; n.Name == r.learned[i].Node && (n.SampledAt.After(r.learnedAt[i]) || n.Role != route.RoleStandby) {
				stale = true
			}
		}
		if !stale {
			r.learned[kept], r.learnedAt[kept] = r.learned[i], r.learnedAt[i]
			kept++
		}
	}
	r.learned, r.learnedAt = r.learned[:kept], r.learnedAt[:kept]
	return r.learned
}

// userKey identifies a user's sessions on one database.
type userKey struct{ user, database string }

// userWritePositions is the write position shared by the sessions of each
// user and database (routing.read_your_writes: user). The zero value is ready.
type userWritePositions struct {
	mu      sync.Mutex
	entries map[userKey]*userWrites
}

// userWrites is one user's shared position, and the reads of it in flight.
type userWrites struct {
	pos route.WritePosition
	// flushSeen is the primary's flush position when pos was read.
	flushSeen route.WritePosition
	// unreadSince, when not zero, is when a read of the position of a write a session of the
	// user committed failed or could not be made (no primary backend to be had without waiting
	// beside a chained transaction, the node's error, a failover): the user's reads must see
	// what the primary had by then. The first sample of the primary the monitor sent after it
	// gives that (sampledPositionSince); until one, the reads go where no standby is known to
	// have the write (unreadPosition).
	unreadSince time.Time
	// reading counts sessions whose client has (or is about to have) the
	// ReadyForQuery of a write whose position is not read yet; lastBegin is when the last of
	// them announced it (begin).
	reading   int
	lastBegin time.Time
	// changed is closed when reading drops or pos rises.
	changed chan struct{}
}

func (u *userWritePositions) entry(k userKey) *userWrites {
	if u.entries == nil {
		u.entries = map[userKey]*userWrites{}
	}
	e := u.entries[k]
	if e == nil {
		e = &userWrites{changed: make(chan struct{})}
		u.entries[k] = e
	}
	return e
}

// begin announces that a session of k is reading the position of a write.
func (u *userWritePositions) begin(k userKey) {
	u.mu.Lock()
	e := u.entry(k)
	e.reading++
	e.lastBegin = time.Now()
	u.mu.Unlock()
}

// end settles what begin announced: the position rises to pos (zero: the
// read failed, and the position is unread since now); flush is the primary's
// flush position read with it.
func (u *userWritePositions) end(k userKey, pos, flush route.WritePosition) {
	u.mu.Lock()
	e := u.entry(k)
	e.reading--
	if pos.LSN == 0 {
		e.unreadSince = time.Now()
	}
	if raised := e.pos.Raise(pos); raised != e.pos {
		e.pos = raised
	}
	if flush.Timeline != e.flushSeen.Timeline || flush.LSN > e.flushSeen.LSN {
		e.flushSeen = flush
	}
	close(e.changed)
	e.changed = make(chan struct{})
	u.mu.Unlock()
}

// get returns k's position, after the reads in flight end or deadline passes,
// and the primary's flush position last read with one. A position left
// unread is taken from the first sample of the primary in snap sent after it
// (and kept), or is the unread position while snap has none; so is one whose
// read is still in flight at deadline, for this call only.
func (u *userWritePositions) get(ctx context.Context, k userKey, deadline time.Time, snap *route.Snapshot) (pos, flushSeen route.WritePosition) {
	for {
		u.mu.Lock()
		e := u.entries[k]
		if e == nil {
			u.mu.Unlock()
			return route.WritePosition{}, route.WritePosition{}
		}
		if !e.unreadSince.IsZero() {
			if sampled, ok := sampledPositionSince(snap, e.unreadSince); ok {
				e.pos, e.unreadSince = e.pos.Raise(sampled), time.Time{}
			}
		}
		pos, flushSeen, unread, reading, changed := e.pos, e.flushSeen, !e.unreadSince.IsZero(), e.reading, e.changed
		lastBegin := e.lastBegin
		u.mu.Unlock()
		wait := time.Until(deadline)
		if reading == 0 || wait <= 0 {
			if reading > 0 {
				// A read announced is still in flight past the wait (the node is slow to answer it,
				// or the unit's follow-ups before it are): its write may be on no standby yet. As
				// for a read that failed, the primary's position from a sample sent after the last
				// announcement covers it; without one, no standby is known to have it.
				if sampled, ok := sampledPositionSince(snap, lastBegin); ok {
					pos = pos.Raise(sampled)
				} else {
					unread = true
				}
			}
			if unread {
				pos = unreadPosition(snap, pos)
			}
			return pos, flushSeen
		}
		t := time.NewTimer(wait)
		select {
		case <-changed:
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		if ctx.Err() != nil {
			return pos, flushSeen
		}
	}
}

// readYourWritesScope is the configured routing.read_your_writes.
func (sess *session) readYourWritesScope() string {
	return sess.srv.live().cfg.Routing.ReadYourWrites
}

// readAfter is the position the session's next read must see: its own last
// write, its user's in user scope, and its token. unflushed says the primary
// has not flushed that position as far as pgowl knows (see notYetFlushed): no
// standby can have it before the WAL writer flushes it (wal_writer_delay),
// so the read takes a standby only if one is already seen to have it, and
// asks none.
func (sess *session) readAfter(ctx context.Context, snap *route.Snapshot) (pos route.WritePosition, unflushed bool) {
	r := &sess.ryw
	pos = r.token
	flushes := [2]route.WritePosition{r.flushSeen}
	switch sess.readYourWritesScope() {
	case config.ReadYourWritesSession, config.ReadYourWritesOff:
		// Off: r.own holds only the session's own changes of definitions (noteWrite).
		pos = pos.Raise(r.own)
	case config.ReadYourWritesUser:
		pos = pos.Raise(r.own)
		deadline := time.Now().Add(sess.srv.live().cfg.Routing.ReadYourWritesWait)
		shared, sharedFlush := sess.srv.userWrites.get(ctx, userKey{sess.user, sess.database}, deadline, snap)
		pos = pos.Raise(shared)
		flushes[1] = sharedFlush
	}
	return pos, notYetFlushed(pos, flushes[:], snap)
}

// notYetFlushed reports whether no standby can have replayed pos yet: the
// primary had not flushed it when last seen, by a read of the position
// (seen) or by the monitor's latest sample of the primary. A standby
// replays only WAL its primary has flushed; with synchronous_commit = off a
// commit is flushed by the WAL writer, up to wal_writer_delay (200 ms by
// default) later, and the monitor sees that within one interval. Only
// positions on the primary's own timeline count: across a promotion the
// plan's fork rules decide (route.readTarget), and the standby is asked.
func notYetFlushed(pos route.WritePosition, seen []route.WritePosition, snap *route.Snapshot) bool {
	if pos.LSN == 0 || pos.Timeline == 0 {
		return false
	}
	var flushed route.LSN
	known := false
	for _, f := range seen {
		if f.Timeline == pos.Timeline && f.LSN != 0 {
			flushed, known = max(flushed, f.LSN), true
		}
	}
	for i := range snap.Nodes {
		n := &snap.Nodes[i]
		if n.Role != route.RolePrimary || n.FlushPosition == 0 {
			continue
		}
		if n.Timeline != pos.Timeline {
			return false
		}
		flushed, known = max(flushed, n.FlushPosition), true
	}
	return known && pos.LSN > flushed
}

// replayKnownPast reports whether a standby is known (from the snapshot or
// the session's own questions) to have replayed pos.
func (r *readYourWrites) replayKnownPast(pos route.WritePosition, snap *route.Snapshot) bool {
	for i := range snap.Nodes {
		if n := &snap.Nodes[i]; n.Role == route.RoleStandby && n.WALPosition >= pos.LSN {
			return true
		}
	}
	for _, l := range r.fresh(snap) {
		if l.LSN >= pos.LSN {
			return true
		}
	}
	return false
}

// settleCanWait reports whether the session's read can go without reading
// its new write position (session scope): its last position read is not
// flushed on the primary and no standby is known past it, so no standby can
// have the later write either, and the read goes to the primary anyway.
// The position is read once a standby could have the older one. This spares
// a round trip on the primary after every write of a session that writes
// faster than the WAL writer flushes (synchronous_commit = off).
func (r *readYourWrites) settleCanWait(snap *route.Snapshot) bool {
	return r.own.LSN != 0 && notYetFlushed(r.own, []route.WritePosition{r.flushSeen}, snap) && !r.replayKnownPast(r.own, snap)
}

// unitMayWrite reports whether u, run on the primary, may have written
// data: the classifier found a write, a writing or unknown function, or
// could not tell. A lone transaction control statement (BEGIN, COMMIT,
// ROLLBACK), a lone LISTEN or UNLISTEN (only the primary takes them, but
// they write no data), a row lock, a read of node-local statistics and a
// unit that runs nothing write no data.
func unitMayWrite(u *unit) bool {
	if u.runsNothing || u.effects.Access == classify.Read || (u.effects.Statements == 1 && u.effects.Tx != classify.TxNone) {
		return false
	}
	if u.effects.Statements == 1 && u.effects.Session&(classify.SessionListen|classify.SessionUnlisten) != 0 {
		return false
	}
	switch u.effects.Reason {
	case classify.ReasonRowLock, classify.ReasonNodeLocalStats:
		return false
	}
	return true
}

// changesDefinitions reports whether u changes a definition that verdicts read: a function,
// view, type, domain or policy (classify.CatalogueChanges.Definitions), or what the classifier
// cannot name. With read_your_writes off, such a change of the session's own still leaves a
// position to settle: a standby that has not replayed it would run the old definition (a function
// that used to write fails there with 25006) while pgowl plans the session's statements on the
// new one. Tables and sequences created or dropped leave none: a standby without them fails the
// read (42P01), which is the staleness off accepts.
func changesDefinitions(u *unit) bool {
	c := u.effects.CatalogueChanges
	if !u.effects.CatalogueChange || c == nil {
		return u.effects.CatalogueChange
	}
	return c.Everything || c.Definitions
}

// noteWrite records what a unit that may have written leaves the session's reads to wait for
// (see the rules above), once its replies are in the client's buffer and before anything else
// runs on be. In user scope the position is to be read before another connection of the user
// can read: noteWrite announces it (userWrites.begin) before the client can have its
// ReadyForQuery, and reports so; readAnnouncedPosition reads it after the unit's follow-ups,
// which may now let the client have its reply (flushBeforeFollowUp). Nothing here runs on the
// node, so that a backend lost in a follow-up is dropped once the session has taken in the unit
// (afterUnit), and the write is recorded all the same.
func (sess *session) noteWrite(be *backend, u *unit, dec route.Decision) (announced bool) {
	scope := sess.readYourWritesScope()
	r := &sess.ryw
	// Off: only a change of definitions leaves a position (see changesDefinitions).
	counts := scope != config.ReadYourWritesOff || changesDefinitions(u)
	if !counts && !r.inTransaction || be.broken {
		return false
	}
	status := be.conn.TxStatus
	if be.role == route.RolePrimary && dec.Role == route.RolePrimary && unitMayWrite(u) && counts {
		if status == wire.TxIdle {
			r.unsettled = true // autocommitted (or a string that ended its transactions)
			r.unsettledSince = time.Now()
		} else {
			r.inTransaction = true
		}
	}
	if u.outcome.committed {
		if r.inTransaction {
			r.unsettled, r.unsettledSince = true, time.Now()
		}
		r.inTransaction = false
	}
	if status == wire.TxIdle {
		r.inTransaction = false // rolled back, or committed above
	}
	if !r.unsettled || scope != config.ReadYourWritesUser || be.role != route.RolePrimary {
		// Session scope reads the position lazily, when a read needs it
		// (settleWritePosition): a session that only writes pays nothing.
		return false
	}
	if status == wire.TxIdle && be.openBatch {
		// An open batch (a part sent at a Flush): its implicit transaction commits at its
		// Sync, and the position is read then, not before the commit.
		return false
	}
	sess.srv.userWrites.begin(userKey{sess.user, sess.database})
	return true
}

// readAnnouncedPosition reads the write position noteWrite announced (announced), on be once
// the unit's follow-ups are done (behind the session's catalogue read, if one is in flight
// there), and ends the announcement with it. It flushes the client's replies first: the client
// is not kept waiting for it.
func (sess *session) readAnnouncedPosition(be *backend, announced bool) {
	if !announced {
		return
	}
	key := userKey{sess.user, sess.database}
	// Left zero (the position not read), the user's reads take the primary's position from
	// the monitor's first sample after now instead.
	var pos, flush route.WritePosition
	defer func() { sess.srv.userWrites.end(key, pos, flush) }()
	if be.broken {
		return // lost in a follow-up
	}
	sess.settleCatalogueReadOn(be)
	on := be
	if !backendIdle(be) {
		if be.broken || be.conn.TxStatus == wire.TxIdle {
			return // lost with the catalogue read
		}
		// A commit that chained the next transaction (COMMIT AND CHAIN, or a string that
		// goes on with BEGIN): a query on be would run in that transaction and could take
		// its snapshot. Any other connection to the primary reads a position past the
		// commit, which is done: one beside be, if one is to be had without waiting.
		if on = sess.primaryBeside(be); on == nil {
			return
		}
		defer sess.giveBack(on)
	}
	if err := sess.client.w.Flush(); err != nil {
		return
	}
	pos, flush = sess.readWritePosition(on)
}

// giveBack returns a backend taken for one query of pgowl's own to the pool, in session pooling
// too (where releaseIdle keeps a session's backends); one that failed was dropped already.
func (sess *session) giveBack(be *backend) {
	if be.broken {
		return
	}
	sess.backends.forget(be)
	sess.srv.opts.Pool.Release(be.conn, be.conn.TxStatus == wire.TxIdle)
}

// primaryBeside returns another backend on be's node, beside be, when one is to be had without
// waiting (an idle pooled one, or a dial under the node's cap), or nil; the caller gives it back
// (releaseIdle).
func (sess *session) primaryBeside(be *backend) *backend {
	target, ok := sess.srv.live().targets[be.node]
	if !ok {
		return nil
	}
	c, err := sess.srv.opts.Pool.AcquireNow(context.Background(), target, sess.login)
	if err != nil || c == nil {
		return nil
	}
	return sess.backends.add(c, be.node, route.RolePrimary)
}

// backendIdle reports whether be is between transactions and batches, so
// that pgowl may run its own query there.
func backendIdle(be *backend) bool {
	return !be.broken && be.conn.TxStatus == wire.TxIdle && !be.openBatch && be.expect.len() == 0
}

// mayNeedWritePosition reports whether the read of u that r plans may have
// to wait for a write position: the session has one (or one to read), its
// user's may have one, or a definition change u rests on may (see
// definitionChanges), and the plan without it sends the read to a standby.
// A read that goes to the primary anyway (no standby configured, up or
// within the lag limit) neither reads the position nor waits for a standby.
func (sess *session) mayNeedWritePosition(r *route.PlanRequest, u *unit) bool {
	ryw := &sess.ryw
	scope := sess.readYourWritesScope()
	defs := sess.srv.definitions
	if defs.mayConcern(&u.effects) {
		defs.tidy(r.Snapshot, time.Now(), changeMemory(sess.srv.live().policy))
	}
	if ryw.token.LSN == 0 && scope != config.ReadYourWritesUser && !ryw.unsettled && ryw.own.LSN == 0 &&
		!defs.mayConcern(&u.effects) {
		return false
	}
	r.Now = time.Now()
	out, err := route.Plan(*r)
	return err == nil && out.Decision.Role == route.RoleStandby
}

// settleWritePosition reads the session's write position on the primary
// when a unit may have written since it was last read (session scope reads
// it lazily, only when a read needs it). The primary's insert position now
// covers that write. Without a primary, on failure, or when wait is waitNot
// and no primary backend is free now, the position stays as it was and is
// read again for the next read; known is then false, and a read that waited
// for it (not a prepare planned with waitNot) goes where no standby is known
// to have the write (unreadPosition).
func (sess *session) settleWritePosition(ctx context.Context, snap *route.Snapshot, wait poolWait) (known bool) {
	r := &sess.ryw
	if !r.unsettled || sess.readYourWritesScope() == config.ReadYourWritesUser {
		return true
	}
	if sess.settleFromSample(snap, true) {
		return true
	}
	pos, flush, answered := sess.readPrimaryPositions(ctx, snap, wait)
	if answered {
		r.settle(pos, flush)
		return true
	}
	// No primary backend was free (or the read failed): the monitor may have sampled the
	// primary since the write meanwhile, which covers it as well as a read would. Without it the
	// read goes to the primary, where it would wait for a backend a second time.
	return sess.settleFromSample(sess.srv.opts.Nodes.Snapshot(), false)
}

// settleFromSample settles the session's write position from the primary's insert position in
// snap when the monitor sent that sample after the session's last write: no round trip. With
// flushed, only a sample whose insert position was flushed as it was taken: one past its flush
// position (other sessions' WAL in flight) would send the read to the primary, where a read of
// the position now may find it flushed.
func (sess *session) settleFromSample(snap *route.Snapshot, flushed bool) bool {
	r := &sess.ryw
	if r.unsettledSince.IsZero() {
		return false
	}
	pos, ok := sampledPositionSince(snap, r.unsettledSince)
	if !ok {
		return false
	}
	flush := route.WritePosition{Timeline: pos.Timeline}
	for i := range snap.Nodes {
		if n := &snap.Nodes[i]; n.Role == route.RolePrimary && n.Timeline == pos.Timeline && n.WALPosition == pos.LSN {
			flush.LSN = n.FlushPosition // sampled with it
		}
	}
	if flushed && flush.LSN < pos.LSN {
		return false
	}
	r.settle(pos, flush)
	return true
}

// unreadPosition stands for the position of a write the session made whose position could not
// be read (every primary backend busy past pool.acquire_timeout, a failure): no standby can be
// known to have replayed it, so the read goes to the primary with READ_YOUR_WRITES, or is
// refused under routing.read_your_writes_fallback: reject, never to a standby that may not
// have the write. It is on the primary's timeline, so that no fork rule sends it elsewhere.
func unreadPosition(snap *route.Snapshot, known route.WritePosition) route.WritePosition {
	for i := range snap.Nodes {
		if n := &snap.Nodes[i]; n.Role == route.RolePrimary && n.Timeline != 0 {
			return route.WritePosition{LSN: route.UnreadLSN, Timeline: n.Timeline}
		}
	}
	return known
}

// sampledPositionSince returns the insert position of the primary in snap when the monitor sent
// the sample it comes from after since: the primary's position then covers every write committed
// before since.
func sampledPositionSince(snap *route.Snapshot, since time.Time) (route.WritePosition, bool) {
	for i := range snap.Nodes {
		if n := &snap.Nodes[i]; n.Role == route.RolePrimary && n.Timeline != 0 && n.WALPosition != 0 && n.SampledAt.After(since) {
			return route.WritePosition{LSN: n.WALPosition, Timeline: n.Timeline}, true
		}
	}
	return route.WritePosition{}, false
}

// readPrimaryPositions reads the primary's insert and flush positions on a
// primary backend: the session's, or one from the pool (waiting as wait
// says), which goes back to it after. answered is false without a primary,
// without a backend free, or on failure; the positions are zero when the
// node answered but is in recovery (a failover under the session).
func (sess *session) readPrimaryPositions(ctx context.Context, snap *route.Snapshot, wait poolWait) (pos, flush route.WritePosition, answered bool) {
	i, err := route.Primary(snap, sess.srv.live().policy, time.Now())
	if err != nil {
		return pos, flush, false
	}
	node := snap.Nodes[i].Name
	had := sess.backendOn(node) != nil
	be, err := sess.backendFor(ctx, node, route.RolePrimary, wait)
	if err != nil || be == nil {
		return pos, flush, false
	}
	if backendIdle(be) {
		pos, flush, answered = sess.queryWritePosition(be)
	}
	if !had && !be.broken && sess.held != be {
		sess.releaseIdle(be)
	}
	return pos, flush, answered
}

// readWritePosition reads the primary's insert and flush positions on be
// and raises the session's own position; flush is the flush position read
// with it. A failure leaves the position as it was.
func (sess *session) readWritePosition(be *backend) (pos, flush route.WritePosition) {
	pos, flush, answered := sess.queryWritePosition(be)
	if answered {
		sess.ryw.settle(pos, flush)
	}
	return pos, flush
}

// settle takes in the primary's positions read after the session's writes:
// the position is settled, and raised to pos unless the node was in
// recovery (pos zero: the write is on a node that is no longer the
// primary, nothing to wait for).
func (r *readYourWrites) settle(pos, flush route.WritePosition) {
	r.unsettled = false
	if pos.LSN == 0 {
		return
	}
	r.own = r.own.Raise(pos)
	if flush.Timeline != r.flushSeen.Timeline || flush.LSN > r.flushSeen.LSN {
		r.flushSeen = flush
	}
}

// queryWritePosition runs writePositionQuery on be, a primary backend.
// answered is false when the query failed (be is dropped); the positions
// are zero when the node answered that it is in recovery. The positions
// cover every definition change told before the query: they settle those
// whose position was not read yet (definition_changes.go), so that a
// session's read after its own change does not read it twice.
func (sess *session) queryWritePosition(be *backend) (pos, flush route.WritePosition, answered bool) {
	defs := sess.srv.definitions
	upTo := defs.lastTold()
	defer func() {
		if pos.LSN != 0 && upTo != 0 {
			defs.settle(upTo, pos, flush)
		}
	}()
	var insert, flushText string
	code, err := sess.runOnBackend(be, writePositionQuery, func(body []byte) { insert, flushText = firstColumns(body) })
	if err != nil {
		sess.dropBackend(be)
		return pos, flush, false
	}
	lsn, perr := route.ParseLSN(insert)
	if code != "" || perr != nil {
		return pos, flush, true
	}
	flushed, _ := route.ParseLSN(flushText)
	timeline := sess.nodeTimeline(be.node)
	return route.WritePosition{LSN: lsn, Timeline: timeline}, route.WritePosition{LSN: flushed, Timeline: timeline}, true
}

// writePositionQuery reads the primary's insert position, which covers
// every commit so far (with synchronous_commit = off the write and flush
// positions can be behind a commit), and its flush position.
const writePositionQuery = `SELECT pg_catalog.pg_current_wal_insert_lsn(), pg_catalog.pg_current_wal_flush_lsn()`

// nodeTimeline is the node's timeline in the latest snapshot (0: unknown).
func (sess *session) nodeTimeline(node string) uint32 {
	snap := sess.srv.opts.Nodes.Snapshot()
	for i := range snap.Nodes {
		if snap.Nodes[i].Name == node {
			return snap.Nodes[i].Timeline
		}
	}
	return 0
}

// firstColumns returns a DataRow's first two columns as text ("" for NULL
// or missing).
func firstColumns(body []byte) (first, second string) {
	if len(body) < 2 {
		return "", ""
	}
	count := int(binary.BigEndian.Uint16(body))
	rest := body[2:]
	var cols [2]string
	for i := 0; i < count && i < 2; i++ {
		if len(rest) < 4 {
			break
		}
		n := int32(binary.BigEndian.Uint32(rest))
		rest = rest[4:]
		if n < 0 {
			continue
		}
		if int(n) > len(rest) {
			break
		}
		cols[i] = string(rest[:n])
		rest = rest[n:]
	}
	return cols[0], cols[1]
}

// Pauses between two questions to a standby about its replay position.
const (
	firstReplayPause = 200 * time.Microsecond
	maxReplayPause   = 5 * time.Millisecond
)

// awaitReplay asks the standby the plan chose whether it has replayed the
// session's write position, and plans again with its answer, until the plan
// no longer waits or routing.read_your_writes_wait has passed. A standby
// that cannot answer (no connection, pool busy, promoted) is not waited for.
// A backend taken only to ask goes back to the pool when the read goes
// elsewhere.
func (sess *session) awaitReplay(ctx context.Context, r *route.PlanRequest, out route.Outcome) (route.Outcome, error) {
	deadline := time.Now().Add(sess.srv.live().cfg.Routing.ReadYourWritesWait)
	pause := firstReplayPause
	var asked []*backend
	defer func() {
		for _, be := range asked {
			if be.node != out.Decision.Node && !be.broken && sess.held != be {
				sess.releaseIdle(be)
			}
		}
	}()
	for out.AwaitReplay {
		dec := out.Decision
		had := sess.backendOn(dec.Node) != nil
		be, err := sess.backendFor(ctx, dec.Node, route.RoleStandby, waitInTurn)
		var lsn route.LSN
		answered := false
		if err == nil {
			if !had {
				asked = append(asked, be)
			}
			lsn, err = sess.askReplay(be)
			answered = err == nil
		} else if sess.planAroundLoginRefusal(r, dec, err) {
			// As when the read itself meets the refusal: another standby is asked.
			err = nil
		}
		switch {
		case err != nil:
			sess.log.Debug().Err(err).Str("node", dec.Node).Msg("read your writes: the standby could not say what it replayed")
			r.Session.ReadAfterWaitOver = true
		case answered:
			sess.ryw.learn(dec.Node, lsn, time.Now())
		}
		now := time.Now()
		if !now.Before(deadline) {
			r.Session.ReadAfterWaitOver = true
		}
		r.Snapshot = sess.srv.opts.Nodes.Snapshot()
		r.Session.Replayed = sess.ryw.fresh(r.Snapshot)
		r.Now = now
		if out, err = route.Plan(*r); err != nil || !out.AwaitReplay {
			return out, err
		}
		sleep := min(pause, time.Until(deadline))
		if sleep > 0 {
			t := time.NewTimer(sleep)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return out, ctx.Err()
			}
		}
		pause = min(2*pause, maxReplayPause)
	}
	return out, nil
}

// askReplay asks a standby's backend what it has replayed.
func (sess *session) askReplay(be *backend) (route.LSN, error) {
	if be.conn.TxStatus != wire.TxIdle || be.openBatch || be.expect.len() > 0 {
		return 0, errBackendBusy
	}
	var text string
	code, err := sess.runOnBackend(be, "SELECT pg_catalog.pg_last_wal_replay_lsn()", func(body []byte) { text, _ = firstColumns(body) })
	if err != nil {
		sess.dropBackend(be)
		return 0, err
	}
	if code != "" || text == "" {
		return 0, errNotInRecovery
	}
	return route.ParseLSN(text)
}

// readAfterError is why a standby could not say what it replayed.
type readAfterError string

func (e readAfterError) Error() string { return string(e) }

const (
	errBackendBusy   = readAfterError("the session's backend there is busy")
	errNotInRecovery = readAfterError("the node is not in recovery")
)

// setReadAfterToken sets the session's token (pgowl.read_after); "" clears it.
func (sess *session) setReadAfterToken(value string) *clientError {
	if strings.TrimSpace(value) == "" {
		sess.ryw.token = route.WritePosition{}
		return nil
	}
	lsn, err := route.ParseLSN(value)
	if err != nil {
		return &clientError{SQLState: sqlstateInvalidParamValue,
			Message: "pgowl: invalid value for parameter \"pgowl.read_after\": \"" + value + "\"",
			Hint:    "Use a WAL position such as '0/3000148', as SHOW pgowl.write_position returns it."}
	}
	sess.ryw.token = route.WritePosition{LSN: lsn}
	return nil
}

// startupReadAfter takes -c pgowl.read_after=X/Y out of the startup
// options (the nodes never see it, and pooled logins do not differ by it)
// and sets the session's token from it.
func (sess *session) startupReadAfter(params map[string]string) *clientError {
	options, ok := params["options"]
	if !ok || !strings.Contains(options, "pgowl.read_after") {
		return nil
	}
	fields := strings.Fields(options)
	kept := fields[:0]
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		var value string
		switch {
		case f == "-c" && i+1 < len(fields) && strings.HasPrefix(fields[i+1], "pgowl.read_after="):
			value = strings.TrimPrefix(fields[i+1], "pgowl.read_after=")
			i++
		case strings.HasPrefix(f, "-cpgowl.read_after="):
			value = strings.TrimPrefix(f, "-cpgowl.read_after=")
		case strings.HasPrefix(f, "--pgowl.read_after="):
			value = strings.TrimPrefix(f, "--pgowl.read_after=")
		default:
			kept = append(kept, f)
			continue
		}
		if err := sess.setReadAfterToken(value); err != nil {
			return err
		}
	}
	if len(kept) == 0 {
		delete(params, "options")
	} else {
		params["options"] = strings.Join(kept, " ")
	}
	return nil
}
