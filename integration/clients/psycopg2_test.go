package clients

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// debianPython is Debian's interpreter, the one python3-psycopg2 installs into;
// a python3 earlier on PATH (pyenv, a virtualenv) may lack psycopg2.
const debianPython = "/usr/bin/python3"

// TestPsycopg2 runs the client matrix with psycopg2 (Debian's python3-psycopg2).
// psycopg2 has only the simple protocol, and prepares with SQL PREPARE.
func TestPsycopg2(t *testing.T) {
	c := sharedClusterFor(t)
	if _, err := os.Stat(debianPython); err != nil {
		t.Skipf("skipping: %s is missing (Debian: apt-get install python3 python3-psycopg2)", debianPython)
	}
	res := runCmd(t, 30*time.Second, "", nil, debianPython, "-c", "import psycopg2; print(psycopg2.__version__)")
	if res.exitCode != 0 {
		t.Skipf("skipping: %s cannot import psycopg2 (Debian: apt-get install python3-psycopg2): %s", debianPython, strings.TrimSpace(res.stderr))
	}
	t.Logf("psycopg2 %s", strings.TrimSpace(res.stdout))
	dir, err := filepath.Abs("python")
	if err != nil {
		t.Fatal(err)
	}
	o := startOwl(t, c, matrixReadYourWritesOff)
	tb := createTables(t, c, "psycopg2")
	t.Run("read_your_writes", func(t *testing.T) {
		o := startOwl(t, c, rywSessionScope)
		d := startDriver(t, "psycopg2-ryw", dir, o.endpoint, tb, nil, debianPython, "-u", "driver.py")
		rywMatrix(t, c, d, "psycopg2")
	})
	d := startDriver(t, "psycopg2", dir, o.endpoint, tb, nil, debianPython, "-u", "driver.py")
	runMatrix(t, c, d, tb, driverCaps{sqlPrepare: true, authCodeInMessage: true})
}
