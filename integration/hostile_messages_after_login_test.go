package integration

import (
	"fmt"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgowl/pgowl/config"

	"runtime"
	"strings"
	"testing"
	"time"
)

// rvCase is bytes sent after login, and how many ReadyForQuery messages a
// PostgreSQL that keeps the connection answers with.
type rvCase struct {
	name  string
	send  []byte
	ready int
	// setup runs before the case, on both sides (a COPY's start, say).
	setup      []byte
	setupReady int
}

func rvFunctionCallInt4pl(a, b int) []byte {
	return rvFrame('F', rvI32(177), rvI16(1), rvI16(1), rvI16(2), rvI32(4), rvI32(a), rvI32(4), rvI32(b), rvI16(1))
}

// TestHostileMessagesAfterLoginAreAnsweredAsPostgreSQLWould sends malformed or out-of-place
// messages after login to PostgreSQL directly and to pgowl, and compares the
// answers; after each, the connection (if open) must still answer a Query,
// and pgowl must keep serving others with no backend left in a transaction.
func TestHostileMessagesAfterLoginAreAnsweredAsPostgreSQLWould(t *testing.T) {
	c := sharedClusterFor(t)
	createTable(t, c, "rv_copy", "CREATE TABLE rv_copy (a int)")
	o := startOwl(t, c, nil)
	bystander := o.connect(t, nil)
	goroutines0 := runtime.NumGoroutine()

	many := make([]string, 5000)
	for i := range many {
		many[i] = "1"
	}
	badFormats := rvFrame('B', rvCStr(""), rvCStr(""), rvI16(3), rvI16(0), rvI16(0), rvI16(0), rvI16(1), rvI32(1), []byte("1"), rvI16(0))
	badResultFormat := rvFrame('B', rvCStr(""), rvCStr(""), rvI16(0), rvI16(1), rvI32(1), []byte("1"), rvI16(1), rvI16(7))
	truncatedBind := rvFrame('B', rvCStr(""), rvCStr(""), []byte{0})
	parseSelect := rvParse("", "SELECT $1::int AS v")

	cases := []rvCase{
		{name: "bind_param_count_above_parse", send: rvJoin(parseSelect, rvBind("", "", "1", "2"), rvExecute("", 0), rvSync), ready: 1},
		{name: "bind_param_count_below_parse", send: rvJoin(parseSelect, rvBind("", ""), rvExecute("", 0), rvSync), ready: 1},
		{name: "bind_5000_params", send: rvJoin(parseSelect, rvBind("", "", many...), rvExecute("", 0), rvSync), ready: 1},
		{name: "bind_format_codes_disagree", send: rvJoin(parseSelect, badFormats, rvExecute("", 0), rvSync), ready: 1},
		{name: "bind_result_format_7", send: rvJoin(parseSelect, badResultFormat, rvExecute("", 0), rvSync), ready: 1},
		{name: "bind_truncated", send: rvJoin(parseSelect, truncatedBind, rvExecute("", 0), rvSync), ready: 1},
		{name: "bind_unknown_statement", send: rvJoin(rvBind("", "rv_nope"), rvExecute("", 0), rvSync), ready: 1},
		{name: "execute_missing_portal", send: rvJoin(rvExecute("rv_nope", 0), rvSync), ready: 1},
		{name: "execute_negative_maxrows", send: rvJoin(parseSelect, rvBind("", "", "5"), rvExecute("", -1), rvSync), ready: 1},
		{name: "execute_truncated", send: rvJoin(parseSelect, rvBind("", "", "5"), rvFrame('E', rvCStr("")), rvSync), ready: 1},
		{name: "describe_bad_kind", send: rvJoin(rvDescribe('X', ""), rvSync), ready: 1},
		{name: "close_bad_kind", send: rvJoin(rvClose('X', ""), rvSync), ready: 1},
		{name: "describe_missing_statement", send: rvJoin(rvDescribe('S', "rv_nope"), rvSync), ready: 1},
		{name: "describe_missing_portal", send: rvJoin(rvDescribe('P', "rv_nope"), rvSync), ready: 1},
		{name: "close_missing_statement_and_portal", send: rvJoin(rvClose('S', "rv_nope"), rvClose('P', "rv_nope"), rvSync), ready: 1},
		{name: "parse_param_count_lies", send: rvJoin(rvFrame('P', rvCStr(""), rvCStr("SELECT 1"), rvI16(3), rvI32(23)), rvSync), ready: 1},
		{name: "parse_unterminated", send: rvJoin(rvFrame('P', []byte("x")), rvSync), ready: 1},
		{name: "sync_with_body", send: rvFrame('S', rvI32(7)), ready: 1},
		{name: "query_empty_body", send: rvFrame('Q'), ready: 1},
		{name: "copydata_copydone_copyfail_outside_copy", send: rvJoin(rvFrame('d', []byte("1\n")), rvFrame('c'), rvFrame('f', rvCStr("x")), rvQuery("SELECT 1")), ready: 1},
		{name: "copydata_in_extended_batch", send: rvJoin(parseSelect, rvFrame('d', []byte("1\n")), rvBind("", "", "3"), rvExecute("", 0), rvSync), ready: 1},
		{name: "unknown_type_while_skipping_to_sync", send: rvJoin(rvExecute("rv_nope", 0), rvFrame('y'), rvSync), ready: 1},
		{name: "password_message_after_login", send: rvFrame('p', rvCStr("secret")), ready: 1},
		{name: "function_call_int4pl", send: rvFunctionCallInt4pl(40, 2), ready: 1},
		{name: "function_call_unknown_oid", send: rvFrame('F', rvI32(1), rvI16(0), rvI16(0), rvI16(0)), ready: 1},
		{name: "function_call_truncated", send: rvFrame('F', rvI32(177)), ready: 1},
		{name: "function_call_inside_unsynced_batch", send: rvJoin(rvParse("", "SELECT 7"), rvBind("", ""), rvExecute("", 0), rvFunctionCallInt4pl(1, 2), rvSync), ready: 2},
		{name: "query_inside_unsynced_batch", send: rvJoin(rvParse("", "SELECT 7"), rvBind("", ""), rvExecute("", 0), rvQuery("SELECT 8"), rvSync), ready: 2},
		{name: "huge_length_after_login", send: []byte{'Q', 0x7f, 0xff, 0xff, 0xff, 'S', 'E', 'L'}, ready: 1},
		{name: "length_4_execute", send: rvJoin(rvFrame('E'), rvSync), ready: 1},
		{name: "copy_in_then_query_message", setup: rvQuery("COPY rv_copy FROM STDIN"), setupReady: 0,
			send: rvJoin(rvFrame('d', []byte("1\n")), rvQuery("SELECT 1")), ready: 1},
		{name: "copy_in_then_sync_and_flush_then_done", setup: rvQuery("COPY rv_copy FROM STDIN"), setupReady: 0,
			send: rvJoin(rvFrame('d', []byte("1\n")), rvSync, rvFlush, rvFrame('d', []byte("2\n")), rvFrame('c')), ready: 1},
		{name: "copy_in_then_parse", setup: rvQuery("COPY rv_copy FROM STDIN"), setupReady: 0,
			send: rvJoin(rvFrame('d', []byte("1\n")), parseSelect, rvSync), ready: 1},
	}

	var report []string
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			run := func(dsn string) (rvResult, string) {
				conn := rvLogin(t, dsn)
				if tc.setup != nil {
					conn.send(t, tc.setup)
					if tc.setupReady == 0 {
						// A COPY's start: read its CopyInResponse.
						rvAwaitCopyIn(t, conn)
					} else {
						conn.recv(tc.setupReady, 5*time.Second)
					}
				}
				conn.send(t, tc.send)
				res := conn.recv(tc.ready, 5*time.Second)
				probe := "<connection closed>"
				if !res.closed {
					conn.send(t, rvQuery("SELECT 1"))
					probe = conn.recv(1, 5*time.Second).String()
				}
				conn.send(t, rvTerminate)
				conn.conn.Close()
				return res, probe
			}
			pg, pgProbe := run(rvNodeDSN(c))
			ow, owProbe := run(o.rvDSN())
			t.Logf("PostgreSQL: %s ; then SELECT 1: %s", pg, pgProbe)
			t.Logf("pgowl:      %s ; then SELECT 1: %s", ow, owProbe)
			line := fmt.Sprintf("%-40s PG: %s | %s\n%-40s OWL: %s | %s", tc.name, pg, pgProbe, "", ow, owProbe)
			report = append(report, line)
			if ow.timedOut {
				t.Errorf("pgowl neither answered nor closed within 5s: %s", ow)
			}
			if !ow.closed && !strings.Contains(owProbe, "D C Z") {
				t.Errorf("pgowl kept the connection but it does not answer SELECT 1 cleanly: %s", owProbe)
			}
			if ow.closed && len(ow.errors()) == 0 && !pg.closed {
				t.Errorf("pgowl closed the connection without an ErrorResponse; PostgreSQL answered %s", pg)
			}
			if ow.closed && len(ow.errors()) == 0 && pg.closed && len(pg.errors()) > 0 {
				t.Errorf("pgowl closed the connection silently; PostgreSQL said %v before closing", pg.errors())
			}
			if pg.closed != ow.closed || rvTypes(pg) != rvTypes(ow) {
				t.Logf("DIFFERENT from PostgreSQL")
				if strings.HasSuffix(tc.name, "_inside_unsynced_batch") {
					// The order of the answers is the protocol's, not a choice of errors.
					t.Errorf("answers in another order than PostgreSQL's: %s, PostgreSQL %s", rvTypes(ow), rvTypes(pg))
				}
			}
			if s := rvWaitNoLeftovers(t, c, 3*time.Second); s != "" {
				t.Errorf("backends left busy or in a transaction: %s", s)
			}
			requireServing(t, o, bystander, tc.name)
		})
	}
	t.Logf("summary:\n%s", strings.Join(report, "\n"))
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > goroutines0+10 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > goroutines0+10 {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Errorf("goroutines grew from %d to %d after the cases\n%s", goroutines0, n, buf)
	}
}

// rvTypes is a result's message types and SQLSTATEs, without the texts.
func rvTypes(r rvResult) string {
	var out []string
	for _, m := range r.msgs {
		if strings.HasPrefix(m, "E(") {
			if i := strings.Index(m, ":"); i > 0 {
				m = m[:i] + ")"
			}
		}
		out = append(out, m)
	}
	return strings.Join(out, " ")
}

// rvAwaitCopyIn reads past notices to the CopyInResponse.
func rvAwaitCopyIn(t *testing.T, conn *rvConn) {
	t.Helper()
	conn.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	defer conn.conn.SetReadDeadline(time.Time{})
	for {
		msg, err := conn.fe.Receive()
		if err != nil {
			t.Fatalf("waiting for CopyInResponse: %v", err)
		}
		switch m := msg.(type) {
		case *pgproto3.CopyInResponse:
			return
		case *pgproto3.ErrorResponse:
			t.Fatalf("waiting for CopyInResponse: %s %s", m.Code, m.Message)
		}
	}
}

// TestAnInvalidMessageWhileSkippingToSyncEndsTheSession: after pgowl itself refused a
// message of a batch (a named Parse past limits.max_prepared_statements), it
// drops the client's messages up to Sync. PostgreSQL, skipping after an
// error, still checks each message's type: an invalid one is FATAL 08P01.
func TestAnInvalidMessageWhileSkippingToSyncEndsTheSession(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, func(cfg *config.Config) { cfg.Limits.MaxPreparedStatements = 1 })
	conn := rvLogin(t, o.rvDSN())
	conn.send(t, rvJoin(rvParse("rv_a", "SELECT 1"), rvParse("rv_b", "SELECT 2"), rvFrame('y', []byte("garbage")), rvFrame(0, nil), rvSync))
	res := conn.recv(1, 5*time.Second)
	t.Logf("pgowl: %s", res)
	if !res.closed {
		t.Errorf("pgowl accepted message types 'y' and 0 while skipping to Sync (answered %s); PostgreSQL closes with FATAL 08P01 invalid frontend message type", res)
	}
}
