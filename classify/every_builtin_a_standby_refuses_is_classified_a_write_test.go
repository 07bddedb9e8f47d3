package classify

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgowl/pgowl/internal/cluster"
)

// TestEveryBuiltinAStandbyRefusesIsClassifiedAWrite asks PostgreSQL itself which built-in functions
// need the primary. It calls every pg_catalog function the classifier calls a read on a real hot
// standby, with plausible arguments; a function the standby refuses for being a standby would be
// sent there by pgowl and fail for the client, so each one is a failure. The reviewed table in
// builtins.go is written by hand; this is what keeps it honest when PostgreSQL's behaviour and the
// table drift apart.
func TestEveryBuiltinAStandbyRefusesIsClassifiedAWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two PostgreSQL servers")
	}
	started := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// wal_level logical lets the logical decoding functions get as far as asking whether the server
	// is in recovery; with replica they stop earlier, on any server.
	nodes := cluster.StartForTest(t, cluster.Options{Standbys: 1, Settings: map[string]string{"wal_level": "logical"}}).Nodes
	primary, standby := nodes[0], nodes[1]

	largeObject := createOracleObjects(t, ctx, primary)
	if err := standby.WaitCaughtUp(ctx, primary); err != nil {
		t.Fatalf("standby did not replay the oracle's objects: %v\n%s", err, standby.ServerLog())
	}
	session := &standbySession{t: t, node: standby}
	session.requireReplaying(ctx)
	session.requireRefusalsAreRecognised(ctx)

	functions := listBuiltinFunctions(t, ctx, session)
	arguments := standbyArgumentCandidates(largeObject)
	neverCalled := neverCalledOnAStandby()
	classifier := New(Options{CacheSize: -1})
	var tally builtinOracleTally
	for _, function := range functions {
		if reason, unsafe := neverCalledReason(neverCalled, function.name); unsafe {
			sql := "SELECT " + function.qualifiedName() + "()"
			if classifier.Classify(sql).Access == Read {
				t.Errorf("%s is classified a read, but it %s; not called on the standby", function.signature(), reason)
			}
			tally.neverCalled++
			continue
		}
		if !function.callableFromSQL() {
			tally.skip("returns " + function.returns + ", called only by the server")
			continue
		}
		candidates, missing := function.argumentCandidates(arguments)
		if missing != "" {
			tally.skip("takes " + missing)
			continue
		}
		checkBuiltinOnStandby(t, ctx, session, classifier, function, candidates, &tally)
	}
	tally.report(t, len(functions), time.Since(started))
	if tally.called < 1500 || tally.succeeded*2 < tally.called {
		t.Errorf("only %d functions called and %d succeeded on the standby; the arguments no longer fit PostgreSQL's functions, so the check says little",
			tally.called, tally.succeeded)
	}
}

// createOracleObjects creates, on the primary, objects for the arguments to name, and returns the
// OID of a large object: a sequence, a table with BRIN and GIN indexes and extended statistics, an
// enum, and a view that writes when it is read (as a view calling a logging function would), so
// that a function which reads a relation it is given by name shows that it runs the view's
// definition.
func createOracleObjects(t *testing.T, ctx context.Context, primary *cluster.Node) string {
	t.Helper()
	const objects = `
		CREATE SEQUENCE standby_oracle_seq;
		CREATE TABLE standby_oracle_table (id int PRIMARY KEY, body text, doc tsvector);
		INSERT INTO standby_oracle_table
			SELECT i, 'row ' || i, to_tsvector('simple', 'row ' || i) FROM generate_series(1, 100) i;
		CREATE INDEX standby_oracle_brin ON standby_oracle_table USING brin (id);
		CREATE INDEX standby_oracle_gin ON standby_oracle_table USING gin (doc) WITH (fastupdate = on);
		CREATE STATISTICS standby_oracle_stats (ndistinct, dependencies, mcv) ON id, body FROM standby_oracle_table;
		ANALYZE standby_oracle_table;
		CREATE TYPE standby_oracle_mood AS ENUM ('calm', 'busy');
		CREATE VIEW standby_oracle_writing_view AS SELECT pg_catalog.nextval('standby_oracle_seq') AS next;`
	conn := connect(t, ctx, primary)
	if _, err := conn.Exec(ctx, objects).ReadAll(); err != nil {
		t.Fatalf("create the oracle's objects on the primary: %v", err)
	}
	results, err := conn.Exec(ctx, `SELECT pg_catalog.lo_from_bytea(0, '\x00'::bytea)`).ReadAll()
	if err != nil {
		t.Fatalf("create a large object on the primary: %v", err)
	}
	return string(results[0].Rows[0][0])
}

// standbySession is one connection to the standby, opened again when a call breaks it.
type standbySession struct {
	t    *testing.T
	node *cluster.Node
	conn *pgconn.PgConn
}

// connection returns the open connection, connecting first when there is none.
func (s *standbySession) connection(ctx context.Context) *pgconn.PgConn {
	if s.conn != nil && !s.conn.IsClosed() {
		return s.conn
	}
	conn, err := pgconn.Connect(ctx, s.node.SuperuserDSN())
	if err != nil {
		s.t.Fatalf("connect to the standby: %v\n%s", err, s.node.ServerLog())
	}
	s.conn = conn
	s.t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// query runs sql outside any transaction block and returns its rows.
func (s *standbySession) query(ctx context.Context, sql string) [][][]byte {
	s.t.Helper()
	results, err := s.connection(ctx).Exec(ctx, sql).ReadAll()
	if err != nil {
		s.t.Fatalf("%s on the standby: %v", sql, err)
	}
	return results[len(results)-1].Rows
}

// callReadOnly runs one SELECT in a read-only transaction with a short statement timeout, as a
// client's read would run on a standby, and leaves the session idle whatever happened, so that
// one call's failure cannot affect the next.
func (s *standbySession) callReadOnly(ctx context.Context, selectSQL string) error {
	callCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn := s.connection(ctx)
	_, err := conn.Exec(callCtx, "BEGIN READ ONLY; SET LOCAL statement_timeout = '2s'; "+selectSQL+"; ROLLBACK").ReadAll()
	if !conn.IsClosed() && conn.TxStatus() != 'I' {
		if _, rollbackErr := conn.Exec(ctx, "ROLLBACK").ReadAll(); rollbackErr != nil {
			conn.Close(ctx)
		}
	}
	return err
}

// requireReplaying fails the test unless the node is a hot standby that replays WAL.
func (s *standbySession) requireReplaying(ctx context.Context) {
	row := s.query(ctx, `SELECT pg_catalog.pg_is_in_recovery(), pg_catalog.pg_last_wal_replay_lsn() IS NOT NULL,
		pg_catalog.pg_get_wal_replay_pause_state()`)[0]
	if string(row[0]) != "t" || string(row[1]) != "t" || string(row[2]) != "not paused" {
		s.t.Fatalf("the standby is not a replaying hot standby: in recovery %s, replayed %s, pause state %s",
			row[0], row[1], row[2])
	}
}

// requireRefusalsAreRecognised calls, on the standby, functions it refuses in each of the ways
// PostgreSQL 15 words a refusal, so that a change of wording cannot make the oracle blind and the
// test pass for nothing.
func (s *standbySession) requireRefusalsAreRecognised(ctx context.Context) {
	for _, refused := range []string{
		"SELECT pg_catalog.nextval('standby_oracle_seq')",         // 25006, read-only transaction
		"SELECT pg_catalog.txid_current()",                        // 25006, during recovery
		"SELECT pg_catalog.pg_current_wal_lsn()",                  // 55000, recovery is in progress
		"SELECT pg_catalog.pg_replication_origin_oid('anything')", // 25006, replication origins
	} {
		err := s.callReadOnly(ctx, refused)
		if !refusedForBeingAStandby(err) {
			s.t.Fatalf("the standby's answer to %s is not recognised as a refusal: %v", refused, describePostgresError(err))
		}
	}
}

// refusedForBeingAStandby reports whether err is a standby refusing what needs the primary: a
// read-only transaction (SQLSTATE 25006, which every transaction on a standby is) or one of
// PostgreSQL 15's messages about recovery: "cannot execute %s during recovery", "recovery is in
// progress" (whose hint says what "cannot be executed during recovery"), "logical decoding cannot
// be used while in recovery", "cannot assign TransactionIds during recovery", "cannot acquire lock
// mode %s on database objects while recovery is in progress", "cannot use serializable mode in a
// hot standby". "recovery is not in progress" (a recovery control function on a primary) and
// "conflict with recovery" (a query cancelled by replay) are not refusals.
func refusedForBeingAStandby(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	if pgErr.Code == "25006" {
		return true
	}
	for _, text := range []string{pgErr.Message, pgErr.Hint} {
		for _, wording := range []string{"during recovery", "while in recovery", "recovery is in progress", "in a hot standby"} {
			if strings.Contains(text, wording) {
				return true
			}
		}
	}
	return false
}

// describePostgresError gives PostgreSQL's SQLSTATE, message and hint, or the error as it is.
func describePostgresError(err error) string {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return fmt.Sprint(err)
	}
	described := pgErr.Code + " " + pgErr.Message
	if pgErr.Hint != "" {
		described += " (hint: " + pgErr.Hint + ")"
	}
	return described
}

// listedBuiltin is one pg_catalog function as the standby's pg_proc describes it.
type listedBuiltin struct {
	name       string
	volatility string
	returns    string
	// argumentTypes are format_type's names of the declared arguments; a variadic last argument
	// is named by its element type, which is what a call passes.
	argumentTypes []string
}

func (f listedBuiltin) qualifiedName() string { return `pg_catalog."` + f.name + `"` }

// volatilityName spells out provolatile for failure messages.
func (f listedBuiltin) volatilityName() string {
	switch f.volatility {
	case "v":
		return "volatile"
	case "s":
		return "stable"
	}
	return "immutable"
}

func (f listedBuiltin) signature() string {
	return "pg_catalog." + f.name + "(" + strings.Join(f.argumentTypes, ", ") + ")"
}

// callableFromSQL is false for the handler functions that only the server calls (a trigger, a
// procedural language's call handler, an access method's handler): a direct call tells nothing
// about reads and writes.
func (f listedBuiltin) callableFromSQL() bool {
	switch f.returns {
	case "trigger", "event_trigger", "language_handler", "fdw_handler", "index_am_handler", "table_am_handler", "tsm_handler":
		return false
	}
	return true
}

// argumentCandidates returns each argument's candidate expressions, or the first argument type
// that cannot be written as a literal.
func (f listedBuiltin) argumentCandidates(arguments map[string][]string) (candidates [][]string, missing string) {
	for _, argumentType := range f.argumentTypes {
		expressions, ok := candidatesForType(arguments, argumentType)
		if !ok {
			return nil, argumentType
		}
		candidates = append(candidates, expressions)
	}
	return candidates, ""
}

// calls returns the calls to try in turn: the n-th takes each argument's n-th candidate, or its last
// when it has fewer, so that the number of calls grows with the longest list, not their product.
func (f listedBuiltin) calls(candidates [][]string) []string {
	variants := 1
	for _, expressions := range candidates {
		variants = max(variants, len(expressions))
	}
	calls := make([]string, 0, variants)
	for variant := 0; variant < variants; variant++ {
		arguments := make([]string, len(candidates))
		for i, expressions := range candidates {
			arguments[i] = expressions[min(variant, len(expressions)-1)]
		}
		calls = append(calls, "SELECT "+f.qualifiedName()+"("+strings.Join(arguments, ", ")+")")
	}
	return calls
}

// listBuiltinFunctions lists the standby's pg_catalog functions (not aggregates, window functions
// or procedures), of every volatility.
func listBuiltinFunctions(t *testing.T, ctx context.Context, session *standbySession) []listedBuiltin {
	t.Helper()
	rows := session.query(ctx, `
		SELECT p.proname, p.provolatile, pg_catalog.format_type(p.prorettype, NULL),
			coalesce((SELECT pg_catalog.string_agg(pg_catalog.format_type(
					CASE WHEN a.position = p.pronargs AND p.provariadic <> 0 THEN p.provariadic ELSE a.type END, NULL),
					',' ORDER BY a.position)
				FROM pg_catalog.unnest(p.proargtypes::oid[]) WITH ORDINALITY AS a(type, position)), '')
		FROM pg_catalog.pg_proc p
		WHERE p.pronamespace = 'pg_catalog'::regnamespace AND p.prokind = 'f'
		ORDER BY p.proname, p.oid`)
	functions := make([]listedBuiltin, 0, len(rows))
	for _, row := range rows {
		function := listedBuiltin{name: string(row[0]), volatility: string(row[1]), returns: string(row[2])}
		if len(row[3]) > 0 {
			function.argumentTypes = strings.Split(string(row[3]), ",")
		}
		functions = append(functions, function)
	}
	if len(functions) < 2500 {
		t.Fatalf("the standby lists only %d pg_catalog functions", len(functions))
	}
	return functions
}

// standbyArgumentCandidates gives, per argument type (as format_type names it), SQL expressions of
// that type to try in turn: first a plain value or a real object, then others that let more
// functions get past their argument checks to the point where a standby may refuse them. Each is
// cast to its exact type, so the call resolves to the overload listed.
func standbyArgumentCandidates(largeObject string) map[string][]string {
	typed := func(typeName string, values ...string) []string {
		expressions := make([]string, len(values))
		for i, value := range values {
			expressions[i] = "'" + strings.ReplaceAll(value, "'", "''") + "'::" + typeName
		}
		return expressions
	}
	// Some functions take SQL text and run it (query_to_xml, ts_stat, ...): a query that writes
	// shows that they do, and that the classifier cannot see what they will run.
	const writingQuery = "SELECT pg_catalog.nextval('standby_oracle_seq')"
	relations := []string{"standby_oracle_seq", "standby_oracle_table", "standby_oracle_brin", "standby_oracle_gin",
		"standby_oracle_writing_view"}
	arguments := map[string][]string{
		"smallint":                    typed("smallint", "1", "0"),
		"integer":                     typed("integer", "1", "0"),
		"bigint":                      typed("bigint", "1", "0"),
		"oid":                         typed("oid", "1259", largeObject, "0"), // pg_class's OID, a large object
		"xid":                         typed("xid", "1"),
		"xid8":                        typed("xid8", "1"),
		"cid":                         typed("cid", "1"),
		"numeric":                     typed("numeric", "1"),
		"real":                        typed("real", "0.001"),
		"double precision":            typed("double precision", "0.001"), // pg_sleep's seconds
		"money":                       typed("money", "1"),
		"boolean":                     typed("boolean", "false", "true"),
		"text":                        typed("text", "standby_oracle_seq", writingQuery),
		"character varying":           typed("character varying", "standby_oracle_seq", writingQuery),
		"character":                   typed("character", "s"),
		"name":                        typed("name", "postgres", "public"),
		`"char"`:                      typed(`"char"`, "r"),
		"cstring":                     typed("cstring", "standby_oracle_seq", "1"),
		"bytea":                       typed("bytea", `\x00`),
		"regclass":                    typed("regclass", relations...),
		"regproc":                     typed("regproc", "pg_catalog.now"),
		"regprocedure":                typed("regprocedure", "pg_catalog.now()"),
		"regoper":                     typed("regoper", "pg_catalog.||/"),
		"regoperator":                 typed("regoperator", "pg_catalog.+(integer,integer)"),
		"regtype":                     typed("regtype", "integer"),
		"regnamespace":                typed("regnamespace", "pg_catalog", "public"),
		"regrole":                     typed("regrole", "postgres"),
		"regconfig":                   typed("regconfig", "english"),
		"regdictionary":               typed("regdictionary", "simple"),
		"regcollation":                typed("regcollation", "C"),
		"pg_lsn":                      typed("pg_lsn", "0/0"),
		"interval":                    typed("interval", "1 ms"), // pg_sleep_for's wait
		"timestamp with time zone":    {"pg_catalog.now()"},
		"timestamp without time zone": typed("timestamp without time zone", "2000-01-01 00:00"),
		"date":                        typed("date", "2000-01-01"),
		"time without time zone":      typed("time without time zone", "00:00"),
		"time with time zone":         typed("time with time zone", "00:00+00"),
		"json":                        typed("json", `{"a": 1}`),
		"jsonb":                       typed("jsonb", `{"a": 1}`),
		"jsonpath":                    typed("jsonpath", "$.a"),
		"xml":                         typed("xml", "<a/>"),
		"tsvector":                    typed("tsvector", "a b"),
		"tsquery":                     typed("tsquery", "a & b"),
		"tid":                         typed("tid", "(0,1)"),
		"aclitem":                     typed("aclitem", "postgres=r/postgres"),
		"inet":                        typed("inet", "127.0.0.1"),
		"cidr":                        typed("cidr", "127.0.0.0/8"),
		"macaddr":                     typed("macaddr", "08:00:2b:01:02:03"),
		"macaddr8":                    typed("macaddr8", "08:00:2b:01:02:03:04:05"),
		"uuid":                        typed("uuid", "00000000-0000-0000-0000-000000000001"),
		"point":                       typed("point", "(0,0)"),
		"lseg":                        typed("lseg", "[(0,0),(1,1)]"),
		"line":                        typed("line", "{1,-1,0}"),
		"box":                         typed("box", "(1,1),(0,0)"),
		"path":                        typed("path", "((0,0),(1,1))"),
		"polygon":                     typed("polygon", "((0,0),(1,1),(1,0))"),
		"circle":                      typed("circle", "<(0,0),1>"),
		"bit":                         typed("bit", "1"),
		"bit varying":                 typed("bit varying", "1"),
		"txid_snapshot":               typed("txid_snapshot", "10:20:"),
		"pg_snapshot":                 typed("pg_snapshot", "10:20:"),
		"int2vector":                  typed("int2vector", "1"),
		"oidvector":                   typed("oidvector", "1259"),
		"refcursor":                   typed("refcursor", "standby_oracle_cursor"),
		"int4range":                   typed("int4range", "[1,2)"),
		"int8range":                   typed("int8range", "[1,2)"),
		"numrange":                    typed("numrange", "[1,2)"),
		"daterange":                   typed("daterange", "[2000-01-01,2000-01-02)"),
		"tsrange":                     typed("tsrange", "[2000-01-01,2000-01-02)"),
		"tstzrange":                   typed("tstzrange", "[2000-01-01,2000-01-02)"),
		"int4multirange":              typed("int4multirange", "{[1,2)}"),
		"int8multirange":              typed("int8multirange", "{[1,2)}"),
		"nummultirange":               typed("nummultirange", "{[1,2)}"),
		"datemultirange":              typed("datemultirange", "{[2000-01-01,2000-01-02)}"),
		"tsmultirange":                typed("tsmultirange", "{[2000-01-01,2000-01-02)}"),
		"tstzmultirange":              typed("tstzmultirange", "{[2000-01-01,2000-01-02)}"),
		// Polymorphic arguments take an integer, or a container of integers, which fits every
		// combination of them in one signature.
		`"any"`:                   {"1"},
		"anyelement":              {"1"},
		"anynonarray":             {"1"},
		"anycompatible":           {"1"},
		"anycompatiblenonarray":   {"1"},
		"anyarray":                {"ARRAY[1]"},
		"anycompatiblearray":      {"ARRAY[1]"},
		"anyrange":                {"pg_catalog.int4range(1, 2)"},
		"anycompatiblerange":      {"pg_catalog.int4range(1, 2)"},
		"anymultirange":           {"pg_catalog.int4multirange(pg_catalog.int4range(1, 2))"},
		"anycompatiblemultirange": {"pg_catalog.int4multirange(pg_catalog.int4range(1, 2))"},
		"anyenum":                 {"'calm'::standby_oracle_mood"},
		"record":                  {"ROW(1, 'standby_oracle_seq'::text)"},
		// Types without an input function exist only as stored values; take one from the catalogue.
		"pg_node_tree":    {"(SELECT ev_action FROM pg_catalog.pg_rewrite LIMIT 1)"},
		"pg_ndistinct":    {"(SELECT stxdndistinct FROM pg_catalog.pg_statistic_ext_data WHERE stxdndistinct IS NOT NULL LIMIT 1)"},
		"pg_dependencies": {"(SELECT stxddependencies FROM pg_catalog.pg_statistic_ext_data WHERE stxddependencies IS NOT NULL LIMIT 1)"},
		"pg_mcv_list":     {"(SELECT stxdmcv FROM pg_catalog.pg_statistic_ext_data WHERE stxdmcv IS NOT NULL LIMIT 1)"},
	}
	return arguments
}

// candidatesForType looks a type up, building an array of a known element type's candidates.
func candidatesForType(arguments map[string][]string, typeName string) ([]string, bool) {
	if expressions, ok := arguments[typeName]; ok {
		return expressions, true
	}
	element, isArray := strings.CutSuffix(typeName, "[]")
	if !isArray {
		return nil, false
	}
	elements, ok := arguments[element]
	if !ok {
		return nil, false
	}
	expressions := make([]string, len(elements))
	for i, expression := range elements {
		expressions[i] = "ARRAY[" + expression + "]::" + typeName
	}
	return expressions, true
}

// neverCalledOnAStandby names the built-ins whose effect reaches outside the transaction (signals,
// recovery control, configuration, log files, WAL, backups, replication slots, server files,
// statistics): the test never calls them, even on a standby in a read-only transaction. Each must be
// classified a write already, so that pgowl never sends one to a standby.
func neverCalledOnAStandby() map[string]string {
	return map[string]string{
		"pg_promote":                          "promotes the standby",
		"pg_wal_replay_pause":                 "pauses the standby's replay",
		"pg_wal_replay_resume":                "resumes the standby's replay",
		"pg_terminate_backend":                "terminates a backend",
		"pg_cancel_backend":                   "cancels a backend's query",
		"pg_log_backend_memory_contexts":      "signals a backend",
		"pg_reload_conf":                      "reloads the server's configuration",
		"pg_rotate_logfile":                   "rotates the server's log file",
		"pg_switch_wal":                       "switches WAL files",
		"pg_create_restore_point":             "writes a restore point",
		"pg_backup_start":                     "puts the server in backup mode",
		"pg_backup_stop":                      "ends a backup",
		"pg_create_physical_replication_slot": "creates a replication slot",
		"pg_create_logical_replication_slot":  "creates a replication slot",
		"pg_copy_physical_replication_slot":   "creates a replication slot",
		"pg_copy_logical_replication_slot":    "creates a replication slot",
		"pg_drop_replication_slot":            "drops a replication slot",
		"pg_replication_slot_advance":         "advances a replication slot",
		"lo_export":                           "writes a file on the server",
		"lo_import":                           "reads a file on the server into a large object",
		"pg_file_write":                       "writes a file on the server",
		"pg_file_rename":                      "renames a file on the server",
		"pg_file_unlink":                      "removes a file on the server",
		"pg_file_sync":                        "syncs a file on the server",
		"pg_stat_reset":                       "resets the server's statistics",
	}
}

// neverCalledReason also holds every pg_stat_reset_* function back.
func neverCalledReason(neverCalled map[string]string, name string) (string, bool) {
	if reason, ok := neverCalled[name]; ok {
		return reason, true
	}
	if strings.HasPrefix(name, "pg_stat_reset_") {
		return "resets the server's statistics", true
	}
	return "", false
}

// builtinOracleTally counts what happened to the listed functions, for the test's log.
type builtinOracleTally struct {
	called, succeeded, refused, otherErrors, statements int
	classifiedWrite, neverCalled                        int
	skipped                                             map[string]int
	otherErrorCodes                                     map[string]int
}

func (tally *builtinOracleTally) skip(reason string) {
	if tally.skipped == nil {
		tally.skipped = make(map[string]int)
	}
	tally.skipped[reason]++
}

func (tally *builtinOracleTally) otherError(err error) {
	if tally.otherErrorCodes == nil {
		tally.otherErrorCodes = make(map[string]int)
	}
	code := "not from PostgreSQL"
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		code = pgErr.Code
	}
	tally.otherErrorCodes[code]++
	tally.otherErrors++
}

func (tally *builtinOracleTally) report(t *testing.T, listed int, took time.Duration) {
	t.Helper()
	skipped := 0
	skippedLines := make([]string, 0, len(tally.skipped))
	for reason, count := range tally.skipped {
		skipped += count
		skippedLines = append(skippedLines, fmt.Sprintf("%5d %s", count, reason))
	}
	sort.Strings(skippedLines)
	codes := make([]string, 0, len(tally.otherErrorCodes))
	for code, count := range tally.otherErrorCodes {
		codes = append(codes, fmt.Sprintf("%s×%d", code, count))
	}
	sort.Strings(codes)
	t.Logf("%d pg_catalog functions listed, %v with the cluster's start: %d classified reads called on the standby (%d statements): "+
		"%d succeeded, %d refused for being a standby, %d failed otherwise (%s); "+
		"%d classified writes not called; %d never called for safety; %d skipped:\n%s",
		listed, took.Round(time.Millisecond), tally.called, tally.statements, tally.succeeded, tally.refused,
		tally.otherErrors, strings.Join(codes, " "), tally.classifiedWrite, tally.neverCalled, skipped,
		strings.Join(skippedLines, "\n"))
}

// checkBuiltinOnStandby tries all of one function's calls, until the standby refuses one: a call
// that succeeds with one argument may still be refused with another (table_to_xml runs a view's
// definition, not a sequence's). Only calls the classifier calls reads run; a refused one is a
// failure.
func checkBuiltinOnStandby(t *testing.T, ctx context.Context, session *standbySession, classifier *Classifier,
	function listedBuiltin, candidates [][]string, tally *builtinOracleTally) {
	t.Helper()
	called, succeeded := false, false
	var lastErr error
	for _, call := range function.calls(candidates) {
		if classifier.Classify(call).Access != Read {
			continue
		}
		called = true
		tally.statements++
		err := session.callReadOnly(ctx, call)
		if err == nil {
			succeeded = true
			continue
		}
		if refusedForBeingAStandby(err) {
			tally.called++
			tally.refused++
			t.Errorf("%s (%s) is classified a read, but the standby refused %s: %s",
				function.signature(), function.volatilityName(), call, describePostgresError(err))
			return
		}
		lastErr = err
	}
	switch {
	case !called:
		tally.classifiedWrite++
	case succeeded:
		tally.called++
		tally.succeeded++
	default:
		tally.called++
		tally.otherError(lastErr)
	}
}
