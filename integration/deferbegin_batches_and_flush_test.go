package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgowl/pgowl/config"
)

// rawReply is one backend message as a client saw it.
type rawReply struct {
	typ    byte
	status byte   // ReadyForQuery
	tag    string // CommandComplete
	code   string // ErrorResponse / NoticeResponse
	sev    string
	msg    string // ErrorResponse / NoticeResponse
}

func (r rawReply) String() string {
	switch r.typ {
	case 'Z':
		return "Z(" + string(r.status) + ")"
	case 'C':
		return "C(" + r.tag + ")"
	case 'E', 'N':
		return string(r.typ) + "(" + r.sev + " " + r.code + ")"
	}
	return string(r.typ)
}

func describeReplies(rs []rawReply) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = r.String()
	}
	return strings.Join(parts, " ")
}

// rawSend sends messages on the client's connection, bypassing pgx.
func rawSend(t *testing.T, c *client, msgs ...pgproto3.FrontendMessage) {
	t.Helper()
	fe := c.PgConn().Frontend()
	for _, m := range msgs {
		fe.Send(m)
	}
	if err := fe.Flush(); err != nil {
		t.Fatalf("send: %v", err)
	}
}

// rawReceive reads backend messages until stop says so (or a timeout).
func rawReceive(t *testing.T, c *client, stop func(rawReply, []rawReply) bool) []rawReply {
	t.Helper()
	return rawReceiveFor(t, c, 10*time.Second, stop)
}

func rawReceiveFor(t *testing.T, c *client, wait time.Duration, stop func(rawReply, []rawReply) bool) []rawReply {
	t.Helper()
	fe := c.PgConn().Frontend()
	conn := c.PgConn().Conn()
	conn.SetReadDeadline(time.Now().Add(wait))
	defer conn.SetReadDeadline(time.Time{})
	var out []rawReply
	for {
		msg, err := fe.Receive()
		if err != nil {
			t.Fatalf("receive after %s: %v", describeReplies(out), err)
		}
		buf, err := msg.Encode(nil)
		if err != nil {
			t.Fatal(err)
		}
		r := rawReply{typ: buf[0]}
		switch m := msg.(type) {
		case *pgproto3.ReadyForQuery:
			r.status = m.TxStatus
		case *pgproto3.CommandComplete:
			r.tag = string(m.CommandTag)
		case *pgproto3.ErrorResponse:
			r.code, r.sev, r.msg = m.Code, m.Severity, m.Message
		case *pgproto3.NoticeResponse:
			r.code, r.sev = m.Code, m.Severity
		}
		out = append(out, r)
		if stop(r, out) {
			return out
		}
	}
}

// untilReady stops after n ReadyForQuery messages.
func untilReady(n int) func(rawReply, []rawReply) bool {
	seen := 0
	return func(r rawReply, _ []rawReply) bool {
		if r.typ == 'Z' {
			seen++
		}
		return seen == n
	}
}

func lastReady(rs []rawReply) byte {
	for i := len(rs) - 1; i >= 0; i-- {
		if rs[i].typ == 'Z' {
			return rs[i].status
		}
	}
	return 0
}

func hasType(rs []rawReply, typ byte, code string) bool {
	for _, r := range rs {
		if r.typ == typ && (code == "" || r.code == code || r.tag == code) {
			return true
		}
	}
	return false
}

// TestDeferredBeginReview collects suspected bugs of the deferred BEGIN.
func TestDeferredBeginReview(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, func(cfg *config.Config) {
		cfg.Pool.MaxPerNode = 1
		cfg.Pool.AcquireTimeout = 300 * time.Millisecond
	})
	createTable(t, c, "t_defer_review", "CREATE TABLE t_defer_review (id int PRIMARY KEY, v text NOT NULL)")
	catchUp(t, c)
	ctx := timeoutCtx(t, 2*statementTimeout)

	// A synchronous Prepare (Parse/Describe/Sync) inside the transaction: a
	// server answers ReadyForQuery 'T'. pgowl runs the prepare-only batch on
	// any node outside the deferred transaction and relays that node's 'I'.
	t.Run("prepare_inside_keeps_status_T", func(t *testing.T) {
		a := o.connect(t, nil)
		if _, err := a.Exec(ctx, "BEGIN"); err != nil {
			t.Fatal(err)
		}
		if _, err := a.PgConn().Prepare(ctx, "review_s1", "SELECT v FROM t_defer_review WHERE id = $1", nil); err != nil {
			t.Fatal(err)
		}
		if got := a.PgConn().TxStatus(); got != 'T' {
			t.Errorf("ReadyForQuery after Parse/Describe/Sync inside BEGIN: status %q, want T", got)
		}
		a.Exec(ctx, "ROLLBACK")
	})

	// A Parse that fails inside a transaction block aborts the transaction on
	// PostgreSQL: the next statement gets 25P02. With deferred BEGIN the Parse
	// ran outside the transaction, so the transaction goes on as if nothing failed.
	t.Run("parse_error_inside_aborts_transaction", func(t *testing.T) {
		a := o.connect(t, nil)
		if _, err := a.Exec(ctx, "BEGIN"); err != nil {
			t.Fatal(err)
		}
		_, err := a.PgConn().Prepare(ctx, "review_bad", "SELEC 1", nil)
		wantSQLState(t, "Parse of a syntax error", err, "42601")
		if got := a.PgConn().TxStatus(); got != 'E' {
			t.Errorf("ReadyForQuery after a failed Parse inside BEGIN: status %q, want E", got)
		}
		_, err = a.Exec(ctx, "INSERT INTO t_defer_review VALUES (100, 'after failed parse')")
		wantSQLState(t, "statement after a failed Parse in the transaction", err, "25P02")
		tag, err := a.Exec(ctx, "COMMIT")
		if err != nil || tag.String() != "ROLLBACK" {
			t.Errorf("COMMIT of the failed transaction: tag %q, %v; want ROLLBACK", tag, err)
		}
		if got := primaryInt(t, c, "SELECT count(*) FROM t_defer_review WHERE id = 100"); got != 0 {
			t.Errorf("a row inserted after the transaction failed was committed")
		}
	})

	// A prepare runs outside the deferred transaction. One that no node can
	// take fails the transaction, as a failed Parse does on a node. (A
	// statement that will pin the session is prepared on the primary only:
	// the primary's one backend is held, so it is refused after
	// pool.acquire_timeout. A write's prepare would go to a standby instead.)
	t.Run("refused_prepare_inside_fails_transaction", func(t *testing.T) {
		holder := o.connect(t, nil)
		a := o.connect(t, nil)
		if _, err := holder.Exec(ctx, "BEGIN"); err != nil {
			t.Fatal(err)
		}
		if _, err := holder.Exec(ctx, fmt.Sprintf("INSERT INTO t_defer_review VALUES (%d, 'holder')", 400+time.Now().Nanosecond()%1000)); err != nil {
			t.Fatal(err)
		}
		defer holder.Exec(ctx, "ROLLBACK")
		if _, err := a.Exec(ctx, "BEGIN"); err != nil {
			t.Fatal(err)
		}
		_, err := a.PgConn().Prepare(ctx, "review_busy", "CREATE TEMP TABLE review_busy (a int)", nil)
		wantSQLState(t, "prepare of a statement that pins while the primary is busy", err, "53300")
		if got := a.PgConn().TxStatus(); got != 'E' {
			t.Errorf("ReadyForQuery after a refused prepare inside BEGIN: status %q, want E", got)
		}
		_, err = a.Exec(ctx, "SELECT 1")
		wantSQLState(t, "statement after a refused prepare in the transaction", err, "25P02")
		if _, err := a.Exec(ctx, "ROLLBACK"); err != nil {
			t.Errorf("ROLLBACK of the failed transaction: %v", err)
		}
	})

	// After the first statement could not be routed, the transaction is
	// failed: a FunctionCall must get 25P02 and 'E', not run outside it.
	// An extended-protocol COMMIT of the failed transaction must answer ROLLBACK.
	t.Run("failed_deferred_transaction_other_protocols", func(t *testing.T) {
		var fnOID uint32
		if err := o.connect(t, nil).QueryRow(ctx, "SELECT 'pg_backend_pid'::regproc::oid").Scan(&fnOID); err != nil {
			t.Fatal(err)
		}
		failed := func(t *testing.T) *client {
			holder := o.connect(t, nil)
			a := o.connect(t, nil)
			if _, err := holder.Exec(ctx, "BEGIN"); err != nil {
				t.Fatal(err)
			}
			if _, err := holder.Exec(ctx, fmt.Sprintf("INSERT INTO t_defer_review VALUES (%d, 'holder')", 300+time.Now().Nanosecond()%1000)); err != nil {
				t.Fatal(err)
			}
			if _, err := a.Exec(ctx, "BEGIN"); err != nil {
				t.Fatal(err)
			}
			_, err := a.Exec(ctx, "INSERT INTO t_defer_review VALUES (301, 'a')")
			wantSQLState(t, "first write while the primary is busy", err, "53300")
			if _, err := holder.Exec(ctx, "ROLLBACK"); err != nil {
				t.Fatal(err)
			}
			return a
		}
		t.Run("function_call", func(t *testing.T) {
			a := failed(t)
			rawSend(t, a, &pgproto3.FunctionCall{Function: fnOID, ResultFormatCode: 1})
			rs := rawReceive(t, a, untilReady(1))
			if !hasType(rs, 'E', "25P02") || lastReady(rs) != 'E' {
				t.Errorf("FunctionCall in a failed deferred transaction: replies %s, want E(25P02) Z(E)", describeReplies(rs))
			}
		})
		t.Run("extended_commit", func(t *testing.T) {
			a := failed(t)
			rawSend(t, a,
				&pgproto3.Parse{Query: "COMMIT"},
				&pgproto3.Bind{},
				&pgproto3.Execute{},
				&pgproto3.Sync{})
			rs := rawReceive(t, a, untilReady(1))
			if !hasType(rs, 'C', "ROLLBACK") || hasType(rs, 'N', "25P01") || lastReady(rs) != 'I' {
				t.Errorf("extended-protocol COMMIT of a failed deferred transaction: replies %s, want C(ROLLBACK) Z(I) as PostgreSQL", describeReplies(rs))
			}
		})
		t.Run("prepare_keeps_E", func(t *testing.T) {
			a := failed(t)
			rawSend(t, a,
				&pgproto3.Parse{Name: "review_p", Query: "SELECT 1"},
				&pgproto3.Describe{ObjectType: 'S', Name: "review_p"},
				&pgproto3.Sync{})
			rs := rawReceive(t, a, untilReady(1))
			if lastReady(rs) != 'E' {
				t.Errorf("Parse/Describe/Sync in a failed deferred transaction: replies %s, want Z(E)", describeReplies(rs))
			}
		})
	})

	// Pipelined simple queries: BEGIN, INSERT, ROLLBACK in one write.
	t.Run("pipelined_simple_queries", func(t *testing.T) {
		a := o.connect(t, nil)
		rawSend(t, a,
			&pgproto3.Query{String: "BEGIN"},
			&pgproto3.Query{String: "INSERT INTO t_defer_review VALUES (400, 'pipe')"},
			&pgproto3.Query{String: "ROLLBACK"})
		rs := rawReceive(t, a, untilReady(3))
		var got []string
		for _, r := range rs {
			if r.typ == 'C' || r.typ == 'Z' || r.typ == 'E' {
				got = append(got, r.String())
			}
		}
		want := "C(BEGIN) Z(T) C(INSERT 0 1) Z(T) C(ROLLBACK) Z(I)"
		if strings.Join(got, " ") != want {
			t.Errorf("pipelined BEGIN/INSERT/ROLLBACK: %s, want %s", strings.Join(got, " "), want)
		}
		if n := primaryInt(t, c, "SELECT count(*) FROM t_defer_review WHERE id = 400"); n != 0 {
			t.Errorf("rolled-back row is on the primary")
		}
	})

	// COPY FROM STDIN as the first statement of a deferred transaction.
	t.Run("copy_first", func(t *testing.T) {
		a := o.connect(t, nil)
		if _, err := a.Exec(ctx, "BEGIN"); err != nil {
			t.Fatal(err)
		}
		tag, err := a.PgConn().CopyFrom(ctx, strings.NewReader("500\tcopy\n501\tcopy\n"), "COPY t_defer_review FROM STDIN")
		if err != nil || tag.RowsAffected() != 2 {
			t.Fatalf("COPY: %v %v", tag, err)
		}
		if got := a.PgConn().TxStatus(); got != 'T' {
			t.Errorf("after COPY status %q", got)
		}
		if _, err := a.Exec(ctx, "ROLLBACK"); err != nil {
			t.Fatal(err)
		}
		if n := primaryInt(t, c, "SELECT count(*) FROM t_defer_review WHERE id IN (500, 501)"); n != 0 {
			t.Errorf("rolled-back COPY rows are on the primary")
		}
	})

	// A SET in the transaction counts only if it commits.
	t.Run("set_tracking", func(t *testing.T) {
		a := o.connect(t, nil)
		for _, end := range []string{"ROLLBACK", "COMMIT"} {
			if _, err := a.Exec(ctx, "BEGIN"); err != nil {
				t.Fatal(err)
			}
			if _, err := a.Exec(ctx, "SET application_name = 'review_"+end+"'"); err != nil {
				t.Fatal(err)
			}
			if _, err := a.Exec(ctx, end); err != nil {
				t.Fatal(err)
			}
			var name string
			if err := a.QueryRow(ctx, "SELECT current_setting('application_name')").Scan(&name); err != nil {
				t.Fatal(err)
			}
			if end == "COMMIT" && name != "review_COMMIT" || end == "ROLLBACK" && name == "review_ROLLBACK" {
				t.Errorf("after SET in a transaction and %s, application_name = %q", end, name)
			}
		}
	})

	// pgowl commands inside a deferred transaction keep status T.
	t.Run("pgowl_commands_inside", func(t *testing.T) {
		a := o.connect(t, nil)
		if _, err := a.Exec(ctx, "BEGIN"); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Exec(ctx, "SHOW pgowl.notice"); err != nil {
			t.Fatal(err)
		}
		if got := a.PgConn().TxStatus(); got != 'T' {
			t.Errorf("SHOW pgowl.notice inside BEGIN: status %q", got)
		}
		rawSend(t, a,
			&pgproto3.Parse{Query: "SHOW pgowl.notice"},
			&pgproto3.Bind{},
			&pgproto3.Execute{},
			&pgproto3.Sync{})
		rs := rawReceive(t, a, untilReady(1))
		if lastReady(rs) != 'T' {
			t.Errorf("extended SHOW pgowl.notice inside BEGIN: %s", describeReplies(rs))
		}
		a.Exec(ctx, "ROLLBACK")
	})

	// A cancel of the statement that carries BEGIN fails the transaction there.
	t.Run("cancel_first_statement", func(t *testing.T) {
		a := o.connect(t, nil)
		if _, err := a.Exec(ctx, "BEGIN"); err != nil {
			t.Fatal(err)
		}
		go func() {
			time.Sleep(500 * time.Millisecond)
			a.PgConn().CancelRequest(context.Background())
		}()
		_, err := a.PgConn().Exec(context.Background(), "SELECT pg_sleep(5)").ReadAll()
		wantSQLState(t, "cancelled first statement", err, "57014")
		if got := a.PgConn().TxStatus(); got != 'E' {
			t.Errorf("after cancelled first statement status %q, want E", got)
		}
		tag, err := a.Exec(ctx, "COMMIT")
		if err != nil || tag.String() != "ROLLBACK" {
			t.Errorf("COMMIT after cancel: %q %v", tag, err)
		}
	})
}

// TestDeferredBeginReviewFlush: a Flush ('H') after Parse/Describe. PostgreSQL
// answers Parse and Describe once it sees Flush. pgowl routes the batch on
// 'H' but never writes the Flush to the node, so both wait for each other.
// Kept apart: the stuck session keeps its backend and delays pgowl's shutdown.
func TestDeferredBeginReviewFlush(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, nil)
	createTable(t, c, "t_defer_review_flush", "CREATE TABLE t_defer_review_flush (id int PRIMARY KEY, v text NOT NULL)")
	ctx := timeoutCtx(t, statementTimeout)
	// Parse/Describe/Flush, then Bind/Execute/Sync of an INSERT inside a
	// read-write transaction: the transaction must run on the primary.
	t.Run("flush_prepare_then_write_inside", func(t *testing.T) {
		a := o.connect(t, nil)
		if _, err := a.Exec(ctx, "BEGIN"); err != nil {
			t.Fatal(err)
		}
		rawSend(t, a,
			&pgproto3.Parse{Name: "review_ins", Query: "INSERT INTO t_defer_review_flush VALUES (200, 'flush')"},
			&pgproto3.Describe{ObjectType: 'S', Name: "review_ins"},
			&pgproto3.Flush{})
		first := rawReceiveFor(t, a, 3*time.Second, func(r rawReply, _ []rawReply) bool { return r.typ == 'n' || r.typ == 'T' || r.typ == 'E' })
		rawSend(t, a,
			&pgproto3.Bind{PreparedStatement: "review_ins"},
			&pgproto3.Execute{},
			&pgproto3.Sync{})
		second := rawReceive(t, a, untilReady(1))
		t.Logf("replies: %s | %s", describeReplies(first), describeReplies(second))
		if !hasType(second, 'C', "INSERT 0 1") || lastReady(second) != 'T' {
			t.Errorf("INSERT after Parse/Describe/Flush inside BEGIN: replies %s, want INSERT 0 1 and Z(T)", describeReplies(second))
		}
		rawSend(t, a, &pgproto3.Query{String: "ROLLBACK"})
		rawReceive(t, a, untilReady(1))
	})

	// The same without BEGIN: is the Flush problem older than deferred BEGIN?
	t.Run("flush_prepare_then_write_autocommit_control", func(t *testing.T) {
		a := o.connect(t, nil)
		rawSend(t, a,
			&pgproto3.Parse{Name: "review_ins2", Query: "INSERT INTO t_defer_review_flush VALUES (201, 'flush') ON CONFLICT DO NOTHING"},
			&pgproto3.Describe{ObjectType: 'S', Name: "review_ins2"},
			&pgproto3.Flush{})
		first := rawReceiveFor(t, a, 3*time.Second, func(r rawReply, _ []rawReply) bool { return r.typ == 'n' || r.typ == 'T' || r.typ == 'E' })
		rawSend(t, a,
			&pgproto3.Bind{PreparedStatement: "review_ins2"},
			&pgproto3.Execute{},
			&pgproto3.Sync{})
		second := rawReceive(t, a, untilReady(1))
		t.Logf("replies: %s | %s", describeReplies(first), describeReplies(second))
		if hasType(second, 'E', "") {
			t.Errorf("INSERT after Parse/Describe/Flush in autocommit: replies %s", describeReplies(second))
		}
	})

}
