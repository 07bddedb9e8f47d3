package integration

import (
	"strings"
	"testing"
)

// TestSearchPathReadInsideABlockTakesNoSnapshot: when a unit inside a transaction block changes
// search_path in a way pgowl cannot read from its text (here a multi-statement string), pgowl
// asks the node for the path before the block's next statement. That
// question must not take the block's snapshot: a client may still choose its isolation level
// after it, as it can on a direct connection, and a repeatable-read block must see rows committed
// after the question was asked and before its own first query.
func TestSearchPathReadInsideABlockTakesNoSnapshot(t *testing.T) {
	c := sharedClusterFor(t)
	setup := timeoutCtx(t, statementTimeout)
	if err := c.Nodes[0].Exec(setup, `DROP TABLE IF EXISTS public.path_snapshot;
		CREATE TABLE public.path_snapshot (id int);
		GRANT SELECT, INSERT, DELETE ON public.path_snapshot TO `+appUser); err != nil {
		t.Fatalf("setup: %v", err)
	}
	catchUp(t, c)
	ctx := timeoutCtx(t, 2*statementTimeout)

	// The test's power: a query before SET TRANSACTION is refused on a direct connection.
	direct := rtDirect(t, c).PgConn()
	r4sExec(t, ctx, direct, `BEGIN; SET LOCAL search_path = public`, `SELECT 1`)
	if _, err := direct.Exec(ctx, `SET TRANSACTION ISOLATION LEVEL REPEATABLE READ`).ReadAll(); err == nil {
		t.Fatalf("direct: SET TRANSACTION after a query succeeded; this test cannot tell a snapshot taken")
	}
	r4sExec(t, ctx, direct, `ROLLBACK`)

	o := startOwl(t, c, readYourWritesOff)
	p := o.connect(t, nil).PgConn()
	r4sExec(t, ctx, p, `BEGIN; SET LOCAL search_path = public`)
	read := false
	for _, line := range strings.Split(o.logs.String(), "\n") {
		read = read || strings.Contains(line, `"search_path":"public"`) && strings.Contains(line, `"message":"search_path read inside a transaction block"`)
	}
	if !read {
		t.Fatalf("pgowl did not read the path inside the block; this test cannot tell whether the read took a snapshot")
	}
	if _, err := p.Exec(ctx, `SET TRANSACTION ISOLATION LEVEL REPEATABLE READ`).ReadAll(); err != nil {
		t.Fatalf("through pgowl, SET TRANSACTION after a string that set the path locally: %v; it works on a direct connection", err)
	}
	// A row committed now, before the block's first query, is in its snapshot.
	r4sExec(t, ctx, direct, `INSERT INTO public.path_snapshot VALUES (1)`)
	catchUp(t, c)
	if got := r4sOne(t, ctx, p, `SELECT count(*) FROM path_snapshot`); got != "1" {
		t.Errorf("the block's snapshot was taken before its first query: it sees %s rows, want the 1 committed before that query", got)
	}
	if got := r4sOne(t, ctx, p, `SHOW transaction_isolation`); got != "repeatable read" {
		t.Errorf("the block runs at %q, want repeatable read", got)
	}
	r4sExec(t, ctx, p, `COMMIT`)
}
