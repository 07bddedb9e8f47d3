package integration

import (
	"strings"
	"testing"
)

// TestStableDynamicSQLRunsOnStandby: a STABLE PL/pgSQL function whose body runs dynamic SQL goes to
// a standby on the strength of its declaration (PostgreSQL runs the string read-only). When the
// string calls nextval(), which the declaration does not stop and no analysis can see, the standby
// refuses it with PostgreSQL's read-only error: the statement fails, and nothing is written.
func TestStableDynamicSQLRunsOnStandby(t *testing.T) {
	c := sharedClusterFor(t)
	ctx := timeoutCtx(t, statementTimeout)
	setup := `
CREATE SEQUENCE IF NOT EXISTS public.decl_seq;
GRANT ALL ON SEQUENCE public.decl_seq TO PUBLIC;
CREATE OR REPLACE FUNCTION public.decl_run(q text) RETURNS bigint LANGUAGE plpgsql STABLE
  AS $$DECLARE n bigint; BEGIN EXECUTE q INTO n; RETURN n; END$$;`
	if err := c.Nodes[0].Exec(ctx, setup); err != nil {
		t.Fatalf("set up on the primary: %v", err)
	}
	catchUp(t, c)
	o := startOwl(t, c, nil)
	cl := o.connect(t, nil)
	seqState := func() int64 {
		return primaryInt(t, c, "SELECT last_value * 2 + is_called::int FROM public.decl_seq")
	}
	before := seqState()

	var n int64
	if err := cl.QueryRow(ctx, "SELECT decl_run('SELECT count(*) FROM pg_class')").Scan(&n); err != nil {
		t.Fatalf("a dynamic read in a STABLE function: %v", err)
	}
	wantRoute(t, "dynamic read in a STABLE function", cl.oneRoute(t, "dynamic read"), "standby", "READ_ONLY")

	err := cl.QueryRow(ctx, "SELECT decl_run('SELECT nextval(''public.decl_seq'')')").Scan(&n)
	if pgErr := wantSQLState(t, "nextval() hidden in a STABLE function's dynamic SQL", err, "25006"); pgErr != nil &&
		!strings.Contains(pgErr.Message, "cannot execute nextval() in a read-only transaction") {
		t.Errorf("the standby's error is %q, want PostgreSQL's read-only refusal of nextval()", pgErr.Message)
	}
	wantRoute(t, "nextval() hidden in dynamic SQL", cl.oneRoute(t, "hidden nextval"), "standby", "READ_ONLY")
	if after := seqState(); after != before {
		t.Errorf("the sequence moved (%d -> %d): the refused statement wrote", before, after)
	}

	// The session goes on; the same nextval() where analysis sees it goes to the primary.
	if err := cl.QueryRow(ctx, "SELECT nextval('public.decl_seq')").Scan(&n); err != nil {
		t.Fatalf("a visible nextval(): %v", err)
	}
	wantRoute(t, "visible nextval()", cl.oneRoute(t, "visible nextval"), "primary", "WRITING_FUNCTION")
}
