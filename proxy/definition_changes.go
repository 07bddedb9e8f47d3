package proxy

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/route"
)

// Definition changes and the reads of every session (issue 17's rule for a session's own
// changes, carried to the others).
//
// A session's own change of a definition (a function, view, type, domain or policy) is read your
// writes (readyourwrites.go). Every other session's statements are classified with the same
// catalogue, which takes the change in as soon as the session that made it tells it
// (classifierState.tellChanges). A read whose verdict rests on a changed name, sent to a standby
// that has not replayed the change, runs there a definition the verdict was not made with: a
// function that used to write fails with 25006, one just created is not found (42883).
//
// So the server remembers each definition change a session tells, per database, with the names
// it changed (classify.CatalogueChanges), until every standby is seen past it. A read that may go
// to a standby and whose verdict rests on one of those names (classify.Effects.RestsOn) must see
// the change, as a session's reads see its own writes: the plan's ReadAfter is raised to the
// change's position, so the read waits for a standby to replay it (routing.read_your_writes_wait)
// and then goes to the primary with READ_YOUR_WRITES, or is refused under
// read_your_writes_fallback: reject. A read that rests on no changed name is not held up.
//
// A change's position is the primary's insert position read after the change was told, which
// covers its commit: the monitor's first sample of the primary sent after it, or, for a read that
// needs it sooner, a read of it on a primary backend, which serves every change told before that
// read began. A change every standby is seen past is forgotten (tidy, at most every tidyEvery,
// by the reads that may go to a standby), and so is one older than changeMemory.
//
// The catalogue also tells what its reads find changed that no session told (definitions.found,
// catalog.Options.Found, classify.ChangedDefinitions): a change made past pgowl (on the primary
// itself, through another pgowl instance), found by a statement that names a missing object or by
// the periodic whole read. It is remembered before the catalogue that holds it is served. Until
// the catalogue finds such a change, reads are planned with the old definition, and a standby
// that replayed the change may run the new one (a known gap).
//
// The position of a change still unknown when a read needs it is read on a primary backend: in
// session pooling the session keeps that backend, as it keeps one after its own writes. When it
// cannot be read (no primary, no backend free), the read is planned without that change.

// definitionChanges are the definition changes sessions told, per database, that some standby
// may not have replayed yet. The zero value is ready.
type definitionChanges struct {
	// pending counts remembered changes over all databases; read without mu, so that a read
	// pays nothing while there are none.
	pending atomic.Int64
	mu      sync.Mutex
	// told numbers the changes told: the last one's seq.
	told       uint64
	byDatabase map[string][]definitionChange
	// nextTidy is when tidy may next run (Unix nanoseconds).
	nextTidy atomic.Int64
}

// definitionChange is one change told, or several folded into one (see maxDefinitionChanges).
type definitionChange struct {
	seq uint64
	// names are the names changed (functions, relations, types); all: any name may have.
	names []string
	all   bool
	// pos is the primary's insert position read after the change was told, flush its flush
	// position then; zero until read.
	pos, flush route.WritePosition
	// at is when the change was told, for forgetting it (definitionChangeMemory).
	at time.Time
}

// maxDefinitionChanges bounds the changes remembered per database; past it they are folded into
// one change of every name.
const maxDefinitionChanges = 256

// definitionChangeMemory bounds how long a change is remembered when some standby is never seen
// past it (one that is down), unless twice routing.max_replica_lag is longer (changeMemory): by
// then such a standby is past the lag limit, or has replayed it.
const definitionChangeMemory = 10 * time.Minute

// changeMemory is how long a change is remembered at most under policy.
func changeMemory(policy route.Policy) time.Duration {
	return max(definitionChangeMemory, 2*policy.MaxReplicaLag)
}

// tidyEvery is how often tidy looks at the remembered changes at most.
const tidyEvery = 25 * time.Millisecond

// tell remembers a change a session made on database's primary, once its transaction ended. Only
// changes of definitions count (changesDefinitions): tables and sequences created or dropped are
// the staleness a standby within the lag limit may show.
func (d *definitionChanges) tell(database string, changes *classify.CatalogueChanges, now time.Time) {
	if database == "" || !(changes.Everything || changes.Definitions) {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.byDatabase == nil {
		d.byDatabase = map[string][]definitionChange{}
	}
	d.told++
	c := definitionChange{seq: d.told, all: changes.Everything, at: now}
	if !c.all {
		c.names = slices.Concat(changes.Functions, changes.Relations, changes.Types)
		c.all = len(c.names) == 0
	}
	list := d.byDatabase[database]
	if len(list) >= maxDefinitionChanges {
		// One change of every name, as late as the last: it holds what the folded ones held.
		// pending moves once, so that mayConcern never reads it as zero meanwhile.
		folded := definitionChange{seq: c.seq, all: true, at: now}
		d.pending.Add(1 - int64(len(list)))
		clear(list[1:])
		list = append(list[:0], folded)
	} else {
		list = append(list, c)
		d.pending.Add(1)
	}
	d.byDatabase[database] = list
}

// found remembers a change the catalogue found by reading (catalog.Options.Found): one no session
// told, made past pgowl or not told yet, which a standby may not have replayed either.
func (d *definitionChanges) found(database string, changes *classify.CatalogueChanges) {
	d.tell(database, changes, time.Now())
}

// mayConcern reports, without a lock, whether a read of effects may rest on a remembered change.
// A nil d remembers nothing.
func (d *definitionChanges) mayConcern(effects *classify.Effects) bool {
	return d != nil && d.pending.Load() > 0 && (effects.RestsOnAll || len(effects.RestsOn) > 0)
}

// readAfter returns the position a read of effects on database must see: the latest of the
// remembered changes it rests on, and a name it rests on there ("" for a change of everything).
// unread is the seq of the latest such change whose position is not read yet (0: none): the
// caller reads the primary's position and tells it with settle. Changes every standby of snap
// has replayed, and old ones, are forgotten first.
func (d *definitionChanges) readAfter(database string, effects *classify.Effects, snap *route.Snapshot, now time.Time, memory time.Duration) (pos, flush route.WritePosition, name string, unread uint64) {
	if d == nil || d.pending.Load() == 0 {
		return pos, flush, "", 0
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	list := d.forgetReplayed(database, snap, now, memory)
	for i := range list {
		c := &list[i]
		matched, ok := c.restedOnBy(effects)
		if !ok {
			continue
		}
		if c.pos.LSN == 0 {
			unread = c.seq
			continue
		}
		if raised := pos.Raise(c.pos); raised != pos {
			pos, flush, name = raised, c.flush, matched
		}
	}
	return pos, flush, name, unread
}

// restedOnBy reports whether a read of effects rests on what c changed, and a name it rests on.
func (c *definitionChange) restedOnBy(effects *classify.Effects) (string, bool) {
	switch {
	case c.all && effects.RestsOnAll:
		return "", true
	case c.all:
		return "", len(effects.RestsOn) > 0 // a read that rests on no name is not concerned
	case effects.RestsOnAll:
		return c.names[0], true
	}
	for _, name := range c.names {
		if slices.Contains(effects.RestsOn, name) {
			return name, true
		}
	}
	return "", false
}

// lastTold returns the seq of the latest change told: a position read after this call covers it
// and every change before it.
func (d *definitionChanges) lastTold() uint64 {
	if d == nil || d.pending.Load() == 0 {
		return 0 // nothing to settle
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.told
}

// settle records pos and flush, the primary's positions read after change upTo was told, as the
// position of every change told up to it whose position was not read, in every database: a WAL
// position is the cluster's.
func (d *definitionChanges) settle(upTo uint64, pos, flush route.WritePosition) {
	if pos.LSN == 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, list := range d.byDatabase {
		for i := range list {
			if c := &list[i]; c.seq <= upTo && c.pos.LSN == 0 {
				c.pos, c.flush = pos, flush
			}
		}
	}
}

// tidy, at most every tidyEvery, settles and forgets what it can in every database (see
// forgetReplayed), so that changes no read asks about do not stay remembered, and cost every
// read of a name a look at them, for changeMemory.
func (d *definitionChanges) tidy(snap *route.Snapshot, now time.Time, memory time.Duration) {
	if d == nil || d.pending.Load() == 0 {
		return
	}
	next := d.nextTidy.Load()
	if now.UnixNano() < next || !d.nextTidy.CompareAndSwap(next, now.Add(tidyEvery).UnixNano()) {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for database := range d.byDatabase {
		d.forgetReplayed(database, snap, now, memory)
	}
}

// forgetReplayed gives database's changes whose position is not read the primary's insert
// position from snap when it was sampled after they were told (the monitor's query was sent
// after their commit, so the position covers it), drops those that every standby in snap is
// seen to have replayed or that were told more than memory ago, and returns the rest. Under d.mu.
func (d *definitionChanges) forgetReplayed(database string, snap *route.Snapshot, now time.Time, memory time.Duration) []definitionChange {
	var primary *route.NodeState
	for i := range snap.Nodes {
		if n := &snap.Nodes[i]; n.Role == route.RolePrimary && n.Up && n.WALPosition != 0 {
			primary = n
		}
	}
	list := d.byDatabase[database]
	kept := list[:0]
	for _, c := range list {
		if c.pos.LSN == 0 && primary != nil && primary.SampledAt.After(c.at) {
			c.pos = route.WritePosition{LSN: primary.WALPosition, Timeline: primary.Timeline}
			c.flush = route.WritePosition{LSN: primary.FlushPosition, Timeline: primary.Timeline}
		}
		if now.Sub(c.at) > memory || c.pos.LSN != 0 && everyStandbyPast(snap, c.pos) {
			continue
		}
		kept = append(kept, c)
	}
	if dropped := len(list) - len(kept); dropped > 0 {
		d.pending.Add(-int64(dropped))
		clear(list[len(kept):])
	}
	if len(kept) == 0 {
		delete(d.byDatabase, database)
		return nil
	}
	d.byDatabase[database] = kept
	return kept
}

// everyStandbyPast reports whether every standby of snap is seen to have replayed pos on its
// timeline (a standby on another timeline is left to the plan's rules for a fork).
func everyStandbyPast(snap *route.Snapshot, pos route.WritePosition) bool {
	for i := range snap.Nodes {
		n := &snap.Nodes[i]
		if n.Role == route.RoleStandby && (n.WALPosition < pos.LSN || pos.Timeline != 0 && n.Timeline != 0 && n.Timeline != pos.Timeline) {
			return false
		}
	}
	return true
}

// definitionsReadAfter is the position a read of u must see for the definition changes it rests on
// (see above), reading the primary's position first when a change it rests on has none yet. A read
// that cannot read it (no primary backend free now under waitNot, a failure) goes on without
// what that change needs; the next read asks again.
func (sess *session) definitionsReadAfter(ctx context.Context, u *unit, snap *route.Snapshot, wait poolWait) (pos, flush route.WritePosition, name string) {
	defs := sess.srv.definitions
	if !defs.mayConcern(&u.effects) {
		return pos, flush, ""
	}
	memory := changeMemory(sess.srv.live().policy)
	pos, flush, name, unread := defs.readAfter(sess.database, &u.effects, snap, time.Now(), memory)
	if unread == 0 {
		return pos, flush, name
	}
	sess.readPrimaryPositions(ctx, snap, wait) // settles the changes told before it (queryWritePosition)
	pos, flush, name, _ = defs.readAfter(sess.database, &u.effects, snap, time.Now(), memory)
	return pos, flush, name
}
