package clients

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// jdbcJar is where Debian's libpostgresql-jdbc-java installs the driver.
const jdbcJar = "/usr/share/java/postgresql.jar"

// TestJDBC runs the client matrix with the PostgreSQL JDBC driver (Debian's
// libpostgresql-jdbc-java), the Java program run in source-file mode.
func TestJDBC(t *testing.T) {
	c := sharedClusterFor(t)
	java, err := exec.LookPath("java")
	if err != nil {
		t.Skip("skipping: java is not installed (Debian: apt-get install default-jre-headless)")
	}
	if _, err := os.Stat(jdbcJar); err != nil {
		t.Skipf("skipping: %s is missing (Debian: apt-get install libpostgresql-jdbc-java)", jdbcJar)
	}
	dir, err := filepath.Abs("java")
	if err != nil {
		t.Fatal(err)
	}
	o := startOwl(t, c, matrixReadYourWritesOff)
	tb := createTables(t, c, "jdbc")
	t.Run("read_your_writes", func(t *testing.T) {
		o := startOwl(t, c, rywSessionScope)
		d := startDriver(t, "jdbc-ryw", dir, o.endpoint, tb, nil, java, "-cp", jdbcJar, "Main.java")
		rywMatrix(t, c, d, "jdbc")
	})
	d := startDriver(t, "jdbc", dir, o.endpoint, tb, nil, java, "-cp", jdbcJar, "Main.java")
	runMatrix(t, c, d, tb, driverCaps{extended: true})

	t.Run("simple_mode_batch_error", func(t *testing.T) {
		// With preferQueryMode=simple every statement of the batch is its own
		// simple Query, so its own implicit transaction. Straight against
		// PostgreSQL the statements on both sides of the failing one are kept
		// (checked once by hand): pgowl must give the same.
		first, third := marker("jdbc-sbatch-a"), marker("jdbc-sbatch-c")
		r := d.step(t, stepTimeout, "simple_mode_batch_error", first, third)
		wantCode(t, r, "22012")
		if got := r.num(t, "after"); got != 42 {
			t.Errorf("the statement after the failed batch returned %d, want 42", got)
		}
		for _, v := range []string{first, third} {
			if got := primaryInt(t, c, fmt.Sprintf("SELECT count(*) FROM %s WHERE v = $1", tb.items), v); got != 1 {
				t.Errorf("the primary holds %d rows %q, want 1: each statement of a simple-mode batch is its own transaction", got, v)
			}
		}
		// One NOTICE per statement on the primary, then the read after it on a standby.
		var roles []string
		for _, rn := range routesOf(t, r.Notices, "simple") {
			roles = append(roles, rn.Role+"/"+rn.Reason)
		}
		if got, want := strings.Join(roles, ","), "primary/WRITE,primary/WRITE,primary/WRITE,standby/READ_ONLY"; got != want {
			t.Errorf("simple-mode batch NOTICEs %s, want %s", got, want)
		}
	})
}
