package integration

import (
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// TestACopyFromStdinSentWithTheExtendedProtocolCompletes runs COPY ... FROM STDIN as libpq does
// with PQexecParams (or a prepared COPY): Parse, Bind, Describe, Execute, Sync; then, on
// CopyInResponse, CopyData, CopyDone and a second Sync (libpq's PQputCopyEnd sends it in the
// extended protocol; the node ignores the first Sync while it is in copy-in mode). A direct
// connection answers CommandComplete and ReadyForQuery; pgowl must too.
func TestACopyFromStdinSentWithTheExtendedProtocolCompletes(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, nil)
	createTable(t, c, "xp_copy_in", "CREATE TABLE xp_copy_in (id int PRIMARY KEY, v text)")

	run := func(t *testing.T, pc *pgconn.PgConn, first int) ([]rawReply, bool) {
		xpSend(t, pc,
			&pgproto3.Parse{Query: "COPY xp_copy_in (id, v) FROM STDIN"},
			&pgproto3.Bind{},
			&pgproto3.Describe{ObjectType: 'P'},
			&pgproto3.Execute{},
			&pgproto3.Sync{})
		xpReceiveCopyIn(t, pc)
		data := []byte("")
		for i := first; i < first+3; i++ {
			data = append(data, []byte(strconv.Itoa(i)+"\trow\n")...)
		}
		xpSend(t, pc, &pgproto3.CopyData{Data: data}, &pgproto3.CopyDone{}, &pgproto3.Sync{})
		return xpReceive(t, pc, 1, 10*time.Second)
	}

	t.Run("direct", func(t *testing.T) {
		replies, timedOut := run(t, xpDirect(t, c.Nodes[0].DSN(appUser, appPassword, appDatabase)), 1)
		if timedOut || !hasType(replies, 'C', "COPY 3") {
			t.Fatalf("reference run on the primary: replies %s (timed out %v)", describeReplies(replies), timedOut)
		}
	})
	t.Run("through_pgowl_bad_row", func(t *testing.T) {
		// A row the node refuses: the node reports 22P02 and skips to the client's Sync, which
		// a direct connection answers with ReadyForQuery.
		pc := o.connect(t, nil).PgConn()
		xpSend(t, pc, &pgproto3.Parse{Query: "COPY xp_copy_in (id, v) FROM STDIN"}, &pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Sync{})
		xpReceiveCopyIn(t, pc)
		xpSend(t, pc, &pgproto3.CopyData{Data: []byte("not-a-number\trow\n")}, &pgproto3.CopyDone{}, &pgproto3.Sync{})
		replies, timedOut := xpReceive(t, pc, 1, 10*time.Second)
		if timedOut {
			t.Errorf("a failing COPY FROM STDIN in the extended protocol hangs through pgowl: the client got %s and then no ReadyForQuery for 10s after its Sync (a direct connection answers ERROR 22P02, ReadyForQuery)", describeReplies(replies))
		}
	})
	t.Run("through_pgowl_flush", func(t *testing.T) {
		// CopyDone followed by Flush: a direct connection answers CommandComplete COPY 1 at once.
		pc := o.connect(t, nil).PgConn()
		xpSend(t, pc, &pgproto3.Parse{Query: "COPY xp_copy_in (id, v) FROM STDIN"}, &pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Flush{})
		xpReceiveCopyIn(t, pc)
		xpSend(t, pc, &pgproto3.CopyData{Data: []byte("201\trow\n")}, &pgproto3.CopyDone{}, &pgproto3.Flush{})
		pc.Conn().SetReadDeadline(time.Now().Add(5 * time.Second))
		for {
			msg, err := pc.Frontend().Receive()
			if err != nil {
				t.Fatalf("COPY FROM STDIN in the extended protocol, CopyDone then Flush: no CommandComplete within 5s through pgowl (%v); a direct connection sends CommandComplete COPY 1 at once", err)
			}
			if _, ok := msg.(*pgproto3.CommandComplete); ok {
				break
			}
		}
	})
	t.Run("through_pgowl", func(t *testing.T) {
		conn := o.connect(t, nil)
		replies, timedOut := run(t, conn.PgConn(), 101)
		if timedOut {
			t.Fatalf("COPY FROM STDIN in the extended protocol hangs through pgowl: after CopyDone and Sync the client got %s and then nothing for 10s (a direct connection answers CommandComplete COPY 3 and ReadyForQuery at once)", describeReplies(replies))
		}
		if !hasType(replies, 'C', "COPY 3") {
			t.Fatalf("COPY FROM STDIN in the extended protocol: replies %s, want CommandComplete COPY 3 and ReadyForQuery", describeReplies(replies))
		}
		if got := primaryInt(t, c, "SELECT count(*) FROM xp_copy_in WHERE id > 100"); got != 3 {
			t.Errorf("the primary holds %d of the 3 copied rows", got)
		}
	})
}

// xpReceiveCopyIn reads replies until CopyInResponse.
func xpReceiveCopyIn(t *testing.T, pc *pgconn.PgConn) {
	t.Helper()
	fe := pc.Frontend()
	pc.Conn().SetReadDeadline(time.Now().Add(10 * time.Second))
	defer pc.Conn().SetReadDeadline(time.Time{})
	for {
		msg, err := fe.Receive()
		if err != nil {
			t.Fatalf("waiting for CopyInResponse: %v", err)
		}
		if _, ok := msg.(*pgproto3.CopyInResponse); ok {
			return
		}
		if e, ok := msg.(*pgproto3.ErrorResponse); ok {
			t.Fatalf("COPY refused: %s %s", e.Code, e.Message)
		}
	}
}
