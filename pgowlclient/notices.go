package pgowlclient

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// NoticeRecorder attributes the NOTICEs of pgowl (and of the nodes) to the
// statement that caused them. It must be installed in a connection's
// configuration before the connection is made (Install, or StdlibOption for
// database/sql).
//
// Attribution rests on two facts: a connection runs one statement at a time,
// and pgowl sends a unit's routing NOTICE before the unit's first reply, so
// before its ReadyForQuery. A statement's window opens (begin) before it is
// sent on a connection this client holds exclusively, and closes (end) after
// its ReadyForQuery has been read; every NOTICE arriving on that connection
// in between is the statement's. NOTICEs outside any window (a statement run
// on the connection directly, not through this package) are only passed to
// the handler that was installed before.
type NoticeRecorder struct {
	mu   sync.Mutex
	open map[*pgconn.PgConn]*noticeWindow
}

// noticeWindow collects the NOTICEs of one statement (or one transaction).
type noticeWindow struct {
	routes []Route
	others []*pgconn.Notice
}

// NewNoticeRecorder returns a recorder with no window open.
func NewNoticeRecorder() *NoticeRecorder {
	return &NoticeRecorder{open: map[*pgconn.PgConn]*noticeWindow{}}
}

// Install makes cfg's connections report their NOTICEs to r, after calling
// any OnNotice handler cfg already has.
func (r *NoticeRecorder) Install(cfg *pgconn.Config) {
	previous := cfg.OnNotice
	cfg.OnNotice = func(pc *pgconn.PgConn, n *pgconn.Notice) {
		if previous != nil {
			previous(pc, n)
		}
		r.record(pc, n)
	}
}

// StdlibOption installs r in every connection database/sql opens through
// pgx's stdlib (stdlib.OpenDB).
func (r *NoticeRecorder) StdlibOption() stdlib.OptionOpenDB {
	return stdlib.OptionBeforeConnect(func(_ context.Context, cfg *pgx.ConnConfig) error {
		r.Install(&cfg.Config)
		return nil
	})
}

func (r *NoticeRecorder) record(pc *pgconn.PgConn, n *pgconn.Notice) {
	r.mu.Lock()
	w := r.open[pc]
	r.mu.Unlock()
	if w == nil {
		return
	}
	// Only the connection's own goroutine, inside the window, touches w.
	if route, ok := RouteFromNotice(n); ok {
		w.routes = append(w.routes, route)
		return
	}
	copied := *n
	w.others = append(w.others, &copied)
}

// begin opens a window on pc; the caller must hold pc exclusively until end.
func (r *NoticeRecorder) begin(pc *pgconn.PgConn) *noticeWindow {
	w := &noticeWindow{}
	r.mu.Lock()
	r.open[pc] = w
	r.mu.Unlock()
	return w
}

// end closes pc's window.
func (r *NoticeRecorder) end(pc *pgconn.PgConn) {
	r.mu.Lock()
	delete(r.open, pc)
	r.mu.Unlock()
}

// Result is what a statement (or a transaction) run through this package
// did, besides its rows: where pgowl ran it and how many attempts it took.
type Result struct {
	// Route is where the last attempt ran, from its last routing NOTICE;
	// meaningful when Routed is true.
	Route Route
	// Routed is true when the last attempt got a routing NOTICE (false if
	// it was refused, or NOTICEs are off with SET pgowl.notice = off).
	Routed bool
	// Routes are every routing NOTICE of the last attempt in order: one
	// per routed unit, so one per statement of a transaction run by RunTx.
	Routes []Route
	// Notices are the last attempt's other NOTICEs (RAISE NOTICE, warnings).
	Notices []*pgconn.Notice
	// Attempts is how many times the statement (or transaction) was sent.
	Attempts int
	// Refusals are pgowl's refusals, one per refused attempt, in order.
	Refusals []*Refusal
	// CommandTag is the last attempt's command tag (pgx only).
	CommandTag string
	// RowsAffected is the last attempt's row count from its command tag.
	RowsAffected int64
	// InTransaction is true when the last attempt left its connection in a
	// transaction (one the caller began), which is why a transient refusal
	// was not retried.
	InTransaction bool
}

// take moves a closed window's NOTICEs into res, replacing an earlier
// attempt's.
func (res *Result) take(w *noticeWindow) {
	res.Routes, res.Notices = w.routes, w.others
	res.Routed = len(w.routes) > 0
	res.Route = Route{}
	if res.Routed {
		res.Route = w.routes[len(w.routes)-1]
	}
}
