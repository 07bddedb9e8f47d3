package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pgowl/pgowl/config"
)

// TestPrepareOfAWriteRunsWhereTheWriteWill: a batch that only prepares (Parse, Describe, Sync, as
// pgx's default mode and PgJDBC's server-side prepare send before the first execution) of a write
// goes to the primary, where the write will run. With read_your_writes off and the standby
// replaying a second late, a prepare of an INSERT into a table the session has just created
// failed on the standby with 42P01, although the INSERT itself would have run. A prepare of a read
// of the same table still goes to the standby and may fail there, which read_your_writes off
// accepts: the test counts those failures to show the standby lacked the table each time.
func TestPrepareOfAWriteRunsWhereTheWriteWill(t *testing.T) {
	c := ownCluster(t, 1)
	ctx := timeoutCtx(t, 2*time.Minute)
	standby := c.Nodes[1]
	if err := standby.Exec(ctx, "ALTER SYSTEM SET recovery_min_apply_delay = '1s'"); err != nil {
		t.Fatalf("slow %s: %v", standby.Name, err)
	}
	if err := standby.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		t.Fatalf("reload %s: %v", standby.Name, err)
	}
	o := startOwl(t, c, func(cfg *config.Config) {
		cfg.Routing.ReadYourWrites = config.ReadYourWritesOff
		cfg.Routing.MaxReplicaLag = 10 * time.Second // the delayed standby qualifies for reads
	})
	schema := strings.ReplaceAll(marker("prepare_write"), "-", "_")
	if err := c.Nodes[0].Exec(ctx, "CREATE SCHEMA "+schema+" AUTHORIZATION "+appUser); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	conn := o.connect(t, nil)
	const rounds = 5
	readsMissingTable := 0
	for i := 1; i <= rounds; i++ {
		table := fmt.Sprintf("%s.t%d", schema, i)
		if _, err := conn.Exec(ctx, "CREATE TABLE "+table+" (a int)"); err != nil {
			t.Fatalf("round %d: create: %v", i, err)
		}
		if _, err := conn.PgConn().Prepare(ctx, "", "INSERT INTO "+table+" VALUES ($1)", nil); err != nil {
			t.Errorf("round %d: prepare of an INSERT into the table just created: %v", i, err)
		}
		if _, err := conn.Exec(ctx, "INSERT INTO "+table+" VALUES ($1)", i); err != nil {
			t.Errorf("round %d: the INSERT: %v", i, err)
		}
		if _, err := conn.PgConn().Prepare(ctx, "", "SELECT a FROM "+table, nil); err != nil {
			if pgErr, ok := asPgError(err); !ok || pgErr.Code != "42P01" {
				t.Fatalf("round %d: prepare of a read: %v", i, err)
			}
			readsMissingTable++
		}
		conn.routes(t)
	}
	t.Logf("prepares of a read that met a standby without the table: %d of %d", readsMissingTable, rounds)
	if readsMissingTable == 0 {
		t.Errorf("no prepare of a read met the delayed standby without its table: the prepares of the INSERT were not put to the test")
	}
}
