package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
)

// verdictTextLimit is the cost limit of these tests: a sequential scan of
// 100 000 rows costs about 2 000, one of 10 rows about 1.
const verdictTextLimit = 500

// startVerdictCacheOwl starts pgowl with a guard on the AI comment, a cost
// limit, the default verdict cache, and round-robin standbys (so that a few
// runs of a statement put its verdict on every standby).
func startVerdictCacheOwl(t *testing.T) *owl {
	t.Helper()
	c := sharedClusterFor(t)
	return startOwl(t, c, func(cfg *config.Config) {
		cfg.Admin.Users = nil
		cfg.Routing.StandbyChoice = config.StandbyRoundRobin
		cfg.Guards = []config.Guard{{Name: "analytics", Match: config.GuardMatch{AIComment: true}, MaxCost: verdictTextLimit,
			VerdictCacheTTL: time.Minute}}
	})
}

// TestACachedCostVerdictIsNotServedToAnotherDatabase: the same SQL text
// names a 10-row table in one database and a 100 000-row table in another
// database on the same nodes. A guarded session on the first database runs
// it (cheap); then a guarded session on the second runs it: that is a
// sequential scan of 100 000 rows, over the limit, and must be refused.
// pgowl's verdict cache key is node + the session's SET statements + text +
// parameters, without the database, so the second session is served the
// first one's cheap verdict and its heavy statement runs.
func TestACachedCostVerdictIsNotServedToAnotherDatabase(t *testing.T) {
	c := sharedClusterFor(t)
	ctx := timeoutCtx(t, 2*time.Minute)
	const otherDB = "guard_vc_other"
	const table = "guard_vc_events"
	if err := c.Nodes[0].Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", otherDB)); err != nil {
		t.Fatal(err)
	}
	if err := c.Nodes[0].Exec(ctx, fmt.Sprintf("CREATE DATABASE %s OWNER %s", otherDB, appUser)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c.Nodes[0].Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", otherDB))
	})
	createTable(t, c, table, fmt.Sprintf(`CREATE TABLE %s (id int PRIMARY KEY, v text);
		INSERT INTO %[1]s SELECT g, 'value ' || g FROM generate_series(1, 10) g; ANALYZE %[1]s;`, table))
	big, err := pgx.Connect(ctx, c.Nodes[0].DatabaseDSN(otherDB))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := big.Exec(ctx, fmt.Sprintf(`SET ROLE %s; CREATE TABLE %s (id int PRIMARY KEY, v text);
		INSERT INTO %[2]s SELECT g, 'value ' || g FROM generate_series(1, 100000) g; ANALYZE %[2]s;`, appUser, table)); err != nil {
		t.Fatal(err)
	}
	big.Close(ctx)
	catchUp(t, c)

	o := startVerdictCacheOwl(t)
	prefix := o.cfg.Routing.AICommentPrefix
	sql := prefix + " SELECT count(*) FROM " + table + " WHERE v LIKE '%7%'"

	small := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
	ran := map[string]bool{}
	for i := 0; i < 4; i++ {
		if _, err := small.Exec(ctx, sql); err != nil {
			t.Fatalf("database %s (10 rows): %v, want it to run", appDatabase, err)
		}
		for _, r := range small.routes(t) {
			ran[r.Node] = true
		}
	}

	cfg, err := pgx.ParseConfig(o.dsn(appUser, appPassword, otherDB, nil))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	notices := &noticeLog{}
	cfg.OnNotice = notices.add
	other, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(context.Background())
	otherClient := &client{Conn: other, notices: notices}
	_, err = other.Exec(ctx, sql)
	rs := otherClient.routes(t)
	if err == nil {
		var cost string
		if len(rs) == 1 {
			cost = rs[0].Raw.Detail
		}
		t.Fatalf("database %s: a guarded sequential scan of 100 000 rows (cost about 2 000, limit %d) ran instead of being refused "+
			"with QUERY_COST_EXCEEDED: it was judged by the verdict cached for the same text in database %s (a 10-row table; "+
			"nodes %v); its NOTICE DETAIL: %q", otherDB, verdictTextLimit, appDatabase, ran, cost)
	}
	wantSQLState(t, "the heavy statement in "+otherDB, err, "54001")
}

// TestACachedCostVerdictFollowsSetLocalSearchPath: inside a transaction
// block, SET LOCAL search_path (the usual way to pick a tenant's schema)
// makes the same text name another table. A guarded statement is first run
// in a block on the default path (a 10-row table), then in a block whose
// path names the schema with the 100 000-row table of the same name: over
// the limit, it must be refused. The verdict cache keys on the session's
// committed SETs only, not on a setting changed inside the open block, so
// the heavy statement gets the cheap verdict and runs.
func TestACachedCostVerdictFollowsSetLocalSearchPath(t *testing.T) {
	c := sharedClusterFor(t)
	ctx := timeoutCtx(t, 2*time.Minute)
	const table = "guard_vc_tenant"
	if err := c.Nodes[0].Exec(ctx, "DROP SCHEMA IF EXISTS guard_vc_big CASCADE; CREATE SCHEMA guard_vc_big AUTHORIZATION "+appUser); err != nil {
		t.Fatal(err)
	}
	createTable(t, c, table, fmt.Sprintf(`CREATE TABLE %s (id int PRIMARY KEY, v text);
		INSERT INTO %[1]s SELECT g, 'value ' || g FROM generate_series(1, 10) g; ANALYZE %[1]s;
		CREATE TABLE guard_vc_big.%[1]s (id int PRIMARY KEY, v text);
		INSERT INTO guard_vc_big.%[1]s SELECT g, 'value ' || g FROM generate_series(1, 100000) g; ANALYZE guard_vc_big.%[1]s;`, table))

	o := startVerdictCacheOwl(t)
	prefix := o.cfg.Routing.AICommentPrefix
	sql := prefix + " SELECT count(*) FROM " + table + " WHERE v LIKE '%7%'"
	conn := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
	run := func(setup string) error { return runIn(t, ctx, conn, setup, sql) }
	if err := run(""); err != nil {
		t.Fatalf("on the default search_path (10 rows): %v, want it to run", err)
	}
	// Control: another text, with no cached verdict, on the tenant's path is refused.
	if err := runIn(t, ctx, conn, "SET LOCAL search_path = guard_vc_big, public", strings.Replace(sql, "%7%", "%8%", 1)); err == nil {
		t.Fatalf("control: the heavy statement (another text, nothing cached) ran on guard_vc_big's path; want QUERY_COST_EXCEEDED")
	}

	err := run("SET LOCAL search_path = guard_vc_big, public")
	if err == nil {
		t.Fatalf("BEGIN; SET LOCAL search_path = guard_vc_big, public; %s ran: a sequential scan of guard_vc_big.%s "+
			"(100 000 rows, cost about 2 000, limit %d) was judged by the verdict cached for public.%s (10 rows); want QUERY_COST_EXCEEDED",
			sql, table, verdictTextLimit, table)
	}
	wantSQLState(t, "the heavy statement after SET LOCAL search_path", err, "54001")
}

// runIn runs sql in a transaction block after setup, rolls the block back,
// and returns sql's error.
func runIn(t *testing.T, ctx context.Context, conn *client, setup, sql string) error {
	t.Helper()
	if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if setup != "" {
		if _, err := conn.Exec(ctx, setup); err != nil {
			t.Fatal(err)
		}
	}
	_, err := conn.Exec(ctx, sql)
	if _, rerr := conn.Exec(ctx, "ROLLBACK"); rerr != nil {
		t.Fatal(rerr)
	}
	conn.routes(t)
	return err
}
