package clients

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// nodeDir holds the node-postgres driver, its package.json and package-lock.json.
const nodeDir = "node"

// nodeDriverPaths returns node and, after installing the locked packages when
// node_modules is missing, the driver's directory; it skips t when node or npm is missing.
func nodeDriverPaths(t *testing.T) (node, dir string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("skipping: node is not installed (Debian: apt-get install nodejs npm)")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("skipping: npm is not installed (Debian: apt-get install npm)")
	}
	dir, err = filepath.Abs(nodeDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "pg", "package.json")); err != nil {
		res := runCmd(t, 5*time.Minute, dir, nil, npm, "ci", "--no-audit", "--no-fund")
		if res.exitCode != 0 {
			t.Fatalf("npm ci in %s exited with %d\nstdout:\n%s\nstderr:\n%s", dir, res.exitCode, res.stdout, res.stderr)
		}
	}
	return node, dir
}

// TestNodePostgres runs the client matrix with node-postgres (pg from npm,
// COPY through pg-copy-streams), plus its pipeline mode.
func TestNodePostgres(t *testing.T) {
	c := sharedClusterFor(t)
	node, dir := nodeDriverPaths(t)
	o := startOwl(t, c, matrixReadYourWritesOff)
	tb := createTables(t, c, "node")
	t.Run("read_your_writes", func(t *testing.T) {
		// pg.Pool hands the write and the read to different connections: user scope.
		o := startOwl(t, c, rywUserScope)
		d := startDriver(t, "node-ryw", dir, o.endpoint, tb, nil, node, "--no-deprecation", "driver.js")
		rywMatrix(t, c, d, "node")
	})
	d := startDriver(t, "node", dir, o.endpoint, tb, nil, node, "--no-deprecation", "driver.js")
	// pg-copy-streams reads COPY TO STDOUT's messages itself and drops the NOTICE before them.
	runMatrix(t, c, d, tb, driverCaps{extended: true, copyOutDropsNotices: true})

	t.Run("pipeline_mixed", func(t *testing.T) {
		readTag, writeTag := marker("node-pipe-read"), marker("node-pipe-write")
		resetStats(t, c)
		r := d.step(t, stepTimeout, "pipeline_mixed", readTag, writeTag)
		wantOK(t, r)
		if got := r.str("v"); got != "item 2" {
			t.Errorf("the pipelined read returned %q, want \"item 2\"", got)
		}
		rs := routesOf(t, r.Notices, "pipe")
		want := []string{"standby", "primary", "standby"}
		if len(rs) != len(want) {
			t.Errorf("pipelined read, write, read: NOTICEs %v, want one per query: %v", rs, want)
		} else {
			for i := range rs {
				if rs[i].Role != want[i] {
					t.Errorf("pipelined query %d: NOTICE %v, want role %s", i+1, rs[i], want[i])
				}
			}
		}
		onStandbys(t, c, "pipelined reads", readTag, 2)
		onPrimary(t, c, "pipelined write", writeTag, 1)
	})

	t.Run("pipeline_error", func(t *testing.T) {
		first, third := marker("node-pipe-a"), marker("node-pipe-c")
		r := d.step(t, stepTimeout, "pipeline_error", first, third)
		wantOK(t, r)
		if got, want := r.str("states"), "ok,22012,ok"; got != want {
			t.Errorf("pipelined insert, failing select, insert: outcomes %s, want %s (each query is its own Sync segment)", got, want)
		}
		if got := r.num(t, "after"); got != 42 {
			t.Errorf("the query after the pipeline returned %d, want 42", got)
		}
		if got := primaryInt(t, c, fmt.Sprintf("SELECT count(*) FROM %s WHERE v IN ($1, $2)", tb.items), first, third); got != 2 {
			t.Errorf("the primary holds %d of the 2 rows the pipeline's good queries wrote", got)
		}
	})
}
