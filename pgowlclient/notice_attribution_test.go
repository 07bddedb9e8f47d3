package pgowlclient

import (
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestNoticeRecorderGivesEachConnectionsNoticesToItsOpenWindow(t *testing.T) {
	var cfg pgconn.Config
	var passedOn int
	cfg.OnNotice = func(*pgconn.PgConn, *pgconn.Notice) { passedOn++ }
	rec := NewNoticeRecorder()
	rec.Install(&cfg)

	connA, connB := &pgconn.PgConn{}, &pgconn.PgConn{}
	write := &pgconn.Notice{Code: "00000", Message: "pgowl: pg1 (primary) ran this statement: it writes", Detail: "node=pg1 role=primary reason=WRITE lag_ms=0"}
	read := &pgconn.Notice{Code: "00000", Message: "pgowl: pg2 (standby) ran this statement: it only reads", Detail: "node=pg2 role=standby reason=READ_ONLY lag_ms=7"}
	raised := &pgconn.Notice{Code: "00000", Message: "hello from plpgsql"}

	cfg.OnNotice(connA, write) // no window open: only passed on
	wa := rec.begin(connA)
	wb := rec.begin(connB)
	cfg.OnNotice(connB, read)
	cfg.OnNotice(connA, raised)
	cfg.OnNotice(connA, write)
	rec.end(connA)
	rec.end(connB)
	cfg.OnNotice(connB, write) // after the window: not B's statement's

	if passedOn != 5 {
		t.Errorf("the handler installed before saw %d NOTICEs, want all 5", passedOn)
	}
	var res Result
	res.take(wa)
	if !res.Routed || len(res.Routes) != 1 || res.Route.Node != "pg1" || len(res.Notices) != 1 || res.Notices[0].Message != raised.Message {
		t.Errorf("connection A's window: %+v", res)
	}
	res.take(wb)
	if !res.Routed || len(res.Routes) != 1 || res.Route.Node != "pg2" || res.Route.LagMS != 7 || len(res.Notices) != 0 {
		t.Errorf("connection B's window: %+v", res)
	}
	res.take(&noticeWindow{})
	if res.Routed || res.Route.Node != "" {
		t.Errorf("a window without a routing NOTICE must leave Routed false: %+v", res)
	}
}
