package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/internal/cluster"
	"github.com/pgowl/pgowl/route"
)

// TestNewRoleReadBeforeStandbyReplays creates a login role on the primary
// while both standbys have replay paused (so they do not have the role, yet
// stay within a generous lag limit), logs in through pgowl as that role
// (the auth query finds it on the primary) and reads. The standbys refuse
// pgowl's backend login (28P01 or 28000); that is theirs, not the client's:
// the read falls back to the primary with a NOTICE naming the standbys that
// refused, and the session stays usable. The refusal is remembered: the next
// reads do not try the standbys again. Once replay resumes, reads go back to
// the standbys.
func TestNewRoleReadBeforeStandbyReplays(t *testing.T) {
	const role, password = "owl_fresh_role", "fresh-role-pass"
	ctx := timeoutCtx(t, 3*time.Minute)
	f := newRoleBeforeReplay(t, ctx, role, password, config.WhenNoStandbyPrimary)
	c, o, primary, standbys, resume := f.cluster, f.owl, f.cluster.Nodes[0], f.cluster.Nodes[1:], f.resume

	notices := &noticeLog{}
	conn, err := pgx.ConnectConfig(ctx, o.connConfig(t, role, password, notices))
	if err != nil {
		t.Fatalf("login through pgowl as the new role: %v", err)
	}
	defer conn.Close(context.Background())

	// Reads while the standbys lack the role: the primary serves them.
	for i := 0; i < 3; i++ {
		var who string
		if err := conn.QueryRow(ctx, "SELECT current_user").Scan(&who); err != nil {
			t.Fatalf("read %d as the new role before the standbys replayed it: %v", i+1, err)
		}
		if who != role {
			t.Fatalf("read %d: current_user = %q, want %q", i+1, who, role)
		}
		detail := routingDetail(notices)
		if !strings.Contains(detail, "node="+primary.Name+" role=primary reason=FALLBACK_PRIMARY") ||
			!strings.Contains(detail, "login_refused=") {
			t.Errorf("read %d: routing NOTICE detail %q, want the primary with FALLBACK_PRIMARY and login_refused", i+1, detail)
		}
	}
	// The NOTICE's message says why in words.
	// (Checked on a fourth read so that its message is at hand.)
	if _, err := conn.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatalf("the session is not usable after the standbys refused its login: %v", err)
	}
	var message string
	for _, n := range notices.take() {
		if strings.Contains(n.Detail, "reason=") {
			message = n.Message
		}
	}
	if !strings.Contains(message, "refused this session's login") {
		t.Errorf("routing NOTICE %q does not say that the standbys refused the session's login", message)
	}
	// Each standby was tried once: the refusal is remembered for the login.
	if got := strings.Count(o.logs.String(), "a standby refused the session's backend login"); got != len(standbys) {
		t.Errorf("the standbys' refusals were met %d times over four reads, want %d (once per standby, then remembered)", got, len(standbys))
	}

	// Once the standbys replayed the role, reads go back to them.
	resume()
	catchUp(t, c)
	deadline := time.Now().Add(30 * time.Second)
	for {
		var who string
		if err := conn.QueryRow(ctx, "SELECT current_user").Scan(&who); err != nil {
			t.Fatalf("read after replay resumed: %v", err)
		}
		detail := routingDetail(notices)
		if strings.Contains(detail, "role=standby reason=READ_ONLY") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("30s after replay resumed, reads still do not go to a standby (last NOTICE detail %q)", detail)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestNewRoleReadBeforeStandbyReplaysUnderReject is the same under
// routing.when_no_standby: reject: the read is refused with
// NO_READABLE_REPLICA naming the standbys that refused the login, an ERROR
// and not the standby's FATAL, and the session stays usable.
func TestNewRoleReadBeforeStandbyReplaysUnderReject(t *testing.T) {
	const role, password = "owl_fresh_role_rejected", "fresh-role-pass"
	ctx := timeoutCtx(t, 3*time.Minute)
	o := newRoleBeforeReplay(t, ctx, role, password, config.WhenNoStandbyReject).owl

	conn, err := pgx.ConnectConfig(ctx, o.connConfig(t, role, password, &noticeLog{}))
	if err != nil {
		t.Fatalf("login through pgowl as the new role: %v", err)
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, "SELECT 1")
	if pgErr := wantSQLState(t, "a read while every standby refuses the login, under reject", err, "57P03"); pgErr != nil {
		if pgErr.Severity != "ERROR" || !strings.Contains(pgErr.Message, "NO_READABLE_REPLICA") || !strings.Contains(pgErr.Message, "refused it") {
			t.Errorf("refusal %s %q, want an ERROR NO_READABLE_REPLICA saying the standbys refused the login", pgErr.Severity, pgErr.Message)
		}
	}
	var who string
	if err := conn.QueryRow(ctx, "/*pgowl:primary*/ SELECT current_user").Scan(&who); err != nil || who != role {
		t.Fatalf("the session is not usable after the refusal: %q, %v", who, err)
	}
}

// TestNewDatabaseReadBeforeStandbyReplays is the same for a database just
// created on the primary: the standbys refuse the backend login with 3D000
// (database does not exist), and the read falls back to the primary instead
// of ending the session.
func TestNewDatabaseReadBeforeStandbyReplays(t *testing.T) {
	c := sharedClusterFor(t)
	ctx := timeoutCtx(t, 3*time.Minute)
	primary := c.Nodes[0]
	const database = "owl_fresh_db"

	if err := primary.Exec(ctx, "DROP DATABASE IF EXISTS "+database+" WITH (FORCE)"); err != nil {
		t.Fatal(err)
	}
	catchUp(t, c)
	o := startOwl(t, c, func(cfg *config.Config) {
		cfg.Routing.MaxReplicaLag = 2 * time.Minute
		cfg.Routing.WhenNoStandby = config.WhenNoStandbyPrimary
	})
	standbys := c.Nodes[1:]
	resume := pauseStandbyReplay(t, ctx, standbys)
	var conn *pgx.Conn
	t.Cleanup(func() {
		if conn != nil {
			conn.Close(context.Background())
		}
		resume()
		if err := primary.Exec(context.Background(), "DROP DATABASE IF EXISTS "+database+" WITH (FORCE)"); err != nil {
			t.Logf("drop %s: %v", database, err)
		}
	})
	if err := primary.Exec(ctx, "CREATE DATABASE "+database); err != nil {
		t.Fatal(err)
	}
	waitPrimaryAheadOfStandbys(t, o)

	notices := &noticeLog{}
	cfg, err := pgx.ParseConfig(o.dsn(appUser, appPassword, database, nil))
	if err != nil {
		t.Fatal(err)
	}
	cfg.OnNotice = notices.add
	if conn, err = pgx.ConnectConfig(ctx, cfg); err != nil {
		t.Fatalf("login through pgowl to the new database: %v", err)
	}
	for i := 0; i < 2; i++ {
		var db string
		if err := conn.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
			t.Fatalf("read %d in the new database before the standbys replayed it: %v", i+1, err)
		}
		if db != database {
			t.Fatalf("read %d: current_database() = %q, want %q", i+1, db, database)
		}
		if detail := routingDetail(notices); !strings.Contains(detail, "reason=FALLBACK_PRIMARY") || !strings.Contains(detail, "login_refused=") {
			t.Errorf("read %d: routing NOTICE detail %q, want FALLBACK_PRIMARY with login_refused", i+1, detail)
		}
	}
	if !strings.Contains(o.logs.String(), `"sqlstate":"3D000"`) {
		t.Error("pgowl's log does not show a standby refusing the login with 3D000")
	}
}

// TestReadAfterWriteAroundStandbysRefusingTheLogin: a role that both
// standbys' pg_hba.conf rejects writes, then reads. Read your writes asks a
// standby whether it has replayed the write, and the standby refuses the
// backend login that asking needs. That refusal is the same as the read's
// own: the standby is planned around and remembered, and the read falls back
// to the primary naming the standbys that refused (not READ_YOUR_WRITES, as
// if the standbys were merely behind), and the next reads do not try the
// standbys' logins again.
func TestReadAfterWriteAroundStandbysRefusingTheLogin(t *testing.T) {
	const role, password, table = "owl_primary_only_writer", "writer-pass", "owl_primary_only_writes"
	c := ownCluster(t, 2)
	ctx := timeoutCtx(t, 3*time.Minute)
	primary := c.Nodes[0]
	if err := primary.Exec(ctx, "CREATE ROLE "+role+" LOGIN PASSWORD '"+password+"'; CREATE TABLE "+table+" (v int); GRANT SELECT, INSERT ON "+table+" TO "+role); err != nil {
		t.Fatal(err)
	}
	catchUp(t, c)
	for _, n := range c.Nodes[1:] {
		rejectRoleOnNode(t, ctx, n, role)
	}
	o := startOwl(t, c, func(cfg *config.Config) {
		cfg.Auth.QueryEnabled = true
		cfg.Routing.WhenNoStandby = config.WhenNoStandbyPrimary
		// The standbys stay within the limit while their replay is paused.
		cfg.Routing.MaxReplicaLag = 2 * time.Minute
	})
	// With replay paused no standby is seen past the write: the read asks one.
	pauseStandbyReplay(t, ctx, c.Nodes[1:])

	notices := &noticeLog{}
	conn, err := pgx.ConnectConfig(ctx, o.connConfig(t, role, password, notices))
	if err != nil {
		t.Fatalf("login through pgowl as %s: %v", role, err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "INSERT INTO "+table+" VALUES (1)"); err != nil {
		t.Fatalf("write as %s: %v", role, err)
	}
	// Until the primary is seen to have flushed the write, no standby could
	// have it and none is asked (synchronous_commit = off in the test clusters).
	var inserted string
	if err := primary.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&inserted); err != nil {
		t.Fatal(err)
	}
	written, err := route.ParseLSN(inserted)
	if err != nil {
		t.Fatal(err)
	}
	o.waitSnapshot(t, 10*time.Second, "the primary seen to have flushed the write", func(s *route.Snapshot) bool {
		for _, n := range s.Nodes {
			if n.Role == route.RolePrimary && n.FlushPosition >= written {
				return true
			}
		}
		return false
	})
	for i := 0; i < 3; i++ {
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil {
			t.Fatalf("read %d after the write: %v", i+1, err)
		}
		if n != 1 {
			t.Errorf("read %d after the write sees %d rows, want 1 (its own write)", i+1, n)
		}
		detail := routingDetail(notices)
		if !strings.Contains(detail, "role=primary reason=FALLBACK_PRIMARY") || !strings.Contains(detail, "login_refused=") {
			t.Errorf("read %d after the write: routing NOTICE detail %q, want the primary with FALLBACK_PRIMARY and login_refused", i+1, detail)
		}
	}
	if got := strings.Count(o.logs.String(), "a standby refused the session's backend login"); got != len(c.Nodes)-1 {
		t.Errorf("the standbys' refusals were met %d times over three reads, want %d (once per standby, then remembered)", got, len(c.Nodes)-1)
	}
}

// rejectRoleOnNode makes node's pg_hba.conf reject role's TCP logins (28000)
// and reloads it.
func rejectRoleOnNode(t *testing.T, ctx context.Context, node *cluster.Node, role string) {
	t.Helper()
	hbaPath := filepath.Join(node.DataDir, "pg_hba.conf")
	hba, err := os.ReadFile(hbaPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hbaPath, append([]byte("host all "+role+" 127.0.0.1/32 reject\n"), hba...), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := node.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		t.Fatal(err)
	}
}

// newRoleFixture is a login role created on the primary while the standbys'
// replay is paused, and a pgowl that finds it with its auth query.
type newRoleFixture struct {
	cluster *cluster.Cluster
	owl     *owl
	// resume resumes the standbys' replay (once; also when the test ends).
	resume func()
}

// newRoleBeforeReplay drops role, lets the standbys catch up, starts pgowl
// with the auth query, a lag limit the paused standbys stay within and
// when_no_standby, pauses replay on the standbys, creates role on the
// primary, and waits until the monitor sees the primary ahead of the standbys.
func newRoleBeforeReplay(t *testing.T, ctx context.Context, role, password, whenNoStandby string) newRoleFixture {
	t.Helper()
	c := sharedClusterFor(t)
	primary := c.Nodes[0]
	if err := primary.Exec(ctx, "DROP ROLE IF EXISTS "+role); err != nil {
		t.Fatal(err)
	}
	catchUp(t, c)
	o := startOwl(t, c, func(cfg *config.Config) {
		cfg.Auth.QueryEnabled = true
		cfg.Auth.CacheTTL = time.Second
		// The standbys stay within the limit while their replay is paused.
		cfg.Routing.MaxReplicaLag = 2 * time.Minute
		cfg.Routing.WhenNoStandby = whenNoStandby
	})
	resume := pauseStandbyReplay(t, ctx, c.Nodes[1:])
	t.Cleanup(func() {
		resume()
		if err := primary.Exec(context.Background(), "DROP ROLE IF EXISTS "+role); err != nil {
			t.Logf("drop %s: %v", role, err)
		}
	})
	if err := primary.Exec(ctx, "CREATE ROLE "+role+" LOGIN PASSWORD '"+password+"'"); err != nil {
		t.Fatal(err)
	}
	waitPrimaryAheadOfStandbys(t, o)
	return newRoleFixture{cluster: c, owl: o, resume: resume}
}

// pauseStandbyReplay pauses WAL replay on standbys and returns the function
// that resumes it (once; also called when t ends).
func pauseStandbyReplay(t *testing.T, ctx context.Context, standbys []*cluster.Node) func() {
	t.Helper()
	resumed := false
	resume := func() {
		if resumed {
			return
		}
		resumed = true
		for _, n := range standbys {
			if err := n.ResumeReplay(context.Background()); err != nil {
				t.Errorf("resume replay on %s: %v", n.Name, err)
			}
		}
	}
	t.Cleanup(resume)
	for _, n := range standbys {
		if err := n.PauseReplay(ctx); err != nil {
			t.Fatalf("pause replay on %s: %v", n.Name, err)
		}
	}
	return resume
}

// waitPrimaryAheadOfStandbys waits until o's monitor has sampled the
// primary past every standby (what was just created is in WAL they have not
// replayed), with the standbys still up and their lag known.
func waitPrimaryAheadOfStandbys(t *testing.T, o *owl) {
	t.Helper()
	o.waitSnapshot(t, 30*time.Second, "the primary ahead of every standby, which stay within the lag limit", func(s *route.Snapshot) bool {
		var primaryAt route.LSN
		for _, n := range s.Nodes {
			if n.Role == route.RolePrimary {
				primaryAt = n.WALPosition
			}
		}
		for _, n := range s.Nodes {
			if n.Role == route.RoleStandby && (!n.Up || !n.LagKnown || n.WALPosition == 0 || n.WALPosition >= primaryAt) {
				return false
			}
		}
		return primaryAt != 0
	})
}

// routingDetail returns the DETAIL of the last routing NOTICE received
// (node=... role=... reason=...) and forgets the NOTICEs.
func routingDetail(notices *noticeLog) string {
	detail := ""
	for _, n := range notices.take() {
		if strings.HasPrefix(n.Detail, "node=") {
			detail = n.Detail
		}
	}
	return detail
}
