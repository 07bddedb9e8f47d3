package integration

import (
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/internal/cluster"
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

// TestLoadHoldsWhereLaterStatementsRun: a session LOADs plpgsql and then
// SETs plpgsql settings. Once the module is loaded, PostgreSQL checks them
// (a value plpgsql does not accept, or a name in its reserved prefix that
// it does not define, is refused); the SETs read, so they run on standbys,
// where the LOAD must hold too. The test runs the same steps on a direct
// connection to the primary and requires the same answers through pgowl.
// LOAD of a library outside $libdir/plugins needs a superuser.
func TestLoadHoldsWhereLaterStatementsRun(t *testing.T) {
	c := sharedClusterFor(t)
	const superPassword = "load-secret"
	o := startOwl(t, c, func(cfg *config.Config) {
		cfg.Routing.StandbyChoice = config.StandbyRoundRobin
		cfg.Users = append(cfg.Users, config.User{Name: cluster.Superuser, Password: superPassword, Auth: config.AuthSCRAM})
	})
	ctx := timeoutCtx(t, 2*statementTimeout)
	steps := []string{
		"LOAD 'plpgsql'",
		"SET plpgsql.variable_conflict = 'no_such_value'",
		"SET plpgsql.no_such_setting = 1",
		"SET plpgsql.variable_conflict = 'no_such_value'",
		"SET plpgsql.no_such_setting = 1",
	}
	run := func(conn *pgx.Conn) []string {
		var codes []string
		for _, sql := range steps {
			_, err := conn.Exec(ctx, sql, pgx.QueryExecModeSimpleProtocol)
			code := rvSQLState(err)
			if err != nil && code == "" {
				t.Fatalf("%s: %v", sql, err)
			}
			codes = append(codes, code)
		}
		return codes
	}
	direct, err := pgx.Connect(ctx, c.Nodes[0].DSN(cluster.Superuser, "", appDatabase))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close(ctx)
	want := run(direct)
	if want[1] == "" || want[2] == "" {
		t.Fatalf("directly, the SETs after LOAD were not refused (%v): the test cannot tell", want)
	}
	notices := &noticeLog{}
	cfg := o.connConfig(t, cluster.Superuser, superPassword, notices)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	got := run(conn)
	owl := &client{Conn: conn, notices: notices}
	t.Logf("SQLSTATEs directly %v, through pgowl %v; routes %v", want, got, owl.routes(t))
	if !slices.Equal(got, want) {
		t.Errorf("through pgowl the steps %q answered %v, directly %v", steps, got, want)
	}
}
