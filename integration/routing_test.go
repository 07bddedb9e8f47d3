package integration

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
)

// execModes are the pgx protocols the routing tests run under, with the
// number of NOTICEs one execution of a not yet prepared statement gets: one
// per routed unit that runs something.
var execModes = []struct {
	name  string
	mode  pgx.QueryExecMode
	units int
}{
	{"simple_protocol", pgx.QueryExecModeSimpleProtocol, 1},
	// Parse/Describe/Sync, then Bind/Execute/Sync: the first unit runs
	// nothing, so it gets no NOTICE (a NOTICE names where a statement ran).
	{"cache_statement", pgx.QueryExecModeCacheStatement, 1},
	{"describe_exec", pgx.QueryExecModeDescribeExec, 1},
	{"exec", pgx.QueryExecModeExec, 1}, // Parse/Bind/Describe/Execute/Sync
}

// TestRoutingEvidence runs a read and a write under each pgx protocol and
// checks, from the nodes' own pg_stat_statements, that the read ran on
// exactly one standby and the write on the primary only, and that the
// NOTICEs say the same, one per routed unit.
func TestRoutingEvidence(t *testing.T) {
	c := sharedClusterFor(t)
	// read_your_writes off: the read after the write checks where a read
	// runs (pg_stat_statements), not read your writes (read_your_writes_test.go).
	o := startOwl(t, c, readYourWritesOff)
	createTable(t, c, "t2_items", "CREATE TABLE t2_items (id serial PRIMARY KEY, v text NOT NULL); INSERT INTO t2_items (v) SELECT 'seed ' || g FROM generate_series(1, 25) g")

	for _, m := range execModes {
		t.Run(m.name, func(t *testing.T) {
			conn := o.connect(t, withMode(m.mode))
			ctx := timeoutCtx(t, statementTimeout)
			resetStats(t, c)

			// A read runs on exactly one standby, the one its NOTICE names.
			readTag := marker("t2-read")
			var count int64
			if err := conn.QueryRow(ctx, fmt.Sprintf("SELECT /* %s */ count(*) FROM t2_items WHERE id > $1", readTag), 0).Scan(&count); err != nil {
				t.Fatalf("read: %v", err)
			}
			if count < 25 {
				t.Errorf("read counted %d rows, want at least the 25 seeded", count)
			}
			notices := conn.routes(t)
			if len(notices) != m.units {
				t.Errorf("read: got %d pgowl NOTICEs %v, want %d (one per routed unit)", len(notices), notices, m.units)
			}
			for _, n := range notices {
				wantRoute(t, "read", n, "standby", "READ_ONLY")
			}
			ran := requireOnOneStandby(t, c, "read", evidence(t, c, readTag))
			if len(notices) > 0 && ran != "" && notices[len(notices)-1].Node != ran {
				t.Errorf("the read's NOTICE names %s, pg_stat_statements says it ran on %s", notices[len(notices)-1].Node, ran)
			}

			// A write runs on the primary only.
			writeTag := marker("t2-write")
			var id int64
			if err := conn.QueryRow(ctx, fmt.Sprintf("INSERT /* %s */ INTO t2_items (v) VALUES ($1) RETURNING id", writeTag), "written by "+m.name).Scan(&id); err != nil {
				t.Fatalf("write: %v", err)
			}
			notices = conn.routes(t)
			if len(notices) != m.units {
				t.Errorf("write: got %d pgowl NOTICEs %v, want %d (one per routed unit)", len(notices), notices, m.units)
			}
			for _, n := range notices {
				wantRoute(t, "write", n, "primary", "WRITE")
				if n.Node != primaryName(c) {
					t.Errorf("write: NOTICE names %s, want %s", n.Node, primaryName(c))
				}
			}
			requireOnPrimary(t, c, "write", evidence(t, c, writeTag), 1)
			if got := primaryInt(t, c, "SELECT count(*) FROM t2_items WHERE id = $1 AND v = $2", id, "written by "+m.name); got != 1 {
				t.Errorf("the primary does not hold the row the write returned (id %d)", id)
			}

			// Executing the same read again runs it once: one NOTICE in every
			// mode (describe_exec describes again first, which runs nothing).
			again := 1
			if err := conn.QueryRow(ctx, fmt.Sprintf("SELECT /* %s */ count(*) FROM t2_items WHERE id > $1", readTag), 0).Scan(&count); err != nil {
				t.Fatalf("read again: %v", err)
			}
			notices = conn.routes(t)
			if len(notices) != again {
				t.Errorf("read again: got %d pgowl NOTICEs %v, want %d", len(notices), notices, again)
			}
			requireOnStandbys(t, c, "read, twice", evidence(t, c, readTag), 2)
		})
	}
}

// TestPreparedStatementsAcrossNodes prepares a read and a write on one
// connection and executes them interleaved. The read was prepared on the
// primary (inside a write transaction) and the write on a standby (inside a
// read-only transaction), so every execution needs pgowl to prepare the
// statement again on the node the execution is routed to.
func TestPreparedStatementsAcrossNodes(t *testing.T) {
	c := sharedClusterFor(t)
	// read_your_writes off: this test reads on a standby right after a write in
	// the same session to check prepared statements on both kinds of node, not read your writes (read_your_writes_test.go).
	o := startOwl(t, c, readYourWritesOff)
	createTable(t, c, "t3_seed", "CREATE TABLE t3_seed (id int PRIMARY KEY, v text NOT NULL); INSERT INTO t3_seed SELECT g, 'value ' || g FROM generate_series(1, 5) g")
	createTable(t, c, "t3_log", "CREATE TABLE t3_log (n int NOT NULL, note text)")
	conn := o.connect(t, withMode(pgx.QueryExecModeCacheStatement))
	ctx := timeoutCtx(t, statementTimeout)
	readTag, writeTag := marker("t3-read"), marker("t3-write")
	readSQL := fmt.Sprintf("SELECT /* %s */ v FROM t3_seed WHERE id = $1", readTag)
	writeSQL := fmt.Sprintf("INSERT /* %s */ INTO t3_log (n, note) VALUES ($1, $2) RETURNING n * 10", writeTag)

	// Prepare the read on the primary: inside a transaction that wrote.
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO t3_log (n, note) VALUES (0, 'opens the transaction on the primary')"); err != nil {
		t.Fatal(err)
	}
	conn.routes(t)
	if _, err := tx.Prepare(ctx, "t3_read", readSQL); err != nil {
		t.Fatalf("prepare the read: %v", err)
	}
	for _, n := range conn.routes(t) {
		wantRoute(t, "prepare the read inside a write transaction", n, "primary", "IN_TRANSACTION")
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	// Prepare the write on a standby: inside a read-only transaction.
	tx, err = conn.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	conn.routes(t)
	if _, err := tx.Prepare(ctx, "t3_write", writeSQL); err != nil {
		t.Fatalf("prepare the write inside a read-only transaction: %v", err)
	}
	for _, n := range conn.routes(t) {
		wantRoute(t, "prepare the write inside a read-only transaction", n, "standby", "IN_TRANSACTION")
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	conn.routes(t)
	resetStats(t, c)

	const rounds = 20
	for i := 1; i <= rounds; i++ {
		id := i%5 + 1
		var v string
		if err := conn.QueryRow(ctx, "t3_read", id).Scan(&v); err != nil {
			t.Fatalf("round %d: execute the read: %v", i, err)
		}
		if want := fmt.Sprintf("value %d", id); v != want {
			t.Errorf("round %d: read returned %q, want %q", i, v, want)
		}
		wantRoute(t, fmt.Sprintf("round %d read", i), conn.oneRoute(t, "execute prepared read"), "standby", "READ_ONLY")

		var got int64
		if err := conn.QueryRow(ctx, "t3_write", i, fmt.Sprintf("round %d", i)).Scan(&got); err != nil {
			t.Fatalf("round %d: execute the write: %v", i, err)
		}
		if got != int64(i*10) {
			t.Errorf("round %d: write returned %d, want %d", i, got, i*10)
		}
		wantRoute(t, fmt.Sprintf("round %d write", i), conn.oneRoute(t, "execute prepared write"), "primary", "WRITE")
	}
	requireOnStandbys(t, c, "prepared read", evidence(t, c, readTag), rounds)
	requireOnPrimary(t, c, "prepared write", evidence(t, c, writeTag), rounds)
	if got := primaryInt(t, c, "SELECT count(*) FROM t3_log WHERE n BETWEEN 1 AND $1", rounds); got != rounds {
		t.Errorf("the primary holds %d of the %d rows written", got, rounds)
	}
}

// TestBatch sends pipelined pgx batches: one of reads only, which runs on a
// standby, and one that writes and then reads its own row, which must run
// entirely on the primary.
func TestBatch(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, nil)
	createTable(t, c, "t4_items", "CREATE TABLE t4_items (id int PRIMARY KEY, v text NOT NULL); INSERT INTO t4_items SELECT g, 'item ' || g FROM generate_series(1, 10) g")
	batchIndex := 0

	for _, m := range []struct {
		name string
		mode pgx.QueryExecMode
	}{
		{"cache_statement", pgx.QueryExecModeCacheStatement},
		{"exec", pgx.QueryExecModeExec},
		{"simple_protocol", pgx.QueryExecModeSimpleProtocol},
	} {
		batchIndex++
		t.Run(m.name, func(t *testing.T) {
			conn := o.connect(t, withMode(m.mode))
			ctx := timeoutCtx(t, statementTimeout)

			tag := marker("t4-reads")
			resetStats(t, c)
			b := &pgx.Batch{}
			var count, sum int64
			var name string
			b.Queue(fmt.Sprintf("SELECT /* %s a */ count(*) FROM t4_items", tag)).QueryRow(func(r pgx.Row) error { return r.Scan(&count) })
			b.Queue(fmt.Sprintf("SELECT /* %s b */ v FROM t4_items WHERE id = $1", tag), 7).QueryRow(func(r pgx.Row) error { return r.Scan(&name) })
			b.Queue(fmt.Sprintf("SELECT /* %s c */ sum(id) FROM t4_items WHERE id <= $1", tag), 10).QueryRow(func(r pgx.Row) error { return r.Scan(&sum) })
			if err := conn.SendBatch(ctx, b).Close(); err != nil {
				t.Fatalf("read batch: %v", err)
			}
			if count < 10 || name != "item 7" || sum != 55 {
				t.Errorf("read batch returned count=%d name=%q sum=%d, want count>=10 name=\"item 7\" sum=55", count, name, sum)
			}
			notices := conn.routes(t)
			if len(notices) == 0 {
				t.Errorf("read batch: no pgowl NOTICE")
			}
			for _, n := range notices {
				wantRoute(t, "read batch", n, "standby", "READ_ONLY")
			}
			requireOnStandbys(t, c, "read batch", evidence(t, c, tag), 3)

			// A batch that writes runs on the primary as one implicit
			// transaction: its read sees the row its write added.
			tag = marker("t4-write")
			resetStats(t, c)
			id := 100 + batchIndex
			b = &pgx.Batch{}
			var inserted int64
			var seen string
			b.Queue(fmt.Sprintf("INSERT /* %s a */ INTO t4_items VALUES ($1, $2) RETURNING id", tag), id, "new "+m.name).QueryRow(func(r pgx.Row) error { return r.Scan(&inserted) })
			b.Queue(fmt.Sprintf("SELECT /* %s b */ v FROM t4_items WHERE id = $1", tag), id).QueryRow(func(r pgx.Row) error { return r.Scan(&seen) })
			b.Queue(fmt.Sprintf("SELECT /* %s c */ count(*) FROM t4_items", tag)).QueryRow(func(r pgx.Row) error { return r.Scan(&count) })
			if err := conn.SendBatch(ctx, b).Close(); err != nil {
				t.Fatalf("write batch: %v", err)
			}
			if inserted != int64(id) || seen != "new "+m.name || count < 11 {
				t.Errorf("write batch returned id=%d v=%q count=%d, want id=%d v=%q count>=11", inserted, seen, count, id, "new "+m.name)
			}
			notices = conn.routes(t)
			if len(notices) == 0 {
				t.Errorf("write batch: no pgowl NOTICE")
			}
			for _, n := range notices {
				wantRoute(t, "write batch", n, "primary", "WRITE")
			}
			requireOnPrimary(t, c, "write batch", evidence(t, c, tag), 3)
			catchUp(t, c)
		})
	}
}

// TestTransactions checks that a transaction stays on its node, that
// BEGIN READ ONLY runs on a standby, and that a failed transaction can be
// rolled back and the connection used again.
func TestTransactions(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, nil)
	createTable(t, c, "t5_items", "CREATE TABLE t5_items (id int PRIMARY KEY, v text NOT NULL)")

	t.Run("write_transaction_reads_its_own_row", func(t *testing.T) {
		conn := o.connect(t, nil)
		ctx := timeoutCtx(t, statementTimeout)
		tag := marker("t5-read-in-tx")
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO t5_items VALUES (1, 'uncommitted')"); err != nil {
			t.Fatal(err)
		}
		var writeNode string
		for _, n := range conn.routes(t) {
			if n.Reason == "WRITE" || n.Reason == "IN_TRANSACTION" {
				writeNode = n.Node
			}
			if n.Role != "primary" {
				t.Errorf("BEGIN/INSERT: NOTICE %v, want role=primary", n)
			}
		}
		resetStats(t, c)
		var v string
		if err := tx.QueryRow(ctx, fmt.Sprintf("SELECT /* %s */ v FROM t5_items WHERE id = $1", tag), 1).Scan(&v); err != nil {
			t.Fatalf("read inside the transaction: %v", err)
		}
		if v != "uncommitted" {
			t.Errorf("read inside the transaction returned %q, want the uncommitted row", v)
		}
		notices := conn.routes(t)
		if len(notices) == 0 {
			t.Errorf("read inside the transaction: no pgowl NOTICE")
		}
		for _, n := range notices {
			wantRoute(t, "read inside the transaction", n, "primary", "IN_TRANSACTION")
			if writeNode != "" && n.Node != writeNode {
				t.Errorf("read inside the transaction ran on %s, the transaction started on %s", n.Node, writeNode)
			}
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatalf("COMMIT: %v", err)
		}
		// PostgreSQL records an extended-protocol statement run inside a
		// transaction block when its portal closes, at the latest at COMMIT.
		requireOnPrimary(t, c, "read inside a write transaction", evidence(t, c, tag), 1)
		if got := primaryInt(t, c, "SELECT count(*) FROM t5_items WHERE id = 1"); got != 1 {
			t.Errorf("after COMMIT the primary has %d rows with id 1, want 1", got)
		}
	})

	catchUp(t, c)

	t.Run("read_only_transaction_on_standby", func(t *testing.T) {
		conn := o.connect(t, nil)
		ctx := timeoutCtx(t, statementTimeout)
		tag := marker("t5-read-only")
		resetStats(t, c)
		tx, err := conn.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
		if err != nil {
			t.Fatal(err)
		}
		var v string
		if err := tx.QueryRow(ctx, fmt.Sprintf("SELECT /* %s */ v FROM t5_items WHERE id = $1", tag), 1).Scan(&v); err != nil {
			t.Fatalf("read inside BEGIN READ ONLY: %v", err)
		}
		if v != "uncommitted" {
			t.Errorf("read returned %q, want the committed row", v)
		}
		notices := conn.routes(t)
		if len(notices) == 0 {
			t.Errorf("BEGIN READ ONLY and read: no pgowl NOTICE")
		}
		node := ""
		for _, n := range notices {
			if n.Role != "standby" {
				t.Errorf("BEGIN READ ONLY transaction: NOTICE %v, want role=standby", n)
			}
			if node != "" && n.Node != node {
				t.Errorf("BEGIN READ ONLY transaction moved from %s to %s", node, n.Node)
			}
			node = n.Node
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatalf("COMMIT: %v", err)
		}
		for _, n := range conn.routes(t) {
			wantRoute(t, "COMMIT of BEGIN READ ONLY", n, "standby", "")
		}
		ran := requireOnOneStandby(t, c, "read inside BEGIN READ ONLY", evidence(t, c, tag))
		if ran != "" && node != "" && ran != node {
			t.Errorf("NOTICEs name %s, pg_stat_statements says the read ran on %s", node, ran)
		}

		// A write inside a read-only transaction must fail there, not move to the primary.
		tx, err = conn.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
		if err != nil {
			t.Fatal(err)
		}
		_, err = tx.Exec(ctx, "INSERT INTO t5_items VALUES (99, 'must not be written')")
		wantSQLState(t, "INSERT inside BEGIN READ ONLY", err, "25006")
		if err := tx.Rollback(ctx); err != nil {
			t.Errorf("ROLLBACK: %v", err)
		}
		if got := primaryInt(t, c, "SELECT count(*) FROM t5_items WHERE id = 99"); got != 0 {
			t.Errorf("the write inside BEGIN READ ONLY reached the primary")
		}
	})

	t.Run("failed_transaction_rolls_back", func(t *testing.T) {
		conn := o.connect(t, nil)
		ctx := timeoutCtx(t, statementTimeout)
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO t5_items VALUES (2, 'rolled back')"); err != nil {
			t.Fatal(err)
		}
		_, err = tx.Exec(ctx, "SELECT 1 / (SELECT count(*) - count(*) FROM t5_items)")
		wantSQLState(t, "division by zero inside the transaction", err, "22012")
		_, err = tx.Exec(ctx, "SELECT 1")
		wantSQLState(t, "statement after the error inside the transaction", err, "25P02")
		if err := tx.Rollback(ctx); err != nil {
			t.Fatalf("ROLLBACK after the error: %v", err)
		}
		if got := queryInt(t, conn, "statement after ROLLBACK", "SELECT 40 + $1::int", 2); got != 42 {
			t.Errorf("statement after ROLLBACK returned %d, want 42", got)
		}
		if _, err := conn.Exec(ctx, "INSERT INTO t5_items VALUES (3, 'after rollback')"); err != nil {
			t.Errorf("write after ROLLBACK: %v", err)
		}
		if got := primaryInt(t, c, "SELECT count(*) FROM t5_items WHERE id IN (2, 3)"); got != 1 {
			t.Errorf("the primary has %d of rows 2 (rolled back) and 3 (written after), want only row 3", got)
		}
	})
}

// TestBatchErrorMidway sends batches whose second query fails: the error is
// reported for that query, the rest of the batch does not run, nothing of a
// failed write batch is kept, and the connection keeps working.
func TestBatchErrorMidway(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, nil)
	createTable(t, c, "t6_items", "CREATE TABLE t6_items (id int PRIMARY KEY)")

	for index, m := range []struct {
		name string
		mode pgx.QueryExecMode
	}{
		{"cache_statement", pgx.QueryExecModeCacheStatement},
		{"exec", pgx.QueryExecModeExec},
		{"simple_protocol", pgx.QueryExecModeSimpleProtocol},
	} {
		t.Run(m.name, func(t *testing.T) {
			conn := o.connect(t, withMode(m.mode))
			ctx := timeoutCtx(t, statementTimeout)
			for _, write := range []bool{false, true} {
				first := "SELECT 1"
				third := "SELECT 3"
				base := 1000 * (index + 1)
				if write {
					first = fmt.Sprintf("INSERT INTO t6_items VALUES (%d)", base)
					third = fmt.Sprintf("INSERT INTO t6_items VALUES (%d)", base+1)
				}
				b := &pgx.Batch{}
				b.Queue(first)
				b.Queue("SELECT 10 / (SELECT count(*) - count(*) FROM t6_items)")
				b.Queue(third)
				br := conn.SendBatch(ctx, b)
				if _, err := br.Exec(); err != nil {
					t.Errorf("write=%t: first query: %v", write, err)
				}
				_, err := br.Exec()
				wantSQLState(t, fmt.Sprintf("write=%t: second query", write), err, "22012")
				if _, err := br.Exec(); err == nil {
					t.Errorf("write=%t: third query succeeded after the batch failed", write)
				}
				if err := br.Close(); err == nil {
					t.Errorf("write=%t: closing the failed batch reported no error", write)
				}
				conn.routes(t)
				if write {
					if got := primaryInt(t, c, "SELECT count(*) FROM t6_items WHERE id IN ($1, $2)", base, base+1); got != 0 {
						t.Errorf("the failed write batch left %d row(s) on the primary, want 0", got)
					}
				}
				if got := queryInt(t, conn, "after the failed batch", "SELECT $1::int + 1", 41); got != 42 {
					t.Errorf("write=%t: query after the failed batch returned %d", write, got)
				}
				// An argument, so that the write goes in the subtest's mode: pgx sends an
				// Exec without arguments as a simple Query whatever the mode.
				if _, err := conn.Exec(ctx, "INSERT INTO t6_items VALUES ($1)", base+2+boolInt(write)); err != nil {
					t.Errorf("write=%t: write after the failed batch: %v", write, err)
				}
			}
		})
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
