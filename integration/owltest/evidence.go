package owltest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/pgowl/pgowl/internal/cluster"
)

// Bounds on the work the helpers below do on the nodes directly.
const (
	// StatementTimeout bounds one statement run on the nodes.
	StatementTimeout = 30 * time.Second
	// CatchUpTimeout bounds how long the standbys may take to replay the primary's WAL.
	CatchUpTimeout = 30 * time.Second
)

// TimeoutCtx returns a context that ends after d or when t ends.
func TimeoutCtx(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// Marker returns a unique tag to put in a statement's comment, so that
// Evidence can find that statement among everything the nodes ran.
func Marker(prefix string) string {
	return fmt.Sprintf("%s-%08x", prefix, rand.Uint32())
}

// ResetStats clears pg_stat_statements on every node of c.
func ResetStats(t testing.TB, c *cluster.Cluster) {
	t.Helper()
	if err := c.ResetStatementStats(TimeoutCtx(t, StatementTimeout)); err != nil {
		t.Fatal(err)
	}
}

// Evidence returns, per node, how many times the node executed statements
// whose text contains tag.
//
// pg_stat_statements keys its entries on the statement's shape, which ignores
// comments and constant values, and keeps the text of the first statement of
// that shape. A tag in a comment is therefore only seen if no statement of the
// same shape ran on the node since the last ResetStats: reset right before
// running the statement under test.
func Evidence(t testing.TB, c *cluster.Cluster, tag string) map[string]int64 {
	t.Helper()
	return EvidenceLike(t, c, "%"+tag+"%")
}

// EvidenceLike returns, per node, pg_stat_statements calls of statements
// matching a LIKE pattern.
func EvidenceLike(t testing.TB, c *cluster.Cluster, like string) map[string]int64 {
	t.Helper()
	out, err := c.StatementCalls(TimeoutCtx(t, StatementTimeout), like)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// RequireOnPrimary checks evidence ev (from Evidence) that c's primary, its
// first node, ran a statement want times and no standby ran it.
func RequireOnPrimary(t testing.TB, c *cluster.Cluster, what string, ev map[string]int64, want int64) {
	t.Helper()
	for name, calls := range ev {
		expected := int64(0)
		if name == c.Nodes[0].Name {
			expected = want
		}
		if calls != expected {
			t.Errorf("%s: pg_stat_statements says it ran %d time(s) on %s, want %d (per node: %v)", what, calls, name, expected, ev)
		}
	}
}

// RequireOnStandbys checks evidence ev (from Evidence) that c's standbys ran
// a statement want times in all and the primary never did. It returns the
// standbys that ran it, in c's order, for callers that compare them with a
// NOTICE.
func RequireOnStandbys(t testing.TB, c *cluster.Cluster, what string, ev map[string]int64, want int64) []string {
	t.Helper()
	var sum int64
	var ran []string
	for i, n := range c.Nodes {
		calls := ev[n.Name]
		if i == 0 {
			if calls != 0 {
				t.Errorf("%s: pg_stat_statements says it ran %d time(s) on the primary %s, want 0 (per node: %v)", what, calls, n.Name, ev)
			}
			continue
		}
		sum += calls
		if calls > 0 {
			ran = append(ran, n.Name)
		}
	}
	if sum != want {
		t.Errorf("%s: pg_stat_statements says the standbys ran it %d time(s), want %d (per node: %v)", what, sum, want, ev)
	}
	return ran
}

// CatchUp waits until every standby of c has replayed everything the primary
// wrote so far, so that a read routed to any of them sees it.
func CatchUp(t testing.TB, c *cluster.Cluster) {
	t.Helper()
	ctx := TimeoutCtx(t, CatchUpTimeout)
	for _, n := range c.Nodes[1:] {
		if err := n.WaitCaughtUp(ctx, c.Nodes[0]); err != nil {
			t.Fatalf("wait for %s to catch up: %v", n.Name, err)
		}
	}
}

// PrimaryInt runs a one-value integer query as the superuser directly on c's
// primary, bypassing pgowl.
func PrimaryInt(t testing.TB, c *cluster.Cluster, sql string, args ...any) int64 {
	t.Helper()
	ctx := TimeoutCtx(t, StatementTimeout)
	var v int64
	if err := c.Nodes[0].QueryRow(ctx, sql, args...).Scan(&v); err != nil {
		t.Fatalf("query the primary: %s: %v", sql, err)
	}
	return v
}
