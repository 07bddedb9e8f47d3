package integration

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/internal/cluster"
	"github.com/pgowl/pgowl/route"
)

// review9Pool fills pgowl's pool with n idle backends on the primary: n
// clients each open a transaction through pgowl, write in it, and commit only
// once all of them hold a backend. The clients are returned, connected.
func review9Pool(t *testing.T, o *owl, table string, modes []pgx.QueryExecMode) []*client {
	t.Helper()
	ctx := timeoutCtx(t, time.Minute)
	clients := make([]*client, len(modes))
	txs := make([]pgx.Tx, len(modes))
	for i, m := range modes {
		clients[i] = o.connect(t, withMode(m))
		tx, err := clients[i].Begin(ctx)
		if err != nil {
			t.Fatalf("client %d: BEGIN: %v", i, err)
		}
		if _, err := tx.Exec(ctx, fmt.Sprintf("INSERT INTO %s (id, v) VALUES (%d, 'warm-up') ON CONFLICT (id) DO NOTHING", table, 1000+i)); err != nil {
			t.Fatalf("client %d: INSERT in the warm-up transaction: %v", i, err)
		}
		txs[i] = tx
	}
	for i, tx := range txs {
		if err := tx.Commit(ctx); err != nil {
			t.Fatalf("client %d: COMMIT of the warm-up transaction: %v", i, err)
		}
	}
	for _, c := range clients {
		c.notices.take()
	}
	return clients
}

// review9CrashRestart SIGKILLs one backend of node (a connection of its own),
// which makes the postmaster end every other backend (with a WARNING
// 57P02 "terminating connection because of crash of another server
// process", then a closed connection) and restart. It returns once the node
// accepts connections again and pgowl's monitor sees the roles as before.
func review9CrashRestart(t *testing.T, o *owl, c *cluster.Cluster, node *cluster.Node) {
	t.Helper()
	crashRestart(t, node)
	o.waitRoles(t, initialRoles(c))
}

// crashRestart SIGKILLs one backend of node (a connection of its own): the
// postmaster ends every other backend (a WARNING 57P02, then a closed
// connection) and restarts after crash recovery. It returns once the node
// accepts connections again.
func crashRestart(t *testing.T, node *cluster.Node) {
	t.Helper()
	ctx := timeoutCtx(t, 2*time.Minute)
	victim, err := node.Connect(ctx)
	if err != nil {
		t.Fatalf("connect to %s: %v", node.Name, err)
	}
	defer victim.Close(context.Background())
	var pid int
	if err := victim.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatalf("backend pid on %s: %v", node.Name, err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL backend %d of %s: %v", pid, node.Name, err)
	}
	// The postmaster notices the crash and restarts; wait until it is back.
	time.Sleep(300 * time.Millisecond)
	deadline := time.Now().Add(60 * time.Second)
	for {
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := node.Exec(qctx, "SELECT 1")
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not accept connections within 60s of the crash: %v", node.Name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// review9Case is one kind of statement a client sends after its pooled
// backend died; it returns the statement's error.
type review9Case struct {
	name string
	mode pgx.QueryExecMode
	run  func(ctx context.Context, conn *client, id int) error
}

func review9WriteCases(table string) []review9Case {
	insert := func(ctx context.Context, conn *client, id int) error {
		_, err := conn.Exec(ctx, fmt.Sprintf("INSERT INTO %s (id, v) VALUES ($1, 'after')", table), id)
		return err
	}
	return []review9Case{
		{"simple_insert", pgx.QueryExecModeSimpleProtocol, insert},
		{"extended_insert", pgx.QueryExecModeCacheStatement, insert},
		{"exec_mode_insert", pgx.QueryExecModeExec, insert},
		{"transaction", pgx.QueryExecModeSimpleProtocol, func(ctx context.Context, conn *client, id int) error {
			return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, fmt.Sprintf("INSERT INTO %s (id, v) VALUES (%d, 'tx')", table, id))
				return err
			})
		}},
		{"batch", pgx.QueryExecModeCacheStatement, func(ctx context.Context, conn *client, id int) error {
			b := &pgx.Batch{}
			b.Queue(fmt.Sprintf("INSERT INTO %s (id, v) VALUES ($1, 'batch')", table), id)
			b.Queue(fmt.Sprintf("UPDATE %s SET v = 'batch2' WHERE id = $1", table), id)
			return conn.SendBatch(ctx, b).Close()
		}},
	}
}

// review9Warm runs one write through a fresh pgowl so that its pool holds
// exactly one idle backend on the primary, and returns the client.
func review9Warm(t *testing.T, c *cluster.Cluster, table string, mode pgx.QueryExecMode) (*owl, *client) {
	t.Helper()
	o := startOwl(t, c, nil)
	conn := o.connect(t, withMode(mode))
	ctx := timeoutCtx(t, statementTimeout)
	if _, err := conn.Exec(ctx, fmt.Sprintf("UPDATE %s SET v = v WHERE id = -1", table)); err != nil {
		t.Fatalf("warm-up write: %v", err)
	}
	conn.notices.take()
	return o, conn
}

// TestResendAfterCrashRestartPrimary: a node's crash-restart (one
// backend died; PostgreSQL ends all others) closes every idle pooled backend.
// README, "Dead backends": a backend found dead before any reply reached the
// client (a node restart closed an idle connection) is replaced and the
// statement sent again; a write is sent again when it cannot have run. The
// single pooled backend here was closed by the node before the client's
// statement was sent, so the statement must succeed, exactly once.
// PostgreSQL 14+ ends the idle backends of a crash with a WARNING (a
// NoticeResponse, not a FATAL) 57P02 before closing: pgowl relays it as the
// unit's first reply, so the unit counts as forwarded and is never resent,
// even a plain read; and safeToResend's 57P02 case never matches.
func TestResendAfterCrashRestartPrimary(t *testing.T) {
	c := ownCluster(t, 1)
	primary := c.Nodes[0]
	createTable(t, c, "r9_crash", "CREATE TABLE r9_crash (id int PRIMARY KEY, v text)")
	for i, tc := range review9WriteCases("r9_crash") {
		t.Run(tc.name, func(t *testing.T) {
			o, conn := review9Warm(t, c, "r9_crash", tc.mode)
			review9CrashRestart(t, o, c, primary)
			ctx := timeoutCtx(t, time.Minute)
			if err := tc.run(ctx, conn, i+1); err != nil {
				t.Errorf("%s after the node's crash-restart closed the idle pooled backend: %v", tc.name, err)
				for _, n := range conn.notices.take() {
					t.Logf("the client also got a %s %s %q", n.Severity, n.Code, n.Message)
				}
			}
			if got := primaryInt(t, c, "SELECT count(*) FROM r9_crash WHERE id = $1", i+1); got != 1 {
				t.Errorf("row %d is on the primary %d times, want once", i+1, got)
			}
		})
	}
	t.Run("read_in_read_write_transaction", func(t *testing.T) {
		o, conn := review9Warm(t, c, "r9_crash", pgx.QueryExecModeSimpleProtocol)
		review9CrashRestart(t, o, c, primary)
		ctx := timeoutCtx(t, time.Minute)
		err := pgx.BeginTxFunc(ctx, conn, pgx.TxOptions{AccessMode: pgx.ReadWrite}, func(tx pgx.Tx) error {
			var n int
			return tx.QueryRow(ctx, "SELECT count(*) FROM r9_crash").Scan(&n)
		})
		if err != nil {
			t.Errorf("read after the node's crash-restart closed the idle pooled backend: %v", err)
		}
	})
}

// TestResendReadAfterCrashRestartStandby: the same for a read on a
// standby, which pgowl sends again whatever the error: after the standby's
// crash-restart closed the idle pooled backend, a plain SELECT must succeed.
func TestResendReadAfterCrashRestartStandby(t *testing.T) {
	c := ownCluster(t, 1)
	standby := c.Nodes[1]
	createTable(t, c, "r9_sread", "CREATE TABLE r9_sread (id int PRIMARY KEY, v text)")
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheStatement} {
		t.Run(mode.String(), func(t *testing.T) {
			o := startOwl(t, c, nil)
			ctx := timeoutCtx(t, time.Minute)
			conn := o.connect(t, withMode(mode))
			var n int
			if err := conn.QueryRow(ctx, "SELECT count(*) FROM r9_sread").Scan(&n); err != nil {
				t.Fatalf("read before the crash: %v", err)
			}
			wantRoute(t, "read before the crash", conn.oneRoute(t, "read"), "standby", "")
			review9CrashRestart(t, o, c, standby)
			catchUp(t, c)
			if err := conn.QueryRow(ctx, "SELECT count(*) FROM r9_sread").Scan(&n); err != nil {
				t.Errorf("read after the standby's crash-restart closed the idle pooled backend: %v", err)
				for _, n := range conn.notices.take() {
					t.Logf("the client also got a %s %s %q", n.Severity, n.Code, n.Message)
				}
			}
		})
	}
}

// review9IdleBackends returns the pids of the app user's idle backends on node.
func review9IdleBackends(t *testing.T, node *cluster.Node) []int {
	t.Helper()
	ctx := timeoutCtx(t, statementTimeout)
	conn, err := node.Connect(ctx)
	if err != nil {
		t.Fatalf("connect to %s: %v", node.Name, err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE usename = $1 AND state = 'idle'", appUser)
	if err != nil {
		t.Fatalf("list idle backends on %s: %v", node.Name, err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatalf("list idle backends on %s: %v", node.Name, err)
	}
	return pids
}

// TestResendManyDeadIdleBackends: README, "Dead backends": a backend
// found dead before any reply reached the client (a node restart closed an
// idle connection) is replaced and the statement sent again. A node restart
// (pg_ctl restart -m fast; each idle backend says 57P01 and closes) or
// pg_terminate_backend of the idle backends closes every pooled connection at
// once. pgowl sends the unit again on the next idle pooled connection, which
// is just as dead, and gives up after maxAttempts (3): with five dead
// pooled backends the client's first statement fails with 08006 although
// the log says "sending it on a fresh one" and nothing ran.
func TestResendManyDeadIdleBackends(t *testing.T) {
	c := ownCluster(t, 1)
	primary := c.Nodes[0]
	createTable(t, c, "r9_many", "CREATE TABLE r9_many (id int PRIMARY KEY, v text)")
	modes := []pgx.QueryExecMode{
		pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeSimpleProtocol,
		pgx.QueryExecModeCacheStatement, pgx.QueryExecModeCacheStatement,
	}
	kill := map[string]func(t *testing.T){
		"terminate": func(t *testing.T) {
			ctx := timeoutCtx(t, statementTimeout)
			pids := review9IdleBackends(t, primary)
			if len(pids) < len(modes) {
				t.Fatalf("%d idle app backends on the primary, want at least %d", len(pids), len(modes))
			}
			for _, pid := range pids {
				if err := primary.Exec(ctx, "SELECT pg_terminate_backend($1, 5000)", pid); err != nil {
					t.Fatalf("terminate %d: %v", pid, err)
				}
			}
		},
		"restart_fast": func(t *testing.T) {
			ctx := timeoutCtx(t, time.Minute)
			if err := primary.Stop(ctx); err != nil {
				t.Fatalf("stop %s: %v", primary.Name, err)
			}
			if err := primary.Start(ctx); err != nil {
				t.Fatalf("start %s: %v", primary.Name, err)
			}
		},
	}
	base := 0
	for _, name := range []string{"terminate", "restart_fast"} {
		base += 100
		t.Run(name, func(t *testing.T) {
			o := startOwl(t, c, nil)
			clients := review9Pool(t, o, "r9_many", modes)
			kill[name](t)
			o.waitRoles(t, map[string]route.Role{primary.Name: route.RolePrimary, c.Nodes[1].Name: route.RoleStandby})
			ctx := timeoutCtx(t, time.Minute)
			for i, conn := range clients {
				id := base + i
				if _, err := conn.Exec(ctx, "INSERT INTO r9_many (id, v) VALUES ($1, 'after')", id); err != nil {
					t.Errorf("client %d (%v): INSERT after the node closed the idle pooled backends: %v", i, modes[i], err)
				}
				if got := primaryInt(t, c, "SELECT count(*) FROM r9_many WHERE id = $1", id); got != 1 {
					t.Errorf("client %d: row %d is on the primary %d times, want once", i, id, got)
				}
			}
		})
	}
}
