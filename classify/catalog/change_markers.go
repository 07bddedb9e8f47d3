package catalog

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/classify"
)

// Changes made past pgowl, found by the catalogue's own change markers.
//
// A change a session makes through pgowl is told to the Manager (Changed and the calls that take
// it in). A change made on the primary itself, or through another pgowl, is not: until a read
// finds it, reads are planned with the old definition, and a standby that already replayed the
// change runs the new one (a function replaced by one that writes then fails there with 25006).
// The periodic whole read (Options.RefreshInterval) found it at the latest; with
// Options.ChangePollInterval the Manager asks the primary, that often, which catalogue rows were
// written since it last asked, and reads those names.
//
// Every row PostgreSQL writes carries the transaction that wrote it (xmin), and a new or replaced
// function, view, type, policy or relation is a new row of pg_proc, pg_rewrite, pg_type,
// pg_policy or pg_class. The poll keeps the snapshot it last ran under (pg_current_snapshot():
// every transaction at or past its xmax, or running then, was not visible to it) and selects the
// rows written by such a transaction: what committed since, and nothing earlier, so a
// long-running transaction elsewhere does not make every poll return the same rows again. Each
// is a scan of those catalogues' rows (changeMarkersQuery: a few milliseconds for a database of
// thousands of functions), over the connection the Manager keeps, while no read runs. A database
// no statement has used for a minute is not polled (nor is its connection kept); the first use
// after that polls at once, from the snapshot it kept, so what changed meanwhile is found all the
// same.
//
// The names found are read as a read by name (a rule, a cast, an operator or a search_path
// default of a role or database: the whole catalogue), in the background: statements do not
// wait for it, as they do for a change a session made. What the read finds changed reaches
// Options.Found like any other read's. Names a session told the Manager of in the last two polls
// are left out: the session's own change is in already, and reading it again would cost a
// migration a read per poll. A change past pgowl to such a name within that window is found by
// the next whole read. Drops are not found: a dropped object leaves no row, and a definition
// that is gone can make a statement fail, not run something else.
//
// The snapshot starts with each whole read (taken before its first part runs, so nothing
// committed between the two is missed) and is kept when a poll fails or finds that a read is
// running; then the next poll selects the same rows again.

// changeSnapshot is what a poll keeps of the snapshot it ran under: its xmax and the transactions
// running then, as 32-bit transaction IDs (what xmin holds). known is false until a whole read
// took one.
type changeSnapshot struct {
	known   bool
	xmax    uint32
	running []uint32
}

// snapshotQuery reads the snapshot the markers start from.
const snapshotQuery = `SELECT pg_catalog.pg_current_snapshot()::text`

// changeMarkersQuery selects the names of the rows written by transactions not visible to the
// snapshot $1 (xmax) and $2 (running): by part, 'f' functions, 'r' relations and views, 't' types,
// '*' what only a whole read reads. Its last row, part 's', is its own snapshot. age() compares
// transaction IDs across wraparound, as xmin values are compared with one another. Each catalogue
// is scanned whole (no index covers xmin): about 7 ms on PostgreSQL 15 for a database of 20000
// functions and 2000 tables on the 2-core development machine, of which pg_proc's 23000 rows take
// 1.3 ms; leaving out pg_catalog's rows cost more than it saved.
const changeMarkersQuery = `WITH s AS (SELECT $1::text::xid AS xmax, $2::text::xid[] AS running)
SELECT 'f', p.proname::text FROM pg_catalog.pg_proc p, s
 WHERE pg_catalog.age(p.xmin) <= pg_catalog.age(s.xmax) OR p.xmin = ANY (s.running)
UNION
SELECT 'r', c.relname::text FROM pg_catalog.pg_class c, s
 WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S') AND (pg_catalog.age(c.xmin) <= pg_catalog.age(s.xmax) OR c.xmin = ANY (s.running))
UNION
SELECT CASE WHEN w.rulename = '_RETURN' THEN 'r' ELSE '*' END, c.relname::text
  FROM pg_catalog.pg_rewrite w JOIN pg_catalog.pg_class c ON c.oid = w.ev_class, s
 WHERE pg_catalog.age(w.xmin) <= pg_catalog.age(s.xmax) OR w.xmin = ANY (s.running)
UNION
SELECT 'r', c.relname::text FROM pg_catalog.pg_policy y JOIN pg_catalog.pg_class c ON c.oid = y.polrelid, s
 WHERE pg_catalog.age(y.xmin) <= pg_catalog.age(s.xmax) OR y.xmin = ANY (s.running)
UNION
SELECT 't', t.typname::text FROM pg_catalog.pg_type t, s
 WHERE pg_catalog.age(t.xmin) <= pg_catalog.age(s.xmax) OR t.xmin = ANY (s.running)
UNION
SELECT '*', '' FROM pg_catalog.pg_operator o, s WHERE pg_catalog.age(o.xmin) <= pg_catalog.age(s.xmax) OR o.xmin = ANY (s.running)
UNION
SELECT '*', '' FROM pg_catalog.pg_cast k, s WHERE pg_catalog.age(k.xmin) <= pg_catalog.age(s.xmax) OR k.xmin = ANY (s.running)
UNION
SELECT '*', '' FROM pg_catalog.pg_db_role_setting d, s WHERE pg_catalog.age(d.xmin) <= pg_catalog.age(s.xmax) OR d.xmin = ANY (s.running)
UNION ALL
SELECT 's', pg_catalog.pg_current_snapshot()::text`

// parseSnapshot reads pg_current_snapshot()'s text ("xmin:xmax:running,..."; 64-bit IDs).
func parseSnapshot(text string) (changeSnapshot, error) {
	parts := strings.Split(text, ":")
	if len(parts) != 3 {
		return changeSnapshot{}, errors.New("catalog: unexpected snapshot " + strconv.Quote(text))
	}
	xid := func(s string) (uint32, error) {
		v, err := strconv.ParseUint(s, 10, 64)
		return uint32(v), err // the low 32 bits: the xid xmin holds
	}
	xmax, err := xid(parts[1])
	if err != nil {
		return changeSnapshot{}, err
	}
	snap := changeSnapshot{known: true, xmax: xmax}
	if parts[2] != "" {
		for _, s := range strings.Split(parts[2], ",") {
			v, err := xid(s)
			if err != nil {
				return changeSnapshot{}, err
			}
			snap.running = append(snap.running, v)
		}
	}
	return snap, nil
}

// readSnapshot reads the snapshot a whole read's markers start from.
func readSnapshot(ctx context.Context, conn *pgx.Conn) (changeSnapshot, error) {
	var text string
	if err := conn.QueryRow(ctx, snapshotQuery).Scan(&text); err != nil {
		return changeSnapshot{}, err
	}
	return parseSnapshot(text)
}

// queryChangeMarkers runs changeMarkersQuery from since: the names written since, and the
// snapshot the next poll starts from.
func queryChangeMarkers(ctx context.Context, conn *pgx.Conn, since changeSnapshot) (classify.CatalogueChanges, changeSnapshot, error) {
	running := make([]string, len(since.running))
	for i, xid := range since.running {
		running[i] = strconv.FormatUint(uint64(xid), 10)
	}
	rows, err := conn.Query(ctx, changeMarkersQuery, strconv.FormatUint(uint64(since.xmax), 10), "{"+strings.Join(running, ",")+"}")
	if err != nil {
		return classify.CatalogueChanges{}, since, err
	}
	var found classify.CatalogueChanges
	next := changeSnapshot{}
	var part, name string
	_, err = pgx.ForEachRow(rows, []any{&part, &name}, func() error {
		switch part {
		case "f":
			found.Functions = append(found.Functions, name)
		case "r":
			found.Relations = append(found.Relations, name)
		case "t":
			found.Types = append(found.Types, name)
		case "*":
			found.Everything = true
		case "s":
			snap, err := parseSnapshot(name)
			if err != nil {
				return err
			}
			next = snap
		}
		return nil
	})
	if err == nil && !next.known {
		err = errors.New("catalog: the change markers returned no snapshot")
	}
	if err != nil {
		return classify.CatalogueChanges{}, since, err
	}
	return found, next, nil
}

// toldNames are the names sessions told the Manager of (Changed, and the changes they patch in),
// in the current poll's interval and the one before: a poll leaves them out (see above).
type toldNames struct {
	now, before map[toldName]struct{}
}

type toldName struct {
	part byte
	name string
}

// note records the names of changes.
func (t *toldNames) note(changes *classify.CatalogueChanges) {
	if changes == nil {
		return
	}
	if t.now == nil {
		t.now = make(map[toldName]struct{})
	}
	for _, l := range [...]struct {
		part  byte
		names []string
	}{{'f', changes.Functions}, {'r', changes.Relations}, {'t', changes.Types}} {
		for _, name := range l.names {
			t.now[toldName{l.part, name}] = struct{}{}
		}
	}
}

// untold returns found without the names told in the last two intervals, and starts a new
// interval.
func (t *toldNames) untold(found classify.CatalogueChanges) classify.CatalogueChanges {
	keep := func(part byte, names []string) []string {
		var out []string
		for _, name := range names {
			key := toldName{part, name}
			_, now := t.now[key]
			_, before := t.before[key]
			if !now && !before {
				out = append(out, name)
			}
		}
		return out
	}
	out := classify.CatalogueChanges{Everything: found.Everything,
		Functions: keep('f', found.Functions), Relations: keep('r', found.Relations), Types: keep('t', found.Types)}
	t.before, t.now = t.now, nil
	return out
}

// maxChangedNamesPolled bounds the names a poll reads by name; past it the whole catalogue is read.
const maxChangedNamesPolled = maxChangedNamesRead

// pollLater (re)arms db's poll for Options.ChangePollInterval from now, when polls are on and a
// whole read has given it a snapshot. db.mu must be held.
func (m *Manager) pollLater(db *database) {
	if m.opts.ChangePollInterval <= 0 || !db.markers.known || m.closed.Load() {
		return
	}
	if db.poll == nil {
		db.poll = time.AfterFunc(m.opts.ChangePollInterval, func() { m.pollChanges(db) })
	} else {
		db.poll.Reset(m.opts.ChangePollInterval)
	}
}

// pollsUnused is how many polls in a row may find a database unused (Held and Catalogue not
// called) before its polls stop until its next use (noteUse).
func (m *Manager) pollsUnused() int {
	unused := m.opts.ChangePollsWhileUnused
	if unused <= 0 {
		unused = time.Minute
	}
	return max(1, int(unused/m.opts.ChangePollInterval))
}

// noteUse records that a statement asked for db's catalogue, and starts its polls again if they
// stopped for want of use. It costs one atomic load when db was used since the last poll.
func (m *Manager) noteUse(db *database) {
	if db.used.Load() {
		return
	}
	db.used.Store(true)
	if db.pollsStopped.Load() {
		db.mu.Lock()
		if db.pollsStopped.Swap(false) && db.poll != nil && !m.closed.Load() {
			db.poll.Reset(0)
		}
		db.mu.Unlock()
	}
}

// pollChanges runs one poll of db's change markers (see above) when no read runs and no change
// is pending, and reads what it finds by name, in the background.
func (m *Manager) pollChanges(db *database) {
	db.mu.Lock()
	if m.closed.Load() || db.cat.Load() == nil || !db.markers.known {
		db.mu.Unlock()
		return
	}
	if db.used.Swap(false) {
		db.unusedPolls = 0
	} else if db.unusedPolls++; db.unusedPolls >= m.pollsUnused() {
		db.pollsStopped.Store(true) // until noteUse
		if db.used.Load() && db.pollsStopped.Swap(false) {
			m.pollLater(db) // used meanwhile: noteUse saw the polls running
		} else {
			m.opts.Logger.Debug().Str("database", db.name).Msg("the catalogue's change markers are not polled until the database is used again")
		}
		db.mu.Unlock()
		return
	}
	if db.loading != nil || !db.pending.Empty() {
		m.pollLater(db) // a read runs, or will: poll after it, from the same snapshot
		db.mu.Unlock()
		return
	}
	done := make(chan struct{})
	db.loading, db.polling = done, true
	conn, since := db.conn, db.markers
	db.mu.Unlock()

	found, next, err := func() (classify.CatalogueChanges, changeSnapshot, error) {
		var err error
		if conn, err = m.connection(db.name, conn); err != nil {
			return classify.CatalogueChanges{}, since, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), m.opts.LoadTimeout)
		defer cancel()
		return queryChangeMarkers(ctx, conn, since)
	}()

	db.mu.Lock()
	defer close(done)
	defer db.mu.Unlock()
	db.loading, db.polling = nil, false
	if err != nil {
		if conn != nil {
			go conn.Close(context.Background())
		}
		db.conn = nil
		if !m.closed.Load() {
			m.opts.Logger.Debug().Err(err).Str("database", db.name).Msg("could not read the catalogue's change markers; polled again later")
		}
	} else {
		db.conn, db.lastUse = conn, time.Now()
		if m.closed.Load() {
			db.conn = nil
			go conn.Close(context.Background())
		} else if db.idleTimer == nil {
			db.idleTimer = time.AfterFunc(keepIdle, func() { m.closeIdle(db) })
		} else {
			db.idleTimer.Reset(keepIdle) // closed once the polls stop (pollsUnused)
		}
		db.markers = next
		found = db.told.untold(found)
		if len(found.Functions)+len(found.Relations)+len(found.Types) > maxChangedNamesPolled {
			found = classify.CatalogueChanges{Everything: true}
		}
		if !found.Empty() {
			m.opts.Logger.Debug().Str("database", db.name).Strs("functions", found.Functions).Strs("relations", found.Relations).
				Strs("types", found.Types).Bool("everything", found.Everything).Msg("catalogue rows written past pgowl; reading them")
			if db.pending.Empty() {
				db.pending = found
			} else {
				db.pending.Merge(&found)
			}
		}
	}
	if !db.pending.Empty() && !m.closed.Load() {
		// What the poll found, or a change a session told while it ran.
		m.startLoad(db)
	}
	m.pollLater(db)
}
