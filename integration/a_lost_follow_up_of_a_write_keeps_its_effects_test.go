package integration

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/internal/cluster"
)

// lockPgProc holds pg_catalog.pg_proc locked on c's primary. A backend that has not looked up
// pg_current_wal_insert_lsn yet (a fresh one) waits there for the lock when it parses pgowl's
// write-position query. It returns the locker connection (its own queries are not blocked) and
// unlock.
func lockPgProc(t *testing.T, ctx context.Context, c *cluster.Cluster) (*pgx.Conn, func()) {
	t.Helper()
	locker, err := pgx.Connect(ctx, c.Nodes[0].DatabaseDSN(appDatabase))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { locker.Close(context.Background()) })
	if _, err := locker.Exec(ctx, "BEGIN; LOCK TABLE pg_catalog.pg_proc IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	unlocked := false
	unlock := func() {
		if !unlocked {
			unlocked = true
			if _, err := locker.Exec(context.Background(), "COMMIT"); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(unlock)
	return locker, unlock
}

// terminatePositionRead ends, through locker, the backend waiting for pg_proc in pgowl's
// write-position query.
func terminatePositionRead(t *testing.T, ctx context.Context, locker *pgx.Conn) {
	t.Helper()
	terminateWaiting(t, ctx, locker, "pg_current_wal_insert_lsn", "pg_current_wal_insert_lsn")
}

// terminateWaiting ends, through locker, the app user's backend waiting for a lock in a query
// that mentions what or orWhat.
func terminateWaiting(t *testing.T, ctx context.Context, locker *pgx.Conn, what, orWhat string) {
	t.Helper()
	var pid int32
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		err := locker.QueryRow(ctx, `SELECT pid FROM pg_stat_activity
WHERE wait_event_type = 'Lock' AND usename = $1 AND (query LIKE '%' || $2 || '%' OR query LIKE '%' || $3 || '%')
  AND pid <> pg_backend_pid()`, appUser, what, orWhat).Scan(&pid)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			var waiting []string
			rows, _ := locker.Query(ctx, `SELECT coalesce(application_name, '') || ': ' || left(query, 120) FROM pg_stat_activity WHERE wait_event_type = 'Lock'`)
			for rows.Next() {
				var q string
				rows.Scan(&q)
				waiting = append(waiting, q)
			}
			rows.Close()
			t.Fatalf("no query of the session's backend (%q) waits for pg_proc within 10s; waiting for a lock: %q", what, waiting)
		}
	}
	if _, err := locker.Exec(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
}

// TestALostPositionReadKeepsTheCommittedSettings: in read_your_writes user scope, a
// transaction block sets statement_timeout and application_name, writes, and commits. The
// COMMIT succeeds (the client has its reply), then pgowl reads the write position on the same
// backend and loses it there. The SETs committed: the session must keep them, as it keeps them
// when the backend is lost at any later moment.
func TestALostPositionReadKeepsTheCommittedSettings(t *testing.T) {
	c := sharedClusterFor(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	createTable(t, c, "review_lost_position", "CREATE TABLE review_lost_position (n int)")
	o := startOwl(t, c, func(cfg *config.Config) { cfg.Routing.ReadYourWrites = config.ReadYourWritesUser })
	s := o.connect(t, func(cfg *pgx.ConnConfig) {
		withMode(pgx.QueryExecModeSimpleProtocol)(cfg)
		cfg.RuntimeParams["application_name"] = "before-block"
	})
	for _, sql := range []string{
		"BEGIN",
		"INSERT INTO review_lost_position VALUES (1)",
		"SET statement_timeout = '123s'",
		"SET application_name = 'set-in-block'",
	} {
		if _, err := s.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	locker, unlock := lockPgProc(t, ctx, c)
	done := make(chan error, 1)
	go func() {
		_, err := s.Exec(ctx, "COMMIT")
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("COMMIT: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("COMMIT had no reply")
	}
	terminatePositionRead(t, ctx, locker)
	unlock()

	var timeout, app string
	if err := s.QueryRow(ctx, "SHOW statement_timeout").Scan(&timeout); err != nil {
		t.Fatalf("SHOW statement_timeout: %v", err)
	}
	if err := s.QueryRow(ctx, "SELECT current_setting('application_name') FROM review_lost_position LIMIT 1 FOR UPDATE").Scan(&app); err != nil {
		t.Fatalf("application_name on the primary: %v", err)
	}
	reported := s.PgConn().ParameterStatus("application_name")
	if timeout != "123s" || app != "set-in-block" || reported != "set-in-block" {
		t.Errorf("after a committed block whose write-position read lost the backend: statement_timeout %q, application_name %q on the node and %q reported to the client; want 123s and set-in-block: the committed SETs were dropped as if the block had rolled back",
			timeout, app, reported)
	}
}

// TestALostFollowUpReleasesTheBackendOnce: in read_your_writes user scope, a write
// whose effects on the session are unknown (dynamic SQL) is followed by the pin check and the
// write-position read on its backend. When one of them loses the backend, the backend goes
// back to the pool once: the pool's count of connections to the primary stays right (SHOW
// pgowl.nodes in_use is 0 once the session holds none there).
func TestALostFollowUpReleasesTheBackendOnce(t *testing.T) {
	c := sharedClusterFor(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	createDynamicAuditFunction(t, ctx, c)
	catchUp(t, c)
	o := startOwl(t, c, func(cfg *config.Config) {
		cfg.Routing.ReadYourWrites = config.ReadYourWritesUser
		cfg.Pool.Mode = config.PoolSession // the warm-up and the write share the backend
	})
	s := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
	// Warm the backend (the function, its read-back and pin check) without a committed write,
	// so that only the write-position query has something to look up in pg_proc.
	for _, sql := range []string{"BEGIN", "SELECT public.rbf_dynamic(0)", "ROLLBACK"} {
		if _, err := s.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	locker, unlock := lockPgProc(t, ctx, c)
	done := make(chan error, 1)
	go func() {
		_, err := s.Exec(ctx, "SELECT public.rbf_dynamic(1)")
		done <- err
	}()
	// The first of pgowl's follow-ups on the backend that waits for pg_proc: the pin check, or
	// the write-position query (7ae60b6 ran it first).
	terminateWaiting(t, ctx, locker, "pg_current_wal_insert_lsn", "pg_listening_channels")
	unlock()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the write: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the write had no reply")
	}

	if got := primaryInUse(t, ctx, s, c); got != "0" {
		t.Errorf("SHOW pgowl.nodes: %s in_use %q once the session's backend there was lost; want 0 (the lost backend was released to the pool more than once)", c.Nodes[0].Name, got)
	}
}

// primaryInUse returns SHOW pgowl.nodes' in_use of c's primary, through the session s.
func primaryInUse(t *testing.T, ctx context.Context, s *client, c *cluster.Cluster) string {
	t.Helper()
	rows, err := s.Query(ctx, "SHOW pgowl.nodes") // answered by pgowl once the unit is done
	if err != nil {
		t.Fatal(err)
	}
	inUse := map[string]string{}
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		inUse[vals[0].(string)] = vals[8].(string)
	}
	rows.Close()
	return inUse[c.Nodes[0].Name]
}
