package integration

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// xpReceive reads backend messages from pc until n ReadyForQuery messages came, or wait passed. It
// returns what came and whether it stopped for want of a reply (timedOut).
func xpReceive(t *testing.T, pc *pgconn.PgConn, n int, wait time.Duration) (out []rawReply, timedOut bool) {
	t.Helper()
	fe := pc.Frontend()
	pc.Conn().SetReadDeadline(time.Now().Add(wait))
	defer pc.Conn().SetReadDeadline(time.Time{})
	seen := 0
	for seen < n {
		msg, err := fe.Receive()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return out, true
			}
			t.Fatalf("receive after %s: %v", describeReplies(out), err)
		}
		buf, _ := msg.Encode(nil)
		r := rawReply{typ: buf[0]}
		switch m := msg.(type) {
		case *pgproto3.ReadyForQuery:
			r.status = m.TxStatus
			seen++
		case *pgproto3.CommandComplete:
			r.tag = string(m.CommandTag)
		case *pgproto3.ErrorResponse:
			r.code, r.sev, r.msg = m.Code, m.Severity, m.Message
		case *pgproto3.NoticeResponse:
			r.code, r.sev = m.Code, m.Severity
		}
		out = append(out, r)
	}
	return out, false
}

// xpSend writes msgs to pc and flushes.
func xpSend(t *testing.T, pc *pgconn.PgConn, msgs ...pgproto3.FrontendMessage) {
	t.Helper()
	fe := pc.Frontend()
	for _, m := range msgs {
		fe.Send(m)
	}
	if err := fe.Flush(); err != nil {
		t.Fatalf("send: %v", err)
	}
}

// xpDirect connects to the cluster's primary directly, as the app user (the reference behaviour).
func xpDirect(t *testing.T, dsn string) *pgconn.PgConn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect directly: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn.PgConn()
}
