package proxy

import (
	"testing"

	"github.com/pgowl/pgowl/classify"
)

// TestSearchPathMovedUnseenInsideABlock: which units, run inside a transaction block, leave the
// block's later statements on a search_path the session did not follow from the text, so that
// pgowl reads the path from the node (readSearchPathInBlock).
func TestSearchPathMovedUnseenInsideABlock(t *testing.T) {
	c := classify.New(classify.Options{})
	for _, tc := range []struct {
		sql              string
		pending          bool // changes made earlier in the block wait for its end
		savepointUnknown bool // the unit is a ROLLBACK TO of a savepoint the session did not see set
		want             bool
	}{
		// Followed from the text.
		{sql: "SET LOCAL search_path = pg_temp, public"},
		{sql: "SET search_path = app, public"},
		{sql: "SELECT set_config('search_path', 'app', true)"},
		{sql: "RESET search_path"},
		{sql: "SELECT 1"},
		{sql: "CREATE TABLE t (id int)"},
		{sql: "SET work_mem = '8MB'; SELECT 1"},
		{sql: "COMMIT; BEGIN"},                         // nothing pending that the block's end drops
		{sql: "ROLLBACK TO s", pending: true},          // a savepoint the session followed
		{sql: "ROLLBACK TO s", savepointUnknown: true}, // nothing pending to undo
		// Not followed.
		{sql: "BEGIN; SET LOCAL search_path = pg_temp, public", want: true},
		{sql: "SET search_path = app; SELECT 1", want: true},
		{sql: "SELECT set_config('search_path', 'pg_temp, ' || 'public', true)", want: true},
		{sql: "SELECT set_config(current_setting('app.name'), 'x', true)", want: true},
		{sql: "DO $$ BEGIN PERFORM 1; END $$", want: true},
		{sql: "COMMIT; BEGIN", pending: true, want: true},
		{sql: "ROLLBACK TO s; SELECT 1", pending: true, want: true},
		{sql: "ROLLBACK TO s", pending: true, savepointUnknown: true, want: true},
	} {
		sess := &session{}
		if tc.pending {
			sess.settings.addLocal("SET LOCAL search_path = pg_temp, public")
		}
		u := &unit{sql: tc.sql, effects: c.Classify(tc.sql)}
		if u.effects.Statements == 1 {
			u.setSQL = tc.sql
		}
		if got := sess.searchPathMovedUnseen(u, !tc.savepointUnknown); got != tc.want {
			t.Errorf("%q (pending %v, savepoint unknown %v): moved unseen %v, want %v", tc.sql, tc.pending, tc.savepointUnknown, got, tc.want)
		}
	}
}
