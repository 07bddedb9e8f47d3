package catalog

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/pgowl/pgowl/classify"
)

// Defaults of Options.
const (
	DefaultRefreshInterval = 30 * time.Second
	DefaultWait            = 2 * time.Second
	DefaultLoadTimeout     = 15 * time.Second
	DefaultRetryAfter      = 5 * time.Second
	// DefaultConfirmTakenAfter: a migration's burst of changes is over by then, and the objects
	// it made are read in one read by name, before a later change (the next migration, DDL
	// outside pgowl) would need them all read with it.
	DefaultConfirmTakenAfter = 50 * time.Millisecond
	// settleDelay is when the changes a statement made are read in the background, in case the
	// session that ran it never sends another statement.
	settleDelay = time.Second
	// keepIdle is how long the connection catalogues are read over stays open after its last use.
	keepIdle = 3 * time.Second
)

// Options configures a Manager.
type Options struct {
	// Connect opens a connection to database on the node catalogues are read from (the primary).
	Connect func(ctx context.Context, database string) (*pgx.Conn, error)
	// NodeOf names the node a connection Connect opened is to, asked once per connection, and
	// PrimaryNode the node found primary now, named alike (false: none is found, as during a
	// failover). When both are set, the catalogue follows the primary: a kept connection to
	// another node is closed before its next read or poll and a new one opened, and a connection
	// to another node than the one the catalogue was last read whole from (a failover, a
	// switchover, a promotion while the old primary still answers) has the catalogue read whole
	// again (primaryMoved): the new primary may lack changes the old one took but never sent.
	NodeOf      func(conn *pgx.Conn) string
	PrimaryNode func() (string, bool)
	// Overrides are the configured function assertions.
	Overrides Overrides
	// RefreshInterval is how old a catalogue may grow before it is read again whole in the background.
	RefreshInterval time.Duration
	// Wait bounds how long a statement waits for a catalogue that must be read first: the first
	// use of a database, or the first use after a change. Past it the statement is classified
	// without the catalogue (unknown functions go to the primary) while the read goes on.
	Wait time.Duration
	// LoadTimeout bounds one load or refresh (connect and queries).
	LoadTimeout time.Duration
	// RetryAfter is how long a failed load is not retried; statements meanwhile go on without it.
	RetryAfter time.Duration
	// ConfirmTakenAfter is how long after the last object taken from its statement without a
	// read (ChangedAndCreated) the objects so taken are read, when no read has read them
	// meanwhile (DefaultConfirmTakenAfter when zero).
	ConfirmTakenAfter time.Duration
	// Logger receives one line per load, failure and change.
	Logger zerolog.Logger
	// ChangePollInterval, when above zero, is how often a database's catalogue rows written since
	// the last poll are looked for on the primary, so that a change made past pgowl is read
	// within it rather than at the next whole read (change_markers.go). Zero: no polls.
	ChangePollInterval time.Duration
	// ChangePollsWhileUnused is how long a database's polls go on without a statement using its
	// catalogue (a minute when zero); they start again at its next use.
	ChangePollsWhileUnused time.Duration
	// Found, when set, is told the definitions a read found changed in a database's catalogue
	// (classify.ChangedDefinitions: not tables and sequences only added or dropped), before the
	// catalogue that holds them is served: by a read of names (after Changed, or a name a
	// statement used that the catalogue did not hold) or by a whole read after the first. It is
	// called with the database's lock held and must not call m. A proxy uses it for changes it
	// was not told of (made past it, or not told yet): a standby may not have replayed them.
	Found func(database string, changes *classify.CatalogueChanges)
	// DefaultsChanged, when set, is told of a database whose logins' default settings (set for a
	// role or the database with ALTER ROLE or ALTER DATABASE ... SET: search_path,
	// statement_timeout, work_mem, ...) a read found changed, before the catalogue that holds
	// them is served. A connection keeps the defaults of its login:
	// a proxy retires its pooled connections to the database, so that sessions run where the
	// catalogue says they do. It is called with the database's lock held and must not call m.
	DefaultsChanged func(database string)
}

// Manager keeps one catalogue per database and implements classify.CatalogueSource. A catalogue is
// read whole on first use and again once RefreshInterval has passed since its last whole read (a
// reload that finds the same content keeps the old catalogue and its memoised analyses); after
// Changed, only the objects the change names are read again (one round trip), and so is a name a
// statement uses that the catalogue does not hold.
// Reads of one database run one at a time over a connection the Manager keeps while it is in use.
// A held, current catalogue costs a few atomic loads and no lock.
//
// Per database, the state is: no catalogue (the first Catalogue call loads it); current (held, no
// change pending: Catalogue answers at once); pending (Changed was called: Held reports it not
// current, and Catalogue waits, at most Wait, for a read that started after the last Changed);
// loading (one read runs, or a session's read is patched in; changes and lookups arriving
// meanwhile are read by the next one).
type Manager struct {
	opts Options
	mu   sync.RWMutex
	dbs  map[string]*database
	// derivedOIDs counts the OIDs given to functions added without a read (derivedOID).
	derivedOIDs atomic.Uint32
	// closed: Close was called; no read starts a connection, no timer starts a read.
	closed atomic.Bool
}

// errManagerClosed fails a read that would start after Close.
var errManagerClosed = errors.New("catalog: the catalogue manager is closed")

// Close stops m, for the proxy that owns it stopping: the timers that would start reads (the
// settling of changes, the confirmation of objects taken without a read) and close the kept
// connections are stopped, the kept connections closed, and no read starts a connection after
// it. The catalogues held stay as they are and are still served. A read running finishes and
// closes its connection. Close may be called more than once.
func (m *Manager) Close() {
	if m.closed.Swap(true) {
		return
	}
	m.mu.RLock()
	dbs := make([]*database, 0, len(m.dbs))
	for _, db := range m.dbs {
		dbs = append(dbs, db)
	}
	m.mu.RUnlock()
	for _, db := range dbs {
		db.mu.Lock()
		for _, timer := range []*time.Timer{db.settle, db.confirm, db.idleTimer, db.poll} {
			if timer != nil {
				timer.Stop()
			}
		}
		db.reload.stop()
		db.retry.stop()
		m.endResume(db, nil) // no poll runs any more: the held catalogue is served as it is
		var conn *pgx.Conn
		if db.loading == nil {
			conn, db.conn, db.connNode = db.conn, nil, ""
		}
		pollConn := db.pollConn
		db.pollConn, db.pollConnNode = nil, ""
		db.mu.Unlock()
		for _, conn := range []*pgx.Conn{conn, pollConn} {
			if conn != nil {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				conn.Close(ctx)
				cancel()
			}
		}
	}
}

type database struct {
	name string
	cat  atomic.Pointer[classify.Catalogue]
	// dirty: a change is pending; the next Catalogue call waits for it to be read. stale: a read
	// failed and may be tried again whole. reloadDue: the periodic whole reload is due (reload).
	dirty, stale, reloadDue atomic.Bool

	mu      sync.Mutex
	loading chan struct{} // non-nil while a read runs or a session's read is patched in; closed when it ends
	// patching: loading is a session's read being patched in (ChangedAndRead), not a read.
	// readWhenDone: a committed change was told meanwhile; it is read once the patch is in
	// (or the read of the objects taken before, confirming, is done).
	// (A change only about to be made, told while the patch runs, is not: the session that
	// makes it reads it itself, or a statement that needs it starts the read.)
	patching, readWhenDone bool
	// generation advances with every Changed and Lookup; changed is the generation of the last
	// Changed, and applied the generation the held catalogue reflects.
	generation, changed, applied uint64
	// pending is what the next read must read again.
	pending classify.CatalogueChanges
	// unconfirmed names the objects taken from their CREATE statement without a read
	// (ChangedAndCreated) since: they hold OIDs of pgowl's, and a view its query as written. Every
	// read by name reads them too (confirmWith), so that what it reads (an aggregate made of such
	// a function, a function that takes such a type) finds them as PostgreSQL made them.
	unconfirmed classify.CatalogueChanges
	// unconfirmedIndex holds unconfirmed's names, by part, so that a take looks a name up
	// instead of through a migration's worth of them (nil: to be built from unconfirmed).
	unconfirmedIndex map[unconfirmedName]struct{}
	// viewUses are the names the queries of unconfirmed views use (classify.CreatedView.Uses): an
	// object of such a name is read with them rather than taken from its statement.
	viewUses map[string]struct{}
	// failedAt is when the last read failed, failedGeneration the generation it was to reach.
	failedAt         time.Time
	failedGeneration uint64
	// conn is the connection reads use, kept between reads for keepIdle; only the running read
	// touches it. assertions are the configured overrides as resolved by the last whole load.
	conn      *pgx.Conn
	lastUse   time.Time
	idleTimer *time.Timer
	settle    *time.Timer
	// reload marks the periodic whole read due (reloadDue) Options.RefreshInterval after the last
	// whole read that succeeded, armed again by each such read: a catalogue read whole moments ago
	// (a drop past pgowl, a poll's change of everything) is not read again because an older read's
	// interval ran out. A whole read that was running as the reload fell due is the reload: its
	// end clears the mark.
	reload dueMark
	// retry marks the catalogue stale Options.RetryAfter after the last failed read (retryLater);
	// a whole read that succeeds since is the retry, and drops it.
	retry dueMark
	// connNode and pollConnNode name the nodes conn and pollConn are to (Options.NodeOf);
	// readFrom the node of the last whole read that succeeded, which markers come from too;
	// movedTo the node primaryMoved last asked a whole read of, and moveGeneration the
	// generation it asked for, until a whole read of that generation or a later one succeeds.
	connNode, pollConnNode, readFrom, movedTo string
	moveGeneration                            uint64
	// confirm reads the unconfirmed objects once Options.ConfirmTakenAfter has passed without
	// another taken; confirming: the read running (loading) is the one it started.
	confirm    *time.Timer
	confirming bool
	assertions map[uint32]string
	// markers are what the next poll of the change markers starts from (set by the last whole
	// read, then by each poll), markersEpoch counts the whole reads that set them; poll runs it
	// every Options.ChangePollInterval over pollConn (nil while a poll runs, or none is open).
	// told are the names sessions told of lately, which a poll leaves out (change_markers.go).
	markers      changeMarkers
	markersEpoch uint64
	poll         *time.Timer
	pollConn     *pgx.Conn
	told         toldNames
	// polling: a poll runs (the timer firing meanwhile does nothing; the poll re-arms it when it
	// ends). pollFound: pending holds what a poll found while a read or patch ran, which that
	// read's or patch's end reads next.
	polling, pollFound bool
	// used: Held or Catalogue was called since the last poll; unusedPolls counts the polls in a
	// row that found it false, and pollsStopped says they stopped for it (noteUse).
	used         atomic.Bool
	unusedPolls  int
	pollsStopped atomic.Bool
	// resumed is closed once the poll that starts the polls again at a use (noteUse) has ended,
	// what it found marked changed as a session's change is (nil while no such poll runs), and
	// resuming says one runs: the rows written while nothing polled may be any, so statements
	// wait for that poll (Catalogue) and the read of what it found, rather than be classified
	// without them (a function made to write, a role's new default).
	resumed  chan struct{}
	resuming atomic.Bool
}

// New returns a Manager; nothing is loaded until a database is first used.
func New(opts Options) *Manager {
	if opts.RefreshInterval <= 0 {
		opts.RefreshInterval = DefaultRefreshInterval
	}
	if opts.Wait <= 0 {
		opts.Wait = DefaultWait
	}
	if opts.LoadTimeout <= 0 {
		opts.LoadTimeout = DefaultLoadTimeout
	}
	if opts.RetryAfter <= 0 {
		opts.RetryAfter = DefaultRetryAfter
	}
	if opts.ConfirmTakenAfter <= 0 {
		opts.ConfirmTakenAfter = DefaultConfirmTakenAfter
	}
	return &Manager{opts: opts, dbs: make(map[string]*database)}
}

func (m *Manager) state(name string) *database {
	m.mu.RLock()
	db := m.dbs[name]
	m.mu.RUnlock()
	if db != nil {
		return db
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if db = m.dbs[name]; db == nil {
		db = &database{name: name}
		db.reload.mark, db.retry.mark = &db.reloadDue, &db.stale
		m.dbs[name] = db
	}
	return db
}

// Held returns the database's catalogue without waiting, and whether no change is pending. A
// current catalogue whose periodic reload is due is reloaded in the background.
func (m *Manager) Held(name string) (*classify.Catalogue, bool) {
	db := m.state(name)
	cat := db.cat.Load()
	if db.pollsStopped.Load() {
		// Rows may have changed while nothing polled: not current. Held does not wait, nor
		// take db's lock to start the polls again: a statement that needs the catalogue asks
		// Catalogue, which does both.
		return cat, false
	}
	m.noteUse(db)
	if cat == nil || db.dirty.Load() || db.resuming.Load() {
		return cat, false
	}
	m.refreshIfStale(db)
	return cat, true
}

// refreshIfStale starts the periodic reload when it is due and no read runs.
func (m *Manager) refreshIfStale(db *database) {
	if db.stale.Load() || db.reloadDue.Load() {
		db.mu.Lock()
		if db.loading == nil && (db.stale.Load() || db.reloadDue.Load()) {
			m.startLoad(db)
		}
		db.mu.Unlock()
	}
}

// Catalogue returns the database's current catalogue, reading it first when there is none or a
// change is pending (waiting at most Options.Wait), or nil when none is available.
func (m *Manager) Catalogue(name string) *classify.Catalogue {
	db := m.state(name)
	m.noteUse(db)
	requested := time.Now()
	if db.resuming.Load() {
		m.awaitResumed(db, m.opts.Wait)
	}
	cat := db.cat.Load()
	if cat != nil && !db.dirty.Load() {
		m.refreshIfStale(db)
		return cat
	}
	db.mu.Lock()
	target := db.changed
	if db.loading == nil && !db.failedAt.IsZero() && time.Since(db.failedAt) < m.opts.RetryAfter && db.failedGeneration >= target {
		// The last read failed moments ago: answer without a catalogue rather than wait again.
		db.mu.Unlock()
		return nil
	}
	// Options.Wait in all, the wait for a resuming poll included.
	held, ok := m.await(db, target, requested, m.opts.Wait-time.Since(requested))
	if !ok {
		return nil // not read in time (or failed): never answer from a catalogue that misses the change
	}
	return held
}

// await waits (db.mu held on entry, released on return) until the held catalogue reflects
// generation target, starting reads as needed, for at most wait; ok is false when that did not
// happen in time or a read that started after requested failed.
func (m *Manager) await(db *database, target uint64, requested time.Time, wait time.Duration) (held *classify.Catalogue, ok bool) {
	deadline := time.NewTimer(max(wait, 0))
	defer deadline.Stop()
	for {
		if cat := db.cat.Load(); cat != nil && db.applied >= target {
			db.mu.Unlock()
			return cat, true
		}
		if !db.failedAt.IsZero() && db.failedAt.After(requested) && db.failedGeneration >= target {
			db.mu.Unlock()
			return nil, false
		}
		if db.loading == nil {
			// A kept connection to a node no longer primary is left by the read, which then
			// connects to the new one: not quick.
			kept := db.conn != nil && !db.conn.IsClosed() && m.isPrimary(db.connNode)
			run, whole := m.beginLoad(db)
			if !whole && kept {
				// A read of a few names over the kept connection is quick: run it here rather
				// than hand it over (a read that must connect first is waited for, at most Wait).
				db.mu.Unlock()
				run()
				db.mu.Lock()
				continue
			}
			go run()
		}
		done := db.loading
		db.mu.Unlock()
		select {
		case <-done:
		case <-deadline.C:
			return nil, false
		}
		db.mu.Lock()
	}
}

// Lookup reads the objects called name again when a statement names something current does not
// hold, and waits (at most Options.Wait) for that read, so that anything committed before is seen.
// A lookup that cannot finish in time, or whose read fails, reports looked false.
func (m *Manager) Lookup(name string, current *classify.Catalogue, object string) (*classify.Catalogue, bool) {
	db := m.state(name)
	requested := time.Now()
	db.mu.Lock()
	db.generation++
	target := db.generation
	// The statement named a function or a relation; a relation may be a type's name too.
	db.pending.Merge(&classify.CatalogueChanges{Functions: []string{object}, Relations: []string{object}, Types: []string{object}})
	held, ok := m.await(db, target, requested, m.opts.Wait)
	if !ok {
		return nil, false
	}
	if held == current {
		return nil, true
	}
	return held, true
}

// Changed records that objects of the database changed: the next Catalogue call reads them again
// before it answers, and a background read follows shortly after in case no statement comes.
func (m *Manager) Changed(name string, changes *classify.CatalogueChanges, committed bool) {
	db := m.state(name)
	db.mu.Lock()
	defer db.mu.Unlock()
	if committed {
		defer func() {
			// Read the change now, while the client receives the answer and sends its next
			// statement; that statement waits only for what is left of the read.
			if db.loading == nil && db.cat.Load() != nil {
				m.startLoad(db)
			} else if db.patching || db.confirming {
				db.readWhenDone = true
			}
		}()
	}
	db.told.note(changes)
	db.generation++
	db.changed = db.generation
	if changes == nil {
		changes = &classify.CatalogueChanges{Everything: true}
	}
	db.pending.Merge(changes)
	db.dirty.Store(true)
	if db.settle == nil {
		db.settle = time.AfterFunc(settleDelay, func() { m.settlePending(db) })
	} else {
		db.settle.Reset(settleDelay)
	}
}

// isPrimary reports whether node is the one found primary now, or none is found: a kept
// connection stays while a failover is under way, since a new one could not be opened either.
func (m *Manager) isPrimary(node string) bool {
	if m.opts.PrimaryNode == nil || m.opts.NodeOf == nil {
		return true
	}
	primary, found := m.opts.PrimaryNode()
	return !found || primary == node
}

// movedAway (db.mu held) reports whether a connection to node reads another node than the one
// db's catalogue was last read whole from.
func (db *database) movedAway(node string) bool {
	return db.readFrom != "" && node != "" && node != db.readFrom
}

// foundPrimary reports whether node is the one found primary now: a move is taken only to it,
// not to a node kept while none is found.
func (m *Manager) foundPrimary(node string) bool {
	if m.opts.PrimaryNode == nil {
		return false
	}
	primary, found := m.opts.PrimaryNode()
	return found && primary == node
}

// primaryMoved (db.mu held) has db's catalogue read whole from node, the new primary, as a change
// of everything: until that read ends, statements wait for it (at most Options.Wait) rather than
// use what the old primary held. The polls stop until that read takes the new primary's change
// markers (the old one's say nothing of its rows), and a poll running meanwhile keeps none it
// took on the old one. A second connection noticing the same move adds nothing.
func (m *Manager) primaryMoved(db *database, node string) {
	if db.movedTo == node {
		m.opts.Logger.Debug().Str("database", db.name).Str("to", node).Msg("catalog: the primary's move is already being read")
		return
	}
	m.opts.Logger.Info().Str("database", db.name).Str("from", db.readFrom).Str("to", node).
		Msg("catalog: the primary moved; reading the catalogue whole from the new one")
	db.movedTo = node
	db.markers.known = false
	db.markersEpoch++
	db.generation++
	db.moveGeneration = db.generation
	db.changed = db.generation
	db.pending.Merge(&classify.CatalogueChanges{Everything: true})
	db.dirty.Store(true)
	if db.loading == nil && db.cat.Load() != nil {
		m.startLoad(db)
	} else if db.patching || db.confirming {
		db.readWhenDone = true
	}
}

// settlePending reads pending changes that no statement asked for yet.
func (m *Manager) settlePending(db *database) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if !m.closed.Load() && db.loading == nil && db.dirty.Load() && db.cat.Load() != nil {
		m.startLoad(db)
	}
}

// Loaded returns the database's catalogue if one is held, without loading anything.
func (m *Manager) Loaded(name string) *classify.Catalogue {
	m.mu.RLock()
	db := m.dbs[name]
	m.mu.RUnlock()
	if db == nil {
		return nil
	}
	return db.cat.Load()
}

// startLoad starts a background read of db (see beginLoad). db.mu must be held and no read running.
func (m *Manager) startLoad(db *database) {
	run, _ := m.beginLoad(db)
	go run()
}

// beginLoad marks a read of db as running and returns it, to be run without db.mu held: the pending
// names only when a catalogue is held and neither everything nor the periodic reload is due (whole
// false; bounded by Options.Wait, since a statement waits for it), else the whole catalogue. db.mu
// must be held and no read running.
func (m *Manager) beginLoad(db *database) (run func(), whole bool) {
	done := make(chan struct{})
	db.loading = done
	generation := db.generation
	pending := db.pending
	db.pending = classify.CatalogueChanges{}
	db.pollFound = false
	old := db.cat.Load()
	db.confirmWith(&pending, maxChangedNamesRead)
	stale := db.stale.Swap(false) // a timer's Store(true) meanwhile is not lost
	reloadDue := db.reloadDue.Swap(false)
	whole = old == nil || pending.Everything || stale || reloadDue
	if db.idleTimer != nil {
		db.idleTimer.Stop()
	}
	conn, node, assertions := db.conn, db.connNode, db.assertions
	started := time.Now()
	return func() {
		var cat *classify.Catalogue
		var changed bool
		var err error
		var markers changeMarkers
		if conn, node, err = m.connection(db, conn, node); err == nil && !whole {
			db.mu.Lock()
			if db.movedAway(node) && m.foundPrimary(node) {
				m.primaryMoved(db, node) // read whole once this read ends, which statements wait for
			}
			db.mu.Unlock()
		}
		if err == nil && whole && m.opts.ChangePollInterval > 0 {
			// The first poll, before the read: what commits between the two is polled for, not
			// missed. Without it (a server before PostgreSQL 13 has no pg_current_snapshot)
			// nothing is polled.
			ctx, cancel := context.WithTimeout(context.Background(), m.opts.LoadTimeout)
			var pollErr error
			if _, markers, pollErr = queryChangeMarkers(ctx, conn, changeMarkers{}); pollErr != nil && old == nil {
				m.opts.Logger.Info().Err(pollErr).Str("database", db.name).
					Msg("could not poll the catalogue's change markers; changes made past pgowl are found by the whole reads")
			}
			cancel()
			if pollErr != nil && conn.IsClosed() {
				conn, node, err = m.connection(db, nil, "") // a timeout closes the connection
			}
		}
		if err == nil {
			if whole {
				cat, assertions, err = m.loadWhole(conn, db.name)
				changed = err == nil && (old == nil || !old.SameContent(cat))
			} else {
				cat, changed, err = m.refresh(conn, old, &pending, assertions)
			}
		}
		db.mu.Lock()
		next := false // start the next read once this one is marked done
		confirming := db.confirming
		defer func() {
			db.loading, db.confirming, db.readWhenDone = nil, false, false
			if next {
				m.startLoad(db)
			}
			db.mu.Unlock()
			close(done)
		}()
		if err != nil {
			if conn != nil {
				conn.Close(context.Background())
			}
			db.conn, db.connNode = nil, ""
			db.failedAt, db.failedGeneration = time.Now(), generation
			db.pending.Merge(&pending)
			if m.closed.Load() {
				return // stopped: nothing will use what it would have read
			}
			m.opts.Logger.Warn().Err(err).Str("database", db.name).Bool("whole", whole).
				Msg("could not read the function catalogue; unknown functions go to the primary")
			m.retryLater(db)
			return
		}
		db.conn, db.connNode, db.lastUse = conn, node, time.Now()
		db.confirmed(&pending, whole)
		if m.closed.Load() {
			db.conn = nil
			go conn.Close(context.Background())
		} else {
			db.idleTimer = time.AfterFunc(keepIdle, func() { m.closeIdle(db) })
		}
		db.failedAt = time.Time{}
		if whole {
			db.assertions = assertions
			db.retry.drop() // this read is the retry of any read that failed before it began
			if !m.closed.Load() {
				m.reloadLater(db)
			}
			if generation >= db.moveGeneration {
				db.movedTo = "" // read whole since the move was asked for, from wherever is primary
			}
			if db.readFrom != node {
				if db.readFrom != "" && !markers.known && m.opts.ChangePollInterval > 0 {
					// Read from a new primary whose first poll failed: the old one's markers
					// are no use, and the polls wait for a whole read that takes its own.
					db.markers.known = false
					db.markersEpoch++ // a poll running keeps none it took
					m.retryLater(db)
				}
				db.readFrom = node
			}
			if markers.known {
				db.markers = markers
				db.markersEpoch++
				m.pollLater(db, m.opts.ChangePollInterval)
			}
		}
		if changed {
			if m.opts.DefaultsChanged != nil && old != nil &&
				(!maps.EqualFunc(old.Data().DefaultSearchPath, cat.Data().DefaultSearchPath, slices.Equal[[]string]) ||
					!slices.Equal(old.Data().LoginDefaults, cat.Data().LoginDefaults)) {
				m.opts.DefaultsChanged(db.name)
			}
			if m.opts.Found != nil && old != nil {
				var among []string // a read of names compares those; a whole read, everything
				if !whole {
					among = slices.Concat(pending.Functions, pending.Relations, pending.Types)
					if among == nil {
						among = []string{} // the schemas alone were read: no definition to compare
					}
				}
				if names, all := classify.ChangedDefinitions(old, cat, among); all || len(names) > 0 {
					m.opts.Found(db.name, &classify.CatalogueChanges{Functions: names, Everything: all, Definitions: true})
				}
			}
			db.cat.Store(cat)
			event := m.opts.Logger.Info()
			if old == nil || !whole {
				event = m.opts.Logger.Debug()
			}
			event.Str("database", db.name).Int("function_count", cat.FunctionCount()).Uint64("version", cat.Version()).
				Bool("whole", whole).Strs("functions", pending.Functions).Strs("relations", pending.Relations).Strs("types", pending.Types).Strs("schemas", pending.Schemas).Dur("took", time.Since(started)).Msg("function catalogue read")
			for _, warning := range cat.Warnings() {
				if old == nil || !slices.Contains(old.Warnings(), warning) {
					m.opts.Logger.Warn().Str("database", db.name).Msg(warning)
				}
			}
		} else if whole {
			m.opts.Logger.Debug().Str("database", db.name).Bool("whole", true).Dur("took", time.Since(started)).
				Msg("function catalogue read: unchanged")
		}
		db.applied = generation
		if db.applied >= db.changed {
			db.dirty.Store(false)
		} else if !db.pending.Empty() && (!confirming || db.readWhenDone) {
			// Changes arrived while this read ran: read them now rather than when a statement
			// asks. Not after the read of the objects taken before, unless one was committed:
			// a change told as its statement was classified is taken in by its session once
			// it has committed (ChangedAndCreated), which a read would turn into a read.
			next = true
		}
		if db.pollFound && !db.pending.Empty() {
			next = true // what a poll of the change markers found while this read ran
		}
	}, whole
}

// maxChangedNamesRead bounds the names a read by name reads with the unconfirmed ones added; past
// it the whole catalogue is read. A read by name costs by the name: in integration/migrationbench
// one of some 450 names took 6 to 20 ms, and one of a single name 2 to 3 ms, where a whole read of
// that small database took 13 to 18 ms (a whole read costs by the size of the database).
const maxChangedNamesRead = 1024

// confirmWith adds to changes, when they name anything, the objects taken without a read
// (db.unconfirmed), unless that makes more than limit names: then changes are left as they are
// when limit is a session read's (the caller reads them itself another way), or become a change
// of everything. db.mu must be held.
func (db *database) confirmWith(changes *classify.CatalogueChanges, limit int) (ok bool) {
	if changes.Empty() || db.unconfirmed.Empty() || changes.Everything {
		return true
	}
	// Merged here rather than with CatalogueChanges.Merge, which turns more than a statement's
	// worth of names into a change of everything.
	merged := classify.CatalogueChanges{Functions: addMissing(slices.Clone(changes.Functions), db.unconfirmed.Functions),
		Relations: addMissing(slices.Clone(changes.Relations), db.unconfirmed.Relations),
		Types:     addMissing(slices.Clone(changes.Types), db.unconfirmed.Types), Schemas: slices.Clone(changes.Schemas)}
	if len(merged.Functions)+len(merged.Relations)+len(merged.Types) > limit {
		if limit < maxChangedNamesRead {
			return false
		}
		*changes = classify.CatalogueChanges{Everything: true}
		return true
	}
	*changes = merged
	return true
}

// confirmed forgets the unconfirmed objects a read has read: all after a whole read. db.mu must
// be held.
func (db *database) confirmed(read *classify.CatalogueChanges, whole bool) {
	db.unconfirmedIndex = nil
	if whole || read.Everything {
		db.unconfirmed, db.viewUses = classify.CatalogueChanges{}, nil
		return
	}
	if db.unconfirmed.Empty() {
		return
	}
	unread := func(names, read []string) []string {
		return slices.DeleteFunc(slices.Clone(names), func(name string) bool { return slices.Contains(read, name) })
	}
	db.unconfirmed = classify.CatalogueChanges{Functions: unread(db.unconfirmed.Functions, read.Functions),
		Relations: unread(db.unconfirmed.Relations, read.Relations), Types: unread(db.unconfirmed.Types, read.Types)}
	if len(db.unconfirmed.Relations) == 0 {
		db.viewUses = nil
	}
}

// unconfirmedName is a name of database.unconfirmed: part 0 its functions, 1 relations, 2 types.
type unconfirmedName struct {
	part int
	name string
}

// takenUnread records obj, taken from its statement without a read, as unconfirmed. db.mu must
// be held.
func (db *database) takenUnread(obj classify.CreatedObject) {
	changes := obj.Changes()
	if db.unconfirmedIndex == nil {
		db.unconfirmedIndex = make(map[unconfirmedName]struct{})
		for part, names := range [...][]string{db.unconfirmed.Functions, db.unconfirmed.Relations, db.unconfirmed.Types} {
			for _, name := range names {
				db.unconfirmedIndex[unconfirmedName{part, name}] = struct{}{}
			}
		}
	}
	add := func(part int, list, names []string) []string {
		for _, name := range names {
			if _, held := db.unconfirmedIndex[unconfirmedName{part, name}]; !held {
				db.unconfirmedIndex[unconfirmedName{part, name}] = struct{}{}
				list = append(list, name)
			}
		}
		return list
	}
	db.unconfirmed.Functions = add(0, db.unconfirmed.Functions, changes.Functions)
	db.unconfirmed.Relations = add(1, db.unconfirmed.Relations, changes.Relations)
	db.unconfirmed.Types = add(2, db.unconfirmed.Types, changes.Types)
	if view, ok := obj.(*classify.CreatedView); ok {
		if db.viewUses == nil {
			db.viewUses = make(map[string]struct{})
		}
		for _, name := range view.Uses() {
			db.viewUses[name] = struct{}{}
		}
	}
}

// reloadLater has the periodic whole read fall due Options.RefreshInterval from now, once a whole
// read has succeeded: the timers armed before mark nothing, and a mark one of them made while the
// read ran is cleared (see database.reload). db.mu must be held.
func (m *Manager) reloadLater(db *database) {
	db.reload.armAfter(m.opts.RefreshInterval, &db.mu, func() bool { return false })
}

// retryLater has the catalogue read whole again (stale) Options.RetryAfter from now, after a
// failed read; the retry armed before marks nothing. Nothing is armed once m is closed. db.mu
// must be held.
func (m *Manager) retryLater(db *database) {
	if m.closed.Load() {
		db.retry.drop()
		return
	}
	db.retry.armAfter(m.opts.RetryAfter, &db.mu, m.closed.Load)
}

// confirmLater (re)arms the read of the unconfirmed objects for Options.ConfirmTakenAfter from
// now. db.mu must be held.
func (m *Manager) confirmLater(db *database) {
	if db.confirm == nil {
		db.confirm = time.AfterFunc(m.opts.ConfirmTakenAfter, func() { m.confirmTaken(db) })
	} else {
		db.confirm.Reset(m.opts.ConfirmTakenAfter)
	}
}

// confirmTaken reads the unconfirmed objects, as a read by name, unless a read runs or a change
// is pending: then it tries again later. A pending change is most often a session's statement,
// told as it was classified, that is running: its session takes it in (ChangedAndCreated) once
// it has committed, which a read now, seeing it committed, would turn into a read.
func (m *Manager) confirmTaken(db *database) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if m.closed.Load() || db.unconfirmed.Empty() || db.cat.Load() == nil {
		return
	}
	if db.loading != nil || !db.pending.Empty() {
		m.confirmLater(db)
		return
	}
	// Set, not merged (CatalogueChanges.Merge turns a migration's worth of names into a change
	// of everything): beginLoad bounds them (confirmWith, maxChangedNamesRead).
	db.pending = classify.CatalogueChanges{Functions: slices.Clone(db.unconfirmed.Functions),
		Relations: slices.Clone(db.unconfirmed.Relations), Types: slices.Clone(db.unconfirmed.Types)}
	m.startLoad(db)
	db.confirming = true
}

// usedByUnconfirmedView reports whether an unconfirmed view's query uses a name obj has: taken
// in, obj could change what the view's names resolve to, where PostgreSQL bound them when it
// made the view. db.mu must be held.
func (db *database) usedByUnconfirmedView(obj classify.CreatedObject) bool {
	if len(db.viewUses) == 0 {
		return false
	}
	changes := obj.Changes()
	for _, names := range [][]string{changes.Functions, changes.Relations, changes.Types} {
		for _, name := range names {
			if _, used := db.viewUses[name]; used {
				return true
			}
		}
	}
	return false
}

func addMissing(list, names []string) []string {
	for _, name := range names {
		if !slices.Contains(list, name) {
			list = append(list, name)
		}
	}
	return list
}

// connection returns conn (to node) if it is usable and node is still the primary, else a new
// connection to db's database and the node it is to. The caller compares that node with the one
// the catalogue was read whole from (movedAway).
func (m *Manager) connection(db *database, conn *pgx.Conn, node string) (*pgx.Conn, string, error) {
	database := db.name
	if m.closed.Load() {
		if conn != nil {
			conn.Close(context.Background())
		}
		return nil, "", errManagerClosed
	}
	if conn != nil && !conn.IsClosed() {
		if m.isPrimary(node) {
			return conn, node, nil
		}
		m.opts.Logger.Info().Str("database", database).Str("node", node).
			Msg("catalog: the kept connection's node is no longer the primary; connecting to the new one")
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn.Close(closeCtx)
		cancel()
	}
	if m.opts.Connect == nil {
		return nil, "", errors.New("catalog: no connection configured")
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.opts.LoadTimeout)
	defer cancel()
	conn, err := m.opts.Connect(ctx, database)
	if err != nil {
		return nil, "", err
	}
	if err := prepareConnection(ctx, conn); err != nil {
		conn.Close(context.Background())
		return nil, "", err
	}
	node = ""
	if m.opts.NodeOf != nil && m.opts.PrimaryNode != nil {
		node = m.opts.NodeOf(conn)
	}
	return conn, node, nil
}

// closeIdle closes the kept connection when no read used it for keepIdle.
func (m *Manager) closeIdle(db *database) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.loading != nil || db.conn == nil || time.Since(db.lastUse) < keepIdle {
		return
	}
	conn := db.conn
	db.conn, db.connNode = nil, ""
	go conn.Close(context.Background())
}

// loadWhole reads the whole catalogue within LoadTimeout.
func (m *Manager) loadWhole(conn *pgx.Conn, name string) (*classify.Catalogue, map[uint32]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), m.opts.LoadTimeout)
	defer cancel()
	data, assertions, err := loadData(ctx, conn, name, m.opts.Overrides)
	if err != nil {
		return nil, nil, err
	}
	return classify.NewCatalogueOwning(*data), assertions, nil // the data read is the catalogue's alone
}

// refresh reads the objects changes names again within LoadTimeout and Wait; changed is false (and the old
// catalogue kept, with its memoised analyses) when they are as held.
func (m *Manager) refresh(conn *pgx.Conn, old *classify.Catalogue, changes *classify.CatalogueChanges, assertions map[uint32]string) (*classify.Catalogue, bool, error) {
	if changes.Empty() {
		return old, false, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), min(m.opts.LoadTimeout, m.opts.Wait))
	defer cancel()
	if len(m.opts.Overrides.Readonly)+len(m.opts.Overrides.Writes) > 0 {
		// An assertion may name a function created since the last whole load.
		var err error
		if assertions, _, err = resolveOverrides(ctx, conn, old.Database(), m.opts.Overrides); err != nil {
			return nil, false, err
		}
	}
	data, delta, keep, err := refreshNames(ctx, conn, old, changes, assertions)
	if err != nil || !delta.Changed() {
		return old, false, err
	}
	cat := classify.DeriveCatalogue(old, *data, delta)
	if keep != nil {
		// Functions changed, relations and types were added, by name: what was analysed without
		// them still holds.
		cat.KeepAnalysesFrom(old, keep)
	}
	return cat, true, nil
}

var _ classify.CatalogueSource = (*Manager)(nil)
