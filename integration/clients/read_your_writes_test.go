package clients

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strconv"
	"testing"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/internal/cluster"
)

// The client matrix's read-your-writes check: every client library writes a
// row and reads it back at once, rywRounds times, through a pgowl with
// routing.read_your_writes on (session scope; user scope for
// node-postgres's Pool, whose write and read go out on different
// connections), and no read may return the value before the write.

// rywRounds is how many write-then-read rounds each client runs.
const rywRounds = 1000

// matrixReadYourWritesOff is the configuration of the matrix's own pgowl:
// its steps check where single statements run (a read right after a write
// on a standby, by pg_stat_statements), which is about the client's
// protocol, not about read your writes; the read_your_writes subtest checks
// that with its own pgowl.
func matrixReadYourWritesOff(cfg *config.Config) {
	cfg.Routing.ReadYourWrites = config.ReadYourWritesOff
}

// rywSessionScope and rywUserScope configure the read_your_writes subtests' pgowl.
func rywSessionScope(cfg *config.Config) { cfg.Routing.ReadYourWrites = config.ReadYourWritesSession }
func rywUserScope(cfg *config.Config)    { cfg.Routing.ReadYourWrites = config.ReadYourWritesUser }

// rywWaitLSN finds the read-your-writes fields at the end of a NOTICE's DETAIL.
var rywWaitLSN = regexp.MustCompile(` wait_lsn=[0-9A-F]+/[0-9A-F]+( node_lsn=[0-9A-F]+/[0-9A-F]+)?$`)

// rywTable creates the client's table of the check, with one row at v = 0.
func rywTable(t *testing.T, c *cluster.Cluster, client string) string {
	t.Helper()
	table := "ryw_" + client
	sql := fmt.Sprintf("SET ROLE %[1]s; DROP TABLE IF EXISTS %[2]s; CREATE TABLE %[2]s (k int PRIMARY KEY, v int NOT NULL); INSERT INTO %[2]s VALUES (1, 0)", appUser, table)
	if err := c.Nodes[0].Exec(timeoutCtx(t, statementTimeout), sql); err != nil {
		t.Fatalf("create %s: %v", table, err)
	}
	catchUp(t, c)
	return table
}

// rywMatrix runs the client's ryw_rounds step: rywRounds rounds of UPDATE
// table SET v = i then SELECT v, the read on the driver's connection
// "ryw_read". The step returns how many reads returned less than the write
// before them; every read's routing NOTICE must carry the position it waited for.
func rywMatrix(t *testing.T, c *cluster.Cluster, d stepper, client string) {
	table := rywTable(t, c, client)
	r := d.step(t, largeStepTimeout, "ryw_rounds", table, rywRounds)
	wantOK(t, r)
	rounds, stale := r.num(t, "rounds"), r.num(t, "stale")
	standby, primary := 0, 0
	for _, rn := range routesOf(t, r.Notices, "ryw_read") {
		switch {
		case rn.Role == "standby" && rn.Reason == "READ_ONLY":
			standby++
		case rn.Role == "primary" && rn.Reason == "READ_YOUR_WRITES":
			primary++
		default:
			t.Errorf("%s: a read right after a write: NOTICE %v, want a standby READ_ONLY or the primary READ_YOUR_WRITES", client, rn)
		}
	}
	missing := 0
	for _, n := range r.Notices {
		if n.Conn == "ryw_read" && !rywWaitLSN.MatchString(n.Detail) {
			missing++
		}
	}
	t.Logf("READ-YOUR-WRITES %s: %d rounds, %d stale; reads on a standby %d, on the primary %d (READ_YOUR_WRITES)", client, rounds, stale, standby, primary)
	if rounds != rywRounds {
		t.Errorf("%s: ran %d rounds, want %d", client, rounds, rywRounds)
	}
	if stale != 0 {
		t.Errorf("%s: %d of %d reads right after a write missed it (first: %s)", client, stale, rounds, r.str("first_stale"))
	}
	if standby+primary != rywRounds || missing != 0 {
		t.Errorf("%s: %d reads were routed with a wait position, %d NOTICEs lack it; want %d", client, standby+primary, missing, rywRounds)
	}
}

// rywRoundsPgx is pgx's ryw_rounds step, on one connection (session scope).
func (p *pgxClient) rywRounds(ctx context.Context, a []string) (map[string]any, error) {
	conn, err := p.conn(ctx, "ryw_read")
	if err != nil {
		return nil, err
	}
	rounds, _ := strconv.Atoi(a[1])
	stale, first := 0, ""
	var kept []notice
	for i := 1; i <= rounds; i++ {
		if _, err := conn.Exec(ctx, "UPDATE "+a[0]+" SET v = $1 WHERE k = 1", i); err != nil {
			return nil, err
		}
		p.takeNotices() // the write's: the step reports the reads'
		var got int
		if err := conn.QueryRow(ctx, "SELECT v FROM "+a[0]+" WHERE k = 1").Scan(&got); err != nil {
			return nil, err
		}
		kept = append(kept, p.takeNotices()...)
		if got < i {
			stale++
			if first == "" {
				first = fmt.Sprintf("round %d read %d", i, got)
			}
		}
	}
	for _, n := range kept {
		p.note(n)
	}
	return map[string]any{"rounds": rounds, "stale": stale, "first_stale": first}, nil
}

// rywRoundsPq is lib/pq's ryw_rounds step, on one connection (session scope).
func (p *pqClient) rywRounds(ctx context.Context, a []string) (map[string]any, error) {
	conn, err := p.conn(ctx, "ryw_read")
	if err != nil {
		return nil, err
	}
	rounds, _ := strconv.Atoi(a[1])
	stale, first := 0, ""
	var kept []notice
	for i := 1; i <= rounds; i++ {
		if _, err := conn.ExecContext(ctx, "UPDATE "+a[0]+" SET v = $1 WHERE k = 1", i); err != nil {
			return nil, err
		}
		p.takeNotices() // the write's: the step reports the reads'
		var got int
		if err := conn.QueryRowContext(ctx, "SELECT v FROM "+a[0]+" WHERE k = 1").Scan(&got); err != nil && err != sql.ErrNoRows {
			return nil, err
		}
		kept = append(kept, p.takeNotices()...)
		if got < i {
			stale++
			if first == "" {
				first = fmt.Sprintf("round %d read %d", i, got)
			}
		}
	}
	for _, n := range kept {
		p.note(n)
	}
	return map[string]any{"rounds": rounds, "stale": stale, "first_stale": first}, nil
}
