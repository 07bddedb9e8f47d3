package classify_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/classify/catalog"
	"github.com/pgowl/pgowl/internal/cluster"
)

// CatalogueCase is one entry of a testdata/catalogue/*_cases.json table: a statement whose verdict
// depends on the functions and views of a real database, created by the cases' setup SQL.
type CatalogueCase struct {
	Comment string `json:"comment"`
	// Setup runs on the test database before any case is classified (in file order).
	Setup string `json:"setup,omitempty"`
	SQL   string `json:"sql"`
	// SearchPath is the session's search_path; absent means the database default.
	SearchPath []string `json:"search_path,omitempty"`
	// User is the session's user ("$user" on the search path); absent means postgres.
	User string `json:"user,omitempty"`
	// SearchPathUnknown classifies as a session whose search_path could not be read.
	SearchPathUnknown bool            `json:"search_path_unknown,omitempty"`
	ParamTypes        []uint32        `json:"param_types,omitempty"`
	Access            classify.Access `json:"access"`
	Reason            classify.Reason `json:"reason"`
	// Subject and Chain (Effects.ChainString) are compared when given.
	Subject string                 `json:"subject,omitempty"`
	Chain   string                 `json:"chain,omitempty"`
	Session classify.SessionEffect `json:"session,omitempty"`
	// Assumption, when given, must be one of Effects.Assumptions.
	Assumption string `json:"assumption,omitempty"`
	// CatalogueChange is the expected Effects.CatalogueChange.
	CatalogueChange bool `json:"catalogue_change,omitempty"`
	// Standby says what a real hot standby does with the statement: "ok" (it runs: the default for
	// reads), "refused" (it refuses it as a write), or "skip" (not checked; the default for writes).
	Standby string `json:"standby,omitempty"`
}

// The configured overrides (classify.functions) the catalogue golden tables are classified with.
var goldenOverrides = catalog.Overrides{
	Readonly: []string{"public.cfg_readonly(integer)", "cfg_ro_overload(text)"},
	Writes:   []string{"cfg_writes()"},
}

func loadCatalogueCases(t testing.TB) map[string][]CatalogueCase {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "catalogue", "*_cases.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no catalogue golden tables: %v", err)
	}
	sort.Strings(paths)
	tables := map[string][]CatalogueCase{}
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		decoder := json.NewDecoder(bytes.NewReader(data))
		decoder.DisallowUnknownFields()
		var cases []CatalogueCase
		if err := decoder.Decode(&cases); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for i, tc := range cases {
			if tc.Comment == "" || tc.SQL == "" || tc.Access == 0 || tc.Reason == 0 {
				t.Fatalf("%s case %d (%q): comment, sql, access and reason are required", path, i, tc.SQL)
			}
			switch tc.Standby {
			case "", "ok", "refused", "skip":
			default:
				t.Fatalf("%s case %d: standby must be ok, refused or skip, not %q", path, i, tc.Standby)
			}
		}
		tables[path] = cases
	}
	return tables
}

// goldenDatabase is the database the catalogue cases are set up in.
const goldenDatabase = "golden"

// TestCatalogueGolden sets up the catalogue golden tables' functions and views in a real
// PostgreSQL 15, loads the catalogue with the catalog package, classifies every case and compares;
// on a mismatch it writes <table>.actual.json next to the table. Then it runs the cases on a hot
// standby of that server: reads must run there, and cases marked "refused" must be refused.
func TestCatalogueGolden(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two PostgreSQL servers")
	}
	tables := loadCatalogueCases(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// The harness starts the standby with the primary; it replays the golden database's setup.
	nodes := cluster.StartForTest(t, cluster.Options{Standbys: 1}).Nodes
	primary, standby := nodes[0], nodes[1]
	started := time.Now()
	cat := setUpGoldenDatabase(t, ctx, primary, tables)
	t.Logf("set up and loaded the golden database in %s", time.Since(started).Round(time.Millisecond))
	started = time.Now()
	for _, warning := range cat.Warnings() {
		t.Errorf("catalogue warning: %s", warning)
	}

	classifier := classify.New(classify.Options{})
	total := 0
	for path, cases := range tables {
		failed := false
		actuals := make([]CatalogueCase, 0, len(cases))
		for _, tc := range cases {
			effects := classifier.ClassifyWith(tc.SQL, caseContext(tc), cat)
			if again := classifier.ClassifyWith(tc.SQL, caseContext(tc), cat); !reflect.DeepEqual(effects, again) {
				t.Errorf("%s: %q: cached answer differs:\n%+v\n%+v", path, tc.SQL, effects, again)
			}
			if uncached := classify.New(classify.Options{CacheSize: -1}).ClassifyWith(tc.SQL, caseContext(tc), cat); !reflect.DeepEqual(effects, uncached) {
				t.Errorf("%s: %q: answer with a warm memo differs from a fresh one:\n%+v\n%+v", path, tc.SQL, effects, uncached)
			}
			actual := tc
			actual.Access, actual.Reason, actual.Session, actual.CatalogueChange = effects.Access, effects.Reason, effects.Session, effects.CatalogueChange
			if tc.Subject != "" {
				actual.Subject = effects.Subject
			}
			if tc.Chain != "" {
				actual.Chain = effects.ChainString()
			}
			actuals = append(actuals, actual)
			if diffs := catalogueMismatch(tc, effects); len(diffs) > 0 {
				failed = true
				t.Errorf("%s: %s\n  sql: %s\n  %s\n  (subject %q, chain %q, warnings %q)", path, tc.Comment, tc.SQL, strings.Join(diffs, "\n  "),
					effects.Subject, effects.ChainString(), effects.Warnings)
			}
		}
		total += len(cases)
		actualPath := strings.TrimSuffix(path, ".json") + ".actual.json"
		if failed {
			writeActualCases(t, actualPath, actuals)
		} else if err := os.Remove(actualPath); err != nil && !os.IsNotExist(err) {
			t.Errorf("remove stale %s: %v", actualPath, err)
		}
	}
	if total < 100 {
		t.Errorf("only %d catalogue golden cases; expected at least 100", total)
	}

	t.Logf("classified %d cases in %s", total, time.Since(started).Round(time.Millisecond))
	started = time.Now()
	waitStandby(t, ctx, primary, standby)
	t.Logf("the standby caught up in %s", time.Since(started).Round(time.Millisecond))
	started = time.Now()
	checkCasesOnStandby(t, ctx, standby, classifier, cat, tables)
	t.Logf("checked the cases on the standby in %s", time.Since(started).Round(time.Millisecond))
}

func caseContext(tc CatalogueCase) *classify.Context {
	user := tc.User
	if user == "" {
		user = "postgres"
	}
	return &classify.Context{Database: goldenDatabase, User: user, SearchPath: tc.SearchPath,
		SearchPathUnknown: tc.SearchPathUnknown, ParamTypes: tc.ParamTypes}
}

func catalogueMismatch(tc CatalogueCase, effects classify.Effects) []string {
	var diffs []string
	if tc.Access != effects.Access {
		diffs = append(diffs, fmt.Sprintf("access %v, want %v", effects.Access, tc.Access))
	}
	if tc.Reason != effects.Reason {
		diffs = append(diffs, fmt.Sprintf("reason %v, want %v", effects.Reason, tc.Reason))
	}
	if tc.Subject != "" && tc.Subject != effects.Subject {
		diffs = append(diffs, fmt.Sprintf("subject %q, want %q", effects.Subject, tc.Subject))
	}
	if tc.Chain != "" && tc.Chain != effects.ChainString() {
		diffs = append(diffs, fmt.Sprintf("chain %q, want %q", effects.ChainString(), tc.Chain))
	}
	if tc.Session != effects.Session {
		diffs = append(diffs, fmt.Sprintf("session %v, want %v", effects.Session, tc.Session))
	}
	if tc.Assumption != "" && !slices.Contains(effects.Assumptions, tc.Assumption) {
		diffs = append(diffs, fmt.Sprintf("assumptions %q, want %q among them", effects.Assumptions, tc.Assumption))
	}
	if tc.CatalogueChange != effects.CatalogueChange {
		diffs = append(diffs, fmt.Sprintf("catalogue_change %v, want %v", effects.CatalogueChange, tc.CatalogueChange))
	}
	return diffs
}

// setUpGoldenDatabase creates the golden database with the base schema and every case's setup, and
// loads its catalogue.
func setUpGoldenDatabase(t *testing.T, ctx context.Context, primary *cluster.Node, tables map[string][]CatalogueCase) *classify.Catalogue {
	t.Helper()
	admin, err := pgx.Connect(ctx, primary.DatabaseDSN("postgres"))
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, primary.ServerLog())
	}
	defer admin.Close(context.Background())
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+goldenDatabase); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, primary.DatabaseDSN(goldenDatabase))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, script := range GoldenSetup(t, tables) {
		if _, err := conn.PgConn().Exec(ctx, script.SQL).ReadAll(); err != nil {
			t.Fatalf("setup of %s: %v\n%s", script.From, err, script.SQL)
		}
	}
	cat, err := catalog.Load(ctx, conn, goldenDatabase, goldenOverrides)
	if err != nil {
		t.Fatalf("load catalogue: %v", err)
	}
	return cat
}

// SetupScript is one piece of the golden database's setup.
type SetupScript struct {
	From, SQL string
}

// GoldenSetup returns the base schema and every case's setup, in order.
func GoldenSetup(t testing.TB, tables map[string][]CatalogueCase) []SetupScript {
	t.Helper()
	base, err := os.ReadFile(filepath.Join("testdata", "catalogue", "schema.sql"))
	if err != nil {
		t.Fatal(err)
	}
	scripts := []SetupScript{{From: "testdata/catalogue/schema.sql", SQL: string(base)}}
	for _, path := range slices.Sorted(maps.Keys(tables)) {
		for _, tc := range tables[path] {
			if tc.Setup != "" {
				scripts = append(scripts, SetupScript{From: path + ": " + tc.Comment, SQL: tc.Setup})
			}
		}
	}
	return scripts
}

func waitStandby(t *testing.T, ctx context.Context, primary, standby *cluster.Node) {
	t.Helper()
	admin, err := pgx.Connect(ctx, primary.DatabaseDSN(goldenDatabase))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	var lsn string
	if err := admin.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&lsn); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		conn, err := pgx.Connect(ctx, standby.DatabaseDSN(goldenDatabase))
		if err == nil {
			var caughtUp bool
			err = conn.QueryRow(ctx, "SELECT pg_is_in_recovery() AND pg_last_wal_replay_lsn() >= $1::pg_lsn", lsn).Scan(&caughtUp)
			conn.Close(context.Background())
			if err == nil && caughtUp {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("standby did not catch up: %v\n%s", err, standby.ServerLog())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkCasesOnStandby runs the cases on the standby, each in its own session with the case's
// search_path, inside a transaction that is rolled back.
func checkCasesOnStandby(t *testing.T, ctx context.Context, standby *cluster.Node, classifier *classify.Classifier, cat *classify.Catalogue, tables map[string][]CatalogueCase) {
	ran, refused := 0, 0
	for path, cases := range tables {
		for _, tc := range cases {
			expect := tc.Standby
			if expect == "" {
				expect = "skip"
				if tc.Access == classify.Read {
					expect = "ok"
				}
			}
			if expect == "skip" || len(tc.ParamTypes) > 0 {
				continue
			}
			err := runOnStandby(ctx, standby, tc)
			switch expect {
			case "ok":
				ran++
				if err != nil {
					t.Errorf("%s: %s: classified %v but the standby did not run it: %q: %v", path, tc.Comment,
						classifier.ClassifyWith(tc.SQL, caseContext(tc), cat).Reason, tc.SQL, err)
				}
			case "refused":
				refused++
				if !refusedAsWrite(err) {
					t.Errorf("%s: %s: expected the standby to refuse %q as a write, got %v", path, tc.Comment, tc.SQL, err)
				}
			}
		}
	}
	t.Logf("on the standby: %d statements ran, %d were refused as writes, as the tables say", ran, refused)
	if ran < 40 || refused < 15 {
		t.Errorf("too few standby checks: %d ran, %d refused", ran, refused)
	}
}

func runOnStandby(ctx context.Context, standby *cluster.Node, tc CatalogueCase) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgconn.Connect(ctx, standby.DatabaseDSN(goldenDatabase))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	prefix := ""
	if tc.SearchPath != nil {
		quoted := make([]string, len(tc.SearchPath))
		for i, schema := range tc.SearchPath {
			quoted[i] = `"` + strings.ReplaceAll(schema, `"`, `""`) + `"`
		}
		prefix = "SET search_path = " + strings.Join(quoted, ", ") + "; "
	}
	_, err = conn.Exec(ctx, prefix+"BEGIN; "+tc.SQL+"; ROLLBACK").ReadAll()
	return err
}

// refusedAsWrite reports whether err is a standby refusing a write.
func refusedAsWrite(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	return pgErr.Code == "25006" || strings.Contains(pgErr.Message, "recovery") || strings.Contains(pgErr.Message, "read-only")
}

func writeActualCases(t *testing.T, path string, cases []CatalogueCase) {
	t.Helper()
	var out bytes.Buffer
	out.WriteString("[\n")
	for i, tc := range cases {
		var line bytes.Buffer
		encoder := json.NewEncoder(&line)
		encoder.SetEscapeHTML(false)
		if err := encoder.Encode(tc); err != nil {
			t.Fatal(err)
		}
		out.WriteString("  ")
		out.Write(bytes.TrimSuffix(line.Bytes(), []byte("\n")))
		if i < len(cases)-1 {
			out.WriteByte(',')
		}
		out.WriteByte('\n')
	}
	out.WriteString("]\n")
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", path)
}
