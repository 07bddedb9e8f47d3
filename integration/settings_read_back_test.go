package integration

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgowl/pgowl/integration/owltest"
)

// Review 8: session settings read back from the backend (set_config inside
// functions, multi-statement strings, DO blocks), SET LOCAL pgowl.*, and a
// serializable default isolation level.
//
// Each test asserts what PostgreSQL does on a direct connection; where the
// value is not obvious, the test runs the same steps on a direct connection
// to the primary and compares. Tests that use rvStartOneBackend share one
// backend connection between sessions A and B.

// r8sSetup creates the objects the tests use, idempotently.
func r8sSetup(t *testing.T) {
	t.Helper()
	c := sharedClusterFor(t)
	ctx := timeoutCtx(t, statementTimeout)
	if err := c.Nodes[0].Exec(ctx, `
	CREATE SEQUENCE IF NOT EXISTS public.r8s_seq;
	CREATE OR REPLACE FUNCTION public.r8s_setcfg(n text, v text) RETURNS text LANGUAGE plpgsql AS $f$
	BEGIN
		RETURN set_config(n, v, false);
	END $f$;
	CREATE OR REPLACE FUNCTION public.r8s_set_tenant(v text) RETURNS text LANGUAGE plpgsql AS $f$
	BEGIN
		RETURN set_config('r8s.tenant', v, false);
	END $f$;
	GRANT USAGE, SELECT, UPDATE ON SEQUENCE public.r8s_seq TO `+appUser+`;
	GRANT EXECUTE ON FUNCTION public.r8s_setcfg(text, text) TO `+appUser+`;
	GRANT EXECUTE ON FUNCTION public.r8s_set_tenant(text) TO `+appUser); err != nil {
		t.Fatalf("setup: %v", err)
	}
	catchUp(t, c)
}

// r8sProbe is one value that shows the settings the tests change, and how
// values print under them.
const r8sProbe = `SELECT concat_ws(' | ',
	current_setting('work_mem'), current_setting('TimeZone'), current_setting('DateStyle'),
	current_setting('IntervalStyle'), current_setting('search_path'), current_setting('application_name'),
	current_setting('statement_timeout'), current_setting('standard_conforming_strings'),
	current_setting('default_transaction_isolation'),
	coalesce(nullif(current_setting('r8s.tenant', true), ''), '<none>'),
	coalesce(nullif(current_setting('r8s.q', true), ''), '<none>'),
	'2020-06-01 12:00:00+00'::timestamptz::text, '2020-06-01'::date::text,
	'1 day 02:03:04'::interval::text)`

// r8sProbeWrite is r8sProbe run on the primary (it takes a sequence value).
const r8sProbeWrite = r8sProbe + ` FROM (SELECT nextval('public.r8s_seq')) s`

// r8sCompare runs steps on a direct connection and through pgowl (a fresh
// session each), then the probes a few times on each (through pgowl they run
// on standbys and the primary), and reports any difference.
func r8sCompare(t *testing.T, o *owl, what string, steps ...string) {
	t.Helper()
	c := sharedClusterFor(t)
	ctx := timeoutCtx(t, 3*statementTimeout)
	d := rtDirect(t, c).PgConn()
	p := o.connect(t, nil).PgConn()
	for _, s := range steps {
		if _, err := d.Exec(ctx, s).ReadAll(); err != nil {
			t.Fatalf("%s: direct: %s: %v", what, s, err)
		}
		if _, err := p.Exec(ctx, s).ReadAll(); err != nil {
			t.Fatalf("%s: pgowl: %s: %v (SQLSTATE %s); it works on a direct connection", what, s, err, rvSQLState(err))
		}
	}
	want := r4sOne(t, ctx, d, r8sProbe)
	for i := 0; i < 3; i++ {
		for _, q := range []string{r8sProbe, r8sProbeWrite} {
			got, err := rvQueryOne(ctx, p, q)
			if err != nil {
				t.Fatalf("%s: probe %d through pgowl: %v (SQLSTATE %s)", what, i, err, rvSQLState(err))
			}
			if got != want {
				t.Errorf("%s: probe %d (%s) through pgowl:\n got  %s\n want %s (direct connection)", what, i, firstLine(q), got, want)
				return
			}
		}
	}
}

func firstLine(s string) string {
	if strings.Contains(s, "nextval") {
		return "on the primary"
	}
	return "a read"
}

// r8sSets are settings of the kinds the read-back must carry by value.
var r8sSets = []string{
	`SET work_mem = '64MB'`,
	`SET TimeZone = 'America/New_York'`,
	`SET DateStyle = 'SQL, DMY'`,
	`SET IntervalStyle = 'postgres_verbose'`,
	`SET search_path = "R8s ""Odd"" Schema", "$user", public`,
	`SET application_name = 'r8s app'`,
	`SET statement_timeout = '90s'`,
}

// TestSessionReadBackMultiStatementValues: settings SET inside a
// multi-statement string (read back from the backend by pgowl) keep their
// values on the session's other backends. (Placeholders such as r8s.tenant:
// TestSessionMultiStatementPlaceholder.)
func TestSessionReadBackMultiStatementValues(t *testing.T) {
	r8sSetup(t)
	o := startOwl(t, sharedClusterFor(t), nil)
	r8sCompare(t, o, "multi-statement SETs", strings.Join(r8sSets, "; ")+"; SELECT 1")
}

// TestSessionReadBackFunctionValues: the same settings changed by a
// function that calls set_config with a computed name (pg_settings lists
// them, except the r8s.* placeholders).
func TestSessionReadBackFunctionValues(t *testing.T) {
	r8sSetup(t)
	o := startOwl(t, sharedClusterFor(t), nil)
	r8sCompare(t, o, "set_config in a function",
		`SELECT public.r8s_setcfg('work_mem', '64MB')`,
		`SELECT public.r8s_setcfg('TimeZone', 'Asia/Kolkata')`,
		`SELECT public.r8s_setcfg('DateStyle', 'German, DMY')`,
		`SELECT public.r8s_setcfg('search_path', '"R8s Schema", "$user", public')`,
		`SELECT public.r8s_setcfg('application_name', 'r8s fn app')`,
		`SELECT public.r8s_set_tenant(E'quote '' and backslash \\ end')`,
	)
}

// TestSessionReadBackTimeZoneInterval: SET TIME ZONE with an interval
// (POSIX zone name '<+05:30>-05:30') in a string pgowl reads back.
func TestSessionReadBackTimeZoneInterval(t *testing.T) {
	r8sSetup(t)
	o := startOwl(t, sharedClusterFor(t), nil)
	r8sCompare(t, o, "SET TIME ZONE INTERVAL", `SET TIME ZONE INTERVAL '+05:30' HOUR TO MINUTE; SELECT 1`)
}

// TestSessionReadBackEmptySearchPath: SET search_path = ” in a
// string pgowl reads back.
func TestSessionReadBackEmptySearchPath(t *testing.T) {
	r8sSetup(t)
	o := startOwl(t, sharedClusterFor(t), nil)
	r8sCompare(t, o, "empty search_path", `SET search_path = ''; SELECT 1`)
}

// TestSessionReadBackStandardConformingStringsOff: a string sets
// standard_conforming_strings off (it applies to the strings after it, not to
// the rest of its own string), application_name and search_path with quotes
// and backslashes; then, with standard_conforming_strings off, a SET and a
// function set r8s.q and r8s.tenant with backslash escapes. The values pgowl
// reads back and replays must be the same.
func TestSessionReadBackStandardConformingStringsOff(t *testing.T) {
	r8sSetup(t)
	o := startOwl(t, sharedClusterFor(t), nil)
	r8sCompare(t, o, "standard_conforming_strings off",
		`SET standard_conforming_strings = off; SET application_name = 'a\\b''c'; SET search_path = "x\\y", public; SELECT 1`,
		`SET r8s.q = 'p\\q''r'`,
		`SELECT public.r8s_set_tenant('t\\u')`,
		`SET DateStyle = 'German'; SELECT 1`)
}

// TestSessionReadBackRealPrecision: a real setting read back from
// pg_settings has six significant digits (%g): SET cpu_tuple_cost =
// 1234.56789 comes back as 1234.57, and plans are costed with another value.
// pgowl: Total Cost 1234570.00 where PostgreSQL gives 1234567.89.
// PostgreSQL keeps the value as set: EXPLAIN shows the same costs on every
// statement. A known limit: the test reports it while it is there. (The backend the SET ran on
// keeps the exact value for the session's own later units there: the string runs on the primary,
// and the EXPLAINs, reads, on a standby's backend, which gets the value read back.)
func TestSessionReadBackRealPrecision(t *testing.T) {
	r8sSetup(t)
	c := sharedClusterFor(t)
	o := startOwl(t, c, readYourWritesOff) // the reads go to a standby
	ctx := timeoutCtx(t, 2*statementTimeout)
	const set = `/*pgowl:primary*/ SET cpu_tuple_cost = 1234.56789; SELECT 1`
	const explain = `EXPLAIN (FORMAT JSON) SELECT * FROM generate_series(1, 1000)`
	d := rtDirect(t, c).PgConn()
	p := o.connect(t, nil).PgConn()
	r4sExec(t, ctx, d, set)
	r4sExec(t, ctx, p, set)
	want := r4sOne(t, ctx, d, explain)
	differ := 0
	for i := 0; i < 3; i++ {
		if got := r4sOne(t, ctx, p, explain); got != want {
			differ++
		}
	}
	owltest.KnownGap(t, differ > 0, fmt.Sprintf(`README "Limits": a setting read back from the node has the precision PostgreSQL shows (6 significant digits for real-valued settings): after %q, %d of 3 EXPLAINs through pgowl differ from a direct connection's`, set, differ))
}

// TestSessionMultiStatementPlaceholder: an application setting SET in
// a multi-statement string (pg_settings does not list placeholders) keeps its
// value on the session's next statements.
// pgowl: the read-back lists pg_settings (no placeholders) and the names in
// Effects.SetConfigNames, which holds set_config names only, not the names of
// SET statements in the string: the value is lost (NULL or an empty string depending on
// the backend). Suspected cause: proxy/settings.go carrySettingsReadBack /
// classify SetConfigNames.
func TestSessionMultiStatementPlaceholder(t *testing.T) {
	r8sSetup(t)
	o := startOwl(t, sharedClusterFor(t), nil)
	ctx := timeoutCtx(t, 2*statementTimeout)
	p := o.connect(t, nil).PgConn()
	r4sExec(t, ctx, p, `SET r8s.multi = 'm1'; SELECT 1`)
	for _, q := range []string{`SELECT coalesce(current_setting('r8s.multi', true), '<null>')`,
		`SELECT coalesce(current_setting('r8s.multi', true), '<null>') FROM (SELECT nextval('public.r8s_seq')) s`} {
		if got := r4sOne(t, ctx, p, q); got != "m1" {
			t.Errorf("%s after SET r8s.multi = 'm1' in a multi-statement string: %q, want m1", q, got)
		}
	}
}

// TestSessionPipelinePlaceholder: the same SET sent in one extended
// protocol pipeline with another statement (pgx batch, one Sync).
// pgowl loses r8s.batch as above (work_mem, in pg_settings, is kept).
func TestSessionPipelinePlaceholder(t *testing.T) {
	r8sSetup(t)
	o := startOwl(t, sharedClusterFor(t), nil)
	ctx := timeoutCtx(t, 2*statementTimeout)
	conn := o.connect(t, nil)
	b := &pgx.Batch{}
	b.Queue(`SET r8s.batch = 'b1'`)
	b.Queue(`SET work_mem = '12MB'`)
	b.Queue(`SELECT 1`)
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		t.Fatalf("batch: %v", err)
	}
	for _, q := range []string{`SELECT coalesce(current_setting('r8s.batch', true), '<null>') || '/' || current_setting('work_mem')`,
		`SELECT coalesce(current_setting('r8s.batch', true), '<null>') || '/' || current_setting('work_mem') FROM (SELECT nextval('public.r8s_seq')) s`} {
		var got string
		if err := conn.QueryRow(ctx, q).Scan(&got); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if got != "b1/12MB" {
			t.Errorf("%s after a pipeline that SET r8s.batch and work_mem: %q, want b1/12MB", q, got)
		}
	}
}

// TestSessionResetAfterReadBack: RESET of one setting, RESET ALL and
// DISCARD ALL after pgowl read the settings back.
func TestSessionResetAfterReadBack(t *testing.T) {
	r8sSetup(t)
	o := startOwl(t, sharedClusterFor(t), nil)
	set := strings.Join(r8sSets, "; ") + "; SELECT 1"
	r8sCompare(t, o, "RESET work_mem, TimeZone, r8s.tenant", set, `RESET work_mem`, `RESET TimeZone`, `RESET r8s.tenant`, `SET DateStyle TO DEFAULT`)
	r8sCompare(t, o, "function then RESET", `SELECT public.r8s_set_tenant('fn')`, `SELECT public.r8s_setcfg('work_mem', '3MB')`, `RESET work_mem`, `RESET r8s.tenant`)
	r8sCompare(t, o, "RESET ALL", set, `RESET ALL`)
	r8sCompare(t, o, "DISCARD ALL", set, `DISCARD ALL`)
	r8sCompare(t, o, "SET after read-back", set, `SET work_mem = '5MB'`, `SET TimeZone = 'UTC'`)
	r8sCompare(t, o, "function, then SET in a string", `SELECT public.r8s_set_tenant('fn')`, `SET work_mem = '5MB'; SELECT 1`)
}

// TestSessionFunctionInCommittedTransaction: a function that sets
// r8s.tenant inside a transaction block that commits. PostgreSQL keeps the
// setting for the rest of the session. (README "Limits" says such a change is
// not carried; the test documents it.)
// pgowl: the backend is reset before the next statement and r8s.tenant is
// lost, on every node.
func TestSessionFunctionInCommittedTransaction(t *testing.T) {
	r8sSetup(t)
	o := startOwl(t, sharedClusterFor(t), nil)
	r8sCompare(t, o, "function in a committed transaction", `BEGIN`, `SELECT public.r8s_set_tenant('tx-committed')`, `COMMIT`)
}

// TestSessionFunctionInRolledBackTransaction: the same rolled back:
// the earlier value returns.
func TestSessionFunctionInRolledBackTransaction(t *testing.T) {
	r8sSetup(t)
	o := startOwl(t, sharedClusterFor(t), nil)
	r8sCompare(t, o, "function in a rolled-back transaction", `SET r8s.tenant = 'before'`, `SET work_mem = '6MB'`,
		`BEGIN`, `SELECT public.r8s_set_tenant('tx-rolled-back')`, `SELECT public.r8s_setcfg('work_mem', '7MB')`, `ROLLBACK`)
}

// TestSessionSetThenFunctionInTransactionLeaks: session B has SET
// work_mem = '5MB'. Session A, on the same backend, runs BEGIN; SET work_mem
// = '5MB'; SELECT set_config('r8s.secret', 'a-' || 'secret', false); COMMIT.
// The set_config (computed value, inside a transaction) cannot be read back
// and marks the backend's settings unknown, but the COMMIT then records A's
// pending SET and marks the backend as carrying exactly A's settings, which
// are B's too: B gets the backend without a reset and sees A's r8s.secret.
// On its own connection B never sees it.
// The cause, since fixed: committing the pending SET overwrote the
// backend's "settings unknown" mark that the read-back left inside the
// transaction (today proxy/settings_tracker.go and the typed
// connSettings state in proxy keep the mark).
func TestSessionSetThenFunctionInTransactionLeaks(t *testing.T) {
	o := rvStartOneBackend(t, nil)
	ctx := timeoutCtx(t, 2*statementTimeout)
	b := o.connect(t, nil).PgConn()
	a := o.connect(t, nil).PgConn()
	r4sExec(t, ctx, b, `SET work_mem = '5MB'`)
	r4sExec(t, ctx, a, `BEGIN`, `SET work_mem = '5MB'`, `SELECT set_config('r8s.secret', 'a-' || 'secret', false)`, `COMMIT`)
	got := r4sOne(t, ctx, b, `SELECT coalesce(nullif(current_setting('r8s.secret', true), ''), '<none>')`)
	if got != "<none>" {
		t.Errorf("session B sees session A's r8s.secret = %q; it was never set in B", got)
	}
}

// TestSessionSetThenFunctionInTransactionLeaksSearchPath: the same
// with a function that sets search_path: B then resolves names in A's schema.
func TestSessionSetThenFunctionInTransactionLeaksSearchPath(t *testing.T) {
	r8sSetup(t)
	o := rvStartOneBackend(t, nil)
	ctx := timeoutCtx(t, 2*statementTimeout)
	b := o.connect(t, nil).PgConn()
	a := o.connect(t, nil).PgConn()
	r4sExec(t, ctx, b, `SET work_mem = '5MB'`)
	want := r4sOne(t, ctx, b, `SHOW search_path`)
	r4sExec(t, ctx, a, `BEGIN`, `SET work_mem = '5MB'`, `SELECT public.r8s_setcfg('search_path', 'r8s_a_schema')`, `COMMIT`)
	if got := r4sOne(t, ctx, b, `SHOW search_path`); got != want {
		t.Errorf("session B's search_path is %q after session A's transaction; B never changed it (%q)", got, want)
	}
}

// TestSessionReadBackNotSeenByOtherSession: what A sets by a function,
// a multi-statement string or a DO block with a computed name never reaches B
// on the shared backend, and A keeps what pgowl could read back.
func TestSessionReadBackNotSeenByOtherSession(t *testing.T) {
	r8sSetup(t)
	o := rvStartOneBackend(t, nil)
	ctx := timeoutCtx(t, 3*statementTimeout)
	b := o.connect(t, nil).PgConn()
	a := o.connect(t, nil).PgConn()
	defTZ := r4sOne(t, ctx, b, `SHOW TimeZone`)
	r4sExec(t, ctx, a,
		`SELECT public.r8s_set_tenant('a-tenant')`,
		`SELECT public.r8s_setcfg('TimeZone', 'Asia/Tokyo')`,
		`SET r8s.multi = 'a-multi'; SET work_mem = '11MB'; SELECT 1`,
		`DO $$ BEGIN PERFORM set_config('r8s.' || 'dyn', 'a-dyn', false); END $$`)
	got := r4sOne(t, ctx, b, `SELECT concat_ws('/', coalesce(nullif(current_setting('r8s.tenant', true), ''), '<none>'),
		coalesce(nullif(current_setting('r8s.multi', true), ''), '<none>'),
		coalesce(nullif(current_setting('r8s.dyn', true), ''), '<none>'), current_setting('TimeZone'))`)
	if want := "<none>/<none>/<none>/" + defTZ; got != want {
		t.Errorf("session B sees %q, want %q (A's settings must not reach B)", got, want)
	}
	if tz := b.ParameterStatus("TimeZone"); tz != defTZ {
		t.Errorf("session B's ParameterStatus TimeZone is %q, want %q", tz, defTZ)
	}
	// (r8s.multi, a placeholder SET in a multi-statement string, is lost:
	// TestSessionMultiStatementPlaceholder.)
	got = r4sOne(t, ctx, a, `SELECT concat_ws('/', current_setting('r8s.tenant', true), current_setting('TimeZone'), current_setting('work_mem'))`)
	if want := "a-tenant/Asia/Tokyo/11MB"; got != want {
		t.Errorf("session A after B used the backend: %q, want %q", got, want)
	}
	if tz := a.ParameterStatus("TimeZone"); tz != "Asia/Tokyo" {
		t.Errorf("session A's ParameterStatus TimeZone is %q, want Asia/Tokyo", tz)
	}
}

// TestSessionParameterStatusFromFunction: a function that changes
// TimeZone and application_name makes PostgreSQL send ParameterStatus for
// both; the client's view stays so on the session's other backends, and a
// rolled-back change is reported back.
func TestSessionParameterStatusFromFunction(t *testing.T) {
	r8sSetup(t)
	c := sharedClusterFor(t)
	o := startOwl(t, c, nil)
	ctx := timeoutCtx(t, 3*statementTimeout)
	for _, target := range []struct {
		name string
		conn *pgconn.PgConn
	}{{"direct", rtDirect(t, c).PgConn()}, {"pgowl", o.connect(t, nil).PgConn()}} {
		p := target.conn
		startTZ := p.ParameterStatus("TimeZone")
		r4sExec(t, ctx, p, `SELECT public.r8s_setcfg('TimeZone', 'Asia/Tokyo')`, `SELECT public.r8s_setcfg('application_name', 'r8s-ps')`)
		for i, q := range []string{`SELECT 1`, `SELECT nextval('public.r8s_seq')`, `SELECT 2`} {
			r4sExec(t, ctx, p, q)
			if got := p.ParameterStatus("TimeZone") + "/" + p.ParameterStatus("application_name"); got != "Asia/Tokyo/r8s-ps" {
				t.Errorf("%s: after the functions and %d statements, ParameterStatus TimeZone/application_name = %q, want Asia/Tokyo/r8s-ps", target.name, i+1, got)
			}
		}
		r4sExec(t, ctx, p, `BEGIN`, `SELECT public.r8s_setcfg('TimeZone', 'Europe/Paris')`, `ROLLBACK`, `SELECT 3`)
		if got := p.ParameterStatus("TimeZone"); got != "Asia/Tokyo" {
			t.Errorf("%s: after a rolled-back change of TimeZone, ParameterStatus TimeZone = %q, want Asia/Tokyo", target.name, got)
		}
		r4sExec(t, ctx, p, `RESET TimeZone`, `SELECT 4`)
		if got := p.ParameterStatus("TimeZone"); got != startTZ {
			t.Errorf("%s: after RESET TimeZone, ParameterStatus TimeZone = %q, want %q", target.name, got, startTZ)
		}
		if got := r4sOne(t, ctx, p, `SHOW TimeZone`); got != startTZ {
			t.Errorf("%s: after RESET TimeZone, SHOW TimeZone = %q, want %q", target.name, got, startTZ)
		}
	}
}

// TestSessionPreparedSetConfigThenDeallocate: EXECUTE of an SQL
// prepared statement that calls set_config (the session is pinned by the
// PREPARE). After DEALLOCATE the pin ends; PostgreSQL keeps the setting.
// pgowl: when the pin ends the backend's settings count as unknown and are
// reset; the set_config done by EXECUTE was never recorded or read back, so
// the session loses r8s.tenant. Suspected cause: proxy/pins.go recheckPins
// (released&SessionPrepare) marks unknown instead of reading back.
func TestSessionPreparedSetConfigThenDeallocate(t *testing.T) {
	r8sSetup(t)
	o := startOwl(t, sharedClusterFor(t), nil)
	r8sCompare(t, o, "PREPARE/EXECUTE set_config then DEALLOCATE",
		`PREPARE r8s_p(text) AS SELECT set_config('r8s.tenant', $1, false)`,
		`EXECUTE r8s_p('prepared')`, `DEALLOCATE r8s_p`)
}

// TestSessionPinnedReadBack: a session pinned by a temporary table
// runs a function that sets r8s.tenant and work_mem; the pin then ends.
func TestSessionPinnedReadBack(t *testing.T) {
	r8sSetup(t)
	o := startOwl(t, sharedClusterFor(t), nil)
	r8sCompare(t, o, "temp table pin, function, DROP",
		`CREATE TEMP TABLE r8s_tmp (x int)`,
		`SELECT public.r8s_set_tenant('pinned')`, `SELECT public.r8s_setcfg('work_mem', '13MB')`,
		`SET DateStyle = 'Postgres'; SELECT 1`,
		`DROP TABLE r8s_tmp`)
}

// TestSessionFunctionSetsSerializableDefault: a function (computed
// name) sets default_transaction_isolation to serializable. PostgreSQL runs
// the session's later reads; a standby refuses them (0A000), so they must
// run on the primary.
// pgowl: the read-back records set_config('default_transaction_isolation',
// 'serializable') and replays it on a standby, which answers 0A000 "cannot
// use serializable mode in a hot standby" to the next read. (A SET in a
// multi-statement string is caught by the classifier and pins; a computed
// name in a function is not.)
func TestSessionFunctionSetsSerializableDefault(t *testing.T) {
	r8sSetup(t)
	o := startOwl(t, sharedClusterFor(t), nil)
	r8sCompare(t, o, "serializable default from a function",
		`SELECT public.r8s_setcfg('default_transaction_isolation', 'serializable')`)
}

// TestSessionMultiStatementSerializableDefault: the same from a
// multi-statement string.
func TestSessionMultiStatementSerializableDefault(t *testing.T) {
	r8sSetup(t)
	o := startOwl(t, sharedClusterFor(t), nil)
	r8sCompare(t, o, "serializable default in a multi-statement string",
		`SET default_transaction_isolation = 'serializable'; SELECT 1`)
}

// TestSessionSerializableLogin: a login with a serializable default
// (startup parameter) then SET back to read committed, RESET, DISCARD ALL.
func TestSessionSerializableLogin(t *testing.T) {
	r8sSetup(t)
	c := sharedClusterFor(t)
	o := startOwl(t, c, nil)
	ctx := timeoutCtx(t, 3*statementTimeout)
	p := o.connect(t, withParams(map[string]string{"default_transaction_isolation": "serializable"})).PgConn()
	iso := `SELECT current_setting('transaction_isolation')`
	if got := r4sOne(t, ctx, p, iso); got != "serializable" {
		t.Errorf("serializable login: transaction_isolation %q, want serializable", got)
	}
	r4sExec(t, ctx, p, `SET default_transaction_isolation = 'read committed'`)
	for i := 0; i < 2; i++ {
		if got := r4sOne(t, ctx, p, iso); got != "read committed" {
			t.Errorf("after SET default_transaction_isolation = 'read committed': %q, want read committed", got)
		}
	}
	r4sExec(t, ctx, p, `RESET default_transaction_isolation`)
	for i := 0; i < 2; i++ {
		if got := r4sOne(t, ctx, p, iso); got != "serializable" {
			t.Errorf("after RESET default_transaction_isolation: %q, want serializable (the login's default)", got)
		}
	}
	r4sExec(t, ctx, p, `DISCARD ALL`)
	for i := 0; i < 2; i++ {
		if got := r4sOne(t, ctx, p, iso); got != "serializable" {
			t.Errorf("after DISCARD ALL: %q, want serializable (the login's default)", got)
		}
	}
	r4sExec(t, ctx, p, `SET default_transaction_isolation = 'read committed'; SELECT 1`)
	if got := r4sOne(t, ctx, p, iso); got != "read committed" {
		t.Errorf("after SET read committed in a multi-statement string: %q, want read committed", got)
	}
	r4sExec(t, ctx, p, `BEGIN ISOLATION LEVEL REPEATABLE READ`)
	if got := r4sOne(t, ctx, p, iso); got != "repeatable read" {
		t.Errorf("BEGIN ISOLATION LEVEL REPEATABLE READ: %q", got)
	}
	r4sExec(t, ctx, p, `COMMIT`)
}

// r8sNoticeOn reports whether a read now gets pgowl's routing NOTICE.
func r8sNoticeOn(t *testing.T, conn *client) bool {
	t.Helper()
	ctx := timeoutCtx(t, statementTimeout)
	conn.routes(t)
	if _, err := conn.PgConn().Exec(ctx, `SELECT 1`).ReadAll(); err != nil {
		t.Fatalf("SELECT 1: %v", err)
	}
	return len(conn.routes(t)) > 0
}

// TestSessionSetLocalNoticeEndsWithTransaction: SET LOCAL
// pgowl.notice = off lasts until the transaction ends (COMMIT, ROLLBACK,
// ROLLBACK TO SAVEPOINT of a savepoint set before it); a plain SET inside a
// transaction that rolls back is undone, and one made after a savepoint is
// undone by ROLLBACK TO it, as PostgreSQL does with its own settings. RELEASE
// keeps what was set since the savepoint, and ROLLBACK TO a name set twice
// goes back to the newer savepoint.
func TestSessionSetLocalNoticeEndsWithTransaction(t *testing.T) {
	o := startOwl(t, sharedClusterFor(t), nil)
	conn := o.connect(t, nil)
	ctx := timeoutCtx(t, 3*statementTimeout)
	if !r8sNoticeOn(t, conn) {
		t.Fatalf("no routing NOTICE at the start")
	}
	cases := []struct {
		what   string
		steps  []string
		wantOn bool
	}{
		{"SET LOCAL then COMMIT", []string{`BEGIN`, `SET LOCAL pgowl.notice = off`, `SELECT 1`, `COMMIT`}, true},
		{"SET LOCAL then ROLLBACK", []string{`BEGIN`, `SET LOCAL pgowl.notice = off`, `SELECT 1`, `ROLLBACK`}, true},
		{"SET LOCAL in one string with COMMIT", []string{`BEGIN; SET LOCAL pgowl.notice = off; SELECT 1; COMMIT`}, true},
		{"SET LOCAL after a savepoint, ROLLBACK TO SAVEPOINT, then a statement", []string{`BEGIN`, `SELECT 1`, `SAVEPOINT s`, `SET LOCAL pgowl.notice = off`, `ROLLBACK TO SAVEPOINT s`}, true},
		{"SET after a savepoint, ROLLBACK TO it, COMMIT", []string{`BEGIN`, `SAVEPOINT s`, `SET pgowl.notice = off`, `ROLLBACK TO s`, `COMMIT`}, true},
		{"SET before a savepoint, ROLLBACK TO it, COMMIT", []string{`BEGIN`, `SET pgowl.notice = off`, `SAVEPOINT s`, `SET pgowl.notice = on`, `ROLLBACK TO s`, `COMMIT`}, false},
		{"SET LOCAL after a savepoint, RELEASE, then a statement", []string{`BEGIN`, `SAVEPOINT s`, `SET LOCAL pgowl.notice = off`, `RELEASE s`}, false},
		{"ROLLBACK TO a name set twice returns to the newer", []string{`BEGIN`, `SAVEPOINT s`, `SET LOCAL pgowl.notice = off`, `SAVEPOINT s`, `SET LOCAL pgowl.notice = on`, `ROLLBACK TO s`}, false},
		{"ROLLBACK TO in a failed transaction", []string{`BEGIN`, `SAVEPOINT s`, `SET LOCAL pgowl.notice = off`, `SELECT 1/0`, `ROLLBACK TO s`}, true},
		{"SET in a rolled-back transaction", []string{`BEGIN`, `SELECT 1`, `SET pgowl.notice = off`, `ROLLBACK`}, true},
	}
	for _, tc := range cases {
		t.Run(tc.what, func(t *testing.T) {
			for _, s := range tc.steps {
				_, err := conn.PgConn().Exec(ctx, s).ReadAll()
				if err != nil && s != `SELECT 1/0` {
					t.Fatalf("%s: %s: %v", tc.what, s, err)
				}
			}
			if on := r8sNoticeOn(t, conn); on != tc.wantOn {
				t.Errorf("%s: the next statement got a routing NOTICE: %v, want %v", tc.what, on, tc.wantOn)
			}
			if conn.PgConn().TxStatus() != 'I' {
				r4sExec(t, ctx, conn.PgConn(), `ROLLBACK`)
			}
			r4sExec(t, ctx, conn.PgConn(), `RESET pgowl.notice`)
		})
	}
}

// TestSessionSetLocalMaxLagEndsWithTransaction: SHOW after the
// transaction of a SET LOCAL pgowl.max_replica_lag ended.
func TestSessionSetLocalMaxLagEndsWithTransaction(t *testing.T) {
	o := startOwl(t, sharedClusterFor(t), nil)
	ctx := timeoutCtx(t, 2*statementTimeout)
	p := o.connect(t, nil).PgConn()
	before := r4sOne(t, ctx, p, `SHOW pgowl.max_replica_lag`)
	r4sExec(t, ctx, p, `BEGIN`, `SET LOCAL pgowl.max_replica_lag = '1ms'`, `SELECT 1`, `COMMIT`, `SELECT 1`)
	if got := r4sOne(t, ctx, p, `SHOW pgowl.max_replica_lag`); got != before {
		t.Errorf("SHOW pgowl.max_replica_lag after the transaction of SET LOCAL ended: %q, want %q", got, before)
	}
}

// TestSessionPgowlSetInFailedTransaction: in a failed transaction
// PostgreSQL refuses every command but ROLLBACK (25P02), SET LOCAL included.
// pgowl answers SET LOCAL pgowl.notice in the failed transaction with SET.
func TestSessionPgowlSetInFailedTransaction(t *testing.T) {
	o := startOwl(t, sharedClusterFor(t), nil)
	conn := o.connect(t, nil)
	ctx := timeoutCtx(t, 2*statementTimeout)
	p := conn.PgConn()
	r4sExec(t, ctx, p, `BEGIN`)
	if _, err := p.Exec(ctx, `SELECT 1/0`).ReadAll(); err == nil {
		t.Fatalf("1/0 succeeded")
	}
	_, err := p.Exec(ctx, `SET LOCAL pgowl.notice = off`).ReadAll()
	if rvSQLState(err) != "25P02" {
		t.Errorf("SET LOCAL pgowl.notice in a failed transaction: %v, want SQLSTATE 25P02 as for any SET", err)
	}
	r4sExec(t, ctx, p, `ROLLBACK`)
	if !r8sNoticeOn(t, conn) {
		t.Errorf("after ROLLBACK of the failed transaction: no routing NOTICE; pgowl.notice should be on")
	}
}

// TestSessionMaxLagZeroRefused: 0 in any spelling is refused; the
// setting keeps its value.
func TestSessionMaxLagZeroRefused(t *testing.T) {
	o := startOwl(t, sharedClusterFor(t), nil)
	ctx := timeoutCtx(t, 2*statementTimeout)
	p := o.connect(t, nil).PgConn()
	before := r4sOne(t, ctx, p, `SHOW pgowl.max_replica_lag`)
	for _, v := range []string{`0`, `'0'`, `'0ms'`, `'0s'`, `'-1s'`} {
		_, err := p.Exec(ctx, `SET pgowl.max_replica_lag = `+v).ReadAll()
		if rvSQLState(err) != "22023" {
			t.Errorf("SET pgowl.max_replica_lag = %s: %v, want SQLSTATE 22023", v, err)
		}
	}
	if got := r4sOne(t, ctx, p, `SHOW pgowl.max_replica_lag`); got != before {
		t.Errorf("SHOW pgowl.max_replica_lag after refused SETs: %q, want %q", got, before)
	}
}

// TestSessionCommitWithoutTransaction: COMMIT and ROLLBACK outside a
// transaction succeed with WARNING 25P01 "there is no transaction in
// progress", and the session's settings are untouched.
func TestSessionCommitWithoutTransaction(t *testing.T) {
	r8sSetup(t)
	o := startOwl(t, sharedClusterFor(t), nil)
	conn := o.connect(t, nil)
	ctx := timeoutCtx(t, 2*statementTimeout)
	p := conn.PgConn()
	r4sExec(t, ctx, p, `SET work_mem = '9MB'`, `SELECT public.r8s_set_tenant('c1')`)
	for _, s := range []string{`COMMIT`, `ROLLBACK`, `END`, `ABORT`} {
		conn.notices.take()
		if _, err := p.Exec(ctx, s).ReadAll(); err != nil {
			t.Errorf("%s outside a transaction: %v; PostgreSQL answers with a warning", s, err)
			continue
		}
		found := false
		for _, n := range conn.notices.take() {
			found = found || n.Code == "25P01"
		}
		if !found {
			t.Errorf("%s outside a transaction: no WARNING 25P01", s)
		}
	}
	if got := r4sOne(t, ctx, p, `SELECT current_setting('work_mem') || '/' || current_setting('r8s.tenant', true)`); got != "9MB/c1" {
		t.Errorf("settings after COMMIT/ROLLBACK outside a transaction: %q, want 9MB/c1", got)
	}
}
