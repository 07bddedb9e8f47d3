package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/classify/catalog"
	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/internal/cluster"
)

// effectsCase is a golden case of classify/testdata as this test needs it (unknown fields ignored).
type effectsCase struct {
	Comment           string          `json:"comment"`
	Setup             string          `json:"setup"`
	SQL               string          `json:"sql"`
	SearchPath        []string        `json:"search_path"`
	SearchPathUnknown bool            `json:"search_path_unknown"`
	User              string          `json:"user"`
	ParamTypes        []uint32        `json:"param_types"`
	Access            classify.Access `json:"access"`
	Reason            classify.Reason `json:"reason"`
	Standby           string          `json:"standby"`
	Pgowl             json.RawMessage `json:"pgowl"`
	file              string
}

// The overrides the catalogue golden tables assume (see classify/catalogue_golden_test.go).
var effectsOverrides = config.ClassifyFunctions{
	Readonly: []string{"public.cfg_readonly(integer)", "cfg_ro_overload(text)"},
	Writes:   []string{"cfg_writes()"},
}

func readEffectsCases(t *testing.T, pattern string) []effectsCase {
	t.Helper()
	paths, err := filepath.Glob(pattern)
	if err != nil || len(paths) == 0 {
		t.Fatalf("no golden tables match %s: %v", pattern, err)
	}
	sort.Strings(paths)
	var all []effectsCase
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var cases []effectsCase
		if err := json.Unmarshal(data, &cases); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for i := range cases {
			cases[i].file = filepath.Base(path)
		}
		all = append(all, cases...)
	}
	return all
}

// newRouteReasons are the reasons added with effect analysis; until proxy.routeRequest maps them
// (proxy/classifier.go routeReason), a statement carrying one reaches the primary as UNKNOWN_EFFECT.
var newRouteReasons = map[string]bool{"NODE_LOCAL_STATS": true, "HINT": true, "NESTING_TOO_DEEP": true, "OVERRIDE": true}

// TestEffectsEndToEnd runs the classifier's golden cases through pgowl against a real primary and
// standby: the catalogue cases (functions, views, overrides, node-local statistics, hints) in a
// database set up with their setup SQL, and the catalogue-free tables' reads (plus the hint and
// statistics table) in a database with the standby schema. For each statement it checks the routing
// NOTICE against the classifier's verdict with that database's catalogue, and where the statement
// ran against the nodes' own pg_stat_statements.
func TestEffectsEndToEnd(t *testing.T) {
	c := ownCluster(t, 1)
	ctx := timeoutCtx(t, 5*time.Minute)
	primary := c.Nodes[0]

	catalogueCases := readEffectsCases(t, filepath.Join("..", "classify", "testdata", "catalogue", "*_cases.json"))
	plainCases := readEffectsCases(t, filepath.Join("..", "classify", "testdata", "*_cases.json"))

	// Two databases: "effects" with the catalogue cases' objects, "plain" with the standby schema.
	// app is made a superuser so that the cases may do what their functions do (COPY to a file, ...).
	if err := primary.Exec(ctx, "CREATE DATABASE effects"); err != nil {
		t.Fatal(err)
	}
	if err := primary.Exec(ctx, "CREATE DATABASE plain"); err != nil {
		t.Fatal(err)
	}
	if err := primary.Exec(ctx, "ALTER ROLE "+appUser+" SUPERUSER"); err != nil {
		t.Fatal(err)
	}
	setUp := func(database string, scripts ...string) {
		conn, err := pgx.Connect(ctx, primary.DSN(cluster.Superuser, "", database))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		for _, script := range scripts {
			if _, err := conn.PgConn().Exec(ctx, script).ReadAll(); err != nil {
				t.Fatalf("set up %s: %v\n%s", database, err, script)
			}
		}
	}
	schema, err := os.ReadFile(filepath.Join("..", "classify", "testdata", "catalogue", "schema.sql"))
	if err != nil {
		t.Fatal(err)
	}
	scripts := []string{string(schema)}
	for _, tc := range catalogueCases {
		if tc.Setup != "" {
			scripts = append(scripts, tc.Setup)
		}
	}
	setUp("effects", scripts...)
	standbySchema, err := os.ReadFile(filepath.Join("..", "classify", "testdata", "standby_schema.sql"))
	if err != nil {
		t.Fatal(err)
	}
	setUp("plain", "CREATE EXTENSION IF NOT EXISTS pg_stat_statements", string(standbySchema))
	catchUp(t, c)

	o := startOwl(t, c, func(cfg *config.Config) { cfg.Classify.Functions = effectsOverrides })

	// The verdicts pgowl must reach: the classifier's, with each database's catalogue as loaded here.
	catalogues := map[string]*classify.Catalogue{}
	for _, database := range []string{"effects", "plain"} {
		conn, err := pgx.Connect(ctx, primary.DSN(cluster.Superuser, "", database))
		if err != nil {
			t.Fatal(err)
		}
		cat, err := catalog.Load(ctx, conn, database, catalog.Overrides{Readonly: effectsOverrides.Readonly, Writes: effectsOverrides.Writes})
		conn.Close(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		catalogues[database] = cat
	}
	reference := classify.New(classify.Options{CacheSize: -1})

	var runs []effectsRun
	for _, tc := range catalogueCases {
		if tc.User != "" || tc.SearchPathUnknown {
			continue // sessions this harness cannot open (another login, an unreadable SET)
		}
		runs = append(runs, effectsRun{tc: tc, database: "effects"})
	}
	for _, tc := range plainCases {
		if len(tc.Pgowl) > 0 {
			continue // answered by pgowl itself: not routed
		}
		if tc.Access != classify.Read && tc.file != "hint_nodelocal_cases.json" {
			continue // the other writes include ALTER SYSTEM, pg_promote, DROP DATABASE, ...
		}
		runs = append(runs, effectsRun{tc: tc, database: "plain"})
	}

	stats := effectsStats{}
	for i := range runs {
		run := &runs[i]
		want := reference.ClassifyWith(run.tc.SQL, &classify.Context{Database: run.database, User: appUser,
			SearchPath: run.tc.SearchPath, ParamTypes: run.tc.ParamTypes}, catalogues[run.database])
		if run.database == "effects" && (want.Access != run.tc.Access || want.Reason != run.tc.Reason) {
			t.Errorf("%s: %s: the classifier says %v %v here, the golden table %v %v", run.tc.file, run.tc.Comment,
				want.Access, want.Reason, run.tc.Access, run.tc.Reason)
		}
		o.runEffectsCase(t, c, run, want, &stats)
	}
	t.Logf("%d statements through pgowl: %d routed as the classifier says, %d ran with evidence on the node the NOTICE named, "+
		"%d without evidence (failed or not recorded), %d pinned to the primary by their session effects, "+
		"%d reads held on the primary for a change no standby had replayed yet, "+
		"%d pending the router's mapping of the new reasons %v",
		len(runs), stats.routed, stats.evidence, stats.noEvidence, stats.pinned, stats.heldForReplay, stats.pending, stats.pendingReasons)
	if stats.heldForReplay > len(runs)/10 {
		t.Errorf("%d of %d reads held on the primary for replay: more than a tenth", stats.heldForReplay, len(runs))
	}
	if len(runs) < 250 {
		t.Errorf("only %d golden statements ran end to end; want at least 250", len(runs))
	}
	if stats.evidence < len(runs)/2 {
		t.Errorf("only %d of %d statements left evidence on a node", stats.evidence, len(runs))
	}
	if stats.pending > 0 {
		t.Logf("NOTE: proxy.routeRequest does not map %v yet: see routeReason in proxy/classifier.go", stats.pendingReasons)
	}
}

type effectsRun struct {
	tc       effectsCase
	database string
}

type effectsStats struct {
	routed, evidence, noEvidence, pending, pinned int
	pendingReasons                                []string
	// heldForReplay counts reads routed to the primary with READ_YOUR_WRITES: a read verdict, held
	// there because no standby had replayed a change it rests on (an earlier case's DDL) within
	// routing.read_your_writes_wait.
	heldForReplay int
}

// runEffectsCase runs one statement through pgowl on a fresh connection and checks its route.
func (o *owl) runEffectsCase(t *testing.T, c *cluster.Cluster, run *effectsRun, want classify.Effects, stats *effectsStats) {
	t.Helper()
	tc := run.tc
	what := fmt.Sprintf("%s: %s: %q", tc.file, tc.Comment, tc.SQL)
	tag := marker("effects")
	sql := "/* " + tag + " */ " + tc.SQL
	notices := &noticeLog{}
	cfg, err := pgconn.ParseConfig(o.dsn(appUser, appPassword, run.database, nil))
	if err != nil {
		t.Fatal(err)
	}
	if tc.SearchPath != nil {
		quoted := make([]string, len(tc.SearchPath))
		for i, schema := range tc.SearchPath {
			quoted[i] = `"` + strings.ReplaceAll(schema, `"`, `""`) + `"`
		}
		cfg.RuntimeParams["search_path"] = strings.Join(quoted, ",")
	}
	cfg.OnNotice = notices.add
	ctx := timeoutCtx(t, statementTimeout)
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("%s: connect to pgowl: %v", what, err)
	}
	defer conn.Close(context.Background())
	resetStats(t, c)
	if len(tc.ParamTypes) > 0 {
		values := make([][]byte, len(tc.ParamTypes))
		for i, oid := range tc.ParamTypes {
			values[i] = []byte("1")
			if oid == 25 {
				values[i] = []byte("x")
			}
		}
		err = conn.ExecParams(ctx, sql, values, tc.ParamTypes, nil, nil).Read().Err
	} else {
		_, err = conn.Exec(ctx, sql).ReadAll()
	}
	var routes []routeNotice
	takeRoutes := func() {
		for _, n := range notices.take() {
			if isRouteNotice(n) {
				routes = append(routes, parseRouteNotice(t, n))
			}
		}
	}
	takeRoutes()
	if deferred := want.Statements == 1 && (want.Tx == classify.TxBegin || want.Tx == classify.TxBeginReadOnly); deferred && err == nil {
		// pgowl answers a lone BEGIN itself and sends it with the
		// transaction's first statement: BEGIN's NOTICE comes with that one.
		if len(routes) != 0 {
			t.Errorf("%s: a deferred BEGIN got NOTICEs %v before it ran anywhere", what, routes)
		}
		if _, err := conn.Exec(ctx, "SELECT 1").ReadAll(); err != nil {
			// An error of BEGIN itself (serializable on a standby) comes now.
			t.Logf("%s: first statement of the transaction: %v", what, err)
		}
		takeRoutes()
		if len(routes) == 2 && routes[1].Reason == "IN_TRANSACTION" && routes[1].Node == routes[0].Node {
			routes = routes[:1]
		}
	}
	if len(routes) != 1 {
		t.Errorf("%s: %d routing NOTICEs %v, want 1 (err %v)", what, len(routes), routes, err)
		return
	}
	route := routes[0]
	if route.Reason == "SESSION_PINNED" && route.Role == "primary" && want.Session != 0 {
		// The statement creates session state that cannot move, so pgowl pins the session to the
		// primary before it runs; its effect no longer decides.
		stats.pinned++
		return
	}
	wantRole := "primary"
	if want.Access == classify.Read {
		wantRole = "standby"
	}
	if want.Access == classify.Read && route.Role == "primary" && route.Reason == "READ_YOUR_WRITES" {
		// A read verdict, held on the primary until a standby replays what it rests on.
		stats.heldForReplay++
		return
	}
	if route.Reason != want.Reason.String() || route.Role != wantRole {
		if newRouteReasons[want.Reason.String()] && route.Reason == "UNKNOWN_EFFECT" && route.Role == "primary" {
			stats.pending++
			if !containsString(stats.pendingReasons, want.Reason.String()) {
				stats.pendingReasons = append(stats.pendingReasons, want.Reason.String())
			}
			return
		}
		t.Errorf("%s: NOTICE %v, want role %s reason %s (subject %q)", what, route, wantRole, want.Reason, want.Subject)
		return
	}
	stats.routed++
	if err != nil {
		var pgErr *pgconn.PgError
		refused := errors.As(err, &pgErr) && (pgErr.Code == "25006" || strings.Contains(pgErr.Message, "recovery"))
		if refused && route.Role == "standby" && tc.Standby != "refused" {
			t.Errorf("%s: routed to the standby, which refused it as a write: %v", what, err)
		}
		stats.noEvidence++
		return
	}
	ev := evidence(t, c, tag)
	total := int64(0)
	for node, calls := range ev {
		total += calls
		if calls > 0 && node != route.Node {
			t.Errorf("%s: the NOTICE names %s, but pg_stat_statements says %s ran it (per node: %v)", what, route.Node, node, ev)
		}
	}
	if total == 0 {
		stats.noEvidence++
		return
	}
	stats.evidence++
}

// TestEffectsFollowSessionAndCatalogue checks, through pgowl, what a golden table cannot: that a
// SET search_path made in the session changes how names resolve; that CREATE OR REPLACE FUNCTION
// passing through pgowl takes effect for the very next statement; that a function created behind
// pgowl's back is found on first use; and that SHOW pgowl.explain names the chain of functions.
func TestEffectsFollowSessionAndCatalogue(t *testing.T) {
	c := sharedClusterFor(t)
	ctx := timeoutCtx(t, 2*time.Minute)
	primary := c.Nodes[0]
	if err := primary.Exec(ctx, "DROP DATABASE IF EXISTS effects_session"); err != nil {
		t.Fatal(err)
	}
	if err := primary.Exec(ctx, "CREATE DATABASE effects_session OWNER "+appUser); err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.Connect(ctx, primary.DSN(cluster.Superuser, "", "effects_session"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	if _, err := admin.Exec(ctx, `SET ROLE `+appUser+`;
CREATE SCHEMA lib;
CREATE TABLE audit (msg text);
CREATE FUNCTION lib.lib_count() RETURNS bigint LANGUAGE sql AS $$ SELECT count(*) FROM public.audit $$;
CREATE FUNCTION report() RETURNS bigint LANGUAGE sql AS $$ SELECT count(*) FROM audit $$`); err != nil {
		t.Fatal(err)
	}
	catchUp(t, c)
	// This test is about classification: a statement it routes to the primary
	// for an unknown effect would otherwise make the next reads wait for (or,
	// with the harness's synchronous_commit = off, skip) the standbys.
	o := startOwl(t, c, readYourWritesOff)
	notices := &noticeLog{}
	cfg, err := pgconn.ParseConfig(o.dsn(appUser, appPassword, "effects_session", nil))
	if err != nil {
		t.Fatal(err)
	}
	cfg.OnNotice = notices.add
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	run := func(sql string) (routeNotice, error) {
		t.Helper()
		_, err := conn.Exec(ctx, sql).ReadAll()
		var routes []routeNotice
		for _, n := range notices.take() {
			if isRouteNotice(n) {
				routes = append(routes, parseRouteNotice(t, n))
			}
		}
		if len(routes) != 1 {
			t.Fatalf("%s: %d routing NOTICEs, want 1 (err %v)", sql, len(routes), err)
		}
		return routes[0], err
	}
	expect := func(sql, role, reason string) {
		t.Helper()
		route, err := run(sql)
		if err != nil {
			t.Errorf("%s: %v", sql, err)
		}
		if route.Role != role || route.Reason != reason {
			if newRouteReasons[reason] && route.Reason == "UNKNOWN_EFFECT" {
				t.Logf("%s: %v (pending the router's mapping of %s)", sql, route, reason)
				return
			}
			t.Errorf("%s: NOTICE %v, want %s %s", sql, route, role, reason)
		}
	}

	expect("SELECT report()", "standby", "READ_ONLY")
	// lib is not on the search path: the function is not found, so the primary (where it errors).
	if route, _ := run("SELECT lib_count()"); route.Role != "primary" || route.Reason != "UNKNOWN_EFFECT" {
		t.Errorf("lib_count() without lib on the search path: %v, want primary UNKNOWN_EFFECT", route)
	}
	expect("SET search_path = lib, public", "standby", "READ_ONLY")
	expect("SELECT lib_count()", "standby", "READ_ONLY")
	expect("RESET search_path", "standby", "READ_ONLY")
	if route, _ := run("SELECT lib_count()"); route.Role != "primary" {
		t.Errorf("lib_count() after RESET search_path: %v, want the primary", route)
	}

	// CREATE OR REPLACE through pgowl: the next statement sees the new body.
	expect("CREATE OR REPLACE FUNCTION report() RETURNS bigint LANGUAGE sql AS $$ INSERT INTO audit VALUES ('r'); SELECT count(*) FROM audit $$",
		"primary", "WRITE")
	expect("SELECT report()", "primary", "WRITING_FUNCTION")
	if ok, err := conn.Exec(ctx, "SHOW pgowl.explain").ReadAll(); err != nil {
		t.Errorf("SHOW pgowl.explain: %v", err)
	} else if len(ok) != 1 || len(ok[0].Rows) != 1 || !strings.Contains(string(ok[0].Rows[0][0]), "report()") {
		t.Errorf("SHOW pgowl.explain does not name the function: %v", ok)
	}
	notices.take()

	// A function created behind pgowl's back is found on its first use.
	if _, err := admin.Exec(ctx, `CREATE FUNCTION added_later() RETURNS bigint LANGUAGE sql AS $$ SELECT count(*) FROM audit $$`); err != nil {
		t.Fatal(err)
	}
	catchUp(t, c)
	// The session's own write (report()'s INSERT) is to be seen by its reads: its position, read
	// now, may hold a record the primary has not flushed yet (the background writer's snapshot of
	// running transactions), which no standby can have; the read then runs on the primary.
	if route, err := run("SELECT added_later()"); err != nil || !(route.Role == "standby" && route.Reason == "READ_ONLY" ||
		route.Role == "primary" && route.Reason == "READ_YOUR_WRITES") {
		t.Errorf("SELECT added_later(): NOTICE %v (err %v), want a standby READ_ONLY, or the primary READ_YOUR_WRITES", route, err)
	}
	// And one that writes.
	if _, err := admin.Exec(ctx, `CREATE FUNCTION added_writer() RETURNS void LANGUAGE sql AS $$ DELETE FROM audit WHERE false $$`); err != nil {
		t.Fatal(err)
	}
	catchUp(t, c)
	expect("SELECT added_writer()", "primary", "WRITING_FUNCTION")
	// Hints and node-local statistics.
	expect("/*pgowl:primary*/ SELECT report() IS NULL FROM (SELECT 1) x", "primary", "HINT")
	expect("SELECT count(*) FROM pg_stat_user_tables", "primary", "NODE_LOCAL_STATS")

	// A migration run as a procedure: the function it replaces is judged by its new body at once,
	// not at the next periodic reload (30 s).
	expect("CREATE FUNCTION tally() RETURNS bigint LANGUAGE sql AS $$ SELECT count(*) FROM audit $$", "primary", "WRITE")
	expect(`CREATE PROCEDURE migrate_tally() LANGUAGE plpgsql AS $p$ BEGIN
CREATE OR REPLACE FUNCTION tally() RETURNS bigint LANGUAGE sql AS $$ INSERT INTO audit VALUES ('t'); SELECT count(*) FROM audit $$;
END $p$`, "primary", "WRITE")
	catchUp(t, c)
	expect("SELECT tally()", "standby", "READ_ONLY")
	expect("CALL migrate_tally()", "primary", "WRITE")
	expect("SELECT tally()", "primary", "WRITING_FUNCTION")

	// Row security: a policy's expression runs for every row read, so a policy that writes
	// makes every read of its table a write (a standby refuses it with 25006).
	expect("CREATE TABLE guarded (v int)", "primary", "WRITE")
	expect("INSERT INTO guarded VALUES (1), (2)", "primary", "WRITE")
	expect("CREATE FUNCTION note_read() RETURNS boolean LANGUAGE sql AS $$ INSERT INTO audit VALUES ('read'); SELECT true $$", "primary", "WRITE")
	catchUp(t, c)
	expect("SELECT count(*) FROM guarded", "standby", "READ_ONLY")
	expect("ALTER TABLE guarded ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY", "primary", "WRITE")
	expect("CREATE POLICY guarded_read ON guarded FOR SELECT USING (note_read())", "primary", "WRITE")
	catchUp(t, c)
	expect("SELECT count(*) FROM guarded", "primary", "WRITING_FUNCTION")
	expect("DROP POLICY guarded_read ON guarded", "primary", "WRITE")
	catchUp(t, c)
	expect("SELECT count(*) FROM guarded", "standby", "READ_ONLY")
}
