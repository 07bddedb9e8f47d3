package proxy

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/route"
)

// settingsTracker follows the session's settings (doc.go, "Session
// settings"): the changes that succeeded, those waiting for the end of
// their transaction, the LOADs, the names a read-back asks for, and the
// settings that make the session need the primary. It does no I/O and
// knows no backend: the session runs the statements, tells the tracker what
// took effect, and marks its connections (connSettings) with the tracker's
// key.
//
// Settings changed inside a transaction block move through these states:
// none pending; pending (they join sets if the block commits, and are
// dropped if it rolls back); pending and uncertain (a ROLLBACK TO a savepoint
// pgowl did not see set, or a multi-statement string that ends or chains the
// block, may have undone some of them: when the block ends they are dropped
// and the backend's settings count as unknown). A ROLLBACK TO a savepoint
// that pgowl saw set, sent alone, goes back to the pending changes (and
// their certainty) of that moment, as PostgreSQL undoes the settings.
// Independently, readBackDue is set by a change
// pgowl cannot replay as sent and cleared when the values are read back
// from an idle backend; and searchPathUnsure is set by a unit that may have
// moved search_path where the text does not say, and cleared when the path
// is read from the node inside the block, or between transactions once no
// read-back is due.
type settingsTracker struct {
	// sets are the session-level settings changes that succeeded, in order,
	// as the statements that replay them.
	sets []string
	// pending ran inside the open transaction and count only if it commits.
	// pending[i] is a transaction-local change (SET LOCAL search_path) when pendingLocal[i] is
	// set: it holds, for the classifier's search path, until the block ends, and never counts.
	pending      []string
	pendingLocal []bool
	// pendingUncertain: pgowl cannot tell which of pending survived (see the type's states).
	pendingUncertain bool
	// savepoints are the savepoints set in the open block and not released,
	// oldest first, with the pending changes at that moment.
	savepoints savepointMarks[settingsAtSavepoint]
	// key identifies loads and sets ("" when there are none): a connection
	// marked with it carries them.
	key string
	// names are the settings the session's statements named in set_config
	// calls and SETs (classify.Effects.SetConfigNames), at most
	// maxSettingNames: a read-back asks for each, since pg_settings does not
	// list the settings of applications (app.tenant).
	names []string
	// readBackDue: a unit changed settings in a way pgowl cannot replay as
	// sent; they are read back once the backend is idle (at the end of the
	// unit, or of the transaction block or batch it ran in).
	readBackDue bool
	// searchPathUnsure: a unit may have changed search_path in a way the
	// classifier did not follow (see session.searchPathMovedUnseen); what is
	// created meanwhile is checked on the node, and inside a block the path
	// is read from it at the first quiet moment.
	searchPathUnsure bool
	// loads are the LOAD statements the session ran, replayed on its other
	// backends ahead of its settings (see noteLoad).
	loads []string
	// primaryOnly are the settings that make every statement of the session
	// need the primary, whatever it does: a serializable default isolation
	// level from the login, or read back from the node, which a standby
	// refuses for every statement.
	primaryOnly route.PrimaryOnly
}

// maxSettingNames bounds settingsTracker.names.
const maxSettingNames = 64

// maxLoads bounds the LOAD statements a session replays.
const maxLoads = 16

// lexerSettings change how later statements' text is read (string escapes,
// the client's bytes): an entry for one is never moved or dropped, so that
// every recorded statement after it is replayed as it was read.
var lexerSettings = map[string]bool{
	"standard_conforming_strings": true,
	"client_encoding":             true,
	"backslash_quote":             true,
	"escape_string_warning":       true,
}

// recordedChange returns the setting change a recorded replay statement
// makes (SET, RESET, RESET ALL or a set_config call), for replacing an
// earlier value; ok is false for a statement that names no session-level
// change. The classifier answers from its cache: the statements were
// classified when the session ran them.
func recordedChange(c *classify.Classifier, recorded string) (classify.SettingChange, bool) {
	settings := c.Classify(recorded).Settings
	if len(settings) != 1 || settings[0].Local {
		return classify.SettingChange{}, false
	}
	return settings[0], true
}

// apply records settings changes that took effect. A SET or RESET of a
// setting replaces what was recorded for it before, so that a value set
// again and again is replayed once.
func (t *settingsTracker) apply(c *classify.Classifier, sets []string) {
	for _, s := range sets {
		change, ok := recordedChange(c, s)
		if ok && change.All {
			t.sets = t.sets[:0]
			continue
		}
		if ok && change.Name != "" && !lexerSettings[change.Name] {
			t.sets = slices.DeleteFunc(t.sets, func(earlier string) bool {
				other, ok := recordedChange(c, earlier)
				return ok && other.Name == change.Name
			})
			// The replay starts from RESET ALL: the default is what RESET gives, unless an
			// unnamed change recorded before (SET SESSION CHARACTERISTICS) may set it again.
			if change.Reset && !slices.ContainsFunc(t.sets, func(earlier string) bool {
				other, ok := recordedChange(c, earlier)
				return ok && other.Name == "" && !other.All
			}) {
				continue
			}
		}
		t.sets = append(t.sets, s)
	}
	t.updateKey()
}

// updateKey computes key from loads and sets.
func (t *settingsTracker) updateKey() {
	if len(t.sets) == 0 && len(t.loads) == 0 {
		t.key = ""
		return
	}
	h := sha256.New()
	for _, s := range t.loads {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	h.Write([]byte{0})
	for _, s := range t.sets {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	t.key = hex.EncodeToString(h.Sum(nil)[:12])
}

// discardAll follows DISCARD ALL: no setting of the session survives.
func (t *settingsTracker) discardAll() {
	t.sets, t.pending, t.pendingLocal = nil, nil, nil
	t.updateKey()
}

// noteNames remembers the setting names a unit's statements named.
func (t *settingsTracker) noteNames(names []string) {
	for _, name := range names {
		if len(t.names) >= maxSettingNames {
			return
		}
		if name != "" && !slices.Contains(t.names, name) {
			t.names = append(t.names, name)
		}
	}
}

// addLoad records a LOAD statement to replay. It reports false when the
// load was recorded already or too many are (full says which).
func (t *settingsTracker) addLoad(load string) (added, full bool) {
	if slices.Contains(t.loads, load) {
		return false, false
	}
	if len(t.loads) >= maxLoads {
		return false, true
	}
	t.loads = append(t.loads, load)
	t.updateKey()
	return true, false
}

// hasPending reports whether changes wait for the end of their transaction
// block; without any, the uncertain mark is dropped too (nothing is left
// for it to be about).
func (t *settingsTracker) hasPending() bool {
	if len(t.pending) == 0 {
		t.pendingUncertain = false
		return false
	}
	return true
}

// addPending records a change made inside the open transaction block; it
// counts only if the block commits.
func (t *settingsTracker) addPending(replay string) {
	t.pending, t.pendingLocal = append(t.pending, replay), append(t.pendingLocal, false)
}

// pendingChangesSearchPath reports whether a change pending in the open block sets search_path
// (for the block or the session): a ROLLBACK TO, or the end of the block, pgowl could not follow
// may then have undone it. c answers from its cache: the statements were classified when the
// session ran them.
func (t *settingsTracker) pendingChangesSearchPath(c *classify.Classifier) bool {
	for _, sql := range t.pending {
		if c.Classify(sql).SearchPath != nil {
			return true
		}
	}
	return false
}

// addLocal records a change of search_path made for the rest of the open transaction block
// (SET LOCAL, set_config(..., true)), in order with the block's other changes: the classifier
// resolves the block's later statements with it, and it ends with the block, whatever its fate.
func (t *settingsTracker) addLocal(sql string) {
	t.pending, t.pendingLocal = append(t.pending, sql), append(t.pendingLocal, true)
}

// settlePending applies a unit's fate to the pending changes (the type's
// states). When the block ended, it returns the changes that now count
// (the block committed and pgowl could follow it), valid until the next
// addPending, or unknown when pgowl could not tell which of them survived:
// the backend's settings then count as unknown.
func (t *settingsTracker) settlePending(fate pendingSetsFate, committed bool) (committedSets []string, unknown bool) {
	switch fate {
	case pendingKept:
		return nil, false
	case pendingKeptUncertain:
		t.pendingUncertain = true
		return nil, false
	}
	// Transaction-local changes end with the block: they neither count nor make it uncertain.
	kept := t.pending
	if slices.Contains(t.pendingLocal, true) {
		kept = nil
		for i, sql := range t.pending {
			if !t.pendingLocal[i] {
				kept = append(kept, sql)
			}
		}
	}
	unknown = t.pendingUncertain && len(kept) > 0
	if committed && !unknown {
		committedSets = kept
	}
	t.pending, t.pendingLocal = t.pending[:0], t.pendingLocal[:0]
	t.pendingUncertain = false
	return committedSets, unknown
}

// settingsAtSavepoint is what ROLLBACK TO a savepoint restores: the
// pending changes made before it, their certainty then, and whether the
// search_path was unsure then (a path read from the node since is among the
// changes the rollback drops).
type settingsAtSavepoint struct {
	pending          int
	uncertain        bool
	searchPathUnsure bool
}

// followSavepoint applies a SAVEPOINT, RELEASE or ROLLBACK TO that ran
// alone and succeeded in the open block, and reports whether it was
// followed: a RELEASE or ROLLBACK TO of a savepoint pgowl did not see set is
// not (the caller then counts the pending changes as uncertain).
func (t *settingsTracker) followSavepoint(st *classify.TransactionStatement) bool {
	at, back, followed := t.savepoints.follow(st, func() settingsAtSavepoint {
		return settingsAtSavepoint{pending: len(t.pending), uncertain: t.pendingUncertain, searchPathUnsure: t.searchPathUnsure}
	})
	if back {
		t.pending, t.pendingLocal, t.pendingUncertain = t.pending[:at.pending], t.pendingLocal[:at.pending], at.uncertain
		t.searchPathUnsure = at.searchPathUnsure
	}
	return followed
}

// endBlock forgets the block's savepoints once it has ended.
func (t *settingsTracker) endBlock() { t.savepoints.clear() }

// replay is what brings a connection's settings in line with the session's,
// after RESET ALL: the LOADs, then the settings.
func (t *settingsTracker) replay() []string { return slices.Concat(t.loads, t.sets) }

// readBackNames are the settings a read-back asks for by name: those the
// session's statements named, and those its recorded changes set.
func (t *settingsTracker) readBackNames(c *classify.Classifier) []string {
	named := t.names
	for _, recorded := range t.sets {
		if change, ok := recordedChange(c, recorded); ok && change.Name != "" && !slices.Contains(named, change.Name) {
			named = append(named[:len(named):len(named)], change.Name)
		}
	}
	return named
}

// replaceWithReadBack replaces the recorded settings with the values read
// back (as set_config calls); serializable says the default isolation level
// read back is serializable, which a standby refuses for every statement.
func (t *settingsTracker) replaceWithReadBack(sets []string, serializable bool) {
	t.primaryOnly &^= route.SerializableReadBack
	if serializable {
		t.primaryOnly |= route.SerializableReadBack
	}
	t.sets = append(t.sets[:0], sets...)
	t.updateKey()
}

// setsIsolation reports whether the session set a default isolation level:
// above READ COMMITTED an implicit transaction's statements share one
// snapshot, which a split across nodes would not keep. (A default set for
// the role or database is not seen here.)
func (t *settingsTracker) setsIsolation(c *classify.Classifier) bool {
	for _, s := range t.sets {
		// SET SESSION CHARACTERISTICS (no name) may set the default level too.
		if change, ok := recordedChange(c, s); ok && (change.Name == "default_transaction_isolation" || change.Name == "" && !change.All) {
			return true
		}
	}
	return false
}

// changesLexing reports whether the recorded settings include one that
// changes how the statements after it are read.
func (t *settingsTracker) changesLexing(c *classify.Classifier) bool {
	for _, s := range t.sets {
		if change, ok := recordedChange(c, s); ok && lexerSettings[change.Name] {
			return true
		}
	}
	return false
}
