package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// harnessTestOnly are the cluster harness's symbols that exist for tests and benchmarks: a
// pgowl binary that links one of them carries test machinery (the watchdog process) to users.
var harnessTestOnly = []string{
	"github.com/pgowl/pgowl/internal/cluster.StartForTest",
	"github.com/pgowl/pgowl/internal/cluster.StartWatched",
	"github.com/pgowl/pgowl/internal/cluster.startWatchdog",
}

// goTool returns the go command that runs this test, skipping t when there is none.
func goTool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to inspect the build with: %v", err)
	}
	return path
}

// TestBinaryLinksNoTestMachinery checks that the product binary depends on no test framework and
// no package under integration/: `pgowl demo` uses the cluster harness in internal/cluster, whose
// core must stay free of "testing" and of the test-time watchdog.
func TestBinaryLinksNoTestMachinery(t *testing.T) {
	goCmd := goTool(t)
	out, err := exec.Command(goCmd, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed only %d packages: %q", len(deps), deps)
	}
	for _, dep := range deps {
		if dep == "testing" || strings.HasPrefix(dep, "testing/") || strings.HasPrefix(dep, "github.com/pgowl/pgowl/integration") {
			t.Errorf("the pgowl binary depends on %s", dep)
		}
	}

	if testing.Short() {
		t.Skip("-short: not building the binary to read its symbols")
	}
	binary := filepath.Join(t.TempDir(), "pgowl")
	if out, err := exec.Command(goCmd, "build", "-o", binary, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	symbols, err := exec.Command(goCmd, "tool", "nm", binary).Output()
	if err != nil {
		t.Fatalf("go tool nm: %v", err)
	}
	if !bytes.Contains(symbols, []byte("github.com/pgowl/pgowl/internal/cluster.")) {
		t.Fatalf("the binary has no symbol of internal/cluster; the check below would prove nothing")
	}
	for _, line := range strings.Split(string(symbols), "\n") {
		for _, name := range harnessTestOnly {
			if strings.HasSuffix(line, " "+name) || strings.Contains(line, " "+name+".") {
				t.Errorf("the pgowl binary links %s: %s", name, strings.TrimSpace(line))
			}
		}
	}
	content, err := os.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(content, []byte("pgowl-cluster-watchdog")) {
		t.Errorf("the pgowl binary holds the cluster watchdog's script")
	}
}
