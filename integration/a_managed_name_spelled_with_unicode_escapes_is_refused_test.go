package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// unicodeEscapedIdent spells name as a U&"..." identifier with every character escaped: PostgreSQL's
// scanner turns it into name, but the text holds no "pgowl_".
func unicodeEscapedIdent(name string) string {
	var b strings.Builder
	b.WriteString(`U&"`)
	for _, r := range name {
		fmt.Fprintf(&b, `\%04x`, r)
	}
	b.WriteString(`"`)
	return b.String()
}

// TestAManagedNameSpelledWithUnicodeEscapesIsRefused: the managed name of another session's
// statement, written as a Unicode-escaped identifier U&"\0070\0067..." (the same identifier to
// PostgreSQL), must be refused as the plain name is, in the simple and in the extended protocol:
// EXECUTE answers 26000 as on a direct connection (never the other session's row), DEALLOCATE
// does not drop the other session's statement, PREPARE does not take the name.
func TestAManagedNameSpelledWithUnicodeEscapesIsRefused(t *testing.T) {
	c := sharedClusterFor(t)
	o := rvOwlOnPrimaryOnly(t, c, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()

	// The oracle: on a direct connection the escaped name is the plain one, and unknown.
	direct := connectPgConn(t, c.Nodes[0].DSN(appUser, appPassword, appDatabase))
	if _, err := direct.Exec(ctx, "EXECUTE "+unicodeEscapedIdent("pgowl_h2nosuch")).ReadAll(); rvSQLState(err) != "26000" {
		t.Fatalf("oracle: EXECUTE of an escaped unknown name on a direct connection: %v, want 26000", err)
	}
	if res := direct.ExecParams(ctx, "EXECUTE "+unicodeEscapedIdent("pgowl_h2nosuch"), nil, nil, nil, nil).Read(); rvSQLState(res.Err) != "26000" {
		t.Fatalf("oracle (extended): %v, want 26000", res.Err)
	}

	victim := o.connect(t, withMode(pgx.QueryExecModeCacheStatement))
	const sql = "SELECT 4242::int AS h2_unicode_reach"
	var v int
	if err := victim.QueryRow(ctx, sql).Scan(&v); err != nil || v != 4242 {
		t.Fatalf("victim before: %d, %v", v, err)
	}
	hostile := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
	var name string
	if err := hostile.QueryRow(ctx, "SELECT name FROM pg_prepared_statements WHERE NOT from_sql AND statement = $1", sql).Scan(&name); err != nil {
		t.Fatalf("the victim's statement is not listed on the hostile client's backend: %v", err)
	}
	escaped := unicodeEscapedIdent(name)
	t.Logf("managed name %s, escaped %s", name, escaped)

	t.Run("simple", func(t *testing.T) {
		res, err := hostile.PgConn().Exec(ctx, "EXECUTE "+escaped).ReadAll()
		if rvSQLState(err) != "26000" {
			t.Errorf("simple EXECUTE %s: results %v, err %v; a direct connection answers 26000", escaped, resultRows(res), err)
		}
	})
	t.Run("extended", func(t *testing.T) {
		res := hostile.PgConn().ExecParams(ctx, "EXECUTE "+escaped, nil, nil, nil, nil).Read()
		if rvSQLState(res.Err) != "26000" {
			t.Errorf("extended EXECUTE %s: rows %q, err %v; a direct connection answers 26000 (this ran another session's statement)", escaped, res.Rows, res.Err)
		}
	})
	t.Run("extended-deallocate", func(t *testing.T) {
		res := hostile.PgConn().ExecParams(ctx, "DEALLOCATE "+escaped, nil, nil, nil, nil).Read()
		if rvSQLState(res.Err) != "26000" {
			t.Errorf("extended DEALLOCATE %s: err %v; a direct connection answers 26000", escaped, res.Err)
		}
		var listed bool
		if err := hostile.QueryRow(ctx, "SELECT true FROM pg_prepared_statements WHERE name = $1", name).Scan(&listed); err != nil {
			t.Errorf("the victim's managed statement %s is gone from the shared backend: %v", name, err)
		}
		if err := victim.QueryRow(ctx, sql).Scan(&v); err != nil || v != 4242 {
			t.Errorf("the victim's own statement after the hostile DEALLOCATE: %d, %v", v, err)
		}
	})
	t.Run("extended-prepare", func(t *testing.T) {
		squat := unicodeEscapedIdent(managedPrefixForTests + "h2squat")
		res := hostile.PgConn().ExecParams(ctx, "PREPARE "+squat+" AS SELECT 1", nil, nil, nil, nil).Read()
		if rvSQLState(res.Err) != "42939" {
			t.Errorf("extended PREPARE %s: err %v; pgowl reserves the prefix (42939) in the simple protocol", squat, res.Err)
		}
		hostile.PgConn().Exec(ctx, "DEALLOCATE ALL").ReadAll()
	})
}

func resultRows(res []*pgconn.Result) [][][]byte {
	var out [][][]byte
	for _, r := range res {
		out = append(out, r.Rows...)
	}
	return out
}
