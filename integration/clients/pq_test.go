package clients

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/lib/pq"
)

// pqClient runs the matrix's steps with lib/pq through database/sql. Every
// named connection is a *sql.Conn of a *sql.DB of its own, whose notice
// handler knows the name.
type pqClient struct {
	*goClient
	ep       endpoint
	tb       clientTables
	dbs      map[string]*sql.DB
	conns    map[string]*sql.Conn
	listener *pq.Listener
}

// newPqClient returns a lib/pq stepper against ep; its connections close when t ends.
func newPqClient(t *testing.T, ep endpoint, tb clientTables) *pqClient {
	p := &pqClient{ep: ep, tb: tb, dbs: map[string]*sql.DB{}, conns: map[string]*sql.Conn{}}
	p.goClient = &goClient{name: "pq", errorOf: pqError}
	p.steps = map[string]goStep{
		"connect":           p.connect,
		"auth_bad":          p.authBad,
		"simple_read":       p.simpleRead,
		"simple_write":      p.simpleWrite,
		"extended_read":     p.extendedRead,
		"extended_write":    p.extendedWrite,
		"prepared":          p.prepared,
		"tx_commit":         p.txCommit,
		"tx_rollback":       p.txRollback,
		"tx_readonly":       p.txReadOnly,
		"copy_in":           p.copyIn,
		"batch_error":       p.batchError,
		"cancel":            p.cancel,
		"listen":            p.listen,
		"notify":            p.notify,
		"wait_notification": p.waitNotification,
		"poll_notification": p.pollNotification,
		"large":             p.large,
		"ryw_rounds":        p.rywRounds,
	}
	t.Cleanup(func() {
		if p.listener != nil {
			p.listener.Close()
		}
		for name := range p.dbs {
			p.close(name)
		}
	})
	return p
}

// pqError returns the PostgreSQL error inside err.
func pqError(err error) *stepError {
	var pqErr *pq.Error
	if errors.As(err, &pqErr) {
		return &stepError{Code: string(pqErr.Code), Message: pqErr.Message}
	}
	return nil
}

// dsn is the lib/pq connection string for port (0: the matrix's pgowl) with password and extra parameters.
func (p *pqClient) dsn(port int, password string, extra url.Values) string {
	ep := p.ep
	if port != 0 {
		ep.port = port
	}
	q := url.Values{"application_name": {"matrix-pq"}}
	for k, v := range extra {
		q[k] = v
	}
	return ep.dsn(password, q)
}

// open connects the named connection.
func (p *pqClient) open(ctx context.Context, name, dsn string) (*sql.Conn, error) {
	connector, err := pq.NewConnector(dsn)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(pq.ConnectorWithNoticeHandler(connector, func(e *pq.Error) {
		p.note(notice{Conn: name, Severity: e.Severity, Code: string(e.Code), Message: e.Message, Detail: e.Detail})
	}))
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, err
	}
	p.dbs[name], p.conns[name] = db, conn
	return conn, nil
}

// conn returns the named connection to the matrix's pgowl, opening it on first use.
func (p *pqClient) conn(ctx context.Context, name string) (*sql.Conn, error) {
	if c := p.conns[name]; c != nil {
		return c, nil
	}
	return p.open(ctx, name, p.dsn(0, appPassword, nil))
}

func (p *pqClient) close(name string) {
	if c := p.conns[name]; c != nil {
		c.Close()
	}
	if db := p.dbs[name]; db != nil {
		db.Close()
	}
	delete(p.conns, name)
	delete(p.dbs, name)
}

func (p *pqClient) connect(ctx context.Context, _ []string) (map[string]any, error) {
	c, err := p.conn(ctx, "main")
	if err != nil {
		return nil, err
	}
	var user string
	err = c.QueryRowContext(ctx, "SELECT current_user").Scan(&user)
	return map[string]any{"user": user}, err
}

func (p *pqClient) authBad(ctx context.Context, _ []string) (map[string]any, error) {
	_, err := p.open(ctx, "bad", p.dsn(0, "wrong-"+appPassword, nil))
	p.close("bad")
	return nil, err
}

func (p *pqClient) simpleRead(ctx context.Context, a []string) (map[string]any, error) {
	// Without arguments lib/pq sends a simple Query.
	var n int64
	err := p.conns["main"].QueryRowContext(ctx, fmt.Sprintf("SELECT /* %s */ count(*) FROM %s", a[0], p.tb.items)).Scan(&n)
	return map[string]any{"count": n}, err
}

func (p *pqClient) simpleWrite(ctx context.Context, a []string) (map[string]any, error) {
	res, err := p.conns["main"].ExecContext(ctx, fmt.Sprintf("INSERT /* %s */ INTO %s (v) VALUES ('simple write')", a[0], p.tb.items))
	if err != nil {
		return nil, err
	}
	n, _ := res.RowsAffected()
	return map[string]any{"rowcount": n}, nil
}

func (p *pqClient) extendedRead(ctx context.Context, a []string) (map[string]any, error) {
	// With arguments: Parse/Describe/Sync of the unnamed statement, then Bind/Execute/Sync.
	var v string
	err := p.conns["main"].QueryRowContext(ctx, fmt.Sprintf("SELECT /* %s */ v FROM %s WHERE id = $1", a[0], p.tb.items), 3).Scan(&v)
	return map[string]any{"v": v}, err
}

func (p *pqClient) extendedWrite(ctx context.Context, a []string) (map[string]any, error) {
	var id int64
	err := p.conns["main"].QueryRowContext(ctx, fmt.Sprintf("INSERT /* %s */ INTO %s (v) VALUES ($1) RETURNING id", a[0], p.tb.items), "extended write").Scan(&id)
	return map[string]any{"id": id}, err
}

func (p *pqClient) prepared(ctx context.Context, a []string) (map[string]any, error) {
	c := p.conns["main"]
	reads, writes := 0, 0
	result := func() map[string]any { return map[string]any{"reads": reads, "writes": writes} }
	read, err := c.PrepareContext(ctx, fmt.Sprintf("SELECT /* %s */ v FROM %s WHERE id = $1", a[0], p.tb.items))
	if err != nil {
		return result(), err
	}
	write, err := c.PrepareContext(ctx, fmt.Sprintf("INSERT /* %s */ INTO %s (v) VALUES ($1) RETURNING id", a[1], p.tb.items))
	if err != nil {
		return result(), err
	}
	// Closing the statements (Close/Sync) is left to the connection's end:
	// it would add routed units to the step.
	for i := 1; i <= atoi(a[2]); i++ {
		id := (i-1)%10 + 1
		var v string
		if err := read.QueryRowContext(ctx, id).Scan(&v); err != nil {
			return result(), err
		}
		if v == fmt.Sprintf("item %d", id) {
			reads++
		}
		var newID int64
		if err := write.QueryRowContext(ctx, fmt.Sprintf("prepared %d", i)).Scan(&newID); err != nil {
			return result(), err
		}
		writes++
	}
	return result(), nil
}

func (p *pqClient) txCommit(ctx context.Context, a []string) (map[string]any, error) {
	tx, err := p.conns["main"].BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	var id int64
	var seen string
	if err := tx.QueryRowContext(ctx, fmt.Sprintf("INSERT INTO %s (v) VALUES ($1) RETURNING id", p.tb.items), a[1]).Scan(&id); err != nil {
		return nil, err
	}
	if err := tx.QueryRowContext(ctx, fmt.Sprintf("SELECT /* %s */ v FROM %s WHERE id = $1", a[0], p.tb.items), id).Scan(&seen); err != nil {
		return nil, err
	}
	return map[string]any{"id": id, "seen": seen}, tx.Commit()
}

func (p *pqClient) txRollback(ctx context.Context, a []string) (map[string]any, error) {
	tx, err := p.conns["main"].BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (v) VALUES ($1)", p.tb.items), a[0]); err != nil {
		tx.Rollback()
		return nil, err
	}
	return nil, tx.Rollback()
}

func (p *pqClient) txReadOnly(ctx context.Context, a []string) (map[string]any, error) {
	tx, err := p.conns["main"].BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	var n int64
	if err := tx.QueryRowContext(ctx, fmt.Sprintf("SELECT /* %s */ count(*) FROM %s", a[0], p.tb.items)).Scan(&n); err != nil {
		return nil, err
	}
	return map[string]any{"count": n}, tx.Commit()
}

func (p *pqClient) copyIn(ctx context.Context, a []string) (map[string]any, error) {
	// lib/pq runs COPY FROM STDIN only inside a transaction, as a prepared statement.
	tx, err := p.conns["main"].BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	stmt, err := tx.PrepareContext(ctx, fmt.Sprintf("COPY %s (id, v) FROM STDIN", p.tb.copy))
	if err != nil {
		return nil, err
	}
	n := atoi(a[0])
	for i := 1; i <= n; i++ {
		if _, err := stmt.ExecContext(ctx, i, fmt.Sprintf("copy row %d", i)); err != nil {
			return nil, err
		}
	}
	if _, err := stmt.ExecContext(ctx); err != nil {
		return nil, err
	}
	if err := stmt.Close(); err != nil {
		return nil, err
	}
	return map[string]any{"rows": n}, tx.Commit()
}

func (p *pqClient) batchError(ctx context.Context, a []string) (map[string]any, error) {
	// Three statements in one simple Query: the second fails, so the implicit
	// transaction keeps nothing.
	q := batchSQL(p.tb, a[0], a[1])
	_, failure := p.conns["main"].ExecContext(ctx, q[0]+"; "+q[1]+"; "+q[2])
	var after int64
	if err := p.conns["main"].QueryRowContext(ctx, "SELECT 40 + $1::int", 2).Scan(&after); err != nil {
		return nil, err
	}
	return map[string]any{"after": after}, failure
}

func (p *pqClient) cancel(ctx context.Context, _ []string) (map[string]any, error) {
	// lib/pq answers a cancelled context with a CancelRequest and then
	// discards the connection, so the statement runs on a connection of its own.
	c, err := p.conn(ctx, "cancel")
	if err != nil {
		return nil, err
	}
	defer p.close("cancel")
	qctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	began := time.Now()
	_, failure := c.ExecContext(qctx, "SELECT pg_sleep(30)")
	elapsed := time.Since(began).Milliseconds()
	var after int64
	if err := p.conns["main"].QueryRowContext(ctx, "SELECT 40 + $1::int", 2).Scan(&after); err != nil {
		return nil, err
	}
	res := map[string]any{"elapsed_ms": elapsed, "after": after}
	if failure != nil && pqError(failure) == nil {
		// The node's 57014 never reaches the caller: lib/pq reports the context's error.
		return res, &pq.Error{Code: "", Message: "lib/pq returned " + failure.Error()}
	}
	return res, failure
}

func (p *pqClient) listen(ctx context.Context, a []string) (map[string]any, error) {
	// pq.Listener keeps a connection of its own and reads it all the time.
	if p.listener == nil {
		p.listener = pq.NewListener(p.dsn(0, appPassword, nil), 100*time.Millisecond, time.Second, nil)
	}
	return nil, p.listener.Listen(a[0])
}

func (p *pqClient) notify(ctx context.Context, a []string) (map[string]any, error) {
	c, err := p.conn(ctx, "notifier")
	if err != nil {
		return nil, err
	}
	defer p.close("notifier")
	_, err = c.ExecContext(ctx, fmt.Sprintf("NOTIFY %s, '%s'", a[0], a[1]))
	return nil, err
}

// takeNotifications collects what the listener delivers within d.
func (p *pqClient) takeNotifications(d time.Duration) map[string]any {
	var got [][2]string
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case n := <-p.listener.Notify:
			if n != nil { // nil reports a reconnection
				got = append(got, [2]string{n.Channel, n.Extra})
				timer.Reset(100 * time.Millisecond)
			}
		case <-timer.C:
			return map[string]any{"notifications": notificationList(got...)}
		}
	}
}

func (p *pqClient) waitNotification(_ context.Context, a []string) (map[string]any, error) {
	return p.takeNotifications(time.Duration(atoi(a[0])) * time.Millisecond), nil
}

func (p *pqClient) pollNotification(_ context.Context, _ []string) (map[string]any, error) {
	// Ping sends an empty query on the listener's connection.
	if err := p.listener.Ping(); err != nil {
		return nil, err
	}
	return p.takeNotifications(100 * time.Millisecond), nil
}

func (p *pqClient) large(ctx context.Context, a []string) (map[string]any, error) {
	c := p.conns["large"]
	if c == nil {
		var err error
		if c, err = p.open(ctx, "large", p.dsn(atoi(a[0]), appPassword, nil)); err != nil {
			return nil, err
		}
	}
	began := time.Now()
	rows, err := c.QueryContext(ctx, fmt.Sprintf("SELECT g AS id, repeat('x', %d) AS v FROM generate_series(1, %d) g", atoi(a[2]), atoi(a[1])))
	if err != nil {
		return nil, err
	}
	var count, size int64
	var id, v sql.RawBytes
	for rows.Next() {
		if err := rows.Scan(&id, &v); err != nil {
			rows.Close()
			return nil, err
		}
		count++
		size += int64(len(v))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	res := map[string]any{"rows": count, "bytes": size, "elapsed_ms": time.Since(began).Milliseconds()}
	if len(a) > 3 && a[3] == "close" {
		p.close("large")
	}
	return res, nil
}

// TestLibPq runs the client matrix with lib/pq through database/sql, then
// lib/pq's binary_parameters mode.
func TestLibPq(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, matrixReadYourWritesOff)
	tb := createTables(t, c, "pq")
	p := newPqClient(t, o.endpoint, tb)
	t.Run("read_your_writes", func(t *testing.T) {
		o := startOwl(t, c, rywSessionScope)
		rywMatrix(t, c, newPqClient(t, o.endpoint, tb), "pq")
	})
	runMatrix(t, c, p, tb, driverCaps{
		extended:      true,
		copyInTx:      true,
		noCopyOut:     "lib/pq does not support COPY TO STDOUT (pq: COPY TO is not supported); pgx, node-postgres, psycopg2, JDBC and psql cover it",
		listenerQuiet: true,
	})

	t.Run("binary_parameters", func(t *testing.T) {
		// With binary_parameters=yes lib/pq sends Parse/Bind/Execute/Sync in one round trip.
		ctx := timeoutCtx(t, statementTimeout)
		conn, err := p.open(ctx, "binary", p.dsn(0, appPassword, url.Values{"binary_parameters": {"yes"}}))
		if err != nil {
			t.Fatal(err)
		}
		defer p.close("binary")
		p.takeNotices()
		readTag, writeTag := marker("pq-bin-read"), marker("pq-bin-write")
		resetStats(t, c)
		var v string
		if err := conn.QueryRowContext(ctx, fmt.Sprintf("SELECT /* %s */ v FROM %s WHERE id = $1", readTag, tb.items), 6).Scan(&v); err != nil {
			t.Fatalf("read: %v", err)
		}
		if v != "item 6" {
			t.Errorf("read returned %q", v)
		}
		rs := wantRoutes(t, "read", p.takeNotices(), "binary", 1, "standby", "READ_ONLY")
		onOneStandby(t, c, "read", readTag, rs)
		if _, err := conn.ExecContext(ctx, fmt.Sprintf("INSERT /* %s */ INTO %s (v) VALUES ($1)", writeTag, tb.items), []byte("binary parameter")); err != nil {
			t.Fatalf("write: %v", err)
		}
		wantRoutes(t, "write", p.takeNotices(), "binary", 1, "primary", "WRITE")
		onPrimary(t, c, "write", writeTag, 1)
	})
}
