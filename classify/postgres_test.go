package classify

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgowl/pgowl/internal/cluster"
)

func connect(t *testing.T, ctx context.Context, node *cluster.Node) *pgconn.PgConn {
	t.Helper()
	conn, err := pgconn.Connect(ctx, node.SuperuserDSN())
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, node.ServerLog())
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// TestAgainstPostgres runs the classifier's claims against a real PostgreSQL 15 primary and hot standby.
func TestAgainstPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two PostgreSQL servers")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// A throw-away PostgreSQL 15 primary and hot standby; skips the test when the binaries are missing.
	nodes := cluster.StartForTest(t, cluster.Options{Standbys: 1}).Nodes
	primary, standby := nodes[0], nodes[1]

	t.Run("BuiltinListMatchesServer", func(t *testing.T) {
		conn := connect(t, ctx, primary)
		results, err := conn.Exec(ctx, `SELECT DISTINCT proname FROM pg_proc WHERE pronamespace = 'pg_catalog'::regnamespace ORDER BY 1`).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		server := make(map[string]struct{})
		for _, row := range results[0].Rows {
			server[string(row[0])] = struct{}{}
		}
		embedded := parseBuiltinNames(pg15BuiltinFunctions)
		if len(server) != len(embedded) {
			t.Errorf("server has %d pg_catalog function names, the embedded list %d; run go generate ./classify", len(server), len(embedded))
		}
		for name := range embedded {
			if _, ok := server[name]; !ok {
				t.Errorf("embedded built-in %q is not in the server's pg_catalog", name)
			}
		}
		for name := range writingBuiltins() {
			if _, ok := server[name]; !ok {
				t.Errorf("writing built-in %q is not in the server's pg_catalog", name)
			}
		}
	})

	schema, err := os.ReadFile(filepath.Join("testdata", "standby_schema.sql"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := connect(t, ctx, primary).Exec(ctx, string(schema)).ReadAll(); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	waitForRecovery(t, ctx, standby)

	t.Run("ReadsRunOnStandby", func(t *testing.T) { checkReadsOnStandby(t, ctx, standby) })
	t.Run("WritesRefusedByStandby", func(t *testing.T) { checkWritesOnStandby(t, ctx, primary, standby) })
}

func waitForRecovery(t *testing.T, ctx context.Context, standby *cluster.Node) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		conn, err := pgconn.Connect(ctx, standby.SuperuserDSN())
		if err == nil {
			results, err := conn.Exec(ctx, `SELECT pg_is_in_recovery(), count(*) FROM t`).ReadAll()
			conn.Close(ctx)
			if err == nil && string(results[0].Rows[0][0]) == "t" && string(results[0].Rows[0][1]) == "20" {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("standby not ready: %v\n%s", err, standby.ServerLog())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// runOnServer runs sql in a fresh session with the simple query protocol, as a client would.
func runOnServer(ctx context.Context, node *cluster.Node, sql string, effects Effects) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgconn.Connect(ctx, node.SuperuserDSN())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if effects.Subject == "COPY TO STDOUT" {
		_, err = conn.CopyTo(ctx, io.Discard, sql)
		return err
	}
	_, err = conn.Exec(ctx, sql).ReadAll()
	return err
}

// refusedByStandby reports whether err is PostgreSQL refusing a statement because it is a standby.
func refusedByStandby(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	return pgErr.Code == "25006" || strings.Contains(pgErr.Message, "recovery") || strings.Contains(pgErr.Hint, "recovery")
}

// checkReadsOnStandby runs every golden case classified Read on the standby: none may be refused
// for being a write, and most must succeed outright (so the check is not vacuous).
func checkReadsOnStandby(t *testing.T, ctx context.Context, standby *cluster.Node) {
	classifier := New(Options{})
	reads, succeeded := 0, 0
	var otherErrors []string
	for _, cases := range loadGolden(t) {
		for _, tc := range cases {
			effects := classifier.Classify(tc.SQL)
			if effects.Access != Read {
				continue
			}
			reads++
			err := runOnServer(ctx, standby, tc.SQL, effects)
			switch {
			case err == nil:
				succeeded++
			case refusedByStandby(err):
				t.Errorf("classified as read but the standby refused it: %q: %v", tc.SQL, err)
			default:
				otherErrors = append(otherErrors, tc.SQL+": "+err.Error())
			}
		}
	}
	sort.Strings(otherErrors)
	t.Logf("%d reads: %d succeeded on the standby, %d failed for other reasons:\n  %s", reads, succeeded, len(otherErrors), strings.Join(otherErrors, "\n  "))
	if succeeded*100 < reads*75 {
		t.Errorf("only %d of %d reads succeeded on the standby; the schema in testdata/standby_schema.sql no longer fits the cases", succeeded, reads)
	}
}

// mustBeRefused are subjects of write verdicts that a standby must refuse; running them there is
// harmless because it refuses them. Other writes are routed to the primary by policy (for example
// advisory locks or currval) and may well run on a standby.
var mustBeRefused = map[string]bool{
	"INSERT": true, "UPDATE": true, "DELETE": true, "MERGE": true, "data-modifying WITH": true,
	"SELECT INTO": true, "CREATE TABLE": true, "CREATE TEMP TABLE": true, "CREATE TABLE AS": true,
	"TRUNCATE": true, "LISTEN": true, "NOTIFY": true, "nextval()": true, "setval()": true,
	"txid_current()": true, "pg_current_xact_id()": true, "pg_current_wal_lsn()": true,
	"pg_switch_wal()": true, "pg_notify()": true, "COPY FROM": true, "SET TRANSACTION READ WRITE": true,
	"SET transaction_read_only = off": true, "lowrite()": true,
}

// checkWritesOnStandby runs the writes a standby must refuse (inside a transaction block, so that
// DECLARE and SET TRANSACTION apply). A statement that PostgreSQL rejects for another reason counts
// when the primary rejects it with the same SQLSTATE (inside a rolled-back transaction): it is then
// invalid SQL, routed to the primary only because we fail closed.
func checkWritesOnStandby(t *testing.T, ctx context.Context, primary, standby *cluster.Node) {
	classifier := New(Options{})
	refused, invalid := 0, 0
	for _, cases := range loadGolden(t) {
		for _, tc := range cases {
			effects := classifier.Classify(tc.SQL)
			if effects.Access != Write || effects.Statements != 1 || effects.Session.Has(SessionPrepare) {
				continue // PREPARE runs nothing: it is routed by its query's effect, not refused
			}
			if !mustBeRefused[effects.Subject] && effects.Reason != ReasonRowLock {
				continue
			}
			standbyErr := runOnServer(ctx, standby, "BEGIN; "+tc.SQL+"; COMMIT", effects)
			if refusedByStandby(standbyErr) {
				refused++
				continue
			}
			primaryErr := runOnServer(ctx, primary, "BEGIN; "+tc.SQL+"; ROLLBACK", effects)
			if sameSQLState(standbyErr, primaryErr) {
				invalid++
				t.Logf("invalid everywhere (fails closed): %q: %v", tc.SQL, standbyErr)
				continue
			}
			t.Errorf("classified as %v (%s) but the standby did not refuse it: %q: standby %v, primary %v",
				effects.Reason, effects.Subject, tc.SQL, standbyErr, primaryErr)
		}
	}
	if refused < 40 {
		t.Errorf("only %d writes were refused by the standby; expected at least 40", refused)
	}
	t.Logf("%d writes refused by the standby as expected, %d invalid on both servers", refused, invalid)
}

func sameSQLState(a, b error) bool {
	var errA, errB *pgconn.PgError
	return errors.As(a, &errA) && errors.As(b, &errB) && errA.Code == errB.Code
}
