package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestChangeMadeByWhatTheSessionCalls: the session changes a function (reader -> writer)
// through something it calls rather than a DDL statement of its own: a function or procedure
// whose body runs the CREATE OR REPLACE (statically, through a nested call, through EXECUTE of a
// string built by format(), which was a known gap until the template was read), or a trigger its
// INSERT fires. The use right after, by the same session, must go to the primary. (A string passed
// in whole: TestDDLRunByAFunctionsOpaqueExecuteIsAKnownGap.)
func TestChangeMadeByWhatTheSessionCalls(t *testing.T) {
	c, o := rddSetup(t)
	for i, variant := range []struct {
		name         string
		settle, aged bool
	}{
		{"use at once", false, false},
		// (A review also ran the uses 2.5 s later, once the standbys had replayed the change,
		// and with the target made 3 s before the call: the same two gaps, and for a target
		// made within the last two change polls they last until the catalogue's whole read,
		// as the polls leave out names the session told. 50 s of waiting; not run here.)
	} {
		settle, aged := variant.settle, variant.aged
		t.Run(variant.name, func(t *testing.T) {
			conn := rddConnect(t, o, pgx.QueryExecModeSimpleProtocol, "rdd, public")
			use := conn
			n := fmt.Sprintf("%d", i)
			writerDDL := func(target string) string {
				return "CREATE OR REPLACE FUNCTION " + target + "() RETURNS bigint LANGUAGE sql VOLATILE AS 'SELECT nextval(''rdd.seq'')'"
			}
			readerDDL := func(target string) string {
				return "CREATE OR REPLACE FUNCTION " + target + "() RETURNS bigint LANGUAGE sql VOLATILE AS 'SELECT 0::bigint'"
			}
			type tc struct{ name, maker, call string }
			cases := []tc{
				{"plpgsql static", "CREATE FUNCTION rdd.mk_st_%[1]s() RETURNS void LANGUAGE plpgsql VOLATILE AS $m$BEGIN %[2]s; END$m$", "SELECT rdd.mk_st_%[1]s()"},
				{"sql static", "CREATE FUNCTION rdd.mk_sql_%[1]s() RETURNS void LANGUAGE sql VOLATILE AS $m$%[2]s$m$", "SELECT rdd.mk_sql_%[1]s()"},
				{"nested", "CREATE FUNCTION rdd.mk_in_%[1]s() RETURNS void LANGUAGE plpgsql VOLATILE AS $m$BEGIN %[2]s; END$m$; CREATE FUNCTION rdd.mk_out_%[1]s() RETURNS void LANGUAGE sql VOLATILE AS 'SELECT rdd.mk_in_%[1]s()'", "SELECT rdd.mk_out_%[1]s()"},
				{"procedure static", "CREATE PROCEDURE rdd.mk_pr_%[1]s() LANGUAGE plpgsql AS $m$BEGIN %[2]s; COMMIT; END$m$", "CALL rdd.mk_pr_%[1]s()"},
				{"plpgsql EXECUTE format", "CREATE FUNCTION rdd.mk_ex_%[1]s() RETURNS void LANGUAGE plpgsql VOLATILE AS $m$BEGIN EXECUTE format('%%s', %[3]s); END$m$", "SELECT rdd.mk_ex_%[1]s()"},
				{"trigger", "CREATE TABLE rdd.mk_tt_%[1]s (id int); CREATE FUNCTION rdd.mk_tr_%[1]s() RETURNS trigger LANGUAGE plpgsql AS $m$BEGIN %[2]s; RETURN NEW; END$m$; CREATE TRIGGER mk_tr BEFORE INSERT ON rdd.mk_tt_%[1]s FOR EACH ROW EXECUTE FUNCTION rdd.mk_tr_%[1]s()", "INSERT INTO rdd.mk_tt_%[1]s VALUES (1)"},
			}
			for j, k := range cases {
				t.Run(k.name, func(t *testing.T) {
					id := fmt.Sprintf("%s_%d", n, j)
					target := "rdd.tg_" + id
					rddMust(t, conn, readerDDL(target))
					ddl := writerDDL(target)
					lit := "'" + escapeSQLString(ddl) + "'"
					rddMust(t, conn, fmt.Sprintf(k.maker, id, ddl, lit))
					catchUp(t, c)
					if aged {
						time.Sleep(3 * time.Second) // the polls no longer leave the target's name out
					}
					rs := rddReader(t, use, "reader before", "SELECT "+target+"()")
					t.Logf("before: %v", rs)
					call := fmt.Sprintf(k.call, id)
					rs, err := oaSimple(t, conn, call)
					if err != nil {
						t.Fatalf("%s: %v (%v)", call, err, rs)
					}
					if settle {
						catchUp(t, c)
						time.Sleep(2500 * time.Millisecond) // the monitor samples the standbys past it; two change polls run
					}
					rddWriter(t, use, "right after "+call+" made it write", "SELECT "+target+"()")
				})
			}
		})
	}
}

func escapeSQLString(s string) string {
	out := make([]byte, 0, len(s)+8)
	for i := 0; i < len(s); i++ {
		if s[i] == '\'' {
			out = append(out, '\'')
		}
		out = append(out, s[i])
	}
	return string(out)
}

// TestPreparedStatementAfterAnotherSessionsReplace: session B prepares SELECT f() (pgx's
// statement cache: a named prepared statement) while f reads; session A replaces f through pgowl
// by a writer; B's next execution of the same prepared statement must go to the primary.
func TestPreparedStatementAfterAnotherSessionsReplace(t *testing.T) {
	_, o := rddSetup(t)
	a := rddConnect(t, o, pgx.QueryExecModeSimpleProtocol, "rdd, public")
	b := rddConnect(t, o, pgx.QueryExecModeCacheStatement, "")
	for i, inTx := range []bool{false, true} {
		f := fmt.Sprintf("rdd.pp_%d", i)
		rddMust(t, a, "CREATE OR REPLACE FUNCTION "+f+"() RETURNS bigint LANGUAGE sql VOLATILE AS 'SELECT 0::bigint'")
		catchUp(t, o.nodes)
		q := "SELECT " + f + "() WHERE $1::int = 1"
		rs, err := runAndRoutesArgs(t, b, q, 1)
		t.Logf("B while it reads: %v, %v", rs, err)
		change := "CREATE OR REPLACE FUNCTION " + f + "() RETURNS bigint LANGUAGE sql VOLATILE AS $$SELECT nextval('rdd.seq')$$"
		if inTx {
			change = "BEGIN; " + change + "; COMMIT"
		}
		rddMust(t, a, change)
		rs, err = runAndRoutesArgs(t, b, q, 1)
		oaJudgeWriter(t, "B's prepared statement right after A's "+change, q, rs, err, nil)
	}
}

func runAndRoutesArgs(t *testing.T, conn *client, sql string, args ...any) ([]routeNotice, error) {
	t.Helper()
	ctx := timeoutCtx(t, statementTimeout)
	err := runToEnd(ctx, conn, sql, args...)
	return conn.routes(t), err
}
