package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/integration/owltest"
	"github.com/pgowl/pgowl/internal/cluster"
)

// The tests of this file check transaction integrity through pgowl: every
// observation is compared with what PostgreSQL does for a client connected
// directly to the primary.

// rtDirect connects to the shared cluster's primary directly as the app user.
func rtDirect(t *testing.T, c *cluster.Cluster) *client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.Nodes[0].DSN(appUser, appPassword, appDatabase))
	if err != nil {
		t.Fatalf("connect to the primary directly: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn.Close(ctx)
	})
	return &client{Conn: conn, notices: &noticeLog{}}
}

// rtTargets returns the direct connection and the pgowl one, named.
func rtTargets(t *testing.T, c *cluster.Cluster, o *owl) []struct {
	name string
	conn func(t *testing.T) *client
} {
	return []struct {
		name string
		conn func(t *testing.T) *client
	}{
		{"direct", func(t *testing.T) *client { return rtDirect(t, c) }},
		{"pgowl", func(t *testing.T) *client { return o.connect(t, nil) }},
	}
}

func rtExec(t *testing.T, conn *client, sqls ...string) {
	t.Helper()
	ctx := timeoutCtx(t, statementTimeout)
	for _, sql := range sqls {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
}

func rtShow(t *testing.T, conn *client, name string) string {
	t.Helper()
	ctx := timeoutCtx(t, statementTimeout)
	var v string
	if err := conn.QueryRow(ctx, "SHOW "+name, pgx.QueryExecModeSimpleProtocol).Scan(&v); err != nil {
		t.Fatalf("SHOW %s: %v", name, err)
	}
	return v
}

// TestTxSetAcrossChainAndSavepoint: a SET made inside a transaction
// takes effect when that transaction commits, and is undone when it (or the
// savepoint it followed) rolls back. pgowl decides from the tag of the unit
// that returns the session to idle (afterUnit/relay's u.committed), so
// COMMIT AND CHAIN followed by ROLLBACK forgets a SET that PostgreSQL kept,
// and ROLLBACK AND CHAIN or ROLLBACK TO SAVEPOINT followed by COMMIT keeps a
// SET that PostgreSQL undid. The session then shows different values on its
// nodes, and (first case) the backend goes back to the pool recorded as
// having default settings while it carries the SET: another session gets it.
func TestTxSetAcrossChainAndSavepoint(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, nil)

	cases := []struct {
		name  string
		stmts []string
		want  string // work_mem afterwards, as PostgreSQL reports it directly
	}{
		{"commit_and_chain_then_rollback",
			[]string{"BEGIN", "SET work_mem = '1234kB'", "COMMIT AND CHAIN", "ROLLBACK"}, "1234kB"},
		{"rollback_and_chain_then_commit",
			[]string{"BEGIN", "SET work_mem = '2345kB'", "ROLLBACK AND CHAIN", "COMMIT"}, "4MB"},
		{"rollback_to_savepoint_then_commit",
			[]string{"BEGIN", "SAVEPOINT s", "SET work_mem = '3456kB'", "ROLLBACK TO SAVEPOINT s", "COMMIT"}, "4MB"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, target := range rtTargets(t, c, o) {
				conn := target.conn(t)
				rtExec(t, conn, tc.stmts...)
				// Several reads: through pgowl they spread over the nodes.
				var got []string
				for i := 0; i < 6; i++ {
					got = append(got, rtShow(t, conn, "work_mem"))
				}
				for _, v := range got {
					if v != tc.want {
						t.Errorf("%s: %s, then SHOW work_mem gave %v; PostgreSQL's answer is %s every time",
							target.name, strings.Join(tc.stmts, "; "), got, tc.want)
						break
					}
				}
			}
		})
	}
}

// TestTxChainedSetLeaksToOtherSession: with one backend connection,
// session A runs BEGIN; SET work_mem; COMMIT AND CHAIN; ROLLBACK. The SET
// was committed and stays on the backend, but pgowl forgot it, so the
// backend is pooled as if it had default settings and session B, which never
// set anything, runs with A's work_mem.
func TestTxChainedSetLeaksToOtherSession(t *testing.T) {
	o := rvStartOneBackend(t, nil)
	a := o.connect(t, nil)
	b := o.connect(t, nil)
	rtExec(t, a, "BEGIN", "SET work_mem = '4321kB'", "COMMIT AND CHAIN", "ROLLBACK")
	if got := rtShow(t, a, "work_mem"); got != "4321kB" {
		t.Errorf("session A: SHOW work_mem = %s, want 4321kB (its committed SET)", got)
	}
	if got := rtShow(t, b, "work_mem"); got != "4MB" {
		t.Errorf("session B, which set nothing: SHOW work_mem = %s, want the default 4MB (session A's SET leaked through the shared backend)", got)
	}
}

// TestTxFlushReadThenWrite: an extended-protocol pipeline that reads,
// flushes (H) to get the read's rows, then writes and syncs is one implicit
// transaction in PostgreSQL and works on the primary. pgowl routes the part
// before Flush alone (runBatch(ctx, false) on 'H'): a read goes to a standby,
// the open batch held the session there, and the write failed with 25006.
// Now a part that only read and left no portal is ended on the standby with
// a Sync the client does not see, and the write goes to the primary.
func TestTxFlushReadThenWrite(t *testing.T) {

	c := sharedClusterFor(t)
	o := startOwl(t, c, nil)
	createTable(t, c, "t_rt_flush", "CREATE TABLE t_rt_flush (id int PRIMARY KEY, src text NOT NULL)")
	for i, target := range rtTargets(t, c, o) {
		t.Run(target.name, func(t *testing.T) {
			conn := target.conn(t)
			id := 10 + i
			rawSend(t, conn,
				&pgproto3.Parse{Query: "SELECT count(*) FROM t_rt_flush"},
				&pgproto3.Bind{},
				&pgproto3.Execute{},
				&pgproto3.Flush{})
			first := rawReceive(t, conn, func(r rawReply, _ []rawReply) bool { return r.typ == 'C' || r.typ == 'E' })
			rawSend(t, conn,
				&pgproto3.Parse{Query: fmt.Sprintf("INSERT INTO t_rt_flush VALUES (%d, '%s')", id, target.name)},
				&pgproto3.Bind{},
				&pgproto3.Execute{},
				&pgproto3.Sync{})
			second := rawReceive(t, conn, untilReady(1))
			if hasType(first, 'E', "") || hasType(second, 'E', "") || !hasType(second, 'C', "INSERT 0 1") || lastReady(second) != 'I' {
				t.Errorf("%s: SELECT, Flush, INSERT, Sync: replies %s | %s, want the count, INSERT 0 1 and Z(I) as PostgreSQL answers",
					target.name, describeReplies(first), describeReplies(second))
			}
			if got := primaryInt(t, c, "SELECT count(*) FROM t_rt_flush WHERE id = $1", id); got != 1 {
				t.Errorf("%s: the primary holds %d rows with id %d, want 1", target.name, got, id)
			}
		})
	}
}

// TestTxLargePipelineReadThenWrite: a pgx batch (one Sync) whose first
// statement reads with a parameter over 1 MiB and whose second writes. In
// PostgreSQL the batch is one implicit transaction and succeeds. pgowl sends
// the part collected so far once it exceeds maxBatchBytes (session.run), routed
// by that part's effects alone: the read goes to a standby, the open batch
// holds the session there, and the INSERT fails with 25006. A known
// limitation, not fixed yet: the test reports it while it is there.
func TestTxLargePipelineReadThenWrite(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, nil)
	createTable(t, c, "t_rt_large", "CREATE TABLE t_rt_large (id int PRIMARY KEY, src text NOT NULL)")
	big := strings.Repeat("x", 1<<20+1000)
	for i, target := range rtTargets(t, c, o) {
		t.Run(target.name, func(t *testing.T) {
			conn := target.conn(t)
			ctx := timeoutCtx(t, statementTimeout)
			id := 20 + i
			var n int64
			b := &pgx.Batch{}
			b.Queue("SELECT length($1::text)", big).QueryRow(func(r pgx.Row) error { return r.Scan(&n) })
			b.Queue("INSERT INTO t_rt_large VALUES ($1, $2)", id, target.name)
			err := conn.SendBatch(ctx, b).Close()
			rows := primaryInt(t, c, "SELECT count(*) FROM t_rt_large WHERE id = $1", id)
			if target.name == "pgowl" {
				owltest.KnownGap(t, rvSQLState(err) == "25006" && rows == 0, fmt.Sprintf("a batch part sent because it passed 1 MiB may end inside a statement (Bind without its Execute); its portal lives on the standby, so the rest of the implicit transaction stays there and a write in it fails with 25006: batch of a large read then an INSERT: %v, %d rows on the primary", err, rows))
				if err == nil || rvSQLState(err) == "25006" {
					return
				}
			}
			if err != nil {
				t.Errorf("%s: batch of a large read then an INSERT: %v; PostgreSQL runs it", target.name, err)
			}
			if rows != 1 {
				t.Errorf("%s: the primary holds %d rows with id %d, want 1", target.name, rows, id)
			}
		})
	}
}

// TestTxQueryAfterUnsyncedBatch: Parse/Bind/Execute of a read without
// Sync, then a simple Query that writes. PostgreSQL runs both (the Query ends
// the implicit transaction and answers ReadyForQuery) and the connection is
// idle afterwards. pgowl sends the unsynced part on its own (to a standby for
// a read), marks the backend openBatch, and sends the Query to that held
// standby; openBatch is cleared only by a Sync, so the session also stays
// pinned to that standby afterwards. Now the Query's write leaves the
// standby (the unsynced part only read; see leaveReadOnlyBatch), and any
// ReadyForQuery ends the open batch.
func TestTxQueryAfterUnsyncedBatch(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, nil)
	createTable(t, c, "t_rt_q", "CREATE TABLE t_rt_q (id int PRIMARY KEY, src text NOT NULL)")
	for i, target := range rtTargets(t, c, o) {
		t.Run(target.name, func(t *testing.T) {
			conn := target.conn(t)
			id := 30 + 2*i
			rawSend(t, conn,
				&pgproto3.Parse{Query: "SELECT 1"},
				&pgproto3.Bind{},
				&pgproto3.Execute{},
				&pgproto3.Query{String: fmt.Sprintf("INSERT INTO t_rt_q VALUES (%d, '%s')", id, target.name)})
			replies := rawReceive(t, conn, untilReady(1))
			if lastReady(replies) != 'I' {
				t.Errorf("%s: Parse/Bind/Execute SELECT 1 then Query INSERT: replies %s, want Z(I) at the end", target.name, describeReplies(replies))
			}
			if hasType(replies, 'E', "") || !hasType(replies, 'C', "INSERT 0 1") {
				t.Errorf("%s: Parse/Bind/Execute SELECT 1 then Query INSERT: replies %s, want SELECT 1, INSERT 0 1, Z(I) as PostgreSQL answers",
					target.name, describeReplies(replies))
			}
			// Afterwards a plain write must work.
			rawSend(t, conn, &pgproto3.Query{String: fmt.Sprintf("INSERT INTO t_rt_q VALUES (%d, '%s')", id+1, target.name)})
			replies = rawReceive(t, conn, untilReady(1))
			if hasType(replies, 'E', "") || lastReady(replies) != 'I' {
				t.Errorf("%s: a later INSERT: replies %s, want INSERT 0 1, Z(I)", target.name, describeReplies(replies))
			}
			if got := primaryInt(t, c, "SELECT count(*) FROM t_rt_q WHERE id IN ($1, $2)", id, id+1); got != 2 {
				t.Errorf("%s: the primary holds %d of the 2 rows", target.name, got)
			}
		})
	}
}

// rtTrace renders replies without pgowl's routing NOTICEs, for comparing a
// pgowl conversation with PostgreSQL's.
func rtTrace(rs []rawReply) string {
	var kept []rawReply
	for _, r := range rs {
		if r.typ == 'N' && r.code == "00000" {
			continue
		}
		kept = append(kept, r)
	}
	return describeReplies(kept)
}

func rtExtended(sql string) []pgproto3.FrontendMessage {
	return []pgproto3.FrontendMessage{&pgproto3.Parse{Query: sql}, &pgproto3.Bind{}, &pgproto3.Execute{}}
}

// TestTxPipelines sends pipelines (and simple-query strings) in one write, directly and through
// pgowl, and compares the replies and the rows committed. Guards what no
// other test covers: a transaction spread over several Syncs (explicit BEGIN
// in the pipeline, or a deferred simple BEGIN before it) with an error,
// ROLLBACK TO SAVEPOINT and more work; an implicit transaction of several
// Executes before one Sync, or across a Flush, where a later statement fails;
// transactions begun or ended inside multi-statement simple queries.
func TestTxPipelines(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, func(cfgp *config.Config) { cfgp.Pool.MaxPerNode = 2 })
	createTable(t, c, "t_rt_pipe", "CREATE TABLE t_rt_pipe (id int PRIMARY KEY, src text NOT NULL)")

	type pipeline struct {
		name     string
		build    func(base int) []pgproto3.FrontendMessage
		readies  int
		wantRows int64
	}
	seg := func(sqls ...string) []pgproto3.FrontendMessage {
		var out []pgproto3.FrontendMessage
		for _, s := range sqls {
			out = append(out, rtExtended(s)...)
		}
		return append(out, &pgproto3.Sync{})
	}
	ins := func(id int) string { return fmt.Sprintf("INSERT INTO t_rt_pipe VALUES (%d, 'p')", id) }
	pipes := []pipeline{
		{"explicit_begin_across_syncs", func(b int) []pgproto3.FrontendMessage {
			var m []pgproto3.FrontendMessage
			for _, s := range [][]pgproto3.FrontendMessage{seg("BEGIN"), seg(ins(b)), seg("SAVEPOINT s"), seg("SELECT 1/0"),
				seg("ROLLBACK TO SAVEPOINT s"), seg(ins(b + 1)), seg("COMMIT")} {
				m = append(m, s...)
			}
			return m
		}, 7, 2},
		{"deferred_begin_then_pipeline", func(b int) []pgproto3.FrontendMessage {
			m := []pgproto3.FrontendMessage{&pgproto3.Query{String: "BEGIN"}}
			for _, s := range [][]pgproto3.FrontendMessage{seg("SELECT 1"), seg(ins(b)), seg("SELECT 1/0"), seg(ins(b + 1)), seg("COMMIT")} {
				m = append(m, s...)
			}
			return m
		}, 6, 0},
		{"deferred_begin_then_prepare_only_then_write", func(b int) []pgproto3.FrontendMessage {
			m := []pgproto3.FrontendMessage{&pgproto3.Query{String: "BEGIN"},
				&pgproto3.Parse{Name: fmt.Sprintf("rt_ins_%d", b), Query: ins(b)}, &pgproto3.Sync{},
				&pgproto3.Bind{PreparedStatement: fmt.Sprintf("rt_ins_%d", b)}, &pgproto3.Execute{}, &pgproto3.Sync{},
				&pgproto3.Query{String: "COMMIT"}}
			return m
		}, 4, 1},
		{"implicit_transaction_later_error", func(b int) []pgproto3.FrontendMessage {
			return seg(ins(b), "SELECT 1", "SELECT 1/0", ins(b+1))
		}, 1, 0},
		{"implicit_transaction_across_flush", func(b int) []pgproto3.FrontendMessage {
			m := append(rtExtended(ins(b)), &pgproto3.Flush{})
			return append(m, seg("SELECT 1/0")...)
		}, 1, 0},
		{"commit_and_chain_in_pipeline", func(b int) []pgproto3.FrontendMessage {
			var m []pgproto3.FrontendMessage
			for _, s := range [][]pgproto3.FrontendMessage{seg("BEGIN"), seg(ins(b)), seg("COMMIT AND CHAIN"), seg(ins(b + 1)), seg("SELECT 1/0"), seg("ROLLBACK AND CHAIN"), seg("SELECT 1"), seg("COMMIT")} {
				m = append(m, s...)
			}
			return m
		}, 8, 1},
		{"simple_begin_in_string_continued", func(b int) []pgproto3.FrontendMessage {
			return []pgproto3.FrontendMessage{&pgproto3.Query{String: "BEGIN; " + ins(b) + "; SELECT 1"},
				&pgproto3.Query{String: ins(b + 1)}, &pgproto3.Query{String: "SELECT 1/0"}, &pgproto3.Query{String: "ROLLBACK"}}
		}, 4, 0},
		{"simple_commit_begin_in_string", func(b int) []pgproto3.FrontendMessage {
			return []pgproto3.FrontendMessage{&pgproto3.Query{String: ins(b) + "; COMMIT; BEGIN; " + ins(b+1)},
				&pgproto3.Query{String: "SELECT 1/0"}, &pgproto3.Query{String: "COMMIT"}}
		}, 3, 1},
		{"simple_implicit_transaction_later_error", func(b int) []pgproto3.FrontendMessage {
			return []pgproto3.FrontendMessage{&pgproto3.Query{String: ins(b) + "; SELECT 1; " + ins(b)}}
		}, 1, 0},
	}
	for pi, p := range pipes {
		t.Run(p.name, func(t *testing.T) {
			var traces []string
			for ti, target := range rtTargets(t, c, o) {
				conn := target.conn(t)
				base := 1000 + pi*100 + ti*10
				rawSend(t, conn, p.build(base)...)
				replies := rawReceive(t, conn, untilReady(p.readies))
				traces = append(traces, rtTrace(replies))
				if got := primaryInt(t, c, "SELECT count(*) FROM t_rt_pipe WHERE id BETWEEN $1 AND $2", base, base+9); got != p.wantRows {
					t.Errorf("%s: %d rows committed, want %d; replies %s", target.name, got, p.wantRows, describeReplies(replies))
				}
			}
			if traces[0] != traces[1] {
				t.Errorf("replies differ:\n direct: %s\n pgowl:  %s", traces[0], traces[1])
			}
		})
	}
}

// TestTxSavepointOneBackend: with two backends on the primary shared
// by two sessions, a transaction with an error, ROLLBACK TO SAVEPOINT and
// more work keeps one backend and one transaction id throughout, while the
// other session runs transactions in between and never sees its rows. Guards
// what no other test covers (the savepoint path under backend sharing).
func TestTxSavepointOneBackend(t *testing.T) {
	c := sharedClusterFor(t)
	o := rvStartOneBackend(t, func(cfgp *config.Config) { cfgp.Pool.MaxPerNode = 2 })
	createTable(t, c, "t_rt_sp", "CREATE TABLE t_rt_sp (id int PRIMARY KEY, src text NOT NULL)")
	a := o.connect(t, nil)
	b := o.connect(t, nil)
	ctx := timeoutCtx(t, statementTimeout)
	type where struct{ pid, txid int64 }
	at := func() where {
		var w where
		if err := a.QueryRow(ctx, "SELECT pg_backend_pid(), coalesce(txid_current_if_assigned(), 0)").Scan(&w.pid, &w.txid); err != nil {
			t.Fatalf("where: %v", err)
		}
		return w
	}
	other := func() {
		rtExec(t, b, "BEGIN", "INSERT INTO t_rt_sp VALUES (900 + (random()*50)::int, 'b') ON CONFLICT DO NOTHING", "COMMIT")
		if n := queryInt(t, b, "b sees a's rows", "SELECT count(*) FROM t_rt_sp WHERE src = 'a'"); n != 0 {
			t.Errorf("session B sees %d uncommitted rows of session A", n)
		}
	}
	rtExec(t, a, "BEGIN", "INSERT INTO t_rt_sp VALUES (1, 'a')")
	first := at()
	other()
	rtExec(t, a, "SAVEPOINT s")
	if _, err := a.Exec(ctx, "INSERT INTO t_rt_sp VALUES (1, 'a')"); err == nil {
		t.Fatal("duplicate insert succeeded")
	}
	other()
	rtExec(t, a, "ROLLBACK TO SAVEPOINT s")
	other()
	rtExec(t, a, "INSERT INTO t_rt_sp VALUES (2, 'a')", "RELEASE SAVEPOINT s")
	if w := at(); w != first {
		t.Errorf("the transaction moved: first at %+v, after the savepoint work at %+v", first, w)
	}
	other()
	rtExec(t, a, "COMMIT")
	if n := primaryInt(t, c, "SELECT count(*) FROM t_rt_sp WHERE src = 'a'"); n != 2 {
		t.Errorf("%d of session A's rows committed, want 2", n)
	}
}

// TestTxDisconnectInTransaction: a client that leaves after BEGIN
// (deferred) and an INSERT leaves no open transaction on the one shared
// backend: the next session runs outside any transaction and never sees the
// row. Guards the hand-over of a deferred-BEGIN transaction on disconnect.
func TestTxDisconnectInTransaction(t *testing.T) {
	c := sharedClusterFor(t)
	o := rvStartOneBackend(t, nil)
	createTable(t, c, "t_rt_gone", "CREATE TABLE t_rt_gone (id int PRIMARY KEY)")
	a := o.connect(t, nil)
	rtExec(t, a, "BEGIN", "INSERT INTO t_rt_gone VALUES (1)")
	ctx := timeoutCtx(t, statementTimeout)
	a.Close(ctx)
	b := o.connect(t, nil)
	var txid *int64
	var rows int64
	if err := b.QueryRow(ctx, "SELECT txid_current_if_assigned(), (SELECT count(*) FROM t_rt_gone)", pgx.QueryExecModeSimpleProtocol).Scan(&txid, &rows); err != nil {
		t.Fatal(err)
	}
	if txid != nil || rows != 0 || b.PgConn().TxStatus() != 'I' {
		t.Errorf("after A left mid-transaction, B sees txid %v, %d rows, status %q; want no transaction and 0 rows", txid, rows, b.PgConn().TxStatus())
	}
}
