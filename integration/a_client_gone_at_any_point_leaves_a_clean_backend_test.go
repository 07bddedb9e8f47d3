package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestAClientGoneAtAnyPointLeavesACleanBackend: pgowl in front of the
// primary alone with one backend connection, so that every client of the app
// login shares it. A client does something and closes its socket (or sends
// Terminate) at an awkward point; the next client must get a clean backend:
// nothing committed of the abandoned work, default settings, no locks,
// listeners, temporary tables, SQL-prepared statements or cursors.
func TestAClientGoneAtAnyPointLeavesACleanBackend(t *testing.T) {
	c := sharedClusterFor(t)
	createTable(t, c, "rv_mid", "CREATE TABLE rv_mid (a int)")
	o := rvOwlOnPrimaryOnly(t, c, nil)

	insert := func(v int) string { return fmt.Sprintf("INSERT INTO rv_mid VALUES (%d)", v) }
	// ranQuery sends sql as a Query and reads its answer, up to ReadyForQuery.
	ranQuery := func(sql string) func(*testing.T, *rvConn) {
		return func(t *testing.T, conn *rvConn) {
			conn.send(t, rvQuery(sql))
			conn.recv(1, 5*time.Second)
		}
	}
	cases := []struct {
		name string
		// do drives the raw connection, then the socket is closed.
		do func(t *testing.T, conn *rvConn)
	}{
		{"mid_message", func(t *testing.T, conn *rvConn) {
			conn.send(t, append([]byte{'Q', 0, 0, 0, 100}, "INSERT INT"...))
		}},
		{"mid_transaction_with_sets", func(t *testing.T, conn *rvConn) {
			conn.send(t, rvQuery("BEGIN"))
			conn.recv(1, 5*time.Second)
			conn.send(t, rvQuery(insert(1)))
			conn.recv(1, 5*time.Second)
			conn.send(t, rvQuery("SET work_mem = '77MB'"))
			conn.recv(1, 5*time.Second)
			conn.send(t, rvQuery("SET LOCAL search_path = pg_catalog"))
			conn.recv(1, 5*time.Second)
		}},
		{"failed_transaction", func(t *testing.T, conn *rvConn) {
			conn.send(t, rvJoin(rvQuery("BEGIN"), rvQuery(insert(11)), rvQuery("SELECT 1/0")))
			conn.recv(3, 5*time.Second)
		}},
		{"session_sets", func(t *testing.T, conn *rvConn) {
			conn.send(t, rvQuery("SET work_mem = '66MB'"))
			conn.recv(1, 5*time.Second)
			conn.send(t, rvQuery("SET search_path = pg_catalog"))
			conn.recv(1, 5*time.Second)
		}},
		{"set_config_in_do_block", ranQuery("DO $$BEGIN PERFORM set_config('work_mem', '55MB', false); END$$")},
		{"sets_in_multi_statement_string", ranQuery("SET work_mem = '44MB'; SELECT 1; SET search_path = pg_catalog")},
		{"extended_batch_flushed_not_synced", func(t *testing.T, conn *rvConn) {
			conn.send(t, rvJoin(rvParse("", insert(2)), rvBind("", ""), rvExecute("", 0), rvFlush))
			conn.conn.SetReadDeadline(time.Now().Add(3 * time.Second))
			for i := 0; i < 3; i++ {
				if _, err := conn.fe.Receive(); err != nil {
					t.Logf("reading the batch's replies: %v", err)
					break
				}
			}
		}},
		{"extended_batch_not_flushed", func(t *testing.T, conn *rvConn) {
			conn.send(t, rvJoin(rvParse("", insert(3)), rvBind("", ""), rvExecute("", 0)))
		}},
		{"extended_error_flushed_not_synced", func(t *testing.T, conn *rvConn) {
			conn.send(t, rvJoin(rvExecute("rv_nope", 0), rvFlush))
			conn.recv(1, 2*time.Second)
		}},
		{"suspended_portal_in_transaction", func(t *testing.T, conn *rvConn) {
			conn.send(t, rvQuery("BEGIN"))
			conn.recv(1, 5*time.Second)
			conn.send(t, rvJoin(rvParse("", "SELECT g FROM generate_series(1, 1000) g"), rvBind("rv_portal", ""), rvExecute("rv_portal", 1), rvFlush))
			conn.recv(1, 2*time.Second)
		}},
		{"mid_copy", func(t *testing.T, conn *rvConn) {
			conn.send(t, rvQuery("COPY rv_mid FROM STDIN"))
			rvAwaitCopyIn(t, conn)
			conn.send(t, rvFrame('d', []byte("4\n")))
			time.Sleep(100 * time.Millisecond)
		}},
		{"query_after_terminate", func(t *testing.T, conn *rvConn) {
			conn.send(t, rvJoin(rvTerminate, rvQuery(insert(5))))
			time.Sleep(300 * time.Millisecond)
		}},
		{"advisory_lock", ranQuery("SELECT pg_advisory_lock(777)")},
		{"listen", ranQuery("LISTEN rv_chan")},
		{"temp_table", ranQuery("CREATE TEMP TABLE rv_tmp (a int)")},
		{"sql_prepare", ranQuery("PREPARE rv_p AS SELECT 1")},
		{"with_hold_cursor", ranQuery("DECLARE rv_cur CURSOR WITH HOLD FOR SELECT 1")},
		{"sleeping_query", func(t *testing.T, conn *rvConn) {
			conn.send(t, rvQuery("SELECT pg_sleep(1.5)"))
			time.Sleep(200 * time.Millisecond)
		}},
		{"set_role_to_self_and_reset_session_authorization", func(t *testing.T, conn *rvConn) {
			conn.send(t, rvQuery("SET application_name = 'rv_hostile'"))
			conn.recv(1, 5*time.Second)
			conn.send(t, rvQuery("SET statement_timeout = '1ms'"))
			conn.recv(1, 5*time.Second)
		}},
	}
	const check = `SELECT current_setting('work_mem') || '|' || current_setting('search_path') || '|' ||
		current_setting('application_name') || '|' || current_setting('statement_timeout') || '|' ||
		(SELECT count(*) FROM public.rv_mid) || '|' ||
		(SELECT count(*) FROM pg_listening_channels()) || '|' ||
		(SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()) || '|' ||
		(SELECT count(*) FROM pg_prepared_statements WHERE from_sql) || '|' ||
		(SELECT count(*) FROM pg_class WHERE relnamespace = pg_my_temp_schema()) || '|' ||
		(SELECT count(*) FROM pg_cursors)`
	const clean = `4MB|"$user", public||0|0|0|0|0|0|0`
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			conn := rvLogin(t, o.rvDSN())
			tc.do(t, conn)
			conn.conn.Close()
			if s := rvWaitNoLeftovers(t, c, 4*time.Second); s != "" {
				t.Errorf("backends left busy or in a transaction: %s", s)
			}
			next := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var got string
			var pid int
			if err := next.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
				t.Fatalf("next client: %v", err)
			}
			if err := next.QueryRow(ctx, check).Scan(&got); err != nil {
				t.Fatalf("next client: %v", err)
			}
			t.Logf("next client, on backend %d: %s", pid, got)
			if got != clean {
				t.Errorf("the next client's backend is not clean: got %q, want %q", got, clean)
			}
			next.Close(ctx)
		})
	}
}

// TestSettingsChangedOutOfSightDoNotReachTheNextClient: a client
// changes a custom setting (a tenant id, as row security policies read one)
// in ways pgowl cannot see from the statement text, then leaves; the next
// client on the shared backend must not see it.
func TestSettingsChangedOutOfSightDoNotReachTheNextClient(t *testing.T) {
	c := sharedClusterFor(t)
	ctx0 := timeoutCtx(t, statementTimeout)
	if err := c.Nodes[0].Exec(ctx0, `SET ROLE app;
		CREATE OR REPLACE FUNCTION public.rv_set_dyn(n text, v text) RETURNS text LANGUAGE sql AS $$ SELECT set_config(n, v, false) $$;
		CREATE OR REPLACE FUNCTION public.rv_set_exec(v text) RETURNS void LANGUAGE plpgsql AS $$BEGIN EXECUTE format('SET myapp.tenant = %L', v); END$$;
		CREATE OR REPLACE FUNCTION public.rv_set_name() RETURNS text LANGUAGE plpgsql AS $$DECLARE n text := 'myapp.' || 'tenant'; BEGIN RETURN set_config(n, 'C', false); END$$;`); err != nil {
		t.Fatal(err)
	}
	o := rvOwlOnPrimaryOnly(t, c, nil)
	for _, tc := range []struct{ name, sql string }{
		{"sql_function_with_parameter_name", "SELECT public.rv_set_dyn('myapp.tenant', 'A')"},
		{"plpgsql_execute_set", "SELECT public.rv_set_exec('B')"},
		{"plpgsql_computed_name", "SELECT public.rv_set_name()"},
		{"set_config_with_expression_name", "SELECT set_config('myapp.' || 'tenant', 'D', false)"},
		{"set_custom", "SET myapp.tenant = 'E'"},
		{"set_config_in_cte", "WITH x AS (SELECT set_config('myapp.tenant', 'F', false)) SELECT * FROM x"},
		{"extended_protocol_set_config_parameter_name", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := rvLogin(t, o.rvDSN())
			if tc.sql == "" {
				conn.send(t, rvJoin(rvParse("", "SELECT set_config($1, $2, false)"), rvBind("", "", "myapp.tenant", "G"), rvExecute("", 0), rvSync))
			} else {
				conn.send(t, rvQuery(tc.sql))
			}
			res := conn.recv(1, 5*time.Second)
			conn.send(t, rvQuery("SELECT current_setting('myapp.tenant', true)"))
			t.Logf("%s: %s; in the same session: %s", tc.sql, res, conn.recv(1, 5*time.Second))
			conn.conn.Close()
			time.Sleep(300 * time.Millisecond)
			next := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var got *string
			if err := next.QueryRow(ctx, "SELECT current_setting('myapp.tenant', true)").Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != nil && *got != "" {
				t.Errorf("the next client sees myapp.tenant = %q, set by the client before it", *got)
			} else {
				t.Logf("next client: myapp.tenant = %v", got)
			}
			next.Close(ctx)
		})
	}
}

// TestSessionStateMadeByDynamicSQLDoesNotReachTheNextClient: a
// PL/pgSQL function runs a string with EXECUTE; what the string leaves on
// the session (a LISTEN, an advisory lock, a temporary table, a prepared
// statement, a setting) must not reach the next client of the shared backend.
func TestSessionStateMadeByDynamicSQLDoesNotReachTheNextClient(t *testing.T) {
	c := sharedClusterFor(t)
	ctx0 := timeoutCtx(t, statementTimeout)
	if err := c.Nodes[0].Exec(ctx0, `SET ROLE app;
		CREATE OR REPLACE FUNCTION public.rv_dyn(q text) RETURNS int LANGUAGE plpgsql AS $$BEGIN EXECUTE q; RETURN 1; END$$;`); err != nil {
		t.Fatal(err)
	}
	o := rvOwlOnPrimaryOnly(t, c, nil)
	const check = `SELECT current_setting('work_mem') || '|' ||
		(SELECT count(*) FROM pg_listening_channels()) || '|' ||
		(SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()) || '|' ||
		(SELECT count(*) FROM pg_prepared_statements WHERE from_sql) || '|' ||
		(SELECT count(*) FROM pg_class WHERE relnamespace = pg_my_temp_schema()) || '|' ||
		(SELECT count(*) FROM pg_cursors)`
	const clean = `4MB|0|0|0|0|0`
	for _, tc := range []struct{ name, arg string }{
		{"listen", "LISTEN rv_dchan"},
		{"advisory_lock", "SELECT pg_advisory_lock(4242)"},
		{"temp_table", "CREATE TEMP TABLE rv_dtmp (a int)"},
		{"sql_prepare", "PREPARE rv_dp AS SELECT 1"},
		{"set_work_mem", "SET work_mem = '99MB'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := rvLogin(t, o.rvDSN())
			conn.send(t, rvQuery("SELECT public.rv_dyn('"+strings.ReplaceAll(tc.arg, "'", "''")+"')"))
			res := conn.recv(1, 5*time.Second)
			t.Logf("rv_dyn(%q): %s", tc.arg, res)
			conn.send(t, rvTerminate)
			conn.conn.Close()
			time.Sleep(300 * time.Millisecond)
			next := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var got string
			if err := next.QueryRow(ctx, check).Scan(&got); err != nil {
				t.Fatalf("next client: %v", err)
			}
			if got != clean {
				t.Errorf("after rv_dyn(%q) by the client before it, the next client's backend has work_mem|listens|advisory locks|SQL-prepared|temp relations|cursors = %q, want %q", tc.arg, got, clean)
			}
			next.Close(ctx)
		})
	}
	// Whatever was left: clean up so that no advisory lock outlives the test on the shared cluster.
	conn := rvLogin(t, o.rvDSN())
	conn.send(t, rvQuery("DISCARD ALL"))
	conn.recv(1, 5*time.Second)
}
