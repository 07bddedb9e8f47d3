package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// prometheusServer is a real Prometheus (Debian's prometheus package) that
// scrapes one target every second.
type prometheusServer struct {
	url string
}

// startPrometheus runs Prometheus scraping target (host:port) until t ends.
// Without the prometheus binary the test fails: .ci/run installs it.
func startPrometheus(t *testing.T, target string) *prometheusServer {
	t.Helper()
	binary, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatalf("prometheus is not installed (apt-get install prometheus; .ci/run does): %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	conf := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: pgowl
    scrape_interval: 1s
    scrape_timeout: 900ms
    static_configs:
      - targets: [%q]
`, target)
	confPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, binary, "--config.file="+confPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	logPath := filepath.Join(dir, "prometheus.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start prometheus: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		cmd.Wait()
		logFile.Close()
		if t.Failed() {
			log, _ := os.ReadFile(logPath)
			t.Logf("prometheus log:\n%s", log)
		}
	})
	p := &prometheusServer{url: "http://" + addr}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(p.url + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus at %s not ready within 30s: %v", addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// promSample is one series of an instant query's result.
type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// query runs an instant PromQL query through Prometheus' HTTP API.
func (p *prometheusServer) query(t *testing.T, promql string) []promSample {
	t.Helper()
	client := http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(p.url + "/api/v1/query?" + url.Values{"query": {promql}}.Encode())
	if err != nil {
		t.Fatalf("query %s: %v", promql, err)
	}
	defer resp.Body.Close()
	var answer struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string       `json:"resultType"`
			Result     []promSample `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		t.Fatalf("query %s: %v", promql, err)
	}
	if answer.Status != "success" {
		t.Fatalf("query %s: %s %s", promql, answer.Status, answer.Error)
	}
	return answer.Data.Result
}

func (s promSample) value(t *testing.T) float64 {
	t.Helper()
	text, _ := s.Value[1].(string)
	v, err := strconv.ParseFloat(text, 64)
	if err != nil {
		t.Fatalf("sample %v: %v", s, err)
	}
	return v
}

// TestPrometheusScrapesPgowl: a real Prometheus scrapes pgowl's /metrics
// every second during pgbench runs (select-only, then TPC-B); queries
// through its HTTP API return the routed-unit counters by reason and the
// lag gauges of every node.
func TestPrometheusScrapesPgowl(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, nil)
	prom := startPrometheus(t, o.inst.AdminAddr().String())
	pgbench := pgBinary(t, "pgbench")
	if res := runCmd(t, 2*time.Minute, o.clientEnv(), pgbench, "-i", "-s", "1", "--quiet"); res.exitCode != 0 {
		t.Fatalf("pgbench -i: %d\n%s", res.exitCode, res.stderr)
	}
	catchUp(t, c)
	for _, args := range [][]string{{"-S", "-c", "4", "-j", "2", "-T", "4"}, {"-c", "4", "-j", "2", "-T", "4"}} {
		if res := runCmd(t, time.Minute, o.clientEnv(), pgbench, args...); res.exitCode != 0 {
			t.Fatalf("pgbench %v: %d\n%s\n%s", args, res.exitCode, res.stdout, res.stderr)
		}
	}

	wantReasons := []string{"READ_ONLY", "WRITE", "IN_TRANSACTION"}
	deadline := time.Now().Add(20 * time.Second)
	for {
		byReason := map[string]float64{}
		for _, s := range prom.query(t, `sum by (reason) (pgowl_routed_units_total{job="pgowl"})`) {
			byReason[s.Metric["reason"]] = s.value(t)
		}
		lags := map[string]float64{}
		for _, s := range prom.query(t, `pgowl_node_lag_seconds{job="pgowl"}`) {
			lags[s.Metric["node"]] = s.value(t)
		}
		missing := []string{}
		for _, r := range wantReasons {
			if byReason[r] < 100 {
				missing = append(missing, "reason "+r)
			}
		}
		for _, n := range c.Nodes {
			if _, ok := lags[n.Name]; !ok {
				missing = append(missing, "lag of "+n.Name)
			}
		}
		if len(missing) == 0 {
			t.Logf("Prometheus: routed units by reason %v; lag seconds by node %v", byReason, lags)
			if lags["pg1"] != 0 {
				t.Errorf("the primary's lag is %v, want 0", lags["pg1"])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus lacks %s 20s after the run: by reason %v, lags %v", strings.Join(missing, ", "), byReason, lags)
		}
		time.Sleep(500 * time.Millisecond)
	}
	// The standbys' reads and the primary's writes, by node. The counters themselves, not
	// increase(): a node's series is born with its first routed unit, and increase() needs two
	// samples of it, which a slow scrape on a loaded machine may not have taken yet.
	nodes := []string{}
	for _, s := range prom.query(t, `sum by (node) (pgowl_routed_units_total{job="pgowl"}) > 0`) {
		nodes = append(nodes, s.Metric["node"])
	}
	slices.Sort(nodes)
	if len(nodes) < 2 || nodes[0] != "pg1" {
		t.Errorf("nodes with routed units: %v, want pg1 and the standbys", nodes)
	}
	if up := prom.query(t, `up{job="pgowl"}`); len(up) != 1 || up[0].value(t) != 1 {
		t.Errorf("up{job=pgowl} = %v, want 1", up)
	}
	checkDashboard(t, prom)
}

// checkDashboard runs every query of deploy/grafana-dashboard.json through
// Prometheus (with Grafana's variables filled in) and checks that every
// pgowl metric it names exists.
func checkDashboard(t *testing.T, prom *prometheusServer) {
	t.Helper()
	data, err := os.ReadFile("../deploy/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("deploy/grafana-dashboard.json: %v", err)
	}
	names := map[string]bool{}
	metricName := regexp.MustCompile(`pgowl_[a-z_]+`)
	for _, p := range dash.Panels {
		for _, target := range p.Targets {
			expr := strings.NewReplacer("$__rate_interval", "1m", "$job", ".*", "$instance", ".*").Replace(target.Expr)
			prom.query(t, expr) // fails the test if Prometheus cannot run it
			for _, n := range metricName.FindAllString(expr, -1) {
				names[strings.TrimSuffix(n, "_bucket")] = true
			}
		}
	}
	for n := range names {
		series := prom.query(t, `count({__name__=~"`+n+`(_bucket)?"})`)
		if len(series) == 0 {
			t.Errorf("the dashboard uses %s, which pgowl does not export", n)
		}
	}
	t.Logf("the dashboard's %d panels use %d pgowl metrics", len(dash.Panels), len(names))
}
