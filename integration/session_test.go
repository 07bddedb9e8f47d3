package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
)

// TestStartupParameters connects with application_name and search_path and
// checks that both reach the standby that runs a read and the primary that
// runs a write.
func TestStartupParameters(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, nil)
	ctx := timeoutCtx(t, statementTimeout)
	if err := c.Nodes[0].Exec(ctx, "DROP SCHEMA IF EXISTS myschema CASCADE; CREATE SCHEMA myschema AUTHORIZATION "+appUser); err != nil {
		t.Fatal(err)
	}
	catchUp(t, c)
	conn := o.connect(t, func(cfg *pgx.ConnConfig) {
		withParams(map[string]string{"application_name": "owltest", "search_path": "myschema"})(cfg)
		cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	})
	if got := conn.PgConn().ParameterStatus("application_name"); got != "owltest" {
		t.Errorf("ParameterStatus application_name = %q at login, want owltest", got)
	}

	var path, app string
	if err := conn.QueryRow(ctx, "SHOW search_path").Scan(&path); err != nil {
		t.Fatal(err)
	}
	r := conn.oneRoute(t, "SHOW search_path")
	if path != "myschema" {
		t.Errorf("SHOW search_path on %s = %q, want myschema", r.Node, path)
	}
	if err := conn.QueryRow(ctx, "SELECT current_setting('application_name')").Scan(&app); err != nil {
		t.Fatal(err)
	}
	r = conn.oneRoute(t, "read application_name")
	wantRoute(t, "read application_name", r, "standby", "READ_ONLY")
	if app != "owltest" {
		t.Errorf("application_name on %s = %q, want owltest", r.Node, app)
	}

	// An unqualified CREATE TABLE on the primary lands in myschema.
	if _, err := conn.Exec(ctx, "CREATE TABLE t10_where (app text, path text)"); err != nil {
		t.Fatal(err)
	}
	wantRoute(t, "CREATE TABLE", conn.oneRoute(t, "CREATE TABLE"), "primary", "")
	if err := conn.QueryRow(ctx, "INSERT INTO t10_where VALUES (current_setting('application_name'), current_setting('search_path')) RETURNING app, path").Scan(&app, &path); err != nil {
		t.Fatal(err)
	}
	wantRoute(t, "INSERT", conn.oneRoute(t, "INSERT"), "primary", "WRITE")
	if app != "owltest" || path != "myschema" {
		t.Errorf("on the primary application_name = %q and search_path = %q, want owltest and myschema", app, path)
	}
	if got := primaryInt(t, c, "SELECT count(*) FROM pg_tables WHERE schemaname = 'myschema' AND tablename = 't10_where'"); got != 1 {
		t.Errorf("t10_where was not created in myschema on the primary")
	}
	if got := primaryInt(t, c, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'owltest' AND usename = $1", appUser); got < 1 {
		t.Errorf("the primary shows no backend with application_name owltest")
	}
}

// TestSetCarriedAcrossNodes sets statement_timeout once, with the simple and
// with the extended protocol, and checks that both standbys and the primary
// run the session's later statements with it, that a SET rolled back with its
// transaction is not carried, and that RESET is.
func TestSetCarriedAcrossNodes(t *testing.T) {
	c := sharedClusterFor(t)
	// Round robin spreads the reads over both standbys.
	// read_your_writes off: this test reads on a standby right after a write in
	// the same session to check settings carried to every node, not read your writes (read_your_writes_test.go).
	o := startOwl(t, c, func(cfg *config.Config) {
		cfg.Routing.StandbyChoice = config.StandbyRoundRobin
		cfg.Routing.ReadYourWrites = config.ReadYourWritesOff
	})
	createTable(t, c, "t11_items", "CREATE TABLE t11_items (n int)")

	protocols := []struct {
		name string
		exec func(ctx context.Context, conn *client, sql string) error
	}{
		{"simple_protocol", func(ctx context.Context, conn *client, sql string) error {
			_, err := conn.Exec(ctx, sql) // no arguments: pgx sends a simple Query
			return err
		}},
		{"extended_protocol", func(ctx context.Context, conn *client, sql string) error {
			_, err := conn.PgConn().ExecParams(ctx, sql, nil, nil, nil, nil).Close()
			return err
		}},
	}
	for _, proto := range protocols {
		t.Run(proto.name, func(t *testing.T) {
			conn := o.connect(t, nil)
			ctx := timeoutCtx(t, statementTimeout)
			run := func(sql string) {
				t.Helper()
				if err := proto.exec(ctx, conn, sql); err != nil {
					t.Fatalf("%s: %v", sql, err)
				}
				conn.routes(t)
			}
			check := func(step, want string) {
				t.Helper()
				seen := map[string]bool{}
				for i := range 4 {
					var got string
					if err := conn.QueryRow(ctx, "SELECT current_setting('statement_timeout')", pgx.QueryExecModeSimpleProtocol).Scan(&got); err != nil {
						t.Fatalf("%s: read %d: %v", step, i, err)
					}
					r := conn.oneRoute(t, step+": read")
					wantRoute(t, step+": read", r, "standby", "READ_ONLY")
					seen[r.Node] = true
					if got != want {
						t.Errorf("%s: statement_timeout on standby %s = %q, want %q", step, r.Node, got, want)
					}
				}
				if len(seen) != len(c.Nodes)-1 {
					t.Errorf("%s: round-robin reads reached standbys %v, want all %d", step, seen, len(c.Nodes)-1)
				}
				var got string
				if err := conn.QueryRow(ctx, "INSERT INTO t11_items VALUES ($1) RETURNING current_setting('statement_timeout')", 1).Scan(&got); err != nil {
					t.Fatalf("%s: write: %v", step, err)
				}
				for _, r := range conn.routes(t) {
					wantRoute(t, step+": write", r, "primary", "WRITE")
				}
				if got != want {
					t.Errorf("%s: statement_timeout on the primary = %q, want %q", step, got, want)
				}
			}

			run("SET statement_timeout = '1234ms'")
			check("after SET", "1234ms")

			run("BEGIN")
			run("INSERT INTO t11_items VALUES (2)")
			run("SET statement_timeout = '999ms'")
			run("ROLLBACK")
			check("after a SET that was rolled back", "1234ms")

			run("RESET statement_timeout")
			check("after RESET", "0")
		})
	}
}

// TestPgowlSettings covers the pgowl.* settings pgowl answers itself.
func TestPgowlSettings(t *testing.T) {
	c := sharedClusterFor(t)
	// read_your_writes off: this test reads on a standby right after a write in
	// the same session to check pgowl.* settings, not read your writes (read_your_writes_test.go).
	o := startOwl(t, c, readYourWritesOff)
	createTable(t, c, "t12_items", "CREATE TABLE t12_items (n int)")
	conn := o.connect(t, nil)
	ctx := timeoutCtx(t, statementTimeout)

	read := func() {
		t.Helper()
		if got := queryInt(t, conn, "read", "SELECT 5", pgx.QueryExecModeSimpleProtocol); got != 5 {
			t.Errorf("SELECT 5 returned %d", got)
		}
	}
	write := func() {
		t.Helper()
		if _, err := conn.Exec(ctx, "INSERT INTO t12_items VALUES (1)"); err != nil {
			t.Errorf("write: %v", err)
		}
	}

	t.Run("notice_off_and_on", func(t *testing.T) {
		if _, err := conn.Exec(ctx, "SET pgowl.notice = off"); err != nil {
			t.Fatalf("SET pgowl.notice = off: %v", err)
		}
		conn.routes(t)
		read()
		write()
		if rs := conn.routes(t); len(rs) != 0 {
			t.Errorf("with pgowl.notice off, got NOTICEs %v", rs)
		}
		var shown string
		if err := conn.QueryRow(ctx, "SHOW pgowl.notice").Scan(&shown); err != nil || shown != "off" {
			t.Errorf("SHOW pgowl.notice = %q, %v; want off", shown, err)
		}
		// The setting belongs to the session: another connection still gets NOTICEs.
		other := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
		if got := queryInt(t, other, "other session", "SELECT 6"); got != 6 {
			t.Errorf("SELECT 6 returned %d", got)
		}
		wantRoute(t, "other session's read", other.oneRoute(t, "other session's read"), "standby", "READ_ONLY")
		other.Close(ctx)
		// Turn it back on with the extended protocol.
		if _, err := conn.PgConn().ExecParams(ctx, "SET pgowl.notice = on", nil, nil, nil, nil).Close(); err != nil {
			t.Fatalf("SET pgowl.notice = on (extended protocol): %v", err)
		}
		conn.routes(t)
		read()
		wantRoute(t, "read with pgowl.notice on", conn.oneRoute(t, "read with pgowl.notice on"), "standby", "READ_ONLY")
		write()
		wantRoute(t, "write with pgowl.notice on", conn.oneRoute(t, "write with pgowl.notice on"), "primary", "WRITE")
		if err := conn.QueryRow(ctx, "SHOW pgowl.notice", pgx.QueryExecModeSimpleProtocol).Scan(&shown); err != nil || shown != "on" {
			t.Errorf("SHOW pgowl.notice = %q, %v; want on", shown, err)
		}
	})

	t.Run("show_nodes", func(t *testing.T) {
		for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheStatement} {
			rows, err := conn.Query(ctx, "SHOW pgowl.nodes", mode)
			if err != nil {
				t.Fatalf("%v: SHOW pgowl.nodes: %v", mode, err)
			}
			nameCol, roleCol := -1, -1
			for i, f := range rows.FieldDescriptions() {
				switch f.Name {
				case "name":
					nameCol = i
				case "role":
					roleCol = i
				}
			}
			if nameCol < 0 || roleCol < 0 {
				rows.Close()
				t.Fatalf("%v: SHOW pgowl.nodes has no name and role columns: %v", mode, rows.FieldDescriptions())
			}
			roles := map[string]string{}
			for rows.Next() {
				values, err := rows.Values()
				if err != nil {
					t.Fatal(err)
				}
				name, _ := values[nameCol].(string)
				role, _ := values[roleCol].(string)
				roles[name] = role
			}
			if err := rows.Err(); err != nil {
				t.Fatalf("%v: SHOW pgowl.nodes: %v", mode, err)
			}
			want := map[string]string{}
			for i, n := range c.Nodes {
				want[n.Name] = "standby"
				if i == 0 {
					want[n.Name] = "primary"
				}
			}
			if fmt.Sprint(roles) != fmt.Sprint(want) {
				t.Errorf("%v: SHOW pgowl.nodes roles = %v, want %v", mode, roles, want)
			}
		}
		conn.routes(t)
	})

	t.Run("unknown_setting", func(t *testing.T) {
		_, err := conn.Exec(ctx, "SET pgowl.bogus = 1")
		pgErr := wantSQLState(t, "SET pgowl.bogus = 1", err, "42704")
		if pgErr != nil {
			if !strings.Contains(pgErr.Message, "pgowl.bogus") {
				t.Errorf("error %q does not name pgowl.bogus", pgErr.Message)
			}
			if pgErr.Severity != "ERROR" {
				t.Errorf("severity %s, want ERROR", pgErr.Severity)
			}
		}
		read()
		_, err = conn.PgConn().ExecParams(ctx, "SET pgowl.bogus = 1", nil, nil, nil, nil).Close()
		wantSQLState(t, "SET pgowl.bogus = 1 (extended protocol)", err, "42704")
		read()
		_, err = conn.Exec(ctx, "SET pgowl.notice = perhaps")
		wantSQLState(t, "SET pgowl.notice = perhaps", err, "22023")
		read()
		if conn.PgConn().IsClosed() {
			t.Errorf("the connection was closed by an unknown pgowl setting")
		}
		conn.routes(t)
	})
}
