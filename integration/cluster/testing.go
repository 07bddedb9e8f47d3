package cluster

import (
	"context"
	"testing"
	"time"
)

// testStartTimeout bounds how long StartForTest waits for a cluster.
const testStartTimeout = 2 * time.Minute

// StartForTest starts a cluster for t and closes it when t ends. It skips t only when the
// PostgreSQL binaries are missing and fails t on any other error. A nil opts.Logf logs to t.Logf.
func StartForTest(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if err := CheckBinaries(opts); err != nil {
		t.Skipf("skipping: PostgreSQL binaries not available: %v", err)
	}
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	ctx, cancel := context.WithTimeout(context.Background(), testStartTimeout)
	defer cancel()
	cluster, err := Start(ctx, opts)
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
