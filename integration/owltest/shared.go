package owltest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/pgowl/pgowl/internal/cluster"
)

// ClusterStartTimeout bounds how long a SharedCluster may take to start.
const ClusterStartTimeout = 2 * time.Minute

// ClusterOptions are the options of a cluster with one primary, the given
// number of standbys and user as its one login. Under go test -v the
// cluster's progress goes to stderr, since a shared cluster outlives the
// test that started it and cannot log through it.
func ClusterOptions(standbys int, user, password string) cluster.Options {
	opts := cluster.Options{
		Standbys: standbys,
		Users:    []cluster.User{{Name: user, Password: password}},
	}
	if testing.Verbose() {
		opts.Logf = func(format string, args ...any) {
			fmt.Fprintf(os.Stderr, format+"\n", args...)
		}
	}
	return opts
}

// SharedCluster is one cluster that the tests of a package share, so that
// they do not each pay for starting PostgreSQL: it starts on first use, and
// the package's TestMain closes it once every test has run. Tests that use it
// must not stop, kill or promote its nodes.
type SharedCluster struct {
	once    sync.Once
	cluster *cluster.Cluster
	err     error
}

// Get returns the cluster, starting it with opts on first use, or the error
// its start ended with; later calls return the same, whatever their opts. It
// skips t when the PostgreSQL binaries are missing.
func (s *SharedCluster) Get(t testing.TB, opts cluster.Options) (*cluster.Cluster, error) {
	t.Helper()
	if err := cluster.CheckBinaries(opts); err != nil {
		t.Skipf("skipping: PostgreSQL binaries not available: %v", err)
	}
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), ClusterStartTimeout)
		defer cancel()
		s.cluster, s.err = cluster.StartWatched(ctx, opts)
	})
	return s.cluster, s.err
}

// Close stops the cluster if it was started.
func (s *SharedCluster) Close() error {
	if s.cluster == nil {
		return nil
	}
	return s.cluster.Close()
}
