package integration

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/internal/cluster"
	"github.com/pgowl/pgowl/route"
)

// Read your writes: a session's reads never return data older than what it
// (or, in user scope, its user; or a token's writer) wrote. Each test runs
// rywRounds write-then-read rounds and counts stale reads, which must be 0;
// TestReadYourWritesOffReadsStale shows that the same rounds do read stale
// rows without it, so the count can fail.

// rywRounds is how many write-then-read rounds each mode runs.
const rywRounds = 1000

// rywDetail finds the read-your-writes fields at the end of a NOTICE's DETAIL.
var rywDetail = regexp.MustCompile(` wait_lsn=([0-9A-F]+/[0-9A-F]+)(?: node_lsn=([0-9A-F]+/[0-9A-F]+))?$`)

// rywTally counts what the reads of a run saw and where they ran.
type rywTally struct {
	rounds, stale    int
	standby, primary int
	firstStale       string
	maxRead          time.Duration
}

func (ty *rywTally) String() string {
	return fmt.Sprintf("%d rounds: %d stale, %d on a standby, %d on the primary (READ_YOUR_WRITES), slowest read %s",
		ty.rounds, ty.stale, ty.standby, ty.primary, ty.maxRead.Round(time.Microsecond))
}

// read records one read: got is what it returned, want what it had to see.
func (ty *rywTally) read(what string, got, want int, took time.Duration) {
	ty.rounds++
	ty.maxRead = max(ty.maxRead, took)
	if got < want {
		ty.stale++
		if ty.firstStale == "" {
			ty.firstStale = fmt.Sprintf("%s: read %d, the write before it set %d", what, got, want)
		}
	}
}

// route checks a read's routing NOTICE: on a standby it must name the
// position it waited for and a replay position at least as far; on the
// primary its reason is READ_YOUR_WRITES and its message names both.
func (ty *rywTally) route(t *testing.T, what string, r routeNotice) {
	t.Helper()
	m := rywDetail.FindStringSubmatch(r.Raw.Detail)
	if m == nil {
		t.Fatalf("%s: NOTICE DETAIL %q lacks wait_lsn (the read came right after a write)", what, r.Raw.Detail)
	}
	wait, _ := route.ParseLSN(m[1])
	switch {
	case r.Role == "standby" && r.Reason == "READ_ONLY":
		at, err := route.ParseLSN(m[2])
		if err != nil || at < wait {
			t.Fatalf("%s: standby read with DETAIL %q: node_lsn must be at or past wait_lsn", what, r.Raw.Detail)
		}
		ty.standby++
	case r.Role == "primary" && r.Reason == "READ_YOUR_WRITES":
		if !strings.Contains(r.Raw.Message, "had not replayed this session's last write ("+m[1]) {
			t.Fatalf("%s: READ_YOUR_WRITES NOTICE %q does not name the position %s", what, r.Raw.Message, m[1])
		}
		ty.primary++
	default:
		t.Fatalf("%s: read NOTICE %v, want a standby READ_ONLY or the primary READ_YOUR_WRITES", what, r)
	}
}

// check fails t when a read was stale, and logs the tally.
func (ty *rywTally) check(t *testing.T, what string) {
	t.Helper()
	t.Logf("READ-YOUR-WRITES %s: %s", what, ty)
	if ty.stale > 0 {
		t.Errorf("%s: %d of %d reads were stale; first: %s", what, ty.stale, ty.rounds, ty.firstStale)
	}
	if ty.rounds != rywRounds {
		t.Errorf("%s: ran %d rounds, want %d", what, ty.rounds, rywRounds)
	}
}

// rywTable makes the table the rounds write and read, with one row per key.
func rywTable(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	createTable(t, c, "ryw_rows", "CREATE TABLE ryw_rows (k text PRIMARY KEY, v int NOT NULL)")
}

// rywKey inserts a fresh row for a run and returns its key.
func rywKey(t *testing.T, conn *client, name string) string {
	t.Helper()
	key := marker(name)
	if _, err := conn.Exec(timeoutCtx(t, statementTimeout), "INSERT INTO ryw_rows VALUES ($1, 0)", key); err != nil {
		t.Fatalf("insert the row of %s: %v", name, err)
	}
	conn.routes(t)
	return key
}

// rywSettings are the commit settings the same-session modes run under:
// the harness's primary at synchronous_commit = off, and again at on (a
// startup parameter pgowl gives every backend of the session).
var rywSettings = []struct {
	name   string
	params map[string]string
}{
	{"synchronous_commit=off", nil},
	{"synchronous_commit=on", map[string]string{"synchronous_commit": "on"}},
}

// rywSameSession runs the same-session modes on o: simple and extended
// protocol, a Parse/Describe-only batch right after CREATE TABLE, and BEGIN
// READ ONLY after a write.
func rywSameSession(t *testing.T, c *cluster.Cluster, o *owl, params map[string]string) {
	for _, mode := range bothProtocols {
		t.Run(mode.name, func(t *testing.T) {
			conn := o.connect(t, func(cfg *pgx.ConnConfig) { withParams(params)(cfg); withMode(mode.mode)(cfg) })
			key := rywKey(t, conn, "ryw-"+mode.name)
			ctx := timeoutCtx(t, 5*time.Minute)
			var ty rywTally
			for i := 1; i <= rywRounds; i++ {
				if _, err := conn.Exec(ctx, "UPDATE ryw_rows SET v = $1 WHERE k = $2", i, key); err != nil {
					t.Fatalf("round %d: write: %v", i, err)
				}
				conn.routes(t)
				var got int
				start := time.Now()
				if err := conn.QueryRow(ctx, "SELECT v FROM ryw_rows WHERE k = $1", key).Scan(&got); err != nil {
					t.Fatalf("round %d: read: %v", i, err)
				}
				ty.read(fmt.Sprintf("round %d", i), got, i, time.Since(start))
				ty.route(t, fmt.Sprintf("round %d", i), conn.oneRoute(t, "read"))
			}
			ty.check(t, mode.name)
		})
	}
	t.Run("prepare_only_after_create_table", func(t *testing.T) {
		conn := o.connect(t, withParams(params))
		ctx := timeoutCtx(t, 5*time.Minute)
		schema := strings.ReplaceAll(marker("ryw_ddl"), "-", "_")
		if err := c.Nodes[0].Exec(ctx, "CREATE SCHEMA "+schema+" AUTHORIZATION "+appUser); err != nil {
			t.Fatalf("create schema: %v", err)
		}
		t.Cleanup(func() {
			c.Nodes[0].Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
		})
		var ty rywTally
		for i := 1; i <= rywRounds; i++ {
			table := fmt.Sprintf("%s.t%d", schema, i)
			if _, err := conn.Exec(ctx, "CREATE TABLE "+table+" (a int)"); err != nil {
				t.Fatalf("round %d: create: %v", i, err)
			}
			conn.routes(t)
			// Parse, Describe and Sync only: a batch that runs nothing.
			start := time.Now()
			_, err := conn.PgConn().Prepare(ctx, "", "SELECT a FROM "+table, nil)
			got := i
			if err != nil {
				if pgErr, ok := asPgError(err); !ok || pgErr.Code != "42P01" {
					t.Fatalf("round %d: prepare: %v", i, err)
				}
				got = i - 1 // the standby did not have the table yet
			}
			ty.read(fmt.Sprintf("round %d", i), got, i, time.Since(start))
			if rs := conn.routes(t); len(rs) != 0 {
				t.Fatalf("round %d: a batch that runs nothing got NOTICEs %v", i, rs)
			}
		}
		ty.check(t, "prepare only after CREATE TABLE")
	})
	t.Run("begin_read_only_after_write", func(t *testing.T) {
		conn := o.connect(t, withParams(params))
		key := rywKey(t, conn, "ryw-ro")
		ctx := timeoutCtx(t, 5*time.Minute)
		var ty rywTally
		for i := 1; i <= rywRounds; i++ {
			if _, err := conn.Exec(ctx, "UPDATE ryw_rows SET v = $1 WHERE k = $2", i, key); err != nil {
				t.Fatalf("round %d: write: %v", i, err)
			}
			conn.routes(t)
			start := time.Now()
			tx, err := conn.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
			if err != nil {
				t.Fatalf("round %d: begin read only: %v", i, err)
			}
			var got int
			if err := tx.QueryRow(ctx, "SELECT v FROM ryw_rows WHERE k = $1", key).Scan(&got); err != nil {
				t.Fatalf("round %d: read: %v", i, err)
			}
			took := time.Since(start)
			if err := tx.Commit(ctx); err != nil {
				t.Fatalf("round %d: commit: %v", i, err)
			}
			ty.read(fmt.Sprintf("round %d", i), got, i, took)
			rs := conn.routes(t) // BEGIN's NOTICE tells where the transaction went
			if len(rs) == 0 {
				t.Fatalf("round %d: no routing NOTICE for the read-only transaction", i)
			}
			ty.route(t, fmt.Sprintf("round %d BEGIN READ ONLY", i), rs[0])
		}
		ty.check(t, "BEGIN READ ONLY after a write")
	})
}

// TestReadYourWritesSameSession runs the same-session modes with the
// default configuration (read_your_writes: session), at both commit settings.
func TestReadYourWritesSameSession(t *testing.T) {
	c := sharedClusterFor(t)
	rywTable(t, c)
	o := startOwl(t, c, nil)
	for _, s := range rywSettings {
		t.Run(s.name, func(t *testing.T) { rywSameSession(t, c, o, s.params) })
	}
}

// TestReadYourWritesSlowedStandby runs the same-session modes with one
// standby slowed by recovery_min_apply_delay (within the lag limit, so it
// still qualifies) and reads spread round robin: the reads that would go to
// it must go to the other standby or the primary.
func TestReadYourWritesSlowedStandby(t *testing.T) {
	c := ownCluster(t, 2)
	slowed := c.Nodes[2]
	ctx := timeoutCtx(t, time.Minute)
	if err := slowed.Exec(ctx, "ALTER SYSTEM SET recovery_min_apply_delay = '1s'"); err != nil {
		t.Fatalf("slow %s: %v", slowed.Name, err)
	}
	if err := slowed.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		t.Fatalf("reload %s: %v", slowed.Name, err)
	}
	rywTable(t, c)
	o := startOwl(t, c, func(cfg *config.Config) { cfg.Routing.StandbyChoice = config.StandbyRoundRobin })
	for _, s := range rywSettings {
		t.Run(s.name, func(t *testing.T) { rywSameSession(t, c, o, s.params) })
	}
}

// TestReadYourWritesUserScope writes on one connection and reads on
// another of the same user, as a connection pool does, in user scope.
func TestReadYourWritesUserScope(t *testing.T) {
	c := sharedClusterFor(t)
	rywTable(t, c)
	o := startOwl(t, c, func(cfg *config.Config) { cfg.Routing.ReadYourWrites = config.ReadYourWritesUser })
	for _, s := range rywSettings {
		t.Run(s.name, func(t *testing.T) {
			writer, reader := o.connect(t, withParams(s.params)), o.connect(t, withParams(s.params))
			key := rywKey(t, writer, "ryw-user")
			ctx := timeoutCtx(t, 5*time.Minute)
			var ty rywTally
			for i := 1; i <= rywRounds; i++ {
				if _, err := writer.Exec(ctx, "UPDATE ryw_rows SET v = $1 WHERE k = $2", i, key); err != nil {
					t.Fatalf("round %d: write: %v", i, err)
				}
				var got int
				start := time.Now()
				if err := reader.QueryRow(ctx, "SELECT v FROM ryw_rows WHERE k = $1", key).Scan(&got); err != nil {
					t.Fatalf("round %d: read: %v", i, err)
				}
				ty.read(fmt.Sprintf("round %d", i), got, i, time.Since(start))
				ty.route(t, fmt.Sprintf("round %d", i), reader.oneRoute(t, "read on the other connection"))
			}
			writer.routes(t)
			ty.check(t, "user scope across two connections")
		})
	}
}

// TestReadYourWritesToken carries the writer's position to a reader that
// logs in through another pgowl instance (which shares nothing with the
// first): SHOW pgowl.write_position on the writer, then SET
// pgowl.read_after on the reader, or the startup option -c
// pgowl.read_after=... on a fresh login every tenth round.
func TestReadYourWritesToken(t *testing.T) {
	c := sharedClusterFor(t)
	rywTable(t, c)
	writerOwl, readerOwl := startOwl(t, c, nil), startOwl(t, c, nil)
	writer := writerOwl.connect(t, nil)
	reader := readerOwl.connect(t, nil)
	key := rywKey(t, writer, "ryw-token")
	ctx := timeoutCtx(t, 5*time.Minute)
	var ty rywTally
	for i := 1; i <= rywRounds; i++ {
		if _, err := writer.Exec(ctx, "UPDATE ryw_rows SET v = $1 WHERE k = $2", i, key); err != nil {
			t.Fatalf("round %d: write: %v", i, err)
		}
		var token string
		if err := writer.QueryRow(ctx, "SHOW pgowl.write_position").Scan(&token); err != nil {
			t.Fatalf("round %d: SHOW pgowl.write_position: %v", i, err)
		}
		if _, err := route.ParseLSN(token); err != nil || token == "0/0" {
			t.Fatalf("round %d: SHOW pgowl.write_position = %q after a write", i, token)
		}
		conn := reader
		if i%10 == 0 {
			conn = readerOwl.connect(t, withParams(map[string]string{"options": "-c pgowl.read_after=" + token}))
		} else if _, err := reader.Exec(ctx, "SET pgowl.read_after = '"+token+"'"); err != nil {
			t.Fatalf("round %d: SET pgowl.read_after: %v", i, err)
		}
		conn.routes(t)
		var got int
		start := time.Now()
		if err := conn.QueryRow(ctx, "SELECT v FROM ryw_rows WHERE k = $1", key).Scan(&got); err != nil {
			t.Fatalf("round %d: read: %v", i, err)
		}
		ty.read(fmt.Sprintf("round %d", i), got, i, time.Since(start))
		ty.route(t, fmt.Sprintf("round %d", i), conn.oneRoute(t, "read with the token"))
		if conn != reader {
			conn.Close(ctx)
		}
	}
	writer.routes(t)
	ty.check(t, "token across two logins and two pgowl instances")

	// A malformed token is refused, at SET and at login.
	if _, err := reader.Exec(ctx, "SET pgowl.read_after = 'not a position'"); err == nil {
		t.Errorf("SET pgowl.read_after = 'not a position' succeeded")
	} else {
		wantSQLState(t, "malformed SET pgowl.read_after", err, "22023")
	}
	cfg := readerOwl.connConfig(t, appUser, appPassword, &noticeLog{})
	cfg.RuntimeParams["options"] = "-c pgowl.read_after=junk"
	if bad, err := pgx.ConnectConfig(ctx, cfg); err == nil {
		bad.Close(ctx)
		t.Errorf("a login with -c pgowl.read_after=junk succeeded")
	} else {
		wantSQLState(t, "malformed startup pgowl.read_after", err, "22023")
	}
}

// TestReadYourWritesOffReadsStale runs the simple-protocol rounds with
// read_your_writes off at synchronous_commit = off: reads right after a
// write do miss it then, which is what the tests above count.
func TestReadYourWritesOffReadsStale(t *testing.T) {
	c := sharedClusterFor(t)
	rywTable(t, c)
	o := startOwl(t, c, func(cfg *config.Config) { cfg.Routing.ReadYourWrites = config.ReadYourWritesOff })
	conn := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
	key := rywKey(t, conn, "ryw-off")
	catchUp(t, c) // the row exists everywhere: only its value may be stale
	ctx := timeoutCtx(t, 5*time.Minute)
	var ty rywTally
	const rounds = 100
	for i := 1; i <= rounds; i++ {
		if _, err := conn.Exec(ctx, "UPDATE ryw_rows SET v = $1 WHERE k = $2", i, key); err != nil {
			t.Fatalf("round %d: write: %v", i, err)
		}
		var got int
		start := time.Now()
		if err := conn.QueryRow(ctx, "SELECT v FROM ryw_rows WHERE k = $1", key).Scan(&got); err != nil {
			t.Fatalf("round %d: read: %v", i, err)
		}
		ty.read("", got, i, time.Since(start))
		if r := conn.routes(t); len(r) != 2 || strings.Contains(r[1].Raw.Detail, "wait_lsn=") {
			t.Fatalf("round %d: with read_your_writes off the read's NOTICE carries no wait_lsn: %v", i, r)
		}
	}
	t.Logf("READ-YOUR-WRITES off: %s", &ty)
	if ty.stale == 0 {
		t.Errorf("with read_your_writes off, none of %d reads right after a write was stale: the stale-read count of the tests above may not be able to fail", rounds)
	}
}

// readYourWritesOff configures a pgowl for a test that reads on a standby
// right after a write in the same session to check something else (a pin
// that ended, a log line, a setting carried): the test says why where it
// uses it.
func readYourWritesOff(cfg *config.Config) { cfg.Routing.ReadYourWrites = config.ReadYourWritesOff }

// TestAReadAfterAWriteWaitsForTheFullPrimaryOnlyOnce: session scope reads the session's write
// position on the primary when a read needs it. With the primary's one backend held by another
// session's open transaction, that read waited pool.acquire_timeout and failed, and the read
// then went to the primary, where it waited as long again and was refused (DATABASE_BUSY): the
// read pgowl could have sent to a standby piled onto the primary at its busiest. The monitor
// samples the primary's position meanwhile (monitor.interval); a sample sent after the write
// covers it, so the read goes to a standby that replayed it, after one wait.
func TestAReadAfterAWriteWaitsForTheFullPrimaryOnlyOnce(t *testing.T) {
	c := ownCluster(t, 1)
	createTable(t, c, "ryw_full", "CREATE TABLE ryw_full (k int PRIMARY KEY, v int NOT NULL); INSERT INTO ryw_full VALUES (1, 0), (2, 0)")
	ctx := timeoutCtx(t, time.Minute)
	const acquireTimeout = 1500 * time.Millisecond
	o := startOwl(t, c, func(cfg *config.Config) {
		cfg.Routing.ReadYourWrites = config.ReadYourWritesSession
		cfg.Pool.MaxPerNode = 1
		cfg.Pool.MinIdle = 0
		cfg.Pool.AcquireTimeout = acquireTimeout
	})
	session := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
	holder := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
	if _, err := session.Exec(ctx, "UPDATE ryw_full SET v = 1 WHERE k = 1"); err != nil {
		t.Fatalf("write: %v", err)
	}
	session.routes(t)
	// The holder's transaction writes no WAL (an uncommitted write would put the primary's
	// insert position past its flush position, and a read after that goes to the primary).
	if _, err := holder.PgConn().Exec(ctx, "BEGIN; SELECT pg_advisory_xact_lock(7301)").ReadAll(); err != nil {
		t.Fatalf("holder: %v", err)
	}
	holder.routes(t)
	defer holder.Exec(context.Background(), "ROLLBACK")
	start := time.Now()
	var v int
	err := session.QueryRow(ctx, "SELECT v FROM ryw_full WHERE k = 1").Scan(&v)
	took := time.Since(start)
	rs := session.routes(t)
	if err != nil {
		t.Fatalf("the read after the write, with the primary's one backend held: %v after %v (routes %v); want it served by the standby", err, took, rs)
	}
	if v != 1 || len(rs) == 0 || rs[len(rs)-1].Role != "standby" {
		t.Errorf("the read after the write: v = %d on %v after %v; want v = 1 on the standby", v, rs, took)
	}
	if took > acquireTimeout+time.Second {
		t.Errorf("the read took %v: more than one wait for the primary (pool.acquire_timeout %v)", took, acquireTimeout)
	}
}
