package integration

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestANodeRefusingAStatementsConnectionLeavesTheSessionOpen: when a node refuses the backend
// connection a statement needs (here the database no longer allows connections, FATAL 55000;
// a node that is being stopped answers a login with FATAL 57P01), the statement fails with the
// node's code as an ERROR, and the client's connection to pgowl stays open: a FATAL would make
// the client close it, though nothing is wrong with it. Once the node accepts logins again the
// same session goes on.
func TestANodeRefusingAStatementsConnectionLeavesTheSessionOpen(t *testing.T) {
	c := sharedClusterFor(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const database = "refusing_db"
	if err := c.Nodes[0].Exec(ctx, "DROP DATABASE IF EXISTS "+database); err != nil {
		t.Fatal(err)
	}
	if err := c.Nodes[0].Exec(ctx, "CREATE DATABASE "+database); err != nil {
		t.Fatal(err)
	}
	allow := func(allowed string) {
		t.Helper()
		if err := c.Nodes[0].Exec(ctx, "ALTER DATABASE "+database+" ALLOW_CONNECTIONS "+allowed); err != nil {
			t.Fatal(err)
		}
		catchUp(t, c)
	}
	t.Cleanup(func() {
		cctx, ccancel := context5s()
		defer ccancel()
		_ = c.Nodes[0].Exec(cctx, "ALTER DATABASE "+database+" ALLOW_CONNECTIONS true")
	})
	catchUp(t, c)
	o := startOwl(t, c, nil)
	conn, err := pgx.Connect(ctx, o.dsn(appUser, appPassword, database, url.Values{"default_query_exec_mode": {"simple_protocol"}}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var one int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		t.Fatal(err)
	}

	allow("false")
	// pgowl's backends to the database end: the next statement needs a new one.
	for _, n := range c.Nodes {
		if err := n.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '"+database+"'"); err != nil {
			t.Fatal(err)
		}
	}
	_, err = conn.Exec(ctx, "SELECT 1")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Severity != "ERROR" {
		t.Errorf("a statement whose node refused its connection: %v, want an ERROR", err)
	} else {
		t.Logf("the statement: %s %s: %s", pgErr.Severity, pgErr.Code, pgErr.Message)
	}
	if conn.PgConn().IsClosed() {
		t.Fatal("the client's connection was closed")
	}

	allow("true")
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		t.Errorf("the same session once the node accepts logins again: %v", err)
	}
}
