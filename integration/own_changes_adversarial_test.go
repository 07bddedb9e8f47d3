package integration

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/internal/cluster"
)

// Issue 17, adversarially: a statement must never be classified against a catalogue that misses
// a change its own session committed. Each test changes a function or a view through pgowl and
// uses it at once, on the same session, in the simple protocol and in pgx's extended modes,
// against the shared cluster (a primary, two streaming standbys). A use of an object that writes
// must run on the primary, succeed, and be classified as a write: a write routed to a standby
// fails with SQLSTATE 25006, and a write classified as a read that reaches the primary only
// because read_your_writes kept the session there is the same misclassification, masked. Where a
// use of an object that only reads went is logged, not asserted. Every object is named oa_*.
//
// Each test runs twice: with read_your_writes as configured by default (session), and with it
// off, where a use misclassified as a read goes straight to a standby.

const oaSetupSQL = `
CREATE SCHEMA IF NOT EXISTS oa_app AUTHORIZATION app;
CREATE SCHEMA IF NOT EXISTS oa_low AUTHORIZATION app;
CREATE SCHEMA IF NOT EXISTS oa_shadow AUTHORIZATION app;
CREATE SEQUENCE IF NOT EXISTS oa_app.oa_seq;
ALTER SEQUENCE oa_app.oa_seq OWNER TO app;
CREATE TABLE IF NOT EXISTS oa_app.oa_log (id bigserial PRIMARY KEY, tag text NOT NULL);
ALTER TABLE oa_app.oa_log OWNER TO app;
CREATE OR REPLACE FUNCTION oa_app.oa_probe() RETURNS integer LANGUAGE sql STABLE AS $$SELECT 1$$;
`

// oaSettings are the read_your_writes settings every test of this file runs under.
var oaSettings = []struct {
	name   string
	mutate func(*config.Config)
}{
	{"ryw_default", func(cfg *config.Config) { cfg.Classify.RefreshInterval = 10 * time.Minute }},
	{"ryw_off", func(cfg *config.Config) {
		cfg.Classify.RefreshInterval = 10 * time.Minute
		cfg.Routing.ReadYourWrites = config.ReadYourWritesOff
	}},
}

// oaModes are the protocols the uses run in: the simple protocol and three of pgx's extended modes
// (an unnamed statement each time, a cached description, a cached prepared statement).
var oaModes = []queryProtocol{
	{"simple", pgx.QueryExecModeSimpleProtocol},
	{"exec", pgx.QueryExecModeExec},
	{"describe", pgx.QueryExecModeCacheDescribe},
	{"prepared", pgx.QueryExecModeCacheStatement},
}

// oaEach runs body once per read_your_writes setting, each with its own pgowl in front of the
// shared cluster (the catalogue read at start, then changed only by the sessions' statements).
func oaEach(t *testing.T, body func(t *testing.T, c *cluster.Cluster, o *owl, setting string)) {
	for _, s := range oaSettings {
		t.Run(s.name, func(t *testing.T) {
			c, o := setupAndStart(t, "own changes, adversarially", oaSetupSQL, s.mutate)
			body(t, c, o, s.name)
		})
	}
}

// oaConnect opens a connection in mode with search_path oa_app, public, the catalogue loaded.
func oaConnect(t *testing.T, o *owl, mode pgx.QueryExecMode) *client {
	t.Helper()
	conn := o.connect(t, withMode(mode))
	oaMust(t, conn, "SET search_path = oa_app, public")
	oaMust(t, conn, "SELECT oa_probe()") // the catalogue is read, and held from here
	conn.routes(t)
	return conn
}

// oaMust runs sql (a change) and stops the test when it fails.
func oaMust(t *testing.T, conn *client, sql string) {
	t.Helper()
	if rs, err := runAndRoutes(t, conn, sql); err != nil {
		t.Fatalf("%s: %v (NOTICEs %v)", sql, err, rs)
	}
}

// oaSimple runs sql as one simple Query (any number of statements) whatever the connection's mode.
func oaSimple(t *testing.T, conn *client, sql string) ([]routeNotice, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), statementTimeout)
	defer cancel()
	_, err := conn.PgConn().Exec(ctx, sql).ReadAll()
	return conn.routes(t), err
}

// oaTally counts where the uses went.
type oaTally struct {
	writes, wrong int
	readers       map[string]int
}

func (tl *oaTally) reader(r routeNotice) {
	if tl.readers == nil {
		tl.readers = map[string]int{}
	}
	tl.readers[r.Role+"/"+string(r.Reason)]++
}

func (tl *oaTally) String() string {
	var keys []string
	for k := range tl.readers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, tl.readers[k]))
	}
	return fmt.Sprintf("writer uses %d (wrong %d); reader uses %s", tl.writes, tl.wrong, strings.Join(parts, " "))
}

// oaJudgeWriter checks the outcome of a use of an object that writes: no error (25006 is a write
// on a standby), and its routed unit on the primary with a verdict that is no read. It returns
// whether the use was right.
func oaJudgeWriter(t *testing.T, what, sql string, rs []routeNotice, err error, tl *oaTally) bool {
	t.Helper()
	if tl != nil {
		tl.writes++
	}
	wrong := func(format string, args ...any) bool {
		t.Errorf("%s: %s: "+format, append([]any{what, sql}, args...)...)
		if tl != nil {
			tl.wrong++
		}
		return false
	}
	if err != nil {
		if pgErr, ok := asPgError(err); ok && pgErr.Code == "25006" {
			return wrong("BUG: failed with 25006 (a write ran on a standby): %v; NOTICEs %v", err, rs)
		}
		return wrong("failed: %v; NOTICEs %v", err, rs)
	}
	if len(rs) == 0 {
		return wrong("no pgowl NOTICE")
	}
	// The last NOTICE is the unit that ran it (pgx may prepare it in a unit of its own first).
	last := rs[len(rs)-1]
	if last.Role != "primary" {
		return wrong("ran on %v; a use of a function that writes must run on the primary (NOTICEs %v)", last, rs)
	}
	if last.Reason == "READ_ONLY" || last.Reason == "READ_YOUR_WRITES" {
		return wrong("classified as a read (%v): it reached the primary only through read_your_writes; "+
			"the catalogue it was classified against missed the session's change (NOTICEs %v)", last, rs)
	}
	return true
}

// oaWriterUse runs a use of an object that writes and judges it.
func oaWriterUse(t *testing.T, conn *client, what, sql string, tl *oaTally) bool {
	t.Helper()
	rs, err := runAndRoutes(t, conn, sql)
	return oaJudgeWriter(t, what, sql, rs, err, tl)
}

// oaReaderUse runs a use of an object that only reads: it must succeed, anywhere. Even with
// read_your_writes off it never runs on a standby that has not replayed the session's change (where
// an old writing body fails with 25006, or a new function is missing, 42883): a session's own
// catalogue changes are always read-your-writes.
func oaReaderUse(t *testing.T, conn *client, what, sql string, tl *oaTally) {
	t.Helper()
	rs, err := runAndRoutes(t, conn, sql)
	if err != nil {
		t.Errorf("%s: %s: %v (NOTICEs %v); the object only reads", what, sql, err, rs)
		return
	}
	if len(rs) == 0 {
		t.Errorf("%s: %s: no pgowl NOTICE", what, sql)
		return
	}
	if tl != nil {
		tl.reader(rs[len(rs)-1])
	}
}

// oaUse runs a use of an object that writes (writes) or only reads, and judges it.
func oaUse(t *testing.T, conn *client, what, sql string, writes bool, tl *oaTally) {
	t.Helper()
	if writes {
		oaWriterUse(t, conn, what, sql, tl)
	} else {
		oaReaderUse(t, conn, what, sql, tl)
	}
}

// oaStartUse waits for the standbys to replay what was made so far (with read_your_writes off),
// then runs a use of an object
// that only reads: the starting point of a test, analysed and held by the session's catalogue.
func oaStartUse(t *testing.T, c *cluster.Cluster, o *owl, conn *client, sql string) {
	t.Helper()
	if o.cfg.Routing.ReadYourWrites == config.ReadYourWritesOff {
		catchUp(t, c) // else read_your_writes keeps the use off a standby that has not replayed it
	}
	oaReaderUse(t, conn, "start", sql, nil)
}

// oaTagsOnPrimary returns the tags oa_log holds on the primary that start with prefix.
func oaTagsOnPrimary(t *testing.T, c *cluster.Cluster, prefix string) map[string]int {
	t.Helper()
	ctx := timeoutCtx(t, statementTimeout)
	var joined string
	if err := c.Nodes[0].QueryRow(ctx, "SELECT coalesce(string_agg(tag, ' ' ORDER BY tag), '') FROM oa_app.oa_log WHERE starts_with(tag, $1)", prefix).Scan(&joined); err != nil {
		t.Fatalf("read oa_log on the primary: %v", err)
	}
	out := map[string]int{}
	for _, tag := range strings.Fields(joined) {
		out[tag]++
	}
	return out
}

// oaWantTags checks that the primary holds each of want exactly once, and no other tag with prefix.
func oaWantTags(t *testing.T, c *cluster.Cluster, prefix string, want []string) {
	t.Helper()
	got := oaTagsOnPrimary(t, c, prefix)
	for _, tag := range want {
		if got[tag] != 1 {
			t.Errorf("the row the writer use tagged %q is on the primary %d times, want once", tag, got[tag])
		}
		delete(got, tag)
	}
	for tag, n := range got {
		t.Errorf("the primary holds %d unexpected rows tagged %q", n, tag)
	}
}

// oaSQLWriter is an SQL function body that INSERTs a row tagged tag and returns its id.
func oaSQLWriter(name, tag string) string {
	return fmt.Sprintf("CREATE OR REPLACE FUNCTION %s() RETURNS bigint LANGUAGE sql VOLATILE AS $$INSERT INTO oa_app.oa_log(tag) VALUES ('%s') RETURNING id$$", name, tag)
}

// oaSQLNextval is an SQL function body that calls nextval, declared volatility as given.
func oaSQLNextval(name, volatility string) string {
	return fmt.Sprintf("CREATE OR REPLACE FUNCTION %s() RETURNS bigint LANGUAGE sql %s AS $$SELECT nextval('oa_app.oa_seq')$$", name, volatility)
}

// oaSQLReader is an SQL function body that only reads.
func oaSQLReader(name string, i int) string {
	return fmt.Sprintf("CREATE OR REPLACE FUNCTION %s() RETURNS bigint LANGUAGE sql STABLE AS $$SELECT count(*) + %d FROM oa_app.oa_log WHERE tag = 'none'$$", name, i)
}

// 1. CREATE OR REPLACE FUNCTION turns an SQL function from a STABLE read into a VOLATILE write
// (an INSERT, or nextval) and back, 20 times in a row; each use right after the change follows
// the body just installed, and the INSERTs' rows are on the primary.
func TestOwnReplacedSQLFunctionUseFollowsTheBodyJustInstalled(t *testing.T) {
	oaEach(t, func(t *testing.T, c *cluster.Cluster, o *owl, setting string) {
		for _, mode := range oaModes {
			t.Run(mode.name, func(t *testing.T) {
				conn := oaConnect(t, o, mode.mode)
				f := "oa_app.oa_sqlf_" + setting + "_" + mode.name
				prefix := fmt.Sprintf("sqlf-%s-%s-", setting, mode.name)
				oaMust(t, conn, oaSQLReader(f, 0))
				oaStartUse(t, c, o, conn, "SELECT "+f+"()")
				tl := oaTally{}
				var tags []string
				for i := 0; i < 24; i++ {
					var change string
					writes := i%2 == 0
					switch {
					case i%4 == 0:
						tag := fmt.Sprintf("%s%02d", prefix, i)
						tags = append(tags, tag)
						change = oaSQLWriter(f, tag)
					case i%4 == 2:
						change = oaSQLNextval(f, "VOLATILE")
					default:
						change = oaSQLReader(f, i)
					}
					oaMust(t, conn, change)
					what := fmt.Sprintf("iteration %d, right after %q", i, change)
					oaUse(t, conn, what, "SELECT "+f+"()", writes, &tl)
				}
				t.Logf("%s", &tl)
				oaWantTags(t, c, prefix, tags)
			})
		}
	})
}

// 2. The same with PL/pgSQL bodies (an INSERT, a nextval, PERFORM of a writing SQL function), and
// with ALTER FUNCTION changing only the volatility of a function whose body calls nextval: the
// body writes whatever the declared volatility says, STABLE and IMMUTABLE included.
func TestOwnReplacedPlpgsqlFunctionAndAlteredVolatility(t *testing.T) {
	oaEach(t, func(t *testing.T, c *cluster.Cluster, o *owl, setting string) {
		for _, mode := range oaModes {
			t.Run(mode.name, func(t *testing.T) {
				conn := oaConnect(t, o, mode.mode)
				f := "oa_app.oa_plf_" + setting + "_" + mode.name
				helper := "oa_app.oa_plhelper_" + setting + "_" + mode.name
				prefix := fmt.Sprintf("plf-%s-%s-", setting, mode.name)
				oaMust(t, conn, oaSQLNextval(helper, "VOLATILE"))
				reader := func(i int) string {
					return fmt.Sprintf("CREATE OR REPLACE FUNCTION %s() RETURNS bigint LANGUAGE plpgsql STABLE AS $$BEGIN RETURN %d; END$$", f, i)
				}
				oaMust(t, conn, reader(0))
				oaStartUse(t, c, o, conn, "SELECT "+f+"()")
				tl := oaTally{}
				var tags []string
				for i := 0; i < 12; i++ {
					var change string
					writes := i%2 == 0
					switch i % 6 {
					case 0:
						tag := fmt.Sprintf("%s%02d", prefix, i)
						tags = append(tags, tag)
						change = fmt.Sprintf("CREATE OR REPLACE FUNCTION %s() RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$DECLARE r bigint; BEGIN INSERT INTO oa_app.oa_log(tag) VALUES ('%s') RETURNING id INTO r; RETURN r; END$$", f, tag)
					case 2:
						change = fmt.Sprintf("CREATE OR REPLACE FUNCTION %s() RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$BEGIN RETURN nextval('oa_app.oa_seq'); END$$", f)
					case 4:
						change = fmt.Sprintf("CREATE OR REPLACE FUNCTION %s() RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$BEGIN PERFORM %s(); RETURN 4; END$$", f, helper)
					default:
						change = reader(i)
					}
					oaMust(t, conn, change)
					what := fmt.Sprintf("plpgsql iteration %d, right after %q", i, change)
					oaUse(t, conn, what, "SELECT "+f+"()", writes, &tl)
				}
				oaWantTags(t, c, prefix, tags)

				// ALTER FUNCTION ... VOLATILE / STABLE / IMMUTABLE of a body that calls nextval:
				// every use writes. Then ALTER of a body that only reads: every use reads.
				g := "oa_app.oa_alter_" + setting + "_" + mode.name
				oaMust(t, conn, oaSQLNextval(g, "VOLATILE"))
				oaWriterUse(t, conn, "created", "SELECT "+g+"()", &tl)
				for i, v := range []string{"STABLE", "VOLATILE", "IMMUTABLE", "STABLE", "VOLATILE", "STABLE"} {
					alter := fmt.Sprintf("ALTER FUNCTION %s() %s", g, v)
					oaMust(t, conn, alter)
					oaWriterUse(t, conn, fmt.Sprintf("alter %d, right after %q (the body calls nextval)", i, alter), "SELECT "+g+"()", &tl)
				}
				pl := "oa_app.oa_alterpl_" + setting + "_" + mode.name
				oaMust(t, conn, fmt.Sprintf("CREATE OR REPLACE FUNCTION %s() RETURNS bigint LANGUAGE plpgsql STABLE AS $$BEGIN RETURN nextval('oa_app.oa_seq'); END$$", pl))
				oaWriterUse(t, conn, "a STABLE PL/pgSQL function that calls nextval", "SELECT "+pl+"()", &tl)
				for i, v := range []string{"VOLATILE", "STABLE", "IMMUTABLE", "VOLATILE"} {
					alter := fmt.Sprintf("ALTER FUNCTION %s() %s", pl, v)
					oaMust(t, conn, alter)
					oaWriterUse(t, conn, fmt.Sprintf("plpgsql alter %d, right after %q (the body calls nextval)", i, alter), "SELECT "+pl+"()", &tl)
				}
				t.Logf("%s", &tl)
			})
		}
	})
}

// 3. CREATE OR REPLACE VIEW switches between a plain read and a query that calls a function that
// INSERTs; SELECT * FROM the view right after follows the query just installed.
func TestOwnReplacedViewUseFollowsItsQuery(t *testing.T) {
	oaEach(t, func(t *testing.T, c *cluster.Cluster, o *owl, setting string) {
		for _, mode := range oaModes {
			t.Run(mode.name, func(t *testing.T) {
				conn := oaConnect(t, o, mode.mode)
				w := "oa_app.oa_vw_writer_" + setting + "_" + mode.name
				v := "oa_app.oa_v_" + setting + "_" + mode.name
				prefix := fmt.Sprintf("view-%s-%s-", setting, mode.name)
				tag := prefix + "w"
				oaMust(t, conn, oaSQLWriter(w, tag))
				oaMust(t, conn, fmt.Sprintf("CREATE OR REPLACE VIEW %s AS SELECT 0::bigint AS n", v))
				oaStartUse(t, c, o, conn, "SELECT * FROM "+v)
				tl := oaTally{}
				writerUses := 0
				for i := 0; i < 16; i++ {
					var change string
					writes := i%2 == 0
					if writes {
						change = fmt.Sprintf("CREATE OR REPLACE VIEW %s AS SELECT %s() AS n", v, w)
					} else {
						change = fmt.Sprintf("CREATE OR REPLACE VIEW %s AS SELECT count(*) AS n FROM oa_app.oa_log WHERE id < %d", v, i)
					}
					oaMust(t, conn, change)
					what := fmt.Sprintf("view iteration %d, right after %q", i, change)
					if writes {
						if oaWriterUse(t, conn, what, "SELECT * FROM "+v, &tl) {
							writerUses++
						}
					} else {
						oaReaderUse(t, conn, what, "SELECT * FROM "+v, &tl)
					}
				}
				t.Logf("%s", &tl)
				if got := oaTagsOnPrimary(t, c, prefix)[tag]; got != writerUses {
					t.Errorf("the primary holds %d rows from the view's writer, want %d (one per writer use that succeeded)", got, writerUses)
				}
			})
		}
	})
}

// Replacing a function that other objects use: a view over it and a (STABLE) SQL function that
// calls it, both made and used (analysed) while it read, follow it when it writes.
func TestOwnReplacedFunctionReachesTheObjectsThatUseIt(t *testing.T) {
	oaEach(t, func(t *testing.T, c *cluster.Cluster, o *owl, setting string) {
		for _, mode := range []queryProtocol{oaModes[0], oaModes[1], oaModes[3]} {
			t.Run(mode.name, func(t *testing.T) {
				conn := oaConnect(t, o, mode.mode)
				f := "oa_app.oa_dep_f_" + setting + "_" + mode.name
				g := "oa_app.oa_dep_g_" + setting + "_" + mode.name
				h := "oa_app.oa_dep_h_" + setting + "_" + mode.name
				v := "oa_app.oa_dep_v_" + setting + "_" + mode.name
				oaMust(t, conn, oaSQLReader(f, 0))
				oaMust(t, conn, fmt.Sprintf("CREATE OR REPLACE FUNCTION %s() RETURNS bigint LANGUAGE sql STABLE AS $$SELECT %s()$$", g, f))
				oaMust(t, conn, fmt.Sprintf("CREATE OR REPLACE FUNCTION %s() RETURNS bigint LANGUAGE plpgsql STABLE AS $$BEGIN RETURN %s() + 1; END$$", h, f))
				oaMust(t, conn, fmt.Sprintf("CREATE OR REPLACE VIEW %s AS SELECT %s() AS n", v, f))
				uses := []string{"SELECT " + g + "()", "SELECT " + h + "()", "SELECT n FROM " + v, "SELECT " + f + "() + " + g + "()"}
				for _, use := range uses {
					oaStartUse(t, c, o, conn, use) // analysed while f reads
				}
				tl := oaTally{}
				for i := 0; i < 6; i++ {
					writes := i%2 == 0
					var change string
					if writes {
						change = oaSQLNextval(f, "VOLATILE")
					} else {
						change = oaSQLReader(f, i)
					}
					oaMust(t, conn, change)
					// The first use right after the change, then the others.
					for _, use := range uses {
						what := fmt.Sprintf("round %d after %q", i, change)
						oaUse(t, conn, what, use, writes, &tl)
					}
				}
				t.Logf("%s", &tl)
			})
		}
	})
}

// 4. DROP FUNCTION, then CREATE FUNCTION of the same name with another effect; and the other ways
// a name comes to mean a function that writes: a rename onto it, a function created in a schema
// earlier in the search_path, an overload whose types are spelled otherwise, a function that
// shadows a built-in. A failed replace leaves the writer in place.
func TestOwnDroppedRecreatedAndShadowedFunctions(t *testing.T) {
	oaEach(t, func(t *testing.T, c *cluster.Cluster, o *owl, setting string) {
		for _, mode := range []queryProtocol{oaModes[0], oaModes[1], oaModes[3]} {
			t.Run(mode.name, func(t *testing.T) {
				conn := oaConnect(t, o, mode.mode)
				tl := oaTally{}
				m := setting + "_" + mode.name

				t.Run("drop then create", func(t *testing.T) {
					f := "oa_app.oa_drop_" + m
					oaMust(t, conn, oaSQLReader(f, 0))
					oaStartUse(t, c, o, conn, "SELECT "+f+"()")
					for i := 0; i < 6; i++ {
						oaMust(t, conn, "DROP FUNCTION "+f+"()")
						if i%2 == 0 {
							oaMust(t, conn, strings.Replace(oaSQLNextval(f, "VOLATILE"), "CREATE OR REPLACE", "CREATE", 1))
							oaWriterUse(t, conn, fmt.Sprintf("drop/create %d (writer)", i), "SELECT "+f+"()", &tl)
						} else {
							oaMust(t, conn, strings.Replace(oaSQLReader(f, i), "CREATE OR REPLACE", "CREATE", 1))
							oaReaderUse(t, conn, fmt.Sprintf("drop/create %d (reader)", i), "SELECT "+f+"()", &tl)
						}
					}
				})

				t.Run("drop and create in one simple query", func(t *testing.T) {
					f := "oa_app.oa_drop1_" + m
					oaMust(t, conn, oaSQLReader(f, 0))
					oaStartUse(t, c, o, conn, "SELECT "+f+"()")
					sql := "DROP FUNCTION " + f + "(); " + strings.Replace(oaSQLNextval(f, "VOLATILE"), "CREATE OR REPLACE", "CREATE", 1)
					if rs, err := oaSimple(t, conn, sql); err != nil {
						t.Fatalf("%s: %v (%v)", sql, err, rs)
					}
					oaWriterUse(t, conn, "after DROP; CREATE in one query", "SELECT "+f+"()", &tl)
				})

				t.Run("rename onto the name", func(t *testing.T) {
					f := "oa_app.oa_ren_" + m
					w := "oa_ren_w_" + m
					oaMust(t, conn, oaSQLReader(f, 0))
					oaMust(t, conn, oaSQLNextval("oa_app."+w, "VOLATILE"))
					oaStartUse(t, c, o, conn, "SELECT "+f+"()")
					oaMust(t, conn, "DROP FUNCTION "+f+"()")
					oaMust(t, conn, "ALTER FUNCTION oa_app."+w+"() RENAME TO oa_ren_"+m)
					oaWriterUse(t, conn, "after the writer was renamed onto the reader's name", "SELECT "+f+"()", &tl)
				})

				t.Run("set schema onto the path", func(t *testing.T) {
					// oa_low.f reads and is found through the path; a writer of the same name moves
					// from oa_shadow to oa_app, ahead of oa_low in the path.
					name := "oa_move_" + m
					oaMust(t, conn, oaSQLReader("oa_low."+name, 0))
					oaMust(t, conn, oaSQLNextval("oa_shadow."+name, "VOLATILE"))
					oaMust(t, conn, "SET search_path = oa_app, oa_low, public")
					oaStartUse(t, c, o, conn, "SELECT "+name+"()")
					oaMust(t, conn, "ALTER FUNCTION oa_shadow."+name+"() SET SCHEMA oa_app")
					oaWriterUse(t, conn, "after a writer moved into a schema earlier in the path", "SELECT "+name+"()", &tl)
					oaMust(t, conn, "SET search_path = oa_app, public")
				})

				t.Run("created earlier in the search path", func(t *testing.T) {
					// oa_low.f reads; CREATE FUNCTION f (unqualified) lands in oa_app, the first
					// schema of the path, and shadows it.
					name := "oa_shadowed_" + m
					oaMust(t, conn, oaSQLReader("oa_low."+name, 0))
					oaMust(t, conn, "SET search_path = oa_app, oa_low, public")
					oaStartUse(t, c, o, conn, "SELECT "+name+"()")
					oaMust(t, conn, oaSQLNextval(name, "VOLATILE"))
					oaWriterUse(t, conn, "after an unqualified CREATE shadowed a reader", "SELECT "+name+"()", &tl)
					oaMust(t, conn, "DROP FUNCTION oa_app."+name+"()")
					oaReaderUse(t, conn, "after the shadow was dropped", "SELECT "+name+"()", &tl)
					oaMust(t, conn, "SET search_path = oa_app, public")
				})

				t.Run("replace spelled with other type names", func(t *testing.T) {
					// The same signature spelled four ways: each CREATE OR REPLACE replaces the one
					// function (there is never an overload).
					name := "oa_app.oa_spell_" + m
					spell := []string{"integer", "int4", "int", "pg_catalog.int4"}
					oaMust(t, conn, fmt.Sprintf("CREATE OR REPLACE FUNCTION %s(x integer) RETURNS bigint LANGUAGE sql STABLE AS $$SELECT x::bigint$$", name))
					oaStartUse(t, c, o, conn, "SELECT "+name+"(1)")
					for i := 0; i < 8; i++ {
						typ := spell[i%len(spell)]
						var change string
						if i%2 == 0 {
							change = fmt.Sprintf("CREATE OR REPLACE FUNCTION %s(x %s) RETURNS int8 LANGUAGE sql VOLATILE AS $$SELECT nextval('oa_app.oa_seq') + x$$", name, typ)
						} else {
							change = fmt.Sprintf("CREATE OR REPLACE FUNCTION %s(x %s) RETURNS bigint LANGUAGE sql STABLE AS $$SELECT x::bigint + %d$$", name, typ, i)
						}
						oaMust(t, conn, change)
						what := fmt.Sprintf("spelling %d after %q", i, change)
						oaUse(t, conn, what, "SELECT "+name+"(1)", i%2 == 0, &tl)
					}
					ctx := timeoutCtx(t, statementTimeout)
					var overloads int64
					if err := c.Nodes[0].QueryRow(ctx, "SELECT count(*) FROM pg_proc WHERE proname = $1", strings.TrimPrefix(name, "oa_app.")).Scan(&overloads); err != nil || overloads != 1 {
						t.Errorf("%s has %d functions on the primary (%v), want 1", name, overloads, err)
					}
				})

				t.Run("new overload that the call now picks", func(t *testing.T) {
					// f(bigint) reads; CREATE FUNCTION f(integer) writes: f(1) now calls it.
					name := "oa_app.oa_over_" + m
					oaMust(t, conn, fmt.Sprintf("CREATE OR REPLACE FUNCTION %s(x bigint) RETURNS bigint LANGUAGE sql STABLE AS $$SELECT x$$", name))
					oaStartUse(t, c, o, conn, "SELECT "+name+"(1)")
					oaMust(t, conn, fmt.Sprintf("CREATE FUNCTION %s(x integer) RETURNS bigint LANGUAGE sql VOLATILE AS $$SELECT nextval('oa_app.oa_seq') + x$$", name))
					oaWriterUse(t, conn, "after an integer overload that writes was added", "SELECT "+name+"(1)", &tl)
					oaReaderUse(t, conn, "the bigint overload still reads", "SELECT "+name+"(1::bigint)", &tl)
				})

				t.Run("shadowing a built-in", func(t *testing.T) {
					// With pg_catalog placed after oa_shadow in the path, an exact match in
					// oa_shadow wins over the built-in.
					oaMust(t, conn, "SET search_path = oa_shadow, pg_catalog, oa_app")
					fn := "oa_shadow.lower"
					// Only the first mode creates it; the others find it made.
					oaMust(t, conn, fmt.Sprintf("CREATE OR REPLACE FUNCTION %s(x text) RETURNS text LANGUAGE sql VOLATILE AS $$SELECT x || nextval('oa_app.oa_seq')::text$$", fn))
					oaWriterUse(t, conn, "after a writing lower(text) shadowed the built-in", "SELECT lower('ABC'::text)", &tl)
					oaMust(t, conn, "DROP FUNCTION "+fn+"(text)")
					oaReaderUse(t, conn, "after the shadow of lower was dropped", "SELECT lower('ABC'::text)", &tl)
					oaMust(t, conn, "SET search_path = oa_app, public")
				})

				t.Run("failed replace keeps the writer", func(t *testing.T) {
					f := "oa_app.oa_failrep_" + m
					oaMust(t, conn, oaSQLNextval(f, "VOLATILE"))
					oaWriterUse(t, conn, "start", "SELECT "+f+"()", &tl)
					for sql, code := range map[string]string{
						// Another result type: refused (42P13), the writer stays.
						"CREATE OR REPLACE FUNCTION " + f + "() RETURNS integer LANGUAGE sql STABLE AS $$SELECT 1$$": "42P13",
						// A body that names no table: refused at validation (42P01).
						"CREATE OR REPLACE FUNCTION " + f + "() RETURNS bigint LANGUAGE sql STABLE AS $$SELECT count(*) FROM oa_app.oa_no_such_table$$": "42P01",
						// A body that does not type-check: refused (42883).
						"CREATE OR REPLACE FUNCTION " + f + "() RETURNS bigint LANGUAGE sql STABLE AS $$SELECT 'a'::text + 1$$": "42883",
					} {
						rs, err := runAndRoutes(t, conn, sql)
						if pgErr, ok := asPgError(err); !ok || pgErr.Code != code {
							t.Errorf("%s: %v (NOTICEs %v), want SQLSTATE %s", sql, err, rs, code)
						}
						oaWriterUse(t, conn, "after a refused replace by a reader: "+sql, "SELECT "+f+"()", &tl)
					}
				})
				t.Logf("%s", &tl)
			})
		}
	})
}

// 5. The change in an explicit transaction block: committed (the use after COMMIT follows it),
// rolled back, or rolled back to a savepoint (the use follows the function as it was); and in a
// simple-protocol string with other statements: with its use, in a BEGIN ... COMMIT, and with a
// statement that fails, which rolls the whole string's implicit transaction back.
func TestOwnChangeInTransactionBlocksAndMultiStatementStrings(t *testing.T) {
	oaEach(t, func(t *testing.T, c *cluster.Cluster, o *owl, setting string) {
		for _, mode := range oaModes {
			t.Run(mode.name, func(t *testing.T) {
				conn := oaConnect(t, o, mode.mode)
				tl := oaTally{}
				f := "oa_app.oa_tx_" + setting + "_" + mode.name
				oaMust(t, conn, oaSQLReader(f, 0))
				oaStartUse(t, c, o, conn, "SELECT "+f+"()")
				use := "SELECT " + f + "()"

				for i := 0; i < 3; i++ {
					// Committed: reader -> writer.
					oaMust(t, conn, "BEGIN")
					oaMust(t, conn, oaSQLNextval(f, "VOLATILE"))
					oaMust(t, conn, "COMMIT")
					oaWriterUse(t, conn, fmt.Sprintf("round %d: right after BEGIN; replace by a writer; COMMIT", i), use, &tl)

					// Rolled back: writer -> (reader, rolled back).
					oaMust(t, conn, "BEGIN")
					oaMust(t, conn, oaSQLReader(f, i))
					oaMust(t, conn, "ROLLBACK")
					oaWriterUse(t, conn, fmt.Sprintf("round %d: right after BEGIN; replace by a reader; ROLLBACK", i), use, &tl)

					// Rolled back to a savepoint, then committed.
					oaMust(t, conn, "BEGIN")
					oaMust(t, conn, "SAVEPOINT s")
					oaMust(t, conn, oaSQLReader(f, i))
					oaMust(t, conn, "ROLLBACK TO SAVEPOINT s")
					oaMust(t, conn, "COMMIT")
					oaWriterUse(t, conn, fmt.Sprintf("round %d: right after a replace by a reader rolled back to a savepoint", i), use, &tl)

					// A transaction that fails after the change: rolled back.
					oaMust(t, conn, "BEGIN")
					oaMust(t, conn, oaSQLReader(f, i))
					if rs, err := runAndRoutes(t, conn, "SELECT 1/0"); err == nil {
						t.Fatalf("SELECT 1/0 succeeded (%v)", rs)
					}
					oaMust(t, conn, "COMMIT") // answers ROLLBACK
					oaWriterUse(t, conn, fmt.Sprintf("round %d: after a failed transaction that replaced it by a reader", i), use, &tl)

					// Committed: writer -> reader.
					oaMust(t, conn, "BEGIN")
					oaMust(t, conn, oaSQLReader(f, i))
					oaMust(t, conn, "COMMIT")
					oaReaderUse(t, conn, fmt.Sprintf("round %d: right after BEGIN; replace by a reader; COMMIT", i), use, &tl)
				}

				// Simple-protocol strings: one Query each.
				type step struct {
					sql     string
					fails   bool
					writes  bool // what the function does after the string
					usesOwn bool // the string's own SELECT f() runs the writer
				}
				steps := []step{
					{sql: oaSQLNextval(f, "VOLATILE") + "; SELECT " + f + "()", writes: true, usesOwn: true},
					{sql: oaSQLReader(f, 7) + "; SELECT " + f + "()", writes: false},
					{sql: "BEGIN; " + oaSQLNextval(f, "VOLATILE") + "; COMMIT", writes: true},
					{sql: "BEGIN; " + oaSQLReader(f, 8) + "; ROLLBACK", writes: true},
					// The failure rolls the implicit transaction back: the replace never was.
					{sql: oaSQLReader(f, 9) + "; SELECT 1/0", fails: true, writes: true},
					{sql: oaSQLReader(f, 10) + "; SELECT " + f + "()", writes: false},
					{sql: oaSQLNextval(f, "VOLATILE") + "; SELECT 1/0", fails: true, writes: false},
					{sql: "SELECT 1; " + oaSQLNextval(f, "VOLATILE"), writes: true},
					// Two changes in one string: the last one holds.
					{sql: oaSQLNextval(f, "VOLATILE") + "; " + oaSQLReader(f, 11), writes: false},
					{sql: oaSQLReader(f, 12) + "; " + oaSQLNextval(f, "VOLATILE"), writes: true},
				}
				for i, s := range steps {
					rs, err := oaSimple(t, conn, s.sql)
					if s.fails != (err != nil) {
						t.Errorf("string %d %q: error %v (NOTICEs %v), want failure %v", i, s.sql, err, rs, s.fails)
					}
					if pgErr, ok := asPgError(err); ok && pgErr.Code == "25006" {
						t.Errorf("BUG: string %d %q failed with 25006 (NOTICEs %v)", i, s.sql, rs)
					}
					if s.usesOwn {
						oaJudgeWriter(t, fmt.Sprintf("string %d (its own use)", i), s.sql, rs, err, &tl)
					}
					what := fmt.Sprintf("right after the simple query %q", s.sql)
					oaUse(t, conn, what, use, s.writes, &tl)
				}
				t.Logf("%s", &tl)
			})
		}
	})
}

// 6. A pgx.Batch (pipelined: one Sync, one implicit transaction) that holds the change and the use;
// one that holds the change and a statement that fails (rolled back); and the use after each.
func TestOwnChangeInAPipelinedBatch(t *testing.T) {
	oaEach(t, func(t *testing.T, c *cluster.Cluster, o *owl, setting string) {
		for _, mode := range oaModes {
			t.Run(mode.name, func(t *testing.T) {
				conn := oaConnect(t, o, mode.mode)
				tl := oaTally{}
				f := "oa_app.oa_batch_" + setting + "_" + mode.name
				prefix := fmt.Sprintf("batch-%s-%s-", setting, mode.name)
				oaMust(t, conn, oaSQLReader(f, 0))
				oaStartUse(t, c, o, conn, "SELECT "+f+"()")
				use := "SELECT " + f + "()"
				var tags []string
				sendBatch := func(queries ...string) ([]routeNotice, error) {
					b := &pgx.Batch{}
					for _, q := range queries {
						b.Queue(q)
					}
					ctx, cancel := context.WithTimeout(context.Background(), statementTimeout)
					defer cancel()
					br := conn.SendBatch(ctx, b)
					var first error
					for range queries {
						rows, err := br.Query()
						if err == nil {
							for rows.Next() {
							}
							rows.Close()
							err = rows.Err()
						}
						if err != nil && first == nil {
							first = err
						}
					}
					if err := br.Close(); err != nil && first == nil {
						first = err
					}
					return conn.routes(t), first
				}
				for i := 0; i < 4; i++ {
					tag := fmt.Sprintf("%s%02d", prefix, i)
					// The change and its use in one batch: the use runs the writer.
					rs, err := sendBatch(oaSQLWriter(f, tag), use)
					if oaJudgeWriter(t, fmt.Sprintf("batch %d: [replace by a writer, use]", i), "the batch", rs, err, &tl) {
						tags = append(tags, tag)
					}
					if oaWriterUse(t, conn, fmt.Sprintf("batch %d: right after the batch that made it write", i), use, &tl) {
						tags = append(tags, tag)
					}

					// A batch that replaces it by a reader, then fails: rolled back, it still writes.
					rs, err = sendBatch(oaSQLReader(f, i), "SELECT 1/0")
					if err == nil {
						t.Errorf("batch %d: [replace by a reader, 1/0] succeeded (NOTICEs %v)", i, rs)
					}
					if pgErr, ok := asPgError(err); ok && pgErr.Code == "25006" {
						t.Errorf("BUG: batch %d [replace by a reader, 1/0] failed with 25006 (NOTICEs %v)", i, rs)
					}
					if oaWriterUse(t, conn, fmt.Sprintf("batch %d: right after a failed batch that replaced it by a reader", i), use, &tl) {
						tags = append(tags, tag)
					}

					// A batch that makes it read, and uses it.
					rs, err = sendBatch(oaSQLReader(f, i), use)
					if err != nil {
						t.Errorf("batch %d: [replace by a reader, use]: %v (NOTICEs %v)", i, err, rs)
					}
					oaReaderUse(t, conn, fmt.Sprintf("batch %d: right after the batch that made it read", i), use, &tl)

					// A batch that makes it write, uses it, then fails: all rolled back, it still reads.
					rs, err = sendBatch(oaSQLWriter(f, tag+"-rolledback"), use, "SELECT 1/0")
					if err == nil {
						t.Errorf("batch %d: [replace by a writer, use, 1/0] succeeded (NOTICEs %v)", i, rs)
					}
					if pgErr, ok := asPgError(err); ok && pgErr.Code == "25006" {
						t.Errorf("BUG: batch %d [replace by a writer, use, 1/0] failed with 25006 (NOTICEs %v)", i, rs)
					}
					oaReaderUse(t, conn, fmt.Sprintf("batch %d: right after a failed batch that replaced it by a writer", i), use, &tl)
				}
				t.Logf("%s", &tl)
				// Each round: the batch's own use, the use after it and the use after the failed batch.
				got := oaTagsOnPrimary(t, c, prefix)
				want := map[string]int{}
				for _, tag := range tags {
					want[tag]++
				}
				for tag, n := range want {
					if got[tag] != n {
						t.Errorf("rows tagged %q on the primary: %d, want %d (one per writer use that succeeded)", tag, got[tag], n)
					}
				}
				for tag, n := range got {
					if want[tag] == 0 {
						t.Errorf("the primary holds %d rows tagged %q, which no committed use made", n, tag)
					}
				}
			})
		}
	})
}

// 7. Rapid alternation: 100 times (replace by a writer, use, replace by a reader, use), counting the
// writer uses that went wrong.
func TestOwnChangeRapidAlternationNeverRoutesAWriterToAStandby(t *testing.T) {
	oaEach(t, func(t *testing.T, c *cluster.Cluster, o *owl, setting string) {
		for _, mode := range []queryProtocol{oaModes[0], oaModes[3]} {
			t.Run(mode.name, func(t *testing.T) {
				conn := oaConnect(t, o, mode.mode)
				f := "oa_app.oa_rapid_" + setting + "_" + mode.name
				oaMust(t, conn, oaSQLReader(f, 0))
				tl := oaTally{}
				deadline := time.Now().Add(20 * time.Second)
				i := 0
				for ; i < 100 && time.Now().Before(deadline); i++ {
					oaMust(t, conn, oaSQLNextval(f, "VOLATILE"))
					rs, err := runAndRoutes(t, conn, "SELECT "+f+"()")
					if !oaJudgeWriter(t, fmt.Sprintf("iteration %d", i), "SELECT "+f+"()", rs, err, &tl) && tl.wrong > 5 {
						t.Fatalf("more than 5 wrong routings; stopping at iteration %d: %s", i, &tl)
					}
					oaMust(t, conn, oaSQLReader(f, i))
					oaReaderUse(t, conn, fmt.Sprintf("iteration %d", i), "SELECT "+f+"()", &tl)
				}
				if i < 100 {
					t.Errorf("only %d of 100 iterations ran within 20s", i)
				}
				t.Logf("%d iterations: %s", i, &tl)
			})
		}
	})
}

// With read_your_writes off, the use right after the session's own CREATE OR REPLACE that turned a
// writing function into a reading one is classified, correctly, as a read of the new body. A
// standby that has not replayed the replace would run the old body, which writes, and fail with
// 25006: the verdict was planned on the primary's catalogue. So the session's own catalogue
// changes are read-your-writes whatever routing.read_your_writes says: the read runs on the
// primary (READ_YOUR_WRITES) while replay is paused on the standbys (their lag stays within
// max_replica_lag), and the old body writes nothing. Until this test's commit the read went to the
// standby and failed.
func TestReadRightAfterOwnReplaceWaitsForItsReplayWithReadYourWritesOff(t *testing.T) {
	c, o := setupAndStart(t, "own changes, read_your_writes off", oaSetupSQL, oaSettings[1].mutate)
	for _, mode := range []queryProtocol{oaModes[0], oaModes[3]} {
		t.Run(mode.name, func(t *testing.T) {
			conn := oaConnect(t, o, mode.mode)
			f := "oa_app.oa_stale_" + mode.name
			oaMust(t, conn, oaSQLWriter(f, "stale-"+mode.name))
			oaWriterUse(t, conn, "the writer", "SELECT "+f+"()", nil)
			catchUp(t, c)
			ctx := timeoutCtx(t, statementTimeout)
			resume := pauseStandbyReplay(t, ctx, c.Nodes[1:])
			change := oaSQLReader(f, 1)
			oaMust(t, conn, change)
			rs, err := runAndRoutes(t, conn, "SELECT "+f+"()")
			resume()
			catchUp(t, c)
			switch {
			case err != nil:
				t.Errorf("right after %q (the same session, replay paused on the standbys): SELECT %s(): %v on %v; "+
					"the standby had not replayed the replace and ran the old, writing body", change, f, err, rs)
			case len(rs) == 0 || rs[len(rs)-1].Role != "primary" || rs[len(rs)-1].Reason != "READ_YOUR_WRITES":
				t.Errorf("right after %q with replay paused: SELECT %s() ran on %v; want the primary, READ_YOUR_WRITES", change, f, rs)
			}
		})
	}
	// A view replaced inside a transaction block sent as one string: the change is the string's
	// (no one statement's CREATE is kept), and it still holds the session's reads back.
	t.Run("view in a transaction string", func(t *testing.T) {
		conn := oaConnect(t, o, pgx.QueryExecModeSimpleProtocol)
		const w, v = "oa_app.oa_stale_view_writer", "oa_app.oa_stale_view"
		oaMust(t, conn, oaSQLWriter(w, "stale-view"))
		oaMust(t, conn, "CREATE OR REPLACE VIEW "+v+" AS SELECT "+w+"() AS n")
		catchUp(t, c)
		// A read settles the position those changes left (it is read lazily), so that only the
		// string below can hold the next read back.
		if rs, err := runAndRoutes(t, conn, "SELECT 1"); err != nil || len(rs) == 0 || rs[len(rs)-1].Role != "standby" {
			t.Fatalf("SELECT 1 once the standbys have replayed the setup: %v, %v; want a standby", rs, err)
		}
		ctx := timeoutCtx(t, statementTimeout)
		resume := pauseStandbyReplay(t, ctx, c.Nodes[1:])
		change := "BEGIN; CREATE OR REPLACE VIEW " + v + " AS SELECT 1::bigint AS n; COMMIT"
		if rs, err := oaSimple(t, conn, change); err != nil {
			resume()
			t.Fatalf("%s: %v (NOTICEs %v)", change, err, rs)
		}
		rs, err := runAndRoutes(t, conn, "SELECT n FROM "+v)
		t.Logf("SELECT n FROM %s right after %q: %v, err %v", v, change, rs, err)
		resume()
		catchUp(t, c)
		switch {
		case err != nil:
			t.Errorf("right after %q (replay paused): SELECT n FROM %s: %v on %v; the standby ran the old view, which writes", change, v, err, rs)
		case len(rs) == 0 || rs[len(rs)-1].Role != "primary" || rs[len(rs)-1].Reason != "READ_YOUR_WRITES":
			t.Errorf("right after %q with replay paused: SELECT n FROM %s ran on %v; want the primary, READ_YOUR_WRITES", change, v, rs)
		}
	})
}

// The use right after the change in other shapes than SELECT f(): a lower-case select, the
// function in FROM, VALUES, TABLE of a view, a WITH, a WHERE, EXPLAIN ANALYZE, COPY (query) TO, and
// EXECUTE of an SQL-level prepared statement PREPAREd while the function read.
func TestOwnChangeUsedByOtherStatementShapes(t *testing.T) {
	oaEach(t, func(t *testing.T, c *cluster.Cluster, o *owl, setting string) {
		for _, mode := range []queryProtocol{oaModes[0], oaModes[1], oaModes[3]} {
			t.Run(mode.name, func(t *testing.T) {
				conn := oaConnect(t, o, mode.mode)
				tl := oaTally{}
				sfx := setting + "_" + mode.name
				f := "oa_app.oa_shape_" + sfx
				v := "oa_app.oa_shape_v_" + sfx
				oaMust(t, conn, oaSQLReader(f, 0))
				oaMust(t, conn, fmt.Sprintf("CREATE OR REPLACE VIEW %s AS SELECT %s() AS n", v, f))
				shapes := []string{
					"select " + f + "()",
					"SELECT * FROM " + f + "()",
					"VALUES (" + f + "())",
					"TABLE " + v,
					"WITH x AS (SELECT " + f + "() AS n) SELECT n FROM x",
					"SELECT 1 WHERE " + f + "() IS NOT NULL",
					"SELECT (SELECT " + f + "())",
					"EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT " + f + "()",
				}
				oaStartUse(t, c, o, conn, "SELECT "+f+"()")
				for _, shape := range shapes {
					oaReaderUse(t, conn, "while it reads", shape, &tl)
				}
				for i, shape := range append(shapes, "COPY") {
					change := oaSQLNextval(f, "VOLATILE")
					if i%2 == 1 {
						change = strings.Replace(change, "SELECT nextval", "SELECT 0 * count(*) + nextval", 1) // another body
					}
					oaMust(t, conn, change)
					what := "right after " + change
					if shape == "COPY" {
						var out strings.Builder
						ctx, cancel := context.WithTimeout(context.Background(), statementTimeout)
						_, err := conn.PgConn().CopyTo(ctx, &out, "COPY (SELECT "+f+"()) TO STDOUT")
						cancel()
						oaJudgeWriter(t, what, "COPY (SELECT f()) TO STDOUT", conn.routes(t), err, &tl)
					} else {
						oaWriterUse(t, conn, what, shape, &tl)
					}
					oaMust(t, conn, oaSQLReader(f, i+1))
					oaReaderUse(t, conn, "right after it was made to read again", "SELECT "+f+"()", &tl)
				}
				t.Logf("%s", &tl)
			})
		}
	})
}

// Where a created function lands, and what a call then resolves to, in corners of search_path: a
// first schema that does not exist (the function lands in the next one), pg_temp first (a function
// is created in the session's temporary schema, which calls never search), and a function whose
// own SET search_path makes an unqualified call in its body mean a writer.
func TestOwnChangeWhereTheNameLandsOrResolvesUnexpectedly(t *testing.T) {
	oaEach(t, func(t *testing.T, c *cluster.Cluster, o *owl, setting string) {
		for _, mode := range []queryProtocol{oaModes[0], oaModes[3]} {
			t.Run(mode.name, func(t *testing.T) {
				conn := oaConnect(t, o, mode.mode)
				tl := oaTally{}
				sfx := setting + "_" + mode.name

				t.Run("first schema of the path missing", func(t *testing.T) {
					name := "oa_land_" + sfx
					oaMust(t, conn, oaSQLReader("oa_app."+name, 0))
					oaMust(t, conn, "SET search_path = oa_missing_schema, oa_low, oa_app")
					oaMust(t, conn, oaSQLNextval(name, "VOLATILE")) // lands in oa_low
					oaWriterUse(t, conn, "right after CREATE into the first existing schema", "SELECT "+name+"()", &tl)
					oaMust(t, conn, "SET search_path = oa_low, oa_app")
					oaWriterUse(t, conn, "after the path dropped the missing schema", "SELECT "+name+"()", &tl)
					oaMust(t, conn, "SET search_path = oa_app, oa_low")
					oaReaderUse(t, conn, "oa_app's reader first in the path", "SELECT "+name+"()", &tl)
					oaMust(t, conn, "SET search_path = oa_app, public")
				})

				t.Run("pg_temp first in the path", func(t *testing.T) {
					// oa_app.f writes; CREATE OR REPLACE FUNCTION f (unqualified) with pg_temp first
					// makes pg_temp.f, and SELECT f() still calls oa_app.f, which writes.
					name := "oa_tmpfirst_" + sfx
					oaMust(t, conn, oaSQLNextval("oa_app."+name, "VOLATILE"))
					oaMust(t, conn, "SET search_path = pg_temp, oa_app")
					rs, err := runAndRoutes(t, conn, oaSQLReader(name, 1))
					if err != nil {
						t.Fatalf("CREATE OR REPLACE with pg_temp first: %v (%v)", err, rs)
					}
					ctx := timeoutCtx(t, statementTimeout)
					var where string
					if err := c.Nodes[0].QueryRow(ctx, "SELECT string_agg(pronamespace::regnamespace::text || ':' || provolatile::text, ',') FROM pg_proc WHERE proname = $1", name).Scan(&where); err != nil {
						t.Fatal(err)
					}
					t.Logf("%s exists in: %s", name, where)
					oaWriterUse(t, conn, "right after CREATE OR REPLACE of a reader with pg_temp first in the path", "SELECT "+name+"()", &tl)
					oaMust(t, conn, "SET search_path = oa_app, public")
					oaWriterUse(t, conn, "with pg_temp out of the path", "SELECT "+name+"()", &tl)
				})

				t.Run("the function's own search_path", func(t *testing.T) {
					// oa_low.g writes, oa_app.g reads; f's SET search_path = oa_low makes its body's g()
					// the writer, whatever the session's path.
					g := "oa_sp_g_" + sfx
					f := "oa_app.oa_sp_f_" + sfx
					oaMust(t, conn, oaSQLReader("oa_app."+g, 0))
					oaMust(t, conn, oaSQLNextval("oa_low."+g, "VOLATILE"))
					oaMust(t, conn, fmt.Sprintf("CREATE OR REPLACE FUNCTION %s() RETURNS bigint LANGUAGE sql STABLE SET search_path = oa_app AS $$SELECT %s()$$", f, g))
					oaStartUse(t, c, o, conn, "SELECT "+f+"()")
					for i := 0; i < 4; i++ {
						path, writes := "oa_low", true
						if i%2 == 1 {
							path, writes = "oa_app", false
						}
						change := fmt.Sprintf("CREATE OR REPLACE FUNCTION %s() RETURNS bigint LANGUAGE sql STABLE SET search_path = %s AS $$SELECT %s()$$", f, path, g)
						oaMust(t, conn, change)
						oaUse(t, conn, "right after "+change, "SELECT "+f+"()", writes, &tl)
					}
					// The same through ALTER FUNCTION ... SET search_path.
					oaMust(t, conn, "ALTER FUNCTION "+f+"() SET search_path = oa_low")
					oaWriterUse(t, conn, "right after ALTER FUNCTION SET search_path = oa_low", "SELECT "+f+"()", &tl)
					oaMust(t, conn, "ALTER FUNCTION "+f+"() RESET search_path")
					oaMust(t, conn, "SET search_path = oa_low, oa_app")
					oaWriterUse(t, conn, "right after RESET search_path, the session's path oa_low first", "SELECT "+f+"()", &tl)
					oaMust(t, conn, "SET search_path = oa_app, public")
				})
				t.Logf("%s", &tl)
			})
		}
	})
}

// Several sessions change their own functions at once, each alternating writer and reader bodies:
// each session's uses follow its own change, whatever the other sessions' changes stored in the
// catalogue meanwhile (a catalogue prepared while a CREATE ran is stored only over the catalogue
// it was derived from).
func TestOwnChangesOfConcurrentSessionsEachFollowTheirOwn(t *testing.T) {
	oaEach(t, func(t *testing.T, c *cluster.Cluster, o *owl, setting string) {
		const sessions, rounds = 4, 30
		type result struct {
			tally oaTally
			err   string
		}
		results := make(chan result, sessions)
		conns := make([]*client, sessions)
		for s := range conns {
			mode := oaModes[s%len(oaModes)].mode
			conns[s] = oaConnect(t, o, mode)
			oaMust(t, conns[s], oaSQLReader(fmt.Sprintf("oa_app.oa_conc_%s_%d", setting, s), 0))
		}
		catchUp(t, c)
		for s := range conns {
			go func(s int, conn *client) {
				tl := oaTally{}
				f := fmt.Sprintf("oa_app.oa_conc_%s_%d", setting, s)
				for i := 0; i < rounds; i++ {
					for _, writes := range []bool{true, false} {
						change := oaSQLReader(f, i)
						if writes {
							change = oaSQLNextval(f, "VOLATILE")
						}
						if rs, err := runAndRoutes(t, conn, change); err != nil {
							results <- result{tl, fmt.Sprintf("session %d round %d: %s: %v (%v)", s, i, change, err, rs)}
							return
						}
						what := fmt.Sprintf("session %d round %d, right after its own %q", s, i, change)
						oaUse(t, conn, what, "SELECT "+f+"()", writes, &tl)
					}
				}
				results <- result{tally: tl}
			}(s, conns[s])
		}
		for s := 0; s < sessions; s++ {
			r := <-results
			if r.err != "" {
				t.Errorf("%s", r.err)
			}
			t.Logf("a session: %s", &r.tally)
		}
	})
}

// pgowl in front of the primary alone: every statement goes there, and the uses right after a change
// go ahead of the change's take-in (a SELECT before it is even parsed). The NOTICE must still give
// the verdict with the change: WRITING_FUNCTION for a writer, NO_STANDBY_CONFIGURED for a reader,
// over 30 alternations, with uses of several shapes (one that holds the word "into" is parsed
// before it is sent).
func TestOwnChangeSentAheadOfItsTakeInReportsTheVerdictWithTheChange(t *testing.T) {
	o := startOwlOnPrimaryAlone(t, sharedClusterFor(t), oaSetupSQL)
	for _, mode := range []queryProtocol{oaModes[0], oaModes[1], oaModes[3]} {
		t.Run(mode.name, func(t *testing.T) {
			conn := oaConnect(t, o, mode.mode)
			f := "oa_app.oa_alone_" + mode.name
			v := "oa_app.oa_alone_v_" + mode.name
			oaMust(t, conn, oaSQLReader(f, 0))
			oaMust(t, conn, fmt.Sprintf("CREATE OR REPLACE VIEW %s AS SELECT %s() AS n", v, f))
			uses := []string{
				"SELECT " + f + "()",
				"SELECT n FROM " + v,
				"SELECT " + f + "() AS into_col",
				"WITH x AS (SELECT " + f + "() AS n) SELECT n FROM x",
			}
			wrong := 0
			for i := 0; i < 30; i++ {
				writes := i%2 == 0
				change := oaSQLReader(f, i)
				want := "NO_STANDBY_CONFIGURED"
				if writes {
					change, want = oaSQLNextval(f, "VOLATILE"), "WRITING_FUNCTION"
					if i%4 == 0 {
						change = fmt.Sprintf("CREATE OR REPLACE FUNCTION %s() RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$BEGIN RETURN nextval('oa_app.oa_seq'); END$$", f)
					}
				}
				oaMust(t, conn, change)
				use := uses[i/2%len(uses)]
				rs, err := runAndRoutes(t, conn, use)
				if err != nil {
					t.Errorf("iteration %d: %s right after %q: %v (%v)", i, use, change, err, rs)
					continue
				}
				if len(rs) == 0 || rs[len(rs)-1].Reason != want || rs[len(rs)-1].Role != "primary" {
					wrong++
					t.Errorf("iteration %d: %s right after %q: NOTICEs %v, want the primary with %s (the verdict with the change)", i, use, change, rs, want)
				}
			}
			if wrong > 0 {
				t.Errorf("%d of 30 uses right after the session's change reported a verdict without it", wrong)
			}
		})
	}
}
