package clients

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"

	"github.com/pgowl/pgowl/internal/cluster"
)

// pgxClient runs the matrix's steps with pgx v5. Its main connection uses
// QueryExecModeCacheStatement, pgx's default: a new statement is prepared
// (Parse/Describe/Sync) and then executed (Bind/Execute/Sync).
type pgxClient struct {
	*goClient
	ep    endpoint
	tb    clientTables
	conns map[string]*pgx.Conn
}

// newPgxClient returns a pgx stepper against ep; its connections close when t ends.
func newPgxClient(t *testing.T, ep endpoint, tb clientTables) *pgxClient {
	p := &pgxClient{ep: ep, tb: tb, conns: map[string]*pgx.Conn{}}
	p.goClient = &goClient{name: "pgx", errorOf: pgxError}
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
		"copy_out":          p.copyOut,
		"batch_error":       p.batchError,
		"cancel":            p.cancel,
		"listen":            p.listen,
		"notify":            p.notify,
		"wait_notification": p.waitNotification,
		"poll_notification": p.pollNotification,
		"listener_read":     p.listenerRead,
		"unlisten":          p.unlisten,
		"large":             p.large,
		"ryw_rounds":        p.rywRounds,
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, c := range p.conns {
			c.Close(ctx)
		}
	})
	return p
}

// pgxError returns the PostgreSQL error inside err.
func pgxError(err error) *stepError {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return &stepError{Code: pgErr.Code, Message: pgErr.Message}
	}
	return nil
}

// open connects as the app user to port (0: the matrix's pgowl) with password.
func (p *pgxClient) open(ctx context.Context, name string, port int, password string) (*pgx.Conn, error) {
	ep := p.ep
	if port != 0 {
		ep.port = port
	}
	cfg, err := pgx.ParseConfig(ep.dsn(password, nil))
	if err != nil {
		return nil, err
	}
	cfg.RuntimeParams["application_name"] = "matrix-pgx"
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) { p.note(fromPgconn(name, n)) }
	if name == "main" {
		// A cancelled context sends a CancelRequest (to pgowl) instead of
		// closing the connection. The listener keeps pgx's default, a read
		// deadline, under which a wait for a notification can time out and
		// leave the connection usable.
		cfg.BuildContextWatcherHandler = func(pc *pgconn.PgConn) ctxwatch.Handler {
			return &pgconn.CancelRequestContextWatcherHandler{Conn: pc, DeadlineDelay: 10 * time.Second}
		}
	}
	return pgx.ConnectConfig(ctx, cfg)
}

// conn returns the named connection, opening it on first use.
func (p *pgxClient) conn(ctx context.Context, name string) (*pgx.Conn, error) {
	if c := p.conns[name]; c != nil {
		return c, nil
	}
	c, err := p.open(ctx, name, 0, appPassword)
	if err != nil {
		return nil, err
	}
	p.conns[name] = c
	return c, nil
}

func (p *pgxClient) connect(ctx context.Context, _ []string) (map[string]any, error) {
	c, err := p.conn(ctx, "main")
	if err != nil {
		return nil, err
	}
	var user string
	err = c.QueryRow(ctx, "SELECT current_user").Scan(&user)
	return map[string]any{"user": user}, err
}

func (p *pgxClient) authBad(ctx context.Context, _ []string) (map[string]any, error) {
	c, err := p.open(ctx, "bad", 0, "wrong-"+appPassword)
	if err == nil {
		c.Close(ctx)
	}
	return nil, err
}

func (p *pgxClient) simpleRead(ctx context.Context, a []string) (map[string]any, error) {
	var n int64
	err := p.conns["main"].QueryRow(ctx, fmt.Sprintf("SELECT /* %s */ count(*) FROM %s", a[0], p.tb.items), pgx.QueryExecModeSimpleProtocol).Scan(&n)
	return map[string]any{"count": n}, err
}

func (p *pgxClient) simpleWrite(ctx context.Context, a []string) (map[string]any, error) {
	tag, err := p.conns["main"].Exec(ctx, fmt.Sprintf("INSERT /* %s */ INTO %s (v) VALUES ('simple write')", a[0], p.tb.items), pgx.QueryExecModeSimpleProtocol)
	return map[string]any{"rowcount": tag.RowsAffected()}, err
}

func (p *pgxClient) extendedRead(ctx context.Context, a []string) (map[string]any, error) {
	var v string
	err := p.conns["main"].QueryRow(ctx, fmt.Sprintf("SELECT /* %s */ v FROM %s WHERE id = $1", a[0], p.tb.items), 3).Scan(&v)
	return map[string]any{"v": v}, err
}

func (p *pgxClient) extendedWrite(ctx context.Context, a []string) (map[string]any, error) {
	var id int64
	err := p.conns["main"].QueryRow(ctx, fmt.Sprintf("INSERT /* %s */ INTO %s (v) VALUES ($1) RETURNING id", a[0], p.tb.items), "extended write").Scan(&id)
	return map[string]any{"id": id}, err
}

func (p *pgxClient) prepared(ctx context.Context, a []string) (map[string]any, error) {
	c := p.conns["main"]
	reads, writes := 0, 0
	result := func() map[string]any { return map[string]any{"reads": reads, "writes": writes} }
	if _, err := c.Prepare(ctx, "matrix_read", fmt.Sprintf("SELECT /* %s */ v FROM %s WHERE id = $1", a[0], p.tb.items)); err != nil {
		return result(), err
	}
	if _, err := c.Prepare(ctx, "matrix_write", fmt.Sprintf("INSERT /* %s */ INTO %s (v) VALUES ($1) RETURNING id", a[1], p.tb.items)); err != nil {
		return result(), err
	}
	for i := 1; i <= atoi(a[2]); i++ {
		id := (i-1)%10 + 1
		var v string
		if err := c.QueryRow(ctx, "matrix_read", id).Scan(&v); err != nil {
			return result(), err
		}
		if v == fmt.Sprintf("item %d", id) {
			reads++
		}
		var newID int64
		if err := c.QueryRow(ctx, "matrix_write", fmt.Sprintf("prepared %d", i)).Scan(&newID); err != nil {
			return result(), err
		}
		writes++
	}
	return result(), nil
}

func (p *pgxClient) txCommit(ctx context.Context, a []string) (map[string]any, error) {
	tx, err := p.conns["main"].Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(ctx)
	var id int64
	var seen string
	if err := tx.QueryRow(ctx, fmt.Sprintf("INSERT INTO %s (v) VALUES ($1) RETURNING id", p.tb.items), a[1]).Scan(&id); err != nil {
		return nil, err
	}
	if err := tx.QueryRow(ctx, fmt.Sprintf("SELECT /* %s */ v FROM %s WHERE id = $1", a[0], p.tb.items), id).Scan(&seen); err != nil {
		return nil, err
	}
	return map[string]any{"id": id, "seen": seen}, tx.Commit(ctx)
}

func (p *pgxClient) txRollback(ctx context.Context, a []string) (map[string]any, error) {
	tx, err := p.conns["main"].Begin(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, fmt.Sprintf("INSERT INTO %s (v) VALUES ($1)", p.tb.items), a[0]); err != nil {
		tx.Rollback(ctx)
		return nil, err
	}
	return nil, tx.Rollback(ctx)
}

func (p *pgxClient) txReadOnly(ctx context.Context, a []string) (map[string]any, error) {
	tx, err := p.conns["main"].BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(ctx)
	var n int64
	if err := tx.QueryRow(ctx, fmt.Sprintf("SELECT /* %s */ count(*) FROM %s", a[0], p.tb.items)).Scan(&n); err != nil {
		return nil, err
	}
	return map[string]any{"count": n}, tx.Commit(ctx)
}

func (p *pgxClient) copyIn(ctx context.Context, a []string) (map[string]any, error) {
	// The text COPY through pgconn; the matrix's pgx test covers pgx.Conn.CopyFrom separately.
	tag, err := p.conns["main"].PgConn().CopyFrom(ctx, strings.NewReader(copyInput(atoi(a[0]))), fmt.Sprintf("COPY %s (id, v) FROM STDIN", p.tb.copy))
	return map[string]any{"rows": tag.RowsAffected()}, err
}

func (p *pgxClient) copyOut(ctx context.Context, a []string) (map[string]any, error) {
	w := &countLines{}
	_, err := p.conns["main"].PgConn().CopyTo(ctx, w, fmt.Sprintf("COPY /* %s */ %s TO STDOUT", a[0], p.tb.copy))
	return map[string]any{"lines": w.lines, "id_sum": w.idSum}, err
}

func (p *pgxClient) batchError(ctx context.Context, a []string) (map[string]any, error) {
	// A pgx batch is one pipeline: the failing second query ends it, and the
	// implicit transaction keeps nothing of the first.
	c := p.conns["main"]
	b := &pgx.Batch{}
	for _, sql := range batchSQL(p.tb, a[0], a[1]) {
		b.Queue(sql)
	}
	br := c.SendBatch(ctx, b)
	_, err1 := br.Exec()
	_, err2 := br.Exec()
	_, err3 := br.Exec()
	errClose := br.Close()
	var after int64
	if err := c.QueryRow(ctx, "SELECT 40 + $1::int", 2).Scan(&after); err != nil {
		return nil, err
	}
	res := map[string]any{"after": after, "first_ok": err1 == nil, "third_ok": err3 == nil, "close_failed": errClose != nil}
	return res, err2
}

func (p *pgxClient) cancel(ctx context.Context, _ []string) (map[string]any, error) {
	c := p.conns["main"]
	qctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	began := time.Now()
	_, failure := c.Exec(qctx, "SELECT pg_sleep(30)")
	elapsed := time.Since(began).Milliseconds()
	var after int64
	if err := c.QueryRow(ctx, "SELECT 40 + $1::int", 2).Scan(&after); err != nil {
		return nil, err
	}
	return map[string]any{"elapsed_ms": elapsed, "after": after}, failure
}

func (p *pgxClient) listen(ctx context.Context, a []string) (map[string]any, error) {
	c, err := p.conn(ctx, "listener")
	if err != nil {
		return nil, err
	}
	_, err = c.Exec(ctx, "LISTEN "+a[0])
	return nil, err
}

func (p *pgxClient) notify(ctx context.Context, a []string) (map[string]any, error) {
	c, err := p.open(ctx, "notifier", 0, appPassword)
	if err != nil {
		return nil, err
	}
	defer c.Close(ctx)
	_, err = c.Exec(ctx, fmt.Sprintf("NOTIFY %s, '%s'", a[0], a[1]))
	return nil, err
}

// takeNotification waits up to d for a notification on the listener.
func (p *pgxClient) takeNotification(ctx context.Context, d time.Duration) (map[string]any, error) {
	var got [][2]string
	for {
		wctx, cancel := context.WithTimeout(ctx, d)
		n, err := p.conns["listener"].WaitForNotification(wctx)
		timedOut := wctx.Err() != nil
		cancel()
		if err != nil {
			if timedOut {
				return map[string]any{"notifications": notificationList(got...)}, nil
			}
			return nil, err
		}
		got = append(got, [2]string{n.Channel, n.Payload})
		d = 100 * time.Millisecond
	}
}

func (p *pgxClient) waitNotification(ctx context.Context, a []string) (map[string]any, error) {
	return p.takeNotification(ctx, time.Duration(atoi(a[0]))*time.Millisecond)
}

func (p *pgxClient) pollNotification(ctx context.Context, _ []string) (map[string]any, error) {
	if _, err := p.conns["listener"].Exec(ctx, "SELECT 1"); err != nil {
		return nil, err
	}
	return p.takeNotification(ctx, 100*time.Millisecond)
}

func (p *pgxClient) listenerRead(ctx context.Context, a []string) (map[string]any, error) {
	var v int64
	err := p.conns["listener"].QueryRow(ctx, fmt.Sprintf("SELECT /* %s */ 1", a[0])).Scan(&v)
	return map[string]any{"v": v}, err
}

func (p *pgxClient) unlisten(ctx context.Context, _ []string) (map[string]any, error) {
	_, err := p.conns["listener"].Exec(ctx, "UNLISTEN *")
	return nil, err
}

func (p *pgxClient) large(ctx context.Context, a []string) (map[string]any, error) {
	c := p.conns["large"]
	if c == nil {
		var err error
		if c, err = p.open(ctx, "large", atoi(a[0]), appPassword); err != nil {
			return nil, err
		}
		p.conns["large"] = c
	}
	began := time.Now()
	rows, err := c.Query(ctx, fmt.Sprintf("SELECT g AS id, repeat('x', %d) AS v FROM generate_series(1, %d) g", atoi(a[2]), atoi(a[1])))
	if err != nil {
		return nil, err
	}
	var count, size int64
	for rows.Next() {
		count++
		size += int64(len(rows.RawValues()[1]))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	res := map[string]any{"rows": count, "bytes": size, "elapsed_ms": time.Since(began).Milliseconds()}
	if len(a) > 3 && a[3] == "close" {
		delete(p.conns, "large")
		c.Close(ctx)
	}
	return res, nil
}

// TestPgx runs the client matrix with pgx v5, then pgx's own batches,
// pipelines, CopyFrom and every query exec mode.
func TestPgx(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, matrixReadYourWritesOff)
	tb := createTables(t, c, "pgx")
	p := newPgxClient(t, o.endpoint, tb)
	t.Run("read_your_writes", func(t *testing.T) {
		o := startOwl(t, c, rywSessionScope)
		rywMatrix(t, c, newPgxClient(t, o.endpoint, tb), "pgx")
	})
	runMatrix(t, c, p, tb, driverCaps{extended: true})

	t.Run("exec_modes", func(t *testing.T) { pgxExecModes(t, c, p) })
	t.Run("batch_reads_and_writes", func(t *testing.T) { pgxBatches(t, c, p) })
	t.Run("pipeline", func(t *testing.T) { pgxPipeline(t, c, p) })
	t.Run("copy_from_binary", func(t *testing.T) { pgxCopyFrom(t, c, p) })
	t.Run("listen_under_load", func(t *testing.T) { pgxListenUnderLoad(t, p) })
	t.Run("target_session_attrs", func(t *testing.T) { pgxTargetSessionAttrs(t, p) })
}

// pgxTargetSessionAttrs connects with each of pgx's target_session_attrs. pgx
// checks them with "show transaction_read_only" or "select pg_is_in_recovery()"
// after login; pgowl is a read-write server (its writes reach the primary), so
// read-write and primary must connect and read-only and standby must be refused,
// whichever node answers reads. Each check runs several times: the answer must not
// depend on which standby the probe would have reached.
func pgxTargetSessionAttrs(t *testing.T, p *pgxClient) {
	ctx := timeoutCtx(t, time.Minute)
	for _, attrs := range []struct {
		value   string
		connect bool
	}{
		{"read-write", true}, {"primary", true}, {"prefer-standby", true}, {"any", true},
		{"read-only", false}, {"standby", false},
	} {
		for i := range 3 {
			cfg, err := pgconn.ParseConfig(p.ep.dsn(appPassword, url.Values{"target_session_attrs": {attrs.value}}))
			if err != nil {
				t.Fatal(err)
			}
			conn, err := pgconn.ConnectConfig(ctx, cfg)
			if err == nil {
				conn.Close(ctx)
			}
			if attrs.connect && err != nil {
				t.Errorf("target_session_attrs=%s, attempt %d: %v", attrs.value, i+1, err)
			}
			if !attrs.connect && err == nil {
				t.Errorf("target_session_attrs=%s, attempt %d: connected to pgowl, which presents a read-write server", attrs.value, i+1)
			}
		}
	}
}

// pgxExecModes reads and writes once in every query exec mode, on a connection of its own.
func pgxExecModes(t *testing.T, c *cluster.Cluster, p *pgxClient) {
	// In every mode one execution gets one NOTICE: the modes that prepare or
	// describe first (Parse/Describe/Sync) run nothing in that round trip.
	for _, mode := range []pgx.QueryExecMode{
		pgx.QueryExecModeCacheStatement,
		pgx.QueryExecModeCacheDescribe,
		pgx.QueryExecModeDescribeExec,
		pgx.QueryExecModeExec,
		pgx.QueryExecModeSimpleProtocol,
	} {
		t.Run(mode.String(), func(t *testing.T) {
			ctx := timeoutCtx(t, statementTimeout)
			conn, err := p.open(ctx, "modes", 0, appPassword)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			p.takeNotices()
			readTag, writeTag := marker("pgx-mode-read"), marker("pgx-mode-write")
			resetStats(t, c)
			var v string
			if err := conn.QueryRow(ctx, fmt.Sprintf("SELECT /* %s */ v FROM %s WHERE id = $1", readTag, p.tb.items), mode, 4).Scan(&v); err != nil {
				t.Fatalf("read: %v", err)
			}
			if v != "item 4" {
				t.Errorf("read returned %q", v)
			}
			rs := wantRoutes(t, "read", p.takeNotices(), "modes", 1, "standby", "READ_ONLY")
			onOneStandby(t, c, "read", readTag, rs)
			if _, err := conn.Exec(ctx, fmt.Sprintf("INSERT /* %s */ INTO %s (v) VALUES ($1)", writeTag, p.tb.items), mode, "mode "+mode.String()); err != nil {
				t.Fatalf("write: %v", err)
			}
			wantRoutes(t, "write", p.takeNotices(), "modes", 1, "primary", "WRITE")
			onPrimary(t, c, "write", writeTag, 1)
		})
	}
}

// pgxBatches sends a batch of reads (a standby) and a batch that writes and
// reads its own row (the primary, as one implicit transaction).
func pgxBatches(t *testing.T, c *cluster.Cluster, p *pgxClient) {
	ctx := timeoutCtx(t, statementTimeout)
	conn := p.conns["main"]
	catchUp(t, c)
	p.takeNotices()
	tag := marker("pgx-batch-read")
	resetStats(t, c)
	b := &pgx.Batch{}
	var count int64
	var name string
	b.Queue(fmt.Sprintf("SELECT /* %s a */ count(*) FROM %s", tag, p.tb.items)).QueryRow(func(r pgx.Row) error { return r.Scan(&count) })
	b.Queue(fmt.Sprintf("SELECT /* %s b */ v FROM %s WHERE id = $1", tag, p.tb.items), 7).QueryRow(func(r pgx.Row) error { return r.Scan(&name) })
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		t.Fatalf("read batch: %v", err)
	}
	if count < seedItems || name != "item 7" {
		t.Errorf("read batch returned count=%d name=%q", count, name)
	}
	wantRoutes(t, "read batch", p.takeNotices(), "main", -1, "standby", "READ_ONLY")
	onStandbys(t, c, "read batch", tag, 2)

	tag = marker("pgx-batch-write")
	value := marker("pgx-batch-value")
	resetStats(t, c)
	b = &pgx.Batch{}
	var id int64
	var seen string
	b.Queue(fmt.Sprintf("INSERT /* %s a */ INTO %s (v) VALUES ($1) RETURNING id", tag, p.tb.items), value).QueryRow(func(r pgx.Row) error { return r.Scan(&id) })
	b.Queue(fmt.Sprintf("SELECT /* %s b */ v FROM %s WHERE v = $1", tag, p.tb.items), value).QueryRow(func(r pgx.Row) error { return r.Scan(&seen) })
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		t.Fatalf("write batch: %v", err)
	}
	if seen != value {
		t.Errorf("the batch's read saw %q, want its own write %q", seen, value)
	}
	wantRoutes(t, "write batch", p.takeNotices(), "main", -1, "primary", "WRITE")
	onPrimary(t, c, "write batch", tag, 2)
}

// pgxPipeline sends a read, a write and a failing read as three Sync
// segments of one pgconn pipeline before reading any result: each segment is
// routed on its own, and the failure does not spill over.
func pgxPipeline(t *testing.T, c *cluster.Cluster, p *pgxClient) {
	ctx := timeoutCtx(t, statementTimeout)
	catchUp(t, c)
	readTag, writeTag := marker("pgx-pipe-read"), marker("pgx-pipe-write")
	resetStats(t, c)
	p.takeNotices()
	pc := p.conns["main"].PgConn()
	pl := pc.StartPipeline(ctx)
	pl.SendQueryParams(fmt.Sprintf("SELECT /* %s */ v FROM %s WHERE id = $1", readTag, p.tb.items), [][]byte{[]byte("5")}, nil, nil, nil)
	pl.SendPipelineSync()
	pl.SendQueryParams(fmt.Sprintf("INSERT /* %s */ INTO %s (v) VALUES ($1)", writeTag, p.tb.items), [][]byte{[]byte("pipelined")}, nil, nil, nil)
	pl.SendPipelineSync()
	pl.SendQueryParams(fmt.Sprintf("SELECT 1 / (SELECT count(*) - count(*) FROM %s WHERE id > $1)", p.tb.items), [][]byte{[]byte("0")}, nil, nil, nil)
	pl.SendPipelineSync()
	pl.SendQueryParams("SELECT $1::int + 1", [][]byte{[]byte("41")}, nil, nil, nil)
	pl.SendPipelineSync()
	if err := pl.Flush(); err != nil {
		t.Fatalf("flush the pipeline: %v", err)
	}
	var outcomes []string
	for syncs := 0; syncs < 4; {
		res, err := pl.GetResults()
		if pgErr := pgxError(err); pgErr != nil {
			outcomes = append(outcomes, pgErr.Code)
			continue
		}
		if err != nil {
			t.Fatalf("pipeline results: %v", err)
		}
		switch r := res.(type) {
		case nil:
			t.Fatalf("the pipeline ran dry after %d of 4 Syncs; outcomes so far %v", syncs, outcomes)
		case *pgconn.ResultReader:
			var last string
			for r.NextRow() {
				last = string(r.Values()[0])
			}
			_, err := r.Close()
			switch pgErr := pgxError(err); {
			case pgErr != nil:
				outcomes = append(outcomes, pgErr.Code)
			case err != nil:
				t.Fatalf("pipeline result: %v", err)
			case last != "":
				outcomes = append(outcomes, last)
			default:
				outcomes = append(outcomes, "ok")
			}
		case *pgconn.PipelineSync:
			syncs++
		}
	}
	if err := pl.Close(); err != nil {
		t.Fatalf("close the pipeline: %v", err)
	}
	if got, want := strings.Join(outcomes, ","), "item 5,ok,22012,42"; got != want {
		t.Errorf("pipeline outcomes %s, want %s", got, want)
	}
	rs := routesOf(t, p.takeNotices(), "main")
	want := []string{"standby", "primary", "standby", "standby"}
	if len(rs) != len(want) {
		t.Errorf("pipeline: NOTICEs %v, want one per Sync segment with roles %v", rs, want)
	} else {
		for i := range rs {
			if rs[i].Role != want[i] {
				t.Errorf("pipeline segment %d: NOTICE %v, want role %s", i+1, rs[i], want[i])
			}
		}
	}
	onStandbys(t, c, "pipelined read", readTag, 1)
	onPrimary(t, c, "pipelined write", writeTag, 1)
}

// pgxCopyFrom copies rows in with pgx.Conn.CopyFrom (binary COPY, preceded by
// a statement that learns the column types).
func pgxCopyFrom(t *testing.T, c *cluster.Cluster, p *pgxClient) {
	ctx := timeoutCtx(t, statementTimeout)
	p.takeNotices()
	const n = 2000
	rows := make([][]any, n)
	for i := range rows {
		rows[i] = []any{100000 + i, fmt.Sprintf("binary row %d", i)}
	}
	copied, err := p.conns["main"].CopyFrom(ctx, pgx.Identifier{p.tb.copy}, []string{"id", "v"}, pgx.CopyFromRows(rows))
	if err != nil {
		t.Fatalf("CopyFrom: %v", err)
	}
	if copied != n {
		t.Errorf("CopyFrom reported %d rows, want %d", copied, n)
	}
	rs := routesOf(t, p.takeNotices(), "main")
	if len(rs) == 0 || rs[len(rs)-1].Role != "primary" {
		t.Errorf("CopyFrom: NOTICEs %v, want the COPY's to name the primary", rs)
	}
	if got := primaryInt(t, c, fmt.Sprintf("SELECT count(*) FROM %s WHERE id >= 100000 AND v LIKE 'binary row %%'", p.tb.copy)); got != n {
		t.Errorf("the primary holds %d of the %d rows copied", got, n)
	}
}

// pgxListenUnderLoad has a listening connection run statements back to back
// while another connection sends it notifications: every statement must get
// its own answer, and every notification must arrive exactly once, whether it
// comes between statements or while one runs.
func pgxListenUnderLoad(t *testing.T, p *pgxClient) {
	ctx := timeoutCtx(t, time.Minute)
	channel := strings.ReplaceAll(marker("matrix_load"), "-", "_")
	const n = 300
	var mu sync.Mutex
	got := map[string]int{}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(got)
	}
	cfg, err := pgconn.ParseConfig(p.ep.dsn(appPassword, nil))
	if err != nil {
		t.Fatal(err)
	}
	cfg.OnNotification = func(_ *pgconn.PgConn, nt *pgconn.Notification) {
		if nt.Channel == channel {
			mu.Lock()
			got[nt.Payload]++
			mu.Unlock()
		}
	}
	listener, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close(context.Background())
	if _, err := listener.Exec(ctx, "LISTEN "+channel).ReadAll(); err != nil {
		t.Fatalf("LISTEN: %v", err)
	}
	notifier, err := p.open(ctx, "notifier", 0, appPassword)
	if err != nil {
		t.Fatal(err)
	}
	defer notifier.Close(context.Background())
	sent := make(chan error, 1)
	go func() {
		for i := range n {
			if _, err := notifier.Exec(ctx, fmt.Sprintf("NOTIFY %s, 'n%d'", channel, i)); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	for i := range n {
		var answer string
		if i%2 == 0 {
			res := listener.ExecParams(ctx, "SELECT $1::int + 1", [][]byte{[]byte(strconv.Itoa(i))}, nil, nil, nil).Read()
			if res.Err != nil || len(res.Rows) != 1 {
				t.Fatalf("statement %d on the listener: %v (%d rows)", i, res.Err, len(res.Rows))
			}
			answer = string(res.Rows[0][0])
		} else {
			results, err := listener.Exec(ctx, fmt.Sprintf("SELECT %d + 1", i)).ReadAll()
			if err != nil || len(results) != 1 || len(results[0].Rows) != 1 {
				t.Fatalf("statement %d on the listener: %v", i, err)
			}
			answer = string(results[0].Rows[0][0])
		}
		if answer != strconv.Itoa(i+1) {
			t.Fatalf("statement %d on the listener answered %q, want %d: replies are out of step", i, answer, i+1)
		}
		if i%3 == 0 {
			// Idle a moment, so that notifications also arrive between statements.
			time.Sleep(time.Millisecond)
		}
	}
	if err := <-sent; err != nil {
		t.Fatalf("NOTIFY: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for count() < n && time.Now().Before(deadline) {
		wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		listener.WaitForNotification(wctx)
		cancel()
	}
	mu.Lock()
	defer mu.Unlock()
	var missing, doubled []string
	for i := range n {
		switch got[fmt.Sprintf("n%d", i)] {
		case 0:
			missing = append(missing, fmt.Sprintf("n%d", i))
		case 1:
		default:
			doubled = append(doubled, fmt.Sprintf("n%d", i))
		}
	}
	if len(missing) > 0 || len(doubled) > 0 || len(got) != n {
		t.Errorf("of %d notifications, %d arrived; missing %v, more than once %v", n, len(got), missing, doubled)
	}
	p.takeNotices()
}
