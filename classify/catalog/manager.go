package catalog

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/pgowl/pgowl/classify"
)

// Defaults of Options.
const (
	DefaultRefreshInterval   = 30 * time.Second
	DefaultWait              = 2 * time.Second
	DefaultLoadTimeout       = 15 * time.Second
	DefaultRetryAfter        = 5 * time.Second
	DefaultMinLookupInterval = 100 * time.Millisecond
	// settleDelay is when a catalogue is reloaded again after a statement that changes functions
	// passed through, in case the session that ran it never sends another statement.
	settleDelay = time.Second
)

// Options configures a Manager.
type Options struct {
	// Connect opens a connection to database on the node catalogues are read from (the primary).
	Connect func(ctx context.Context, database string) (*pgx.Conn, error)
	// Overrides are the configured function assertions.
	Overrides Overrides
	// RefreshInterval is how old a catalogue may grow before it is reloaded in the background.
	RefreshInterval time.Duration
	// Wait bounds how long a statement waits for a catalogue that must be loaded first: the first
	// use of a database, or the first use after an invalidation. Past it the statement is classified
	// without the catalogue (unknown functions go to the primary) while the load goes on.
	Wait time.Duration
	// LoadTimeout bounds one load (connect and queries).
	LoadTimeout time.Duration
	// RetryAfter is how long a failed first load is not retried; statements meanwhile go on without it.
	RetryAfter time.Duration
	// MinLookupInterval is the least time between two loads triggered by names missing from the
	// catalogue; a lookup within it waits for the interval to pass (within Wait).
	MinLookupInterval time.Duration
	// Logger receives one line per load, failure and change.
	Logger zerolog.Logger
}

// Manager keeps one catalogue per database and implements classify.CatalogueSource. Catalogues are
// loaded on first use, reloaded in the background every RefreshInterval (a reload that finds the same
// content keeps the old catalogue and its memoised analyses), reloaded at once after Invalidate, and
// reloaded when a statement names something the catalogue does not hold (once per name per
// catalogue, loads at least MinLookupInterval apart). A held, current catalogue costs two atomic loads.
type Manager struct {
	opts Options
	mu   sync.RWMutex
	dbs  map[string]*database
}

type database struct {
	name string
	cat  atomic.Pointer[classify.Catalogue]
	// dirty: invalidated; the next Catalogue call reloads before answering. stale: old; reload in the background.
	dirty, stale atomic.Bool

	mu         sync.Mutex
	loading    chan struct{} // non-nil while a load runs; closed when it ends
	generation uint64        // advanced by Invalidate
	failedAt   time.Time
	lastLookup time.Time
	// lastGoodStart is when the last successful load started: it saw everything committed before.
	lastGoodStart time.Time
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
	if opts.MinLookupInterval <= 0 {
		opts.MinLookupInterval = DefaultMinLookupInterval
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
		m.dbs[name] = db
	}
	return db
}

// Catalogue returns the database's current catalogue, loading it first when there is none or it was
// invalidated (waiting at most Options.Wait), or nil when none is available.
func (m *Manager) Catalogue(name string) *classify.Catalogue {
	db := m.state(name)
	cat := db.cat.Load()
	if cat != nil && !db.dirty.Load() {
		if db.stale.Load() {
			db.mu.Lock()
			if db.loading == nil && db.stale.Load() {
				m.startLoad(db)
			}
			db.mu.Unlock()
		}
		return cat
	}
	db.mu.Lock()
	if db.loading == nil {
		if !db.failedAt.IsZero() && time.Since(db.failedAt) < m.opts.RetryAfter {
			// The last load failed moments ago: answer without a catalogue rather than wait again.
			db.mu.Unlock()
			return nil
		}
		m.startLoad(db)
	}
	done := db.loading
	db.mu.Unlock()
	timer := time.NewTimer(m.opts.Wait)
	select {
	case <-done:
	case <-timer.C:
	}
	timer.Stop()
	if db.dirty.Load() {
		return nil // the reload did not finish (or failed): do not answer from the old catalogue
	}
	return db.cat.Load()
}

// Lookup reloads the catalogue when a statement names something current does not hold, and waits
// (at most Options.Wait) for a load that started after the statement asked, so that anything
// committed before is seen. Loads are single-flight and at least MinLookupInterval apart; a lookup
// that cannot finish in time, or whose load fails, reports looked false.
func (m *Manager) Lookup(name string, current *classify.Catalogue, _ string) (*classify.Catalogue, bool) {
	db := m.state(name)
	requested := time.Now()
	deadline := time.NewTimer(m.opts.Wait)
	defer deadline.Stop()
	for round := 0; round < 8; round++ {
		db.mu.Lock()
		if !db.lastGoodStart.Before(requested) {
			held := db.cat.Load()
			db.mu.Unlock()
			if held == current {
				return nil, true
			}
			return held, true
		}
		if !db.failedAt.IsZero() && !db.failedAt.Before(requested) {
			db.mu.Unlock()
			return nil, false
		}
		if db.loading == nil {
			if pause := m.opts.MinLookupInterval - time.Since(db.lastLookup); pause > 0 {
				db.mu.Unlock()
				select {
				case <-time.After(pause):
					continue
				case <-deadline.C:
					return nil, false
				}
			}
			db.lastLookup = time.Now()
			m.startLoad(db)
		}
		done := db.loading
		db.mu.Unlock()
		select {
		case <-done:
		case <-deadline.C:
			return nil, false
		}
	}
	return nil, false
}

// Invalidate marks the database's catalogue as outdated: the next Catalogue call reloads it, and a
// background reload follows shortly after in case no statement comes.
func (m *Manager) Invalidate(name string) {
	db := m.state(name)
	db.mu.Lock()
	db.generation++
	db.dirty.Store(true)
	db.mu.Unlock()
	time.AfterFunc(settleDelay, func() { db.stale.Store(true) })
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

// startLoad starts a background load of db; db.mu must be held and no load running.
func (m *Manager) startLoad(db *database) {
	done := make(chan struct{})
	db.loading = done
	generation := db.generation
	db.stale.Store(false)
	started := time.Now()
	go func() {
		cat, err := m.load(db.name)
		db.mu.Lock()
		defer func() {
			db.loading = nil
			db.mu.Unlock()
			close(done)
		}()
		if err != nil {
			db.failedAt = time.Now()
			m.opts.Logger.Warn().Err(err).Str("database", db.name).Msg("could not load the function catalogue; unknown functions go to the primary")
			time.AfterFunc(m.opts.RetryAfter, func() { db.stale.Store(true) })
			return
		}
		db.failedAt = time.Time{}
		db.lastGoodStart = started
		old := db.cat.Load()
		switch {
		case old != nil && old.SameContent(cat):
			// Nothing changed: keep the old catalogue, its version and its memoised analyses.
		default:
			db.cat.Store(cat)
			event := m.opts.Logger.Info()
			if old == nil {
				event = m.opts.Logger.Debug()
			}
			event.Str("database", db.name).Int("functions", cat.FunctionCount()).Uint64("version", cat.Version()).
				Dur("took", time.Since(started)).Msg("function catalogue loaded")
			for _, warning := range cat.Warnings() {
				m.opts.Logger.Warn().Str("database", db.name).Msg(warning)
			}
		}
		if db.generation == generation {
			db.dirty.Store(false)
		}
		time.AfterFunc(m.opts.RefreshInterval, func() { db.stale.Store(true) })
	}()
}

// load connects and reads one catalogue within LoadTimeout.
func (m *Manager) load(name string) (*classify.Catalogue, error) {
	if m.opts.Connect == nil {
		return nil, errors.New("catalog: no connection configured")
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.opts.LoadTimeout)
	defer cancel()
	conn, err := m.opts.Connect(ctx, name)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	return Load(ctx, conn, name, m.opts.Overrides)
}

var _ classify.CatalogueSource = (*Manager)(nil)
