package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
)

// README, "Read your own writes", user scope: "every session of the same user and database
// through this pgowl instance shares one position ... so a write on one connection followed at
// once by a read on another is ordered." Here the write's transaction commits in a unit that
// leaves the connection inside a new transaction: COMMIT AND CHAIN, or a multi-statement string
// "...; COMMIT; BEGIN; ...". The COMMIT is acknowledged, so a read on the user's other
// connection must see the row; the standby's replay is paused, so a read there cannot.
func TestACommitThatChainsANewTransactionIsSeenByTheUsersOtherSessions(t *testing.T) {
	c := ownCluster(t, 1)
	createTable(t, c, "rp_chain", "CREATE TABLE rp_chain (k int PRIMARY KEY, v int NOT NULL); INSERT INTO rp_chain SELECT g, 0 FROM generate_series(1, 10) g")
	ctx := timeoutCtx(t, 2*time.Minute)
	standby := c.Nodes[1]
	if err := standby.PauseReplay(ctx); err != nil {
		t.Fatalf("pause replay on %s: %v", standby.Name, err)
	}
	t.Cleanup(func() { standby.ResumeReplay(context.Background()) })

	cases := []struct {
		name   string
		key    int
		writer []string
	}{
		{"commit_and_chain", 1, []string{"BEGIN", "UPDATE rp_chain SET v = 1 WHERE k = 1", "COMMIT AND CHAIN"}},
		{"commit_then_begin_in_one_string", 2, []string{"UPDATE rp_chain SET v = 1 WHERE k = 2; COMMIT; BEGIN; SELECT 1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// A pgowl of its own: the user's shared position starts empty.
			o := startOwl(t, c, func(cfg *config.Config) {
				cfg.Routing.ReadYourWrites = config.ReadYourWritesUser
				cfg.Routing.MaxReplicaLag = 10 * time.Minute // the paused standby keeps qualifying
			})
			writer := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
			reader := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
			for _, sql := range tc.writer {
				if _, err := writer.PgConn().Exec(ctx, sql).ReadAll(); err != nil {
					t.Fatalf("writer: %s: %v", sql, err)
				}
			}
			writer.routes(t)
			var v int
			err := reader.QueryRow(ctx, fmt.Sprintf("SELECT v FROM rp_chain WHERE k = %d", tc.key)).Scan(&v)
			rs := reader.routes(t)
			if err != nil {
				t.Fatalf("reader: %v (routes %v)", err, rs)
			}
			if v != 1 {
				t.Errorf("after the user's other connection got COMMIT for its UPDATE (v = 1), this connection read v = %d on %v: "+
					"the committed write's position was not shared while the writer's connection sits in the next transaction", v, rs)
			}
			writer.Exec(ctx, "ROLLBACK")
		})
	}
}

// The same when no other connection to the primary is to be had beside the chained transaction
// (pool.max_per_node: 1): the position of the commit cannot be read, and the user's other
// sessions were left with the older one, so a read there went to the paused standby and missed
// the committed row. Now such a read takes the primary until the monitor's next sample of it;
// here it waits for the primary's one connection, which the writer frees shortly after.
func TestACommitThatChainsWhileThePrimaryPoolIsFullIsSeenByTheUsersOtherSessions(t *testing.T) {
	c := ownCluster(t, 1)
	createTable(t, c, "rp_chain_full", "CREATE TABLE rp_chain_full (k int PRIMARY KEY, v int NOT NULL); INSERT INTO rp_chain_full VALUES (1, 0)")
	ctx := timeoutCtx(t, 2*time.Minute)
	standby := c.Nodes[1]
	if err := standby.PauseReplay(ctx); err != nil {
		t.Fatalf("pause replay on %s: %v", standby.Name, err)
	}
	t.Cleanup(func() { standby.ResumeReplay(context.Background()) })
	o := startOwl(t, c, func(cfg *config.Config) {
		cfg.Routing.ReadYourWrites = config.ReadYourWritesUser
		cfg.Routing.MaxReplicaLag = 10 * time.Minute // the paused standby keeps qualifying
		cfg.Pool.MaxPerNode = 1
		cfg.Pool.MinIdle = 0
		cfg.Pool.AcquireTimeout = 10 * time.Second
	})
	writer := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
	reader := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
	for _, sql := range []string{"BEGIN", "UPDATE rp_chain_full SET v = 1 WHERE k = 1", "COMMIT AND CHAIN"} {
		if _, err := writer.PgConn().Exec(ctx, sql).ReadAll(); err != nil {
			t.Fatalf("writer: %s: %v", sql, err)
		}
	}
	writer.routes(t)
	released := make(chan error, 1)
	go func() {
		time.Sleep(500 * time.Millisecond)
		_, err := writer.PgConn().Exec(ctx, "ROLLBACK").ReadAll()
		released <- err
	}()
	var v int
	err := reader.QueryRow(ctx, "SELECT v FROM rp_chain_full WHERE k = 1").Scan(&v)
	rs := reader.routes(t)
	if rerr := <-released; rerr != nil {
		t.Fatalf("writer: ROLLBACK of the chained transaction: %v", rerr)
	}
	if err != nil {
		t.Fatalf("reader: %v (routes %v)", err, rs)
	}
	if v != 1 {
		t.Errorf("after the user's other connection got COMMIT for its UPDATE (v = 1), this connection read v = %d on %v: "+
			"the commit's position could not be read beside the chained transaction and was not shared", v, rs)
	}
}
