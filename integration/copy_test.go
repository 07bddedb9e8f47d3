package integration

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// lineCounter counts the lines and bytes written to it without keeping them.
type lineCounter struct {
	lines, bytes int64
}

func (w *lineCounter) Write(p []byte) (int, error) {
	w.lines += int64(bytes.Count(p, []byte{'\n'}))
	w.bytes += int64(len(p))
	return len(p), nil
}

// TestCopy copies rows in with pgx's CopyFrom (a write, on the primary), out
// with COPY TO STDOUT (a read, on a standby), streams a large COPY TO, and
// checks that a COPY FROM that fails leaves the connection usable.
func TestCopy(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, nil)
	createTable(t, c, "t7_rows", "CREATE TABLE t7_rows (id int PRIMARY KEY, v text NOT NULL)")
	conn := o.connect(t, nil)
	ctx := timeoutCtx(t, 2*time.Minute)
	const n = 10000

	t.Run("copy_from", func(t *testing.T) {
		rows := make([][]any, n)
		for i := range rows {
			rows[i] = []any{i + 1, fmt.Sprintf("row %d\twith a tab", i+1)}
		}
		copied, err := conn.CopyFrom(ctx, pgx.Identifier{"t7_rows"}, []string{"id", "v"}, pgx.CopyFromRows(rows))
		if err != nil {
			t.Fatalf("CopyFrom: %v", err)
		}
		if copied != n {
			t.Errorf("CopyFrom reported %d rows, want %d", copied, n)
		}
		notices := conn.routes(t)
		if len(notices) == 0 || notices[len(notices)-1].Role != "primary" {
			t.Errorf("CopyFrom: the COPY's NOTICE should name the primary; NOTICEs: %v", notices)
		}
		if got := primaryInt(t, c, "SELECT count(*) FROM t7_rows"); got != n {
			t.Errorf("the primary holds %d rows, want %d", got, n)
		}
		if got := primaryInt(t, c, "SELECT coalesce(sum(id), 0) FROM t7_rows WHERE v = 'row ' || id || E'\\twith a tab'"); got != n*(n+1)/2 {
			t.Errorf("the primary's rows do not match what was copied (sum of matching ids %d)", got)
		}
	})
	catchUp(t, c)

	t.Run("copy_to_stdout", func(t *testing.T) {
		resetStats(t, c)
		tag := marker("t7-copy-out")
		var out bytes.Buffer
		result, err := conn.PgConn().CopyTo(ctx, &out, fmt.Sprintf("COPY /* %s */ t7_rows TO STDOUT", tag))
		if err != nil {
			t.Fatalf("COPY TO STDOUT: %v", err)
		}
		if result.RowsAffected() != n {
			t.Errorf("COPY TO STDOUT reported %d rows, want %d", result.RowsAffected(), n)
		}
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		if len(lines) != n {
			t.Fatalf("COPY TO STDOUT wrote %d lines, want %d", len(lines), n)
		}
		var sum int64
		for _, line := range lines {
			id, rest, _ := strings.Cut(line, "\t")
			v, err := strconv.ParseInt(id, 10, 64)
			if err != nil || rest != "row "+id+`\twith a tab` {
				t.Fatalf("unexpected COPY line %q", line)
			}
			sum += v
		}
		if sum != n*(n+1)/2 {
			t.Errorf("COPY TO STDOUT ids sum to %d, want %d", sum, n*(n+1)/2)
		}
		r := conn.oneRoute(t, "COPY TO STDOUT")
		wantRoute(t, "COPY TO STDOUT", r, "standby", "READ_ONLY")
		ran := requireOnOneStandby(t, c, "COPY TO STDOUT", evidence(t, c, tag))
		if ran != "" && r.Node != ran {
			t.Errorf("NOTICE names %s, pg_stat_statements says %s", r.Node, ran)
		}
	})

	t.Run("large_copy_to_streams", func(t *testing.T) {
		const big = 200000
		const width = 100
		var want int64
		for g := 1; g <= big; g++ {
			want += int64(len(strconv.Itoa(g)) + 1 + width + 1)
		}
		w := &lineCounter{}
		began := time.Now()
		result, err := conn.PgConn().CopyTo(ctx, w, fmt.Sprintf("COPY (SELECT g, repeat('x', %d) FROM generate_series(1, %d) g) TO STDOUT", width, big))
		if err != nil {
			t.Fatalf("large COPY TO STDOUT: %v", err)
		}
		t.Logf("streamed %d lines, %d bytes in %s", w.lines, w.bytes, time.Since(began).Round(time.Millisecond))
		if result.RowsAffected() != big || w.lines != big || w.bytes != want {
			t.Errorf("large COPY TO: %d rows reported, %d lines and %d bytes received; want %d rows, %d bytes", result.RowsAffected(), w.lines, w.bytes, big, want)
		}
		conn.routes(t)
		if got := queryInt(t, conn, "after the large COPY", "SELECT count(*) FROM t7_rows"); got != n {
			t.Errorf("after the large COPY the table has %d rows, want %d", got, n)
		}
	})

	t.Run("failed_copy_from_keeps_connection", func(t *testing.T) {
		_, err := conn.PgConn().CopyFrom(ctx, strings.NewReader("20001\tok\nnot-a-number\tbad\n"), "COPY t7_rows (id, v) FROM STDIN")
		wantSQLState(t, "COPY FROM with a bad row", err, "22P02")
		if got := primaryInt(t, c, "SELECT count(*) FROM t7_rows WHERE id = 20001"); got != 0 {
			t.Errorf("the failed COPY left its good row behind")
		}
		if got := queryInt(t, conn, "after the failed COPY", "SELECT $1::int * 2", 21); got != 42 {
			t.Errorf("query after the failed COPY returned %d", got)
		}
	})
}

// slowRows is a CopyFromSource of rows (n) counting up from 1, with a pause
// every pauseEvery rows; it counts the rows the client asked for.
type slowRows struct {
	n, max, pauseEvery int
	pause              time.Duration
}

func (s *slowRows) Next() bool {
	if s.n >= s.max {
		return false
	}
	s.n++
	if s.n%s.pauseEvery == 0 {
		time.Sleep(s.pause)
	}
	return true
}
func (s *slowRows) Values() ([]any, error) { return []any{s.n}, nil }
func (s *slowRows) Err() error             { return nil }

// TestCopyFromFailsMidwayReachesClientAtOnce copies rows into a table whose
// CHECK refuses row 100, from a client that keeps producing rows for a
// while (up to 3000 pauses of 2 ms). The node fails the COPY at row 100;
// directly, the client learns it while still sending and stops. Through
// pgowl it must learn it as early, not after it has sent everything: the
// test counts the rows the client produced, against the node directly and
// through pgowl.
func TestCopyFromFailsMidwayReachesClientAtOnce(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, nil)
	createTable(t, c, "t_copy_midway", "CREATE TABLE t_copy_midway (n int CHECK (n < 100))")
	const max, pauseEvery = 3_000_000, 1000
	run := func(name string, conn *pgx.Conn) int {
		t.Helper()
		ctx := timeoutCtx(t, 2*time.Minute)
		src := &slowRows{max: max, pauseEvery: pauseEvery, pause: 2 * time.Millisecond}
		_, err := conn.CopyFrom(ctx, pgx.Identifier{"t_copy_midway"}, []string{"n"}, src)
		if rvSQLState(err) != "23514" {
			t.Fatalf("%s: CopyFrom: %v, want 23514 (check_violation)", name, err)
		}
		var one int
		if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
			t.Errorf("%s: the connection after the failed COPY: %v", name, err)
		}
		return src.n
	}
	direct, err := pgx.Connect(timeoutCtx(t, statementTimeout), c.Nodes[0].DSN(appUser, appPassword, appDatabase))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close(timeoutCtx(t, statementTimeout))
	directRows := run("directly", direct)
	viaOwl := run("through pgowl", o.connect(t, nil).Conn)
	t.Logf("rows the client produced before it learned of the failure: directly %d, through pgowl %d (of at most %d)", directRows, viaOwl, max)
	if directRows >= max {
		t.Fatalf("directly, the client sent all %d rows before the failure reached it: the test cannot tell", max)
	}
	if viaOwl >= max {
		t.Errorf("through pgowl the client sent all %d rows before it learned that the COPY failed at row 100 (directly: after %d rows)", max, directRows)
	}
}
