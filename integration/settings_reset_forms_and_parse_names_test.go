package integration

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// Review 6: commits 6b263b5 (settings replay) and dc5dfbd (a client's Parse
// closes and re-parses a managed statement the backend holds).
//
// The settings tests use rvStartOneBackend: sessions A and B share the one
// backend connection. A unit of B makes pgowl reset the backend (RESET ALL)
// and A's next unit replays A's recorded settings (proxy/choose.go
// prepareBackend), so what A sees after B ran is what pgowl recorded.

// r6Moved runs sqls on A, one unit of B on the shared backend, and returns
// what query gives on A afterwards.
func r6Moved(t *testing.T, ctx context.Context, a, b *pgconn.PgConn, query string, sqls ...string) (before, after string) {
	t.Helper()
	r4sExec(t, ctx, a, sqls...)
	before = r4sOne(t, ctx, a, query)
	r4sExec(t, ctx, b, "SELECT 1")
	after = r4sOne(t, ctx, a, query)
	return before, after
}

// TestQuotedSetThenResetResurrects:
// Steps: A: SET "r6.q" = 'one'; RESET r6.q; B: SELECT 1; A: current_setting('r6.q').
// Observed (expected failure): A sees 'one' again after B used the backend.
// Should: ” — RESET r6.q reset the setting on PostgreSQL (GUC names are
// case-insensitive and "r6.q" and r6.q are the same setting).
// Cause: proxy/session.go settingName keeps a quoted name with its quotes
// (`"r6.q"`) and lower-cases an unquoted one (`r6.q`), so applySets does not
// see RESET r6.q as replacing SET "r6.q": the SET stays recorded and is
// replayed after RESET ALL. The same for set_config('R6.Q', ...) (lower-cased
// by recordedSettingName) against SET "R6.Q".
func TestQuotedSetThenResetResurrects(t *testing.T) {
	o := rvStartOneBackend(t, nil)
	ctx := timeoutCtx(t, 2*statementTimeout)
	a := o.connect(t, nil).PgConn()
	b := o.connect(t, nil).PgConn()
	q := "SELECT coalesce(current_setting('r6.q', true), '<null>')"
	before, after := r6Moved(t, ctx, a, b, q, `SET "r6.q" = 'one'`, "RESET r6.q")
	if before == "one" {
		t.Fatalf("RESET r6.q did not take on the session's own backend: %q", before)
	}
	if after == "one" {
		t.Errorf(`after SET "r6.q" = 'one'; RESET r6.q the session's r6.q is %q on its own backend but %q once another session used it (the RESET is lost in the replay)`, before, after)
	}
}

// TestCompactSetThenResetResurrects:
// Steps: A: SET r6.ns='one' (no spaces around =); RESET r6.ns; B: SELECT 1;
// A: current_setting('r6.ns').
// Observed (expected failure): 'one' again.
// Should: ”.
// Cause: proxy/session.go settingName splits on white space and needs
// "name = value" as three fields; SET r6.ns='one' is one field after SET, so
// it is recorded without a name, RESET r6.ns cannot replace it, and every
// such SET is appended (the list also grows without bound for a per-request
// SET x='...', the growth 6b263b5 meant to stop).
func TestCompactSetThenResetResurrects(t *testing.T) {
	o := rvStartOneBackend(t, nil)
	ctx := timeoutCtx(t, 2*statementTimeout)
	a := o.connect(t, nil).PgConn()
	b := o.connect(t, nil).PgConn()
	q := "SELECT coalesce(current_setting('r6.ns', true), '<null>')"
	before, after := r6Moved(t, ctx, a, b, q, "SET r6.ns='one'", "RESET r6.ns")
	if before == "one" {
		t.Fatalf("RESET r6.ns did not take on the session's own backend: %q", before)
	}
	if after == "one" {
		t.Errorf(`after SET r6.ns='one'; RESET r6.ns the session's r6.ns is %q on its own backend but %q once another session used it`, before, after)
	}
}

// TestSpecialSetFormThenReset:
// Steps: A: SET TIME ZONE 'Asia/Tokyo'; RESET timezone (resp. SET SCHEMA
// 'pg_catalog'; RESET search_path); B: SELECT 1; A: SHOW the setting.
// Observed (expected failure): Asia/Tokyo (pg_catalog) again.
// Should: the default, as RESET gave on the session's own backend.
// Cause: settingName refuses SET TIME ZONE / SET SCHEMA / SET NAMES (no
// name), so they are recorded unnamed and a RESET timezone / search_path /
// client_encoding does not remove them; the replay brings them back.
func TestSpecialSetFormThenReset(t *testing.T) {
	o := rvStartOneBackend(t, nil)
	for _, tc := range []struct{ set, reset, name, bad string }{
		{"SET TIME ZONE 'Asia/Tokyo'", "RESET timezone", "TimeZone", "Asia/Tokyo"},
		{"SET SCHEMA 'pg_catalog'", "RESET search_path", "search_path", "pg_catalog"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := timeoutCtx(t, 2*statementTimeout)
			a := o.connect(t, nil).PgConn()
			b := o.connect(t, nil).PgConn()
			before, after := r6Moved(t, ctx, a, b, "SELECT current_setting('"+tc.name+"')", tc.set, tc.reset)
			if before == tc.bad {
				t.Fatalf("%s did not take on the session's own backend", tc.reset)
			}
			if after != before {
				t.Errorf("after %s; %s the session's %s is %q on its own backend but %q once another session used it", tc.set, tc.reset, tc.name, before, after)
			}
		})
	}
}

// TestReplacedSetReordersReplay:
// Steps: A: SET standard_conforming_strings = off;
// SELECT set_config('r6.bs', 'a\\b', false) (under off: the value a\b);
// SET standard_conforming_strings = on; B: SELECT 1; A: current_setting('r6.bs').
// Observed (expected failure): a\\b (two backslashes) after the move.
// Should: a\b, as on the session's own backend.
// Cause: applySets deletes the earlier entry of a setting and appends the
// new one at the end, so the recorded order is no longer the order the
// statements ran in: the replay runs the set_config literal before any SET
// standard_conforming_strings, i.e. under on, where 'a\\b' means a\\b. (The
// same reordering breaks a SET with non-ASCII bytes recorded under a
// client_encoding that a later SET client_encoding moves behind it.)
func TestReplacedSetReordersReplay(t *testing.T) {
	o := rvStartOneBackend(t, nil)
	ctx := timeoutCtx(t, 2*statementTimeout)
	a := o.connect(t, nil).PgConn()
	b := o.connect(t, nil).PgConn()
	before, after := r6Moved(t, ctx, a, b, "SELECT current_setting('r6.bs')",
		"SET standard_conforming_strings = off",
		`SELECT set_config('r6.bs', 'a\\b', false)`,
		"SET standard_conforming_strings = on")
	if before != `a\b` {
		t.Fatalf(`r6.bs on the session's own backend is %q, want a\b`, before)
	}
	if after != before {
		t.Errorf("r6.bs is %q on the session's own backend but %q once another session used it (the replay changed the statements' order)", before, after)
	}
}

// ---------------------------------------------------------------------------
// Prepared statements (dc5dfbd): raw extended-protocol batches on a backend
// that already holds the managed statement, so pgowl sends Close + Parse.

// TestParseSameNameTwiceInBatch:
// Steps: Parse "r6_dup" 'SELECT 1' / Parse "r6_dup" 'SELECT 2' / Bind
// "r6_dup" / Execute / Sync, without a Close between; then, in a later
// batch, Parse "r6_dup" again.
// Should (as PostgreSQL): the second Parse fails with 42P05 ("prepared
// statement "r6_dup" already exists"), the rest up to Sync is skipped, and
// r6_dup stays SELECT 1; a later batch's Parse of the name fails alike.
func TestParseSameNameTwiceInBatch(t *testing.T) {
	o := rvStartOneBackend(t, nil)
	ctx := timeoutCtx(t, 2*statementTimeout)
	a := o.connect(t, nil)
	rawSend(t, a,
		&pgproto3.Parse{Name: "r6_dup", Query: "SELECT 1"},
		&pgproto3.Parse{Name: "r6_dup", Query: "SELECT 2"},
		&pgproto3.Bind{PreparedStatement: "r6_dup"},
		&pgproto3.Execute{},
		&pgproto3.Sync{})
	rs := rawReceive(t, a, untilReady(1))
	if !hasType(rs, 'E', "42P05") || lastReady(rs) != 'I' || hasType(rs, 'D', "") {
		t.Errorf("second Parse of r6_dup without Close: replies %s, want 1 E(42P05) Z(I)", describeReplies(rs))
	}
	for _, r := range rs {
		if r.typ == 'E' && !strings.Contains(r.msg, `"r6_dup"`) {
			t.Errorf("the 42P05 error names %q, want the client's name r6_dup", r.msg)
		}
	}
	got, err := rvExecPrepared(ctx, a.PgConn(), "r6_dup")
	if err != nil || got != "1" {
		t.Errorf("r6_dup runs: %q, %v; want 1 (its first Parse)", got, err)
	}

	_, err = a.PgConn().Prepare(ctx, "r6_dup", "SELECT 3", nil)
	if code := rvSQLState(err); code != "42P05" {
		t.Errorf("Parse of r6_dup in a later batch: %v, want 42P05", err)
	}
	if got, err := rvExecPrepared(ctx, a.PgConn(), "r6_dup"); err != nil || got != "1" {
		t.Errorf("r6_dup after the refused Parse runs: %q, %v; want 1", got, err)
	}
}

// TestReparseGuards: checks of the Close+Parse path that pass (kept
// as regression guards): protocol stays in step when an earlier error makes
// the node skip the Close and Parse, when the client re-prepares a name after
// Close in one batch, when the re-Parse fails in an aborted transaction, and
// another session's statement of the same text survives.
func TestReparseGuards(t *testing.T) {
	o := rvStartOneBackend(t, nil)
	ctx := timeoutCtx(t, 4*statementTimeout)
	a := o.connect(t, nil)
	b := o.connect(t, nil)
	const text = "SELECT 'r6-text'::text"
	if _, err := b.PgConn().Prepare(ctx, "r6_b", text, nil); err != nil {
		t.Fatalf("B prepares: %v", err)
	}
	if _, err := a.PgConn().Prepare(ctx, "r6_a1", text, nil); err != nil {
		t.Fatalf("A prepares r6_a1: %v", err)
	}

	t.Run("error before the re-Parse", func(t *testing.T) {
		rawSend(t, a,
			&pgproto3.Parse{Query: "SELECT 1/0"}, &pgproto3.Bind{}, &pgproto3.Execute{},
			&pgproto3.Parse{Name: "r6_a2", Query: text},
			&pgproto3.Bind{PreparedStatement: "r6_a2"}, &pgproto3.Execute{},
			&pgproto3.Sync{})
		rs := rawReceive(t, a, untilReady(1))
		if !hasType(rs, 'E', "22012") || lastReady(rs) != 'I' || len(rs) > 5 {
			t.Fatalf("replies %s, want 1 2 E(22012) Z(I)", describeReplies(rs))
		}
		if _, err := rvExecPrepared(ctx, a.PgConn(), "r6_a2"); rvSQLState(err) != "26000" {
			t.Errorf("r6_a2, whose Parse the node skipped: %v, want 26000", err)
		}
		if got, err := rvExecPrepared(ctx, a.PgConn(), "r6_a1"); err != nil || got != "r6-text" {
			t.Errorf("r6_a1: %q, %v", got, err)
		}
	})

	t.Run("re-prepare after Close in one batch", func(t *testing.T) {
		rawSend(t, a,
			&pgproto3.Parse{Name: "r6_a3", Query: text},
			&pgproto3.Close{ObjectType: 'S', Name: "r6_a3"},
			&pgproto3.Parse{Name: "r6_a3", Query: text},
			&pgproto3.Parse{Name: "r6_a4", Query: text},
			&pgproto3.Bind{PreparedStatement: "r6_a3"}, &pgproto3.Execute{},
			&pgproto3.Bind{PreparedStatement: "r6_a4"}, &pgproto3.Execute{},
			&pgproto3.Sync{})
		rs := rawReceive(t, a, untilReady(1))
		want := "1 3 1 1 2 D C 2 D C Z"
		var got []string
		for _, r := range rs {
			if r.typ != 'N' { // pgowl's routing notice
				got = append(got, string(r.typ))
			}
		}
		if strings.Join(got, " ") != want || lastReady(rs) != 'I' {
			t.Fatalf("replies %s, want %s", describeReplies(rs), want)
		}
	})

	t.Run("re-Parse fails in an aborted transaction", func(t *testing.T) {
		r4sExec(t, ctx, a.PgConn(), "BEGIN")
		if _, err := a.PgConn().Exec(ctx, "SELECT 1/0").ReadAll(); err == nil {
			t.Fatal("1/0 succeeded")
		}
		if _, err := a.PgConn().Prepare(ctx, "r6_a5", text, nil); rvSQLState(err) != "25P02" {
			t.Errorf("Parse in a failed transaction: %v, want 25P02", err)
		}
		r4sExec(t, ctx, a.PgConn(), "ROLLBACK")
		if got, err := rvExecPrepared(ctx, a.PgConn(), "r6_a1"); err != nil || got != "r6-text" {
			t.Errorf("r6_a1 after the failed re-Parse: %q, %v", got, err)
		}
		if _, err := rvExecPrepared(ctx, a.PgConn(), "r6_a5"); rvSQLState(err) != "26000" {
			t.Errorf("r6_a5: %v, want 26000", err)
		}
	})

	t.Run("other session's statement", func(t *testing.T) {
		if got, err := rvExecPrepared(ctx, b.PgConn(), "r6_b"); err != nil || got != "r6-text" {
			t.Errorf("B's r6_b after A's re-prepares: %q, %v", got, err)
		}
	})
}

// TestSettingGuards: settings forms that follow the session correctly
// (kept as regression guards).
func TestSettingGuards(t *testing.T) {
	opts := withParams(map[string]string{"options": "-c work_mem=7777kB"})
	o := rvStartOneBackend(t, nil)
	ctx := timeoutCtx(t, 6*statementTimeout)
	a := o.connect(t, opts)
	b := o.connect(t, opts)
	ap, bp := a.PgConn(), b.PgConn()

	check := func(t *testing.T, query, want string, sqls ...string) {
		t.Helper()
		before, after := r6Moved(t, ctx, ap, bp, query, sqls...)
		if before != want || after != want {
			t.Errorf("%v: %s gives %q on the own backend, %q after a move; want %q", sqls, query, before, after, want)
		}
	}
	t.Run("SET a.b TO DEFAULT", func(t *testing.T) {
		check(t, "SELECT current_setting('r6.d')", "", "SET r6.d = 'x'", "SET r6.d TO DEFAULT")
	})
	t.Run("SET startup option = DEFAULT", func(t *testing.T) {
		check(t, "SHOW work_mem", "7777kB", "SET work_mem = '5MB'", "SET work_mem = DEFAULT")
	})
	t.Run("RESET startup option", func(t *testing.T) {
		check(t, "SHOW work_mem", "7777kB", "SET work_mem = '5MB'", "RESET work_mem")
	})
	values := map[string]string{
		"quotes":    `it's "quoted" ''`,
		"backslash": `a\b\\c\'`,
		"unicode":   "ünïcødé ✓ 𝄞",
		"long":      strings.Repeat("xy'\\", 5000),
	}
	for what, v := range values {
		t.Run("set_config $1 "+what, func(t *testing.T) {
			if _, err := a.Exec(ctx, "SELECT set_config('r6.p', $1, false)", v); err != nil {
				t.Fatalf("set_config: %v", err)
			}
			r4sExec(t, ctx, bp, "SELECT 1")
			got := r4sOne(t, ctx, ap, "SELECT current_setting('r6.p')")
			if got != v {
				t.Errorf("r6.p after a move: %q, want %q", got, v)
			}
		})
	}
	t.Run("set_config $1 with standard_conforming_strings off", func(t *testing.T) {
		r4sExec(t, ctx, ap, "SET standard_conforming_strings = off")
		defer r4sExec(t, ctx, ap, "RESET standard_conforming_strings")
		v := `x\y'z`
		if _, err := a.Exec(ctx, "SELECT set_config('R6.Upper', $1, false)", pgx.QueryExecModeExec, v); err != nil {
			t.Fatalf("set_config: %v", err)
		}
		r4sExec(t, ctx, bp, "SELECT 1")
		if got := r4sOne(t, ctx, ap, "SELECT current_setting('r6.upper')"); got != v {
			t.Errorf("R6.Upper after a move: %q, want %q", got, v)
		}
	})
}
