package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// psqlNotice is a pgowl NOTICE as psql prints it on stderr.
type psqlNotice struct {
	node, role, detail string
}

var (
	psqlNoticePattern = regexp.MustCompile(`(?m)^NOTICE:  pgowl: ([A-Za-z0-9_-]+) \((primary|standby)\)[^\n]*(?:\nDETAIL:  ([^\n]*))?`)
)

// psqlNotices returns the pgowl NOTICEs in psql's stderr.
func psqlNotices(stderr string) []psqlNotice {
	var out []psqlNotice
	for _, m := range psqlNoticePattern.FindAllStringSubmatch(stderr, -1) {
		out = append(out, psqlNotice{node: m[1], role: m[2], detail: m[3]})
	}
	return out
}

// checkPsqlNotices requires exactly count pgowl NOTICEs in stderr, each with
// the given role and a DETAIL of the documented shape that agrees with the message.
func checkPsqlNotices(t *testing.T, what, stderr string, count int, role string) []psqlNotice {
	t.Helper()
	notices := psqlNotices(stderr)
	if len(notices) != count {
		t.Errorf("%s: psql printed %d pgowl NOTICE(s), want %d; stderr:\n%s", what, len(notices), count, stderr)
	}
	for _, n := range notices {
		if n.role != role {
			t.Errorf("%s: NOTICE names %s (%s), want a %s; stderr:\n%s", what, n.node, n.role, role, stderr)
		}
		m := detailPattern.FindStringSubmatch(n.detail)
		if m == nil {
			t.Errorf("%s: NOTICE DETAIL %q does not start with node=<name> role=<role> reason=<CODE> lag_ms=<n>", what, n.detail)
			continue
		}
		if m[1] != n.node || m[2] != n.role {
			t.Errorf("%s: NOTICE message names %s (%s) but its DETAIL says %q", what, n.node, n.role, n.detail)
		}
	}
	return notices
}

// TestPsql drives pgowl with psql: DDL, writes, reads, a multi-statement
// string and \copy in both directions, checking output, NOTICEs and where
// the nodes say each statement ran.
func TestPsql(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, nil)
	psql := pgBinary(t, "psql")
	run := func(t *testing.T, args ...string) cmdResult {
		t.Helper()
		base := []string{"-X", "-q", "-v", "ON_ERROR_STOP=1", "--no-align", "--tuples-only"}
		res := runCmd(t, 60*time.Second, o.clientEnv(), psql, append(base, args...)...)
		if res.exitCode != 0 {
			t.Fatalf("psql %v exited with %d\nstdout:\n%s\nstderr:\n%s", args, res.exitCode, res.stdout, res.stderr)
		}
		return res
	}
	insertTag := marker("t1-insert")
	selectTag := marker("t1-select")
	multiTag := marker("t1-multi")

	t.Run("create_and_insert_on_primary", func(t *testing.T) {
		resetStats(t, c)
		res := run(t,
			"-c", "DROP TABLE IF EXISTS psql_items",
			"-c", "CREATE TABLE psql_items (id int PRIMARY KEY, name text NOT NULL)",
			"-c", fmt.Sprintf("INSERT /* %s */ INTO psql_items VALUES (1, 'apple'), (2, 'banana')", insertTag))
		if strings.TrimSpace(res.stdout) != "" {
			t.Errorf("stdout = %q, want nothing", res.stdout)
		}
		for _, n := range checkPsqlNotices(t, "DROP, CREATE, INSERT", res.stderr, 3, "primary") {
			if n.node != primaryName(c) {
				t.Errorf("write ran on %s per its NOTICE, want %s", n.node, primaryName(c))
			}
		}
		requireOnPrimary(t, c, "psql INSERT", evidence(t, c, insertTag), 1)
	})
	catchUp(t, c)

	t.Run("select_on_standby", func(t *testing.T) {
		resetStats(t, c)
		res := run(t, "-c", fmt.Sprintf("SELECT /* %s */ name FROM psql_items ORDER BY id", selectTag))
		if got, want := res.stdout, "apple\nbanana\n"; got != want {
			t.Errorf("stdout = %q, want %q", got, want)
		}
		notices := checkPsqlNotices(t, "SELECT", res.stderr, 1, "standby")
		ran := requireOnOneStandby(t, c, "psql SELECT", evidence(t, c, selectTag))
		if len(notices) == 1 && ran != "" && notices[0].node != ran {
			t.Errorf("NOTICE says the SELECT ran on %s, pg_stat_statements says %s", notices[0].node, ran)
		}
	})

	t.Run("multi_statement_string", func(t *testing.T) {
		// One Query message, one routed unit: it writes, so all of it runs on
		// the primary, and its SELECTs see the row its INSERT added.
		sql := fmt.Sprintf("INSERT INTO psql_items VALUES (3, 'cherry'); SELECT /* %s */ count(*) FROM psql_items; SELECT name FROM psql_items WHERE id = 3", multiTag)
		resetStats(t, c)
		res := run(t, "-c", sql)
		if got, want := res.stdout, "3\ncherry\n"; got != want {
			t.Errorf("stdout = %q, want %q", got, want)
		}
		checkPsqlNotices(t, "multi-statement string", res.stderr, 1, "primary")
		requireOnPrimary(t, c, "SELECT inside the multi-statement string", evidence(t, c, multiTag), 1)
	})

	t.Run("error_stops_psql", func(t *testing.T) {
		base := []string{"-X", "-q", "-v", "ON_ERROR_STOP=1", "--no-align", "--tuples-only"}
		res := runCmd(t, 60*time.Second, o.clientEnv(), psql, append(base, "-c", "SELECT 1/0", "-c", "SELECT 'not reached'")...)
		if res.exitCode == 0 {
			t.Errorf("psql exited 0 after a division by zero")
		}
		if !strings.Contains(res.stderr, "ERROR:  division by zero") {
			t.Errorf("stderr lacks the server's error:\n%s", res.stderr)
		}
		if strings.Contains(res.stdout, "not reached") {
			t.Errorf("psql ran the statement after the error: %q", res.stdout)
		}
	})

	t.Run("copy_in_and_out", func(t *testing.T) {
		dir := t.TempDir()
		in := filepath.Join(dir, "in.csv")
		out := filepath.Join(dir, "out.csv")
		var b strings.Builder
		for id := 10; id < 60; id++ {
			fmt.Fprintf(&b, "%d,\"name %d, with a comma\"\n", id, id)
		}
		if err := os.WriteFile(in, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		res := run(t, "-c", fmt.Sprintf(`\copy psql_items FROM '%s' WITH (FORMAT csv)`, in))
		checkPsqlNotices(t, `\copy FROM`, res.stderr, 1, "primary")
		if got := primaryInt(t, c, "SELECT count(*) FROM psql_items WHERE id >= 10"); got != 50 {
			t.Fatalf("after \\copy FROM the primary has %d of the 50 rows", got)
		}
		catchUp(t, c)
		res = run(t, "-c", fmt.Sprintf(`\copy (SELECT id, name FROM psql_items WHERE id >= 10 ORDER BY id) TO '%s' WITH (FORMAT csv)`, out))
		checkPsqlNotices(t, `\copy TO`, res.stderr, 1, "standby")
		got, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != b.String() {
			t.Errorf("\\copy TO wrote %d bytes that differ from the %d bytes copied in;\ngot:\n%s", len(got), b.Len(), got)
		}
	})
}
