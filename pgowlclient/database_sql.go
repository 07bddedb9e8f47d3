package pgowlclient

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// DB runs statements through pgowl with database/sql, over pgx's stdlib
// driver: the same retries and routes as Client. Each call takes one
// connection from the *sql.DB for its duration, which is what lets it
// attribute NOTICEs and read the transaction state.
type DB struct {
	db      *sql.DB
	notices *NoticeRecorder
	opts    Options
}

// OpenDB opens a *sql.DB on cfg through pgx's stdlib, with the NOTICE
// recorder installed in every connection it makes; stdOpts are passed on
// to stdlib.OpenDB.
func OpenDB(cfg *pgx.ConnConfig, opts Options, stdOpts ...stdlib.OptionOpenDB) *DB {
	rec := NewNoticeRecorder()
	all := append([]stdlib.OptionOpenDB{rec.StdlibOption()}, stdOpts...)
	return &DB{db: stdlib.OpenDB(*cfg, all...), notices: rec, opts: opts}
}

// DB returns the underlying *sql.DB, for statements that need no retries or routes.
func (d *DB) DB() *sql.DB { return d.db }

// Close closes the *sql.DB.
func (d *DB) Close() error { return d.db.Close() }

// withConn runs f on one connection held for its duration, with the
// connection's *pgconn.PgConn.
func (d *DB) withConn(ctx context.Context, f func(conn *sql.Conn, pc *pgconn.PgConn) (attemptOutcome, error)) (attemptOutcome, error) {
	conn, err := d.db.Conn(ctx)
	if err != nil {
		return attemptOutcome{}, err
	}
	defer conn.Close()
	var pc *pgconn.PgConn
	if err := conn.Raw(func(driverConn any) error {
		c, ok := driverConn.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("pgowlclient: database/sql driver connection is %T, want pgx's *stdlib.Conn", driverConn)
		}
		pc = c.Conn().PgConn()
		return nil
	}); err != nil {
		return attemptOutcome{}, err
	}
	return f(conn, pc)
}

// Exec runs a statement that returns no rows, retrying transient refusals.
func (d *DB) Exec(ctx context.Context, query string, args ...any) (Result, error) {
	var res Result
	err := d.opts.run(ctx, &res, false, func(ctx context.Context) (attemptOutcome, error) {
		return d.withConn(ctx, func(conn *sql.Conn, pc *pgconn.PgConn) (attemptOutcome, error) {
			w := d.notices.begin(pc)
			r, err := conn.ExecContext(ctx, query, args...)
			d.notices.end(pc)
			res.take(w)
			res.RowsAffected = 0
			if err == nil {
				res.RowsAffected, _ = r.RowsAffected()
			}
			return finishAttempt(&res, pc, 0), err
		})
	})
	return res, err
}

// Query runs a statement and calls each for every row, retrying transient
// refusals while no row has been handed to each; a nil each reads and
// drops the rows.
func (d *DB) Query(ctx context.Context, query string, args []any, each func(*sql.Rows) error) (Result, error) {
	var res Result
	err := d.opts.run(ctx, &res, false, func(ctx context.Context) (attemptOutcome, error) {
		return d.withConn(ctx, func(conn *sql.Conn, pc *pgconn.PgConn) (attemptOutcome, error) {
			w := d.notices.begin(pc)
			delivered, err := sqlRows(ctx, conn, query, args, each)
			d.notices.end(pc)
			res.take(w)
			return finishAttempt(&res, pc, delivered), err
		})
	})
	return res, err
}

func sqlRows(ctx context.Context, conn *sql.Conn, query string, args []any, each func(*sql.Rows) error) (int, error) {
	rows, err := conn.QueryContext(ctx, query, args...)
	if err != nil {
		return 0, err
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
	closeErr := rows.Close()
	if eachErr != nil {
		return delivered, eachErr
	}
	if err := rows.Err(); err != nil {
		return delivered, err
	}
	return delivered, closeErr
}

// RunTx runs fn in a transaction and commits it, running it again in a new
// transaction after a transient refusal or PRIMARY_REPLACED, as
// Client.RunTx does; fn must be safe to run more than once.
func (d *DB) RunTx(ctx context.Context, txOpts *sql.TxOptions, fn func(*sql.Tx) error) (Result, error) {
	var res Result
	err := d.opts.run(ctx, &res, true, func(ctx context.Context) (attemptOutcome, error) {
		return d.withConn(ctx, func(conn *sql.Conn, pc *pgconn.PgConn) (attemptOutcome, error) {
			w := d.notices.begin(pc)
			err := runSQLTx(ctx, conn, txOpts, fn)
			d.notices.end(pc)
			res.take(w)
			res.InTransaction = pc.TxStatus() != 'I'
			return attemptOutcome{alone: !res.InTransaction}, err
		})
	})
	return res, err
}

func runSQLTx(ctx context.Context, conn *sql.Conn, txOpts *sql.TxOptions, fn func(*sql.Tx) error) error {
	tx, err := conn.BeginTx(ctx, txOpts)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		rbErr := tx.Rollback()
		if rbErr != nil && !errors.Is(rbErr, sql.ErrTxDone) && AsRefusal(err) == nil {
			return errors.Join(err, rbErr)
		}
		return err
	}
	return tx.Commit()
}
