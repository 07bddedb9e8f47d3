// Command example runs one statement through pgowl with package pgowlclient
// and prints where it ran, how many attempts it took, and, for a refusal,
// what kind it is (and for QUERY_COST_EXCEEDED, the plan nodes to fix).
//
//	go run ./pgowlclient/example -dsn postgres://app:secret@127.0.0.1:6432/postgres -sql 'SELECT 1'
//	go run ./pgowlclient/example -driver database/sql -budget 30s -sql 'SELECT count(*) FROM pg_class'
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/pgowlclient"
)

func main() {
	dsn := flag.String("dsn", "postgres://app:secret@127.0.0.1:6432/postgres?sslmode=disable", "pgowl connection string")
	query := flag.String("sql", "SELECT 1", "statement to run; its rows are counted")
	driver := flag.String("driver", "pgx", "pgx or database/sql")
	budget := flag.Duration("budget", 20*time.Second, "how long transient refusals are retried")
	flag.Parse()
	if err := run(*dsn, *query, *driver, *budget); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(dsn, query, driver string, budget time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	opts := pgowlclient.Options{OnRetry: func(e pgowlclient.RetryEvent) {
		fmt.Printf("attempt %d refused: %s (%s); next in %s\n", e.Attempt, e.Refusal.Code, e.Refusal.Kind, e.Wait.Round(time.Millisecond))
	}}
	var res pgowlclient.Result
	var rows int
	var err error
	switch driver {
	case "pgx":
		var client *pgowlclient.Client
		client, err = pgowlclient.NewPool(ctx, dsn, opts)
		if err != nil {
			return err
		}
		defer client.Close(context.Background())
		res, err = client.Query(ctx, query, nil, func(pgx.Rows) error { rows++; return nil })
	case "database/sql":
		cfg, perr := pgx.ParseConfig(dsn)
		if perr != nil {
			return perr
		}
		db := pgowlclient.OpenDB(cfg, opts)
		defer db.Close()
		res, err = db.Query(ctx, query, nil, func(*sql.Rows) error { rows++; return nil })
	default:
		return fmt.Errorf("unknown driver %q: want pgx or database/sql", driver)
	}
	if err != nil {
		return describe(err, res)
	}
	fmt.Printf("%d rows after %d attempts\n", rows, res.Attempts)
	for _, r := range res.Routes {
		fmt.Printf("ran on %s (%s): %s, lag %dms; %s\n", r.Node, r.Role, r.Reason, r.LagMS, r.Message)
	}
	if !res.Routed {
		fmt.Println("no routing NOTICE (is this pgowl, with pgowl.notice on?)")
	}
	return nil
}

func describe(err error, res pgowlclient.Result) error {
	var budget *pgowlclient.BudgetError
	if errors.As(err, &budget) {
		return fmt.Errorf("still refused when the budget ran out (%s, %d attempts): %w", budget.Exhausted, budget.Attempts, budget.Last)
	}
	r := pgowlclient.AsRefusal(err)
	if r == nil {
		return err
	}
	fmt.Printf("refused after %d attempts: %s (%s)\n%s\n", res.Attempts, r.Code, r.Kind, r.Err.Detail)
	if r.Cost != nil {
		fmt.Printf("estimated cost %.0f over the limit %.0f of guard %s; plan nodes:\n", r.Cost.EstimatedCost, r.Cost.Limit, r.Cost.Guard)
		for _, n := range r.Cost.PlanNodes {
			fmt.Printf("  %-14s relation=%s index=%s rows=%d own_cost=%.2f share=%.1f%%\n", n.NodeType, orNone(n.Relation), orNone(n.Index), n.Rows, n.OwnCost, n.SharePct)
		}
	}
	if res.InTransaction {
		fmt.Println("the connection is in a transaction: only the whole transaction can be retried")
	}
	return err
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
