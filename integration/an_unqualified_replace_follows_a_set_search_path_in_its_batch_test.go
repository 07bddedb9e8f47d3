package integration

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestUnqualifiedReplaceAfterASetSearchPathInTheSameBatch: rdd_w.nm_N() and rdd_r.nm_N()
// both call nextval. A pipelined batch (pgx.Batch: one Sync) sets search_path = rdd_w, public and
// replaces nm_N() unqualified by a reader: PostgreSQL replaces rdd_w.nm_N(). rdd_r.nm_N() still
// writes: after SET search_path = rdd_r, public, SELECT nm_N() must go to the primary.
func TestUnqualifiedReplaceAfterASetSearchPathInTheSameBatch(t *testing.T) {
	c, o := rddSetup(t)
	modes := []queryProtocol{{"simple", pgx.QueryExecModeSimpleProtocol}, {"exec", pgx.QueryExecModeExec}, {"prepared", pgx.QueryExecModeCacheStatement}}
	for i, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			conn := rddConnect(t, o, mode.mode, "rdd_r, public")
			name := fmt.Sprintf("nm_%d", i)
			writer := func(schema string) string {
				return "CREATE OR REPLACE FUNCTION " + schema + name + "() RETURNS bigint LANGUAGE sql VOLATILE AS $$SELECT nextval('rdd.seq')$$"
			}
			rddMust(t, conn, writer("rdd_w."))
			rddMust(t, conn, writer("rdd_r."))
			catchUp(t, c)
			rddWriter(t, conn, "start", "SELECT "+name+"()")
			b := &pgx.Batch{}
			b.Queue("SET search_path = rdd_w, public")
			b.Queue("CREATE OR REPLACE FUNCTION " + name + "() RETURNS bigint LANGUAGE sql VOLATILE AS 'SELECT 5::bigint'")
			bctx, cancel := context.WithTimeout(context.Background(), statementTimeout)
			if err := conn.SendBatch(bctx, b).Close(); err != nil {
				cancel()
				t.Fatalf("batch: %v", err)
			}
			cancel()
			t.Logf("batch NOTICEs: %v", conn.routes(t))
			rddMust(t, conn, "SET search_path = rdd_r, public")
			rddWriter(t, conn, "rdd_r's writer right after the batch replaced rdd_w's", "SELECT "+name+"()")
			catchUp(t, c)
			rddWriter(t, conn, "once replayed", "SELECT "+name+"()")
			rddMust(t, conn, "SET search_path = rdd_w, public")
			rs := rddReader(t, conn, "rdd_w's reader", "SELECT "+name+"()")
			t.Logf("rdd_w's reader: %v", rs)
		})
	}
}
