package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgowl/pgowl/config"
)

// artifactsDir is where tests keep what a person may want to look at after
// a run (screenshots); it is ignored by git. PGOWL_TEST_ARTIFACTS overrides it.
func artifactsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("PGOWL_TEST_ARTIFACTS")
	if dir == "" {
		dir = "artifacts"
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// runChromium runs headless Chromium (Debian's chromium package) with args
// and the page url, and returns its standard output.
func runChromium(t *testing.T, args ...string) string {
	t.Helper()
	binary, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium is not installed (apt-get install chromium; .ci/run does): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
		"--hide-scrollbars", "--user-data-dir=" + t.TempDir(), "--virtual-time-budget=2000"}
	cmd := exec.CommandContext(ctx, binary, append(base, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, owlTail(stderr.String()))
	}
	return string(out)
}

func owlTail(s string) string {
	if len(s) > 4000 {
		return s[len(s)-4000:]
	}
	return s
}

// svgPathPoints returns the y coordinates of the line of series in the
// chart with id chartID, from left (oldest) to right (now).
func svgPathPoints(t *testing.T, page, chartID, series string) []float64 {
	t.Helper()
	start := strings.Index(page, `id="chart-`+chartID+`"`)
	if start < 0 {
		t.Fatalf("the page has no chart %s", chartID)
	}
	chart := page[start:]
	chart = chart[:strings.Index(chart, "</svg>")]
	m := regexp.MustCompile(`data-series="` + regexp.QuoteMeta(series) + `" d="([^"]*)"`).FindStringSubmatch(chart)
	if m == nil {
		t.Fatalf("chart %s has no line for %s", chartID, series)
	}
	var ys []float64
	for _, pt := range regexp.MustCompile(`[ML]([0-9.]+),([0-9.]+)`).FindAllStringSubmatch(m[1], -1) {
		y, _ := strconv.ParseFloat(pt[2], 64)
		ys = append(ys, y)
	}
	return ys
}

// TestStatusPageShowsPausedStandby loads the status page in headless
// Chromium, at a phone's width, while one standby's replay is paused
// (pg_wal_replay_pause()) under a stream of writes: the page shows that
// standby refused for its lag, its lag line rising past the limit, and the
// latest refusals; the screenshot is kept under integration/artifacts.
func TestStatusPageShowsPausedStandby(t *testing.T) {
	c := ownCluster(t, 2)
	o := startOwl(t, c, func(cfg *config.Config) {
		cfg.Routing.MaxReplicaLag = time.Second
	})
	paused := c.Nodes[2]
	ctx := timeoutCtx(t, 3*time.Minute)
	conn := o.connect(t, nil)
	if _, err := conn.Exec(ctx, "CREATE TABLE t20_status (id serial PRIMARY KEY, at timestamptz DEFAULT clock_timestamp())"); err != nil {
		t.Fatal(err)
	}
	catchUp(t, c)
	if err := paused.PauseReplay(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { paused.ResumeReplay(context.Background()) })

	// Writes and reads for a few seconds; reads go to the other standby.
	strict := o.connect(t, nil)
	if _, err := strict.Exec(ctx, "SET pgowl.max_replica_lag = '1ms'"); err != nil {
		t.Fatal(err)
	}
	refused := 0
	until := time.Now().Add(4 * time.Second)
	for i := 0; time.Now().Before(until) && i < 4000; i++ {
		if _, err := conn.Exec(ctx, "INSERT INTO t20_status DEFAULT VALUES"); err != nil {
			t.Fatalf("write: %v", err)
		}
		var n int64
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM t20_status").Scan(&n); err != nil {
			t.Fatalf("read: %v", err)
		}
		if i%50 == 0 {
			// A session limit of 1ms: no standby qualifies, the read is refused.
			if err := strict.QueryRow(ctx, "SELECT count(*) FROM t20_status").Scan(&n); err != nil && strings.Contains(err.Error(), "REPLICA_LAG_EXCEEDED") {
				refused++
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	if refused == 0 {
		t.Fatal("no read was refused with REPLICA_LAG_EXCEEDED under a 1ms session limit")
	}

	if _, metrics := o.adminGet(t, "/metrics"); !strings.Contains(metrics, `pgowl_refusals_total{code="REPLICA_LAG_EXCEEDED"} `) ||
		metricValue(t, metrics, `pgowl_refusals_total{code="REPLICA_LAG_EXCEEDED"}`) < float64(refused) {
		t.Errorf("/metrics does not count the %d refused reads", refused)
	}
	url := "http://" + o.inst.AdminAddr().String() + "/"
	shot := filepath.Join(artifactsDir(t), "status-page-paused-standby.png")
	os.Remove(shot)
	runChromium(t, "--window-size=412,1600", "--screenshot="+shot, url)
	if st, err := os.Stat(shot); err != nil || st.Size() < 10000 {
		t.Fatalf("no screenshot at %s: %v", shot, err)
	}
	t.Logf("screenshot of the status page (412px wide, a phone's width): %s", shot)
	dom := runChromium(t, "--window-size=412,1600", "--dump-dom", url)

	row := regexp.MustCompile(`(?s)<tr data-node="` + paused.Name + `">.*?</tr>`).FindString(dom)
	if !strings.Contains(row, "REPLICA_LAG_EXCEEDED") || !strings.Contains(row, "standby") {
		t.Errorf("the paused standby's row does not say it is refused for its lag:\n%s", row)
	}
	if other := regexp.MustCompile(`(?s)<tr data-node="` + c.Nodes[1].Name + `">.*?</tr>`).FindString(dom); !strings.Contains(other, "serves reads") {
		t.Errorf("the other standby's row does not say it serves reads:\n%s", other)
	}
	ys := svgPathPoints(t, dom, "lag", paused.Name)
	if len(ys) < 3 || ys[len(ys)-1] >= ys[0] {
		t.Errorf("the paused standby's lag line does not rise (SVG y from %v to %v over %d points)", ys[0], ys[len(ys)-1], len(ys))
	}
	if !regexp.MustCompile(`(?s)<table id="refusals">.*REPLICA_LAG_EXCEEDED`).MatchString(dom) {
		t.Errorf("the latest refusals do not list REPLICA_LAG_EXCEEDED")
	}
	for _, want := range []string{`name="viewport"`, `id="chart-by-node"`, `id="chart-by-reason"`, "READ_ONLY", `id="readiness"`} {
		if !strings.Contains(dom, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	if strings.Contains(dom, "http://") && strings.Contains(dom, "<script src") {
		t.Errorf("the page loads a script from elsewhere")
	}
}
