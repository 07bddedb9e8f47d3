package proxy

import (
	"testing"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/wire"
)

// TestSearchPathMovedUnseen: which units leave the session on a search_path it did not follow
// from their text, so that what they (and the units after them) create is checked on the node,
// and inside a block the path is read from it (followSearchPathUnseen).
func TestSearchPathMovedUnseen(t *testing.T) {
	c := classify.New(classify.Options{})
	for _, tc := range []struct {
		sql              string
		pending          string // a change made earlier in the block, waiting for its end
		readBackDue      bool   // a session-level change earlier in the block was not recorded
		savepointUnknown bool   // the unit is a ROLLBACK TO of a savepoint the session did not see set
		want             bool
	}{
		// Followed from the text.
		{sql: "SET LOCAL search_path = pg_temp, public"},
		{sql: "SET search_path = app, public"},
		{sql: "SELECT set_config('search_path', 'app', true)"},
		{sql: "SELECT set_config('search_path', 'app', false)"},
		{sql: "RESET search_path"},
		{sql: "SELECT 1"},
		{sql: "CREATE TABLE t (id int)"},
		{sql: "SET work_mem = '8MB'; SELECT 1"},
		{sql: "COMMIT; BEGIN"},                                   // nothing pending
		{sql: "COMMIT; BEGIN", pending: "SET work_mem = '8MB'"},  // nothing pending sets the path
		{sql: "ROLLBACK TO s", pending: "SET search_path = app"}, // a savepoint the session followed
		{sql: "ROLLBACK TO s", savepointUnknown: true},           // nothing pending to undo
		{sql: "DO $$ BEGIN PERFORM 1; END $$"},                   // checked on the node by the pin check
		{sql: "SAVEPOINT s; SELECT 1", pending: "SET work_mem = '8MB'"},
		// Not followed.
		{sql: "BEGIN; SET LOCAL search_path = pg_temp, public", want: true},
		{sql: "SET search_path = app; SELECT 1", want: true},
		{sql: "SELECT set_config('search_path', 'pg_temp, ' || 'public', true)", want: true},
		{sql: "SELECT set_config('search_path', 'app', false) AS old", want: true},                   // not replayable as sent
		{sql: "SELECT set_config('search_path', 'app', true) FROM pg_class WHERE false", want: true}, // may not run
		{sql: "SELECT set_config('search_path', 'app', true) AS old", want: true},
		{sql: "SELECT set_config(current_setting('app.name'), 'x', true)", want: true},
		{sql: "COMMIT; BEGIN", pending: "SET LOCAL search_path = pg_temp, public", want: true},
		{sql: "COMMIT; BEGIN", pending: "SET search_path = app", want: true},
		{sql: "ROLLBACK TO s; SELECT 1", pending: "SET search_path = app", want: true},
		{sql: "ROLLBACK TO s", pending: "SET search_path = app", savepointUnknown: true, want: true},
		{sql: "COMMIT AND CHAIN", readBackDue: true, want: true},
		{sql: "COMMIT AND CHAIN"},
		{sql: "ROLLBACK AND CHAIN", readBackDue: true, want: true},
		{sql: "COMMIT; BEGIN", readBackDue: true, want: true},
	} {
		sess := &session{srv: &Server{opts: Options{Classifier: c}}}
		if tc.pending != "" {
			sess.settings.addPending(tc.pending)
		}
		sess.settings.readBackDue = tc.readBackDue
		u := &unit{sql: tc.sql, effects: c.Classify(tc.sql)}
		if u.effects.Statements == 1 {
			u.setSQL = tc.sql
		}
		settled := unitSettled{status: wire.TxInBlock, tracking: sessionEffectsTracking(u, &u.outcome, false), savepointFollowed: !tc.savepointUnknown}
		if got := sess.searchPathMovedUnseen(u, false, settled); got != tc.want {
			t.Errorf("%q (pending %q, savepoint unknown %v): moved unseen %v, want %v", tc.sql, tc.pending, tc.savepointUnknown, got, tc.want)
		}
	}
}

// TestACreateOnAPathNotFollowedIsCheckedOnTheNode: a unit that writes or changes the catalogue
// while the session's search_path may have moved unseen (in the same string, or in an earlier
// part of a batch sent at a Flush) may have created an object in pg_temp: the pin check is due.
func TestACreateOnAPathNotFollowedIsCheckedOnTheNode(t *testing.T) {
	c := classify.New(classify.Options{})
	run := func(sess *session, be *backend, sql string) {
		u := &unit{sql: sql, effects: c.Classify(sql)}
		if u.effects.Statements == 1 {
			u.setSQL = sql
		}
		sess.followSearchPathUnseen(be, u, unitSettled{status: wire.TxIdle, tracking: sessionEffectsTracking(u, &u.outcome, be.openBatch), savepointFollowed: true})
	}
	newSession := func() *session { return &session{srv: &Server{opts: Options{Classifier: c}}} }

	sess := newSession()
	run(sess, &backend{}, "SET search_path = pg_temp, public; CREATE TABLE t (id int)")
	if !sess.pins.recheckDue() {
		t.Error("a CREATE after a SET search_path in the same string: no pin check due")
	}

	for _, set := range []string{"SET search_path = pg_temp, public; SELECT 1", "SET search_path = pg_temp, public", "SET LOCAL search_path = pg_temp, public"} {
		sess = newSession()
		batch := &backend{openBatch: true}
		run(sess, batch, set) // sent at a Flush
		if sess.pins.recheckDue() {
			t.Errorf("%q, which created nothing: a pin check is due", set)
		}
		run(sess, batch, "CREATE TABLE t (id int)")
		if !sess.pins.recheckDue() {
			t.Errorf("a CREATE in the batch's next part, after %q in an earlier one: no pin check due", set)
		}
	}

	sess = newSession()
	run(sess, &backend{}, "SET search_path = pg_temp, public")
	run(sess, &backend{}, "CREATE TABLE t (id int)")
	if sess.pins.recheckDue() {
		t.Error("a CREATE after a SET search_path the session followed: a pin check is due")
	}

	// Any write may create: SELECT INTO, a CALL, a function called from an INSERT.
	for _, write := range []string{"SELECT * INTO t FROM src", "CALL p()", "INSERT INTO t SELECT make_table()"} {
		sess = newSession()
		run(sess, &backend{}, "SET search_path = pg_temp, public; "+write)
		if !sess.pins.recheckDue() {
			t.Errorf("SET search_path; %s in one string: no pin check due", write)
		}
	}
	sess = newSession()
	run(sess, &backend{}, "SET search_path = pg_temp, public; SELECT 1")
	if sess.pins.recheckDue() {
		t.Error("SET search_path; SELECT 1 in one string: a pin check is due")
	}
}

// TestARollbackToASavepointTakenWhileThePathWasUnsureMakesItUnsureAgain: a path read from the
// node after a savepoint is among the changes a ROLLBACK TO it drops, so the path is unsure again
// (and read again), as it was when the savepoint was set.
func TestARollbackToASavepointTakenWhileThePathWasUnsureMakesItUnsureAgain(t *testing.T) {
	var tr settingsTracker
	tr.searchPathUnsure = true
	if !tr.followSavepoint(&classify.TransactionStatement{Kind: classify.TxKindSavepoint, Savepoint: "a"}) {
		t.Fatal("SAVEPOINT a not followed")
	}
	tr.addLocal("SELECT pg_catalog.set_config('search_path', 'pg_temp, public', true)") // read from the node
	tr.searchPathUnsure = false
	if !tr.followSavepoint(&classify.TransactionStatement{Kind: classify.TxKindRollbackToSavepoint, Savepoint: "a"}) {
		t.Fatal("ROLLBACK TO a not followed")
	}
	if !tr.searchPathUnsure || len(tr.pending) != 0 {
		t.Errorf("after ROLLBACK TO a: unsure %v, pending %q; want unsure again, the read dropped", tr.searchPathUnsure, tr.pending)
	}
	// A savepoint taken while the path was known: rolling back to it undoes what made it unsure.
	if !tr.followSavepoint(&classify.TransactionStatement{Kind: classify.TxKindSavepoint, Savepoint: "b"}) {
		t.Fatal("SAVEPOINT b not followed")
	}
	tr.searchPathUnsure = false
	tr.followSavepoint(&classify.TransactionStatement{Kind: classify.TxKindSavepoint, Savepoint: "c"})
	tr.searchPathUnsure = true
	tr.followSavepoint(&classify.TransactionStatement{Kind: classify.TxKindRollbackToSavepoint, Savepoint: "c"})
	if tr.searchPathUnsure {
		t.Error("after ROLLBACK TO c, set while the path was known: still unsure")
	}
}
