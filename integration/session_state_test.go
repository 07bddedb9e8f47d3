package integration

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
)

// TestDiscardSequencesEndsCurrval: currval and lastval answer from the
// session's backend where nextval ran (the primary's). DISCARD SEQUENCES and
// DISCARD ALL end that state on a direct connection, so through pgowl both
// must stop answering afterwards (55000), wherever the DISCARD itself ran,
// in session and in transaction pooling; the next nextval defines them again.
func TestDiscardSequencesEndsCurrval(t *testing.T) {
	for _, mode := range []string{"transaction", "session"} {
		t.Run(mode+"_pooling", func(t *testing.T) { testDiscardSequencesEndsCurrval(t, mode) })
	}
}

func testDiscardSequencesEndsCurrval(t *testing.T, poolMode string) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, func(cfg *config.Config) { cfg.Pool.Mode = poolMode })
	ctx := timeoutCtx(t, 2*statementTimeout)
	if err := c.Nodes[0].Exec(ctx, "SET ROLE "+appUser+"; DROP SEQUENCE IF EXISTS s_discard; CREATE SEQUENCE s_discard"); err != nil {
		t.Fatal(err)
	}
	catchUp(t, c)
	for _, discard := range []string{"DISCARD SEQUENCES", "DISCARD ALL"} {
		t.Run(discard, func(t *testing.T) {
			conn := o.connect(t, nil)
			var n, cur, last int64
			if err := conn.QueryRow(ctx, "SELECT nextval('s_discard')").Scan(&n); err != nil {
				t.Fatal(err)
			}
			if err := conn.QueryRow(ctx, "SELECT currval('s_discard'), lastval()").Scan(&cur, &last); err != nil || cur != n || last != n {
				t.Fatalf("currval, lastval after nextval %d: %d, %d, %v", n, cur, last, err)
			}
			if _, err := conn.Exec(ctx, discard); err != nil {
				t.Fatalf("%s: %v", discard, err)
			}
			t.Logf("%s ran as %v", discard, conn.routes(t))
			for _, sql := range []string{"SELECT currval('s_discard')", "SELECT lastval()"} {
				var got int64
				err := conn.QueryRow(ctx, sql, pgx.QueryExecModeSimpleProtocol).Scan(&got)
				if rvSQLState(err) != "55000" {
					t.Errorf("%s after %s: %d, %v; want 55000 (not yet defined in this session), as on a direct connection", sql, discard, got, err)
				}
			}
			// (DISCARD ALL dropped pgx's cached statements, as it would directly.)
			simple := pgx.QueryExecModeSimpleProtocol
			if err := conn.QueryRow(ctx, "SELECT nextval('s_discard')", simple).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if err := conn.QueryRow(ctx, "SELECT currval('s_discard'), lastval()", simple).Scan(&cur, &last); err != nil || cur != n || last != n {
				t.Errorf("currval, lastval after a new nextval %d: %d, %d, %v", n, cur, last, err)
			}
		})
	}
}
