package pgowlclient

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Client runs statements through pgowl with pgx: on a pool (NewPool,
// NewPoolFromConfig) or on one connection (ConnectConfig). It retries
// transient refusals, returns fixable ones at once and reports each
// statement's route. Its methods are safe for concurrent use on a pool; on a
// single connection, as for a *pgx.Conn, one at a time.
type Client struct {
	pool    *pgxpool.Pool
	conn    *pgx.Conn
	notices *NoticeRecorder
	opts    Options
}

// NewPool parses connString (a pgxpool connection string) and opens a pool
// whose connections report their NOTICEs to the client.
func NewPool(ctx context.Context, connString string, opts Options) (*Client, error) {
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return nil, err
	}
	return NewPoolFromConfig(ctx, cfg, opts)
}

// NewPoolFromConfig opens a pool from cfg, after installing the client's
// NOTICE recorder in it (any OnNotice handler cfg has is still called).
func NewPoolFromConfig(ctx context.Context, cfg *pgxpool.Config, opts Options) (*Client, error) {
	rec := NewNoticeRecorder()
	rec.Install(&cfg.ConnConfig.Config)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &Client{pool: pool, notices: rec, opts: opts}, nil
}

// ConnectConfig opens one connection from cfg, after installing the client's
// NOTICE recorder in it.
func ConnectConfig(ctx context.Context, cfg *pgx.ConnConfig, opts Options) (*Client, error) {
	rec := NewNoticeRecorder()
	rec.Install(&cfg.Config)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &Client{conn: conn, notices: rec, opts: opts}, nil
}

// Pool returns the client's pool, nil for a single-connection client.
func (c *Client) Pool() *pgxpool.Pool { return c.pool }

// Conn returns the client's connection, nil for a pool client.
func (c *Client) Conn() *pgx.Conn { return c.conn }

// Close closes the pool or the connection.
func (c *Client) Close(ctx context.Context) error {
	if c.pool != nil {
		c.pool.Close()
		return nil
	}
	return c.conn.Close(ctx)
}

// acquire returns a connection held exclusively until release.
func (c *Client) acquire(ctx context.Context) (conn *pgx.Conn, release func(), err error) {
	if c.conn != nil {
		return c.conn, func() {}, nil
	}
	pc, err := c.pool.Acquire(ctx)
	if err != nil {
		return nil, nil, err
	}
	return pc.Conn(), pc.Release, nil
}

// Exec runs a statement that returns no rows, retrying transient refusals
// while the connection is outside a transaction.
func (c *Client) Exec(ctx context.Context, sql string, args ...any) (Result, error) {
	var res Result
	err := c.opts.run(ctx, &res, false, func(ctx context.Context) (attemptOutcome, error) {
		return c.attempt(ctx, &res, func(conn *pgx.Conn) (int, pgconn.CommandTag, error) {
			tag, err := conn.Exec(ctx, sql, args...)
			return 0, tag, err
		})
	})
	return res, err
}

// attempt runs one try of a statement on a connection of the client, taking
// the statement's NOTICEs and command tag into res; do reports how many rows
// it handed to the caller.
func (c *Client) attempt(ctx context.Context, res *Result, do func(*pgx.Conn) (delivered int, tag pgconn.CommandTag, err error)) (attemptOutcome, error) {
	conn, release, err := c.acquire(ctx)
	if err != nil {
		return attemptOutcome{}, err
	}
	defer release()
	pc := conn.PgConn()
	w := c.notices.begin(pc)
	delivered, tag, err := do(conn)
	c.notices.end(pc)
	res.take(w)
	res.CommandTag, res.RowsAffected = tag.String(), tag.RowsAffected()
	return finishAttempt(res, pc, delivered), err
}

// Query runs a statement and calls each for every row, retrying transient
// refusals while the connection is outside a transaction and no row has
// been handed to each. An error from each stops the rows and is returned;
// a nil each reads and drops the rows.
func (c *Client) Query(ctx context.Context, sql string, args []any, each func(pgx.Rows) error) (Result, error) {
	var res Result
	err := c.opts.run(ctx, &res, false, func(ctx context.Context) (attemptOutcome, error) {
		return c.attempt(ctx, &res, func(conn *pgx.Conn) (int, pgconn.CommandTag, error) {
			return queryRows(ctx, conn, sql, args, each)
		})
	})
	return res, err
}

func queryRows(ctx context.Context, conn *pgx.Conn, sql string, args []any, each func(pgx.Rows) error) (int, pgconn.CommandTag, error) {
	rows, err := conn.Query(ctx, sql, args...)
	if err != nil {
		return 0, pgconn.CommandTag{}, err
	}
	delivered := 0
	var eachErr error
	for rows.Next() {
		delivered++
		if each == nil {
			continue
		}
		if eachErr = each(rows); eachErr != nil {
			break
		}
	}
	rows.Close()
	if eachErr != nil {
		return delivered, rows.CommandTag(), eachErr
	}
	return delivered, rows.CommandTag(), rows.Err()
}

// finishAttempt records the connection's transaction state after an
// attempt and says whether the statement could be sent again alone: only
// outside a transaction (a statement of an explicit transaction cannot be
// retried without the statements before it, and pgowl may have ended the
// transaction) and only if no row reached the caller.
func finishAttempt(res *Result, pc *pgconn.PgConn, delivered int) attemptOutcome {
	res.InTransaction = pc.TxStatus() != 'I'
	return attemptOutcome{alone: !res.InTransaction && delivered == 0}
}

// RunTx runs fn in a transaction and commits it. When fn or the commit
// fails with a transient refusal or PRIMARY_REPLACED, the transaction is
// rolled back and fn runs again in a new one, within the budget: fn must be
// safe to run more than once (no effect outside the transaction). A COMMIT
// that fails otherwise (for example "lost the connection") may or may not
// have committed and is never retried. Result.Routes has the route of every
// unit of the last attempt.
func (c *Client) RunTx(ctx context.Context, txOpts pgx.TxOptions, fn func(pgx.Tx) error) (Result, error) {
	var res Result
	err := c.opts.run(ctx, &res, true, func(ctx context.Context) (attemptOutcome, error) {
		conn, release, err := c.acquire(ctx)
		if err != nil {
			return attemptOutcome{}, err
		}
		defer release()
		pc := conn.PgConn()
		if pc.TxStatus() != 'I' {
			return attemptOutcome{}, fmt.Errorf("pgowlclient: RunTx on a connection already in a transaction")
		}
		w := c.notices.begin(pc)
		err = runPgxTx(ctx, conn, txOpts, fn)
		c.notices.end(pc)
		res.take(w)
		res.InTransaction = pc.TxStatus() != 'I'
		return attemptOutcome{alone: !res.InTransaction}, err
	})
	return res, err
}

func runPgxTx(ctx context.Context, conn *pgx.Conn, txOpts pgx.TxOptions, fn func(pgx.Tx) error) error {
	tx, err := conn.BeginTx(ctx, txOpts)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		// The rollback's own error matters less than fn's; a refused
		// transaction may already be gone on its node.
		rbErr := tx.Rollback(ctx)
		if rbErr != nil && !errors.Is(rbErr, pgx.ErrTxClosed) && AsRefusal(err) == nil {
			return errors.Join(err, rbErr)
		}
		return err
	}
	return tx.Commit(ctx)
}
