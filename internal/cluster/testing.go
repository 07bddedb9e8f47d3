package cluster

import (
	"context"
	"time"
)

// testStartTimeout bounds how long StartForTest waits for a cluster.
const testStartTimeout = 2 * time.Minute

// TB is the part of testing.TB that StartForTest uses. It is declared here so that this package
// does not import "testing": the pgowl binary links the harness for `pgowl demo`, and must not
// link the test framework with it. A *testing.T, *testing.B or *testing.F satisfies it.
type TB interface {
	Helper()
	Skipf(format string, args ...any)
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
	Logf(format string, args ...any)
	Cleanup(func())
}

// StartForTest starts a cluster for t, with a watchdog (see StartWatched), and closes it when t
// ends. It skips t only when the PostgreSQL binaries are missing and fails t on any other error.
// A nil opts.Logf logs to t.Logf.
func StartForTest(t TB, opts Options) *Cluster {
	t.Helper()
	if err := CheckBinaries(opts); err != nil {
		t.Skipf("skipping: PostgreSQL binaries not available: %v", err)
	}
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	ctx, cancel := context.WithTimeout(context.Background(), testStartTimeout)
	defer cancel()
	cluster, err := StartWatched(ctx, opts)
	if err != nil {
		t.Fatalf("start PostgreSQL cluster: %v", err)
	}
	t.Cleanup(func() {
		if err := cluster.Close(); err != nil {
			t.Errorf("close PostgreSQL cluster: %v", err)
		}
	})
	return cluster
}
