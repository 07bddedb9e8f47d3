package pgowlclient_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgowl/pgowl/pgowlclient"
)

// An agent runs a query through pgowl, retrying transient refusals for up
// to 30 seconds, and keeps where it ran beside the SQL; a cost refusal is
// turned into advice for whoever writes the SQL.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, err := pgowlclient.NewPool(ctx, "postgres://app:secret@127.0.0.1:6432/appdb", pgowlclient.Options{
		Backoff: pgowlclient.Backoff{Initial: 200 * time.Millisecond, Max: 5 * time.Second},
	})
	if err != nil {
		fmt.Println("connect:", err)
		return
	}
	defer client.Close(ctx)

	const query = "SELECT count(*) FROM orders WHERE created_at > now() - interval '1 day'"
	var orders int64
	res, err := client.Query(ctx, query, nil, func(rows pgx.Rows) error { return rows.Scan(&orders) })
	if refusal := pgowlclient.AsRefusal(err); refusal != nil && refusal.Kind == pgowlclient.Fixable && refusal.Cost != nil {
		for _, n := range refusal.Cost.PlanNodes {
			fmt.Printf("rewrite the SQL: %s on %s carries %.0f%% of the cost\n", n.NodeType, n.Relation, n.SharePct)
		}
		return
	}
	if err != nil {
		fmt.Println("query:", err)
		return
	}
	fmt.Printf("%d orders; ran on %s (%s, %s, lag %dms) after %d attempts\n",
		orders, res.Route.Node, res.Route.Role, res.Route.Reason, res.Route.LagMS, res.Attempts)
}

// AsRefusal reads pgowl's refusal from the error any pgx or database/sql call returns.
func ExampleAsRefusal() {
	err := fmt.Errorf("run report: %w", &pgconn.PgError{
		Code:    "54001",
		Message: "pgowl: QUERY_COST_EXCEEDED: estimated cost 182340 exceeds the limit 50000",
		Detail: "guard=reports node=pg2 estimated_cost=182340 limit=50000\n" +
			`plan_node="Seq Scan" relation=public.big index=- rows=1000000 own_cost=180000.00 share_pct=98.7`,
	})
	r := pgowlclient.AsRefusal(err)
	fmt.Println(r.Code, r.Kind)
	fmt.Printf("%s over %.0f (guard %s)\n", r.Cost.PlanNodes[0].NodeType, r.Cost.Limit, r.Cost.Guard)
	fmt.Println(pgowlclient.IsTransient(err))
	// Output:
	// QUERY_COST_EXCEEDED fixable
	// Seq Scan over 50000 (guard reports)
	// false
}

// A BudgetError says the refusal outlasted the caller's budget; the refusal is inside it.
func ExampleBudgetError() {
	err := error(&pgowlclient.BudgetError{
		Exhausted: pgowlclient.AttemptsSpent, Attempts: 3, Elapsed: 700 * time.Millisecond,
		Last: pgowlclient.AsRefusal(&pgconn.PgError{Code: "57P03", Message: "pgowl: NO_READABLE_REPLICA: no standby is up"}),
	})
	var budget *pgowlclient.BudgetError
	fmt.Println(errors.As(err, &budget), budget.Exhausted, pgowlclient.AsRefusal(err).Code)
	// Output:
	// true attempts spent NO_READABLE_REPLICA
}

// ParseRouteDetail reads a routing NOTICE's DETAIL, fields added later included.
func ExampleParseRouteDetail() {
	r, err := pgowlclient.ParseRouteDetail("node=pg2 role=standby reason=READ_ONLY lag_ms=40 subject=SELECT guard=reports cost=812.5")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(r.Node, r.Role, r.Reason, r.LagMS, r.Subject, r.Extra["guard"], r.Extra["cost"])
	// Output:
	// pg2 standby READ_ONLY 40 SELECT reports 812.5
}
