package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// results holds every run, by workload key and target name.
type results struct {
	runs map[string]map[string][]runResult
}

// newResults returns an empty result set.
func newResults() *results {
	return &results{runs: map[string]map[string][]runResult{}}
}

// add records one run.
func (r *results) add(workload, target string, run runResult) {
	if r.runs[workload] == nil {
		r.runs[workload] = map[string][]runResult{}
	}
	r.runs[workload][target] = append(r.runs[workload][target], run)
}

// stats returns the summary of one (workload, target) pair.
func (r *results) stats(workload, target string) stats {
	return summarize(r.runs[workload][target])
}

// stats summarises the runs of one (workload, target) pair: medians over the runs that succeeded.
type stats struct {
	runs, ok int
	// tps, latencyMS, connMS and cpuPer10k are medians over successful runs (NaN when none).
	tps, latencyMS, connMS, cpuPer10k float64
	// perRound is each run's tps, NaN for a failed run.
	perRound []float64
	// firstErr is the first failed run's error line; firstDetail its whole stderr.
	firstErr, firstDetail string
	failedTx              int64
	// otherCores is the median CPU (in cores) used by processes outside the benchmark during the runs.
	otherCores float64
	// noticesPerStatement is the median of NOTICEs received per statement executed.
	noticesPerStatement float64
}

// usable reports whether at least one run succeeded.
func (s stats) usable() bool {
	return s.ok > 0
}

// summarize computes the medians of runs.
func summarize(runs []runResult) stats {
	s := stats{runs: len(runs)}
	var tps, lat, conn, cpu, other, notices []float64
	for _, r := range runs {
		if !math.IsNaN(r.otherCores) {
			other = append(other, r.otherCores)
		}
		if r.failed {
			s.perRound = append(s.perRound, math.NaN())
			if s.firstErr == "" {
				s.firstErr, s.firstDetail = r.errLine, r.detail
			}
			continue
		}
		s.ok++
		s.perRound = append(s.perRound, r.tps)
		tps = append(tps, r.tps)
		lat = append(lat, r.latencyMS)
		conn = append(conn, r.connMS)
		if v := r.cpuPer10k(); !math.IsNaN(v) {
			cpu = append(cpu, v)
		}
		s.failedTx += r.failedTx
		if r.statements > 0 {
			notices = append(notices, float64(r.notices)/float64(r.statements))
		}
	}
	s.tps, s.latencyMS, s.connMS, s.cpuPer10k = median(tps), median(lat), median(conn), median(cpu)
	s.otherCores = median(other)
	s.noticesPerStatement = median(notices)
	return s
}

// median returns the median of values, or NaN for none.
func median(values []float64) float64 {
	if len(values) == 0 {
		return math.NaN()
	}
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	mid := len(sorted) / 2
	if len(sorted)%2 == 1 {
		return sorted[mid]
	}
	return (sorted[mid-1] + sorted[mid]) / 2
}

// ratio returns a/b for usable stats, else NaN.
func ratio(a, b stats) float64 {
	if !a.usable() || !b.usable() || b.tps == 0 {
		return math.NaN()
	}
	return a.tps / b.tps
}

// geomean returns the geometric mean of the non-NaN values and how many there were.
func geomean(values []float64) (float64, int) {
	var sum float64
	var n int
	for _, v := range values {
		if math.IsNaN(v) || v <= 0 {
			continue
		}
		sum += math.Log(v)
		n++
	}
	if n == 0 {
		return math.NaN(), 0
	}
	return math.Exp(sum / float64(n)), n
}

// report is everything the benchmark learned, ready to print.
type report struct {
	options   options
	date      time.Time
	elapsed   time.Duration
	machine   machine
	versions  versions
	workloads []workload
	targets   []*target
	results   *results
	// build says which pgowl source was benchmarked.
	build string
	// waited is the total time runs waited for other processes to calm down.
	waited time.Duration
}

// ran returns the targets that were benchmarked.
func (r *report) ran() []*target {
	var list []*target
	for _, t := range r.targets {
		if t.skipped == "" {
			list = append(list, t)
		}
	}
	return list
}

// has reports whether target name was benchmarked.
func (r *report) has(name string) bool {
	for _, t := range r.ran() {
		if t.name == name {
			return true
		}
	}
	return false
}

// workload returns the workload with key, if it ran.
func (r *report) workload(key string) (workload, bool) {
	for _, w := range r.workloads {
		if w.key == key {
			return w, true
		}
	}
	return workload{}, false
}

// Number formatting for tables: "—" for a value that does not exist.
func fmtTPS(s stats) string {
	if !s.usable() {
		return "**fails**"
	}
	text := fmt.Sprintf("%.0f", s.tps)
	if s.ok < s.runs {
		text += fmt.Sprintf(" (%d/%d rounds failed)", s.runs-s.ok, s.runs)
	}
	return text
}

func fmtRatio(v float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	return fmt.Sprintf("%.2f×", v)
}

func fmtFloat(v float64, format string) string {
	if math.IsNaN(v) {
		return "—"
	}
	return fmt.Sprintf(format, v)
}

func fmtRounds(values []float64) string {
	parts := make([]string, len(values))
	for i, v := range values {
		if math.IsNaN(v) {
			parts[i] = "fail"
		} else {
			parts[i] = fmt.Sprintf("%.0f", v)
		}
	}
	return strings.Join(parts, ", ")
}

// workloadTable renders one workload's table.
func (r *report) workloadTable(w workload) string {
	var b strings.Builder
	bouncer := r.results.stats(w.key, targetPgBouncer)
	direct := r.results.stats(w.key, targetDirect)
	b.WriteString("| target | median tps | tps per round | vs PgBouncer | vs direct | latency avg (ms) | initial connection (ms) | proxy CPU s / 10k statements | other load (cores) |\n")
	b.WriteString("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	var notes []string
	for _, t := range r.ran() {
		s := r.results.stats(w.key, t.name)
		if s.runs == 0 {
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			t.label(), fmtTPS(s), fmtRounds(s.perRound), fmtRatio(ratio(s, bouncer)), fmtRatio(ratio(s, direct)),
			fmtFloat(s.latencyMS, "%.3f"), fmtFloat(s.connMS, "%.1f"), fmtFloat(s.cpuPer10k, "%.3f"), fmtFloat(s.otherCores, "%.2f"))
		if s.firstErr != "" {
			notes = append(notes, fmt.Sprintf("- %s fails (%d of %d rounds): `%s`", t.label(), s.runs-s.ok, s.runs, oneLine(s.firstErr)))
		}
		if s.failedTx > 0 {
			notes = append(notes, fmt.Sprintf("- %s: %d failed transactions (serialization/deadlock) over all rounds", t.label(), s.failedTx))
		}
	}
	if len(notes) > 0 {
		b.WriteString("\n" + strings.Join(notes, "\n") + "\n")
	}
	return b.String()
}

// oneLine makes text safe inside a Markdown code span in a table or list.
func oneLine(text string) string {
	text = strings.ReplaceAll(text, "`", "'")
	return strings.Join(strings.Fields(text), " ")
}

// summaryTable renders median tps of every workload (rows) and target (columns).
func (r *report) summaryTable() string {
	var b strings.Builder
	b.WriteString("| workload |")
	for _, t := range r.ran() {
		b.WriteString(" " + t.label() + " |")
	}
	b.WriteString("\n| --- |" + strings.Repeat(" ---: |", len(r.ran())) + "\n")
	for _, w := range r.workloads {
		fmt.Fprintf(&b, "| %s |", w.title)
		for _, t := range r.ran() {
			s := r.results.stats(w.key, t.name)
			cell := fmtTPS(s)
			if !s.usable() {
				cell = "fails"
			}
			b.WriteString(" " + cell + " |")
		}
		b.WriteString("\n")
	}
	return b.String()
}

// ratioTable renders, per workload, how pgowl compares with the other targets.
func (r *report) ratioTable() string {
	type column struct {
		title    string
		num, den string
	}
	candidates := []column{
		{"pgowl / PgBouncer", targetPgowl, targetPgBouncer},
		{"pgowl / pgpool-II", targetPgowl, targetPgpool},
		{"pgowl / direct", targetPgowl, targetDirect},
		{"pgowl+notice / pgowl", targetPgowlNotice, targetPgowl},
		{"pgowl+admin / pgowl", targetPgowlAdmin, targetPgowl},
		{"pgowl+guard / pgowl", targetPgowlGuard, targetPgowl},
		{"pgowl+guard+cache / pgowl", targetPgowlGuardCache, targetPgowl},
		{"pgowl / pgowl-ryw-off", targetPgowl, targetPgowlRYWOff},
		{"PgBouncer / direct", targetPgBouncer, targetDirect},
		{"pgpool-II / direct", targetPgpool, targetDirect},
	}
	var columns []column
	for _, c := range candidates {
		if r.has(c.num) && r.has(c.den) {
			columns = append(columns, c)
		}
	}
	if len(columns) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("| workload |")
	for _, c := range columns {
		b.WriteString(" " + c.title + " |")
	}
	b.WriteString("\n| --- |" + strings.Repeat(" ---: |", len(columns)) + "\n")
	all := make([][]float64, len(columns))
	for _, w := range r.workloads {
		fmt.Fprintf(&b, "| %s |", w.title)
		for i, c := range columns {
			v := ratio(r.results.stats(w.key, c.num), r.results.stats(w.key, c.den))
			all[i] = append(all[i], v)
			b.WriteString(" " + fmtRatio(v) + " |")
		}
		b.WriteString("\n")
	}
	b.WriteString("| **geometric mean** (workloads where both succeed) |")
	for i := range columns {
		g, n := geomean(all[i])
		b.WriteString(fmt.Sprintf(" %s (%d) |", fmtRatio(g), n))
	}
	b.WriteString("\n")
	return b.String()
}

// latencyTable renders the latency each target adds per statement at one client, against direct.
func (r *report) latencyTable() string {
	var keys, titles []string
	for _, mode := range []string{"simple", "extended", "prepared"} {
		key := "select-" + mode + "-1"
		if _, ok := r.workload(key); ok {
			keys = append(keys, key)
			titles = append(titles, "-M "+mode)
		}
	}
	if len(keys) == 0 || !r.has(targetDirect) {
		return ""
	}
	var b strings.Builder
	b.WriteString("| target |")
	for _, title := range titles {
		b.WriteString(" " + title + ": latency avg (ms) | " + title + ": added (µs) |")
	}
	b.WriteString("\n| --- |" + strings.Repeat(" ---: | ---: |", len(keys)) + "\n")
	for _, t := range r.ran() {
		fmt.Fprintf(&b, "| %s |", t.label())
		for _, key := range keys {
			s := r.results.stats(key, t.name)
			direct := r.results.stats(key, targetDirect)
			added := "—"
			switch {
			case !s.usable():
				added = "fails"
			case t.name == targetDirect:
				added = "0"
			case direct.usable():
				added = fmt.Sprintf("%+.0f", (s.latencyMS-direct.latencyMS)*1000)
			}
			fmt.Fprintf(&b, " %s | %s |", fmtFloat(s.latencyMS, "%.3f"), added)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// costTable renders each proxy's CPU per 10,000 statements in the reference workload and its peak RSS.
func (r *report) costTable() string {
	const key = "select-simple-16"
	_, haveKey := r.workload(key)
	var b strings.Builder
	b.WriteString("| proxy | CPU s / 10k statements (select-only, -M simple, 16 clients) | CPU s / 10k statements, median over all workloads | peak RSS (VmHWM) |\n")
	b.WriteString("| --- | ---: | ---: | ---: |\n")
	for _, t := range r.ran() {
		if t.proc == nil {
			continue
		}
		ref := "—"
		if haveKey {
			ref = fmtFloat(r.results.stats(key, t.name).cpuPer10k, "%.3f")
		}
		var all []float64
		for _, w := range r.workloads {
			if v := r.results.stats(w.key, t.name).cpuPer10k; !math.IsNaN(v) {
				all = append(all, v)
			}
		}
		rss := "—"
		switch {
		case t.name == targetPgpool:
			rss = "— (one process per client)"
		case t.peakRSS > 0:
			rss = fmt.Sprintf("%.1f MiB", float64(t.peakRSS)/1024)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", t.label(), ref, fmtFloat(median(all), "%.3f"), rss)
	}
	return b.String()
}

// findings are sentences computed from the results, for the top of the report.
func (r *report) findings() []string {
	var out []string
	compare := func(num, den string) {
		if !r.has(num) || !r.has(den) {
			return
		}
		var values []float64
		best, worst := math.Inf(-1), math.Inf(1)
		var bestW, worstW string
		var numOnlyFails []string
		for _, w := range r.workloads {
			a, b := r.results.stats(w.key, num), r.results.stats(w.key, den)
			if !a.usable() && b.usable() {
				numOnlyFails = append(numOnlyFails, w.title)
			}
			v := ratio(a, b)
			if math.IsNaN(v) {
				continue
			}
			values = append(values, v)
			if v > best {
				best, bestW = v, w.title
			}
			if v < worst {
				worst, worstW = v, w.title
			}
		}
		g, n := geomean(values)
		if n == 0 {
			return
		}
		numLabel, denLabel := r.targetLabel(num), r.targetLabel(den)
		text := fmt.Sprintf("%s reaches %.2f× the throughput of %s (geometric mean over %d workloads where both succeed); "+
			"best %.2f× (%s), worst %.2f× (%s).", numLabel, g, denLabel, n, best, bestW, worst, worstW)
		if len(numOnlyFails) > 0 {
			text += fmt.Sprintf(" %s fails where %s succeeds: %s.", numLabel, denLabel, strings.Join(numOnlyFails, "; "))
		}
		out = append(out, text)
	}
	compare(targetPgowl, targetPgBouncer)
	compare(targetPgowl, targetPgpool)
	compare(targetPgowl, targetDirect)
	compare(targetPgowlNotice, targetPgowl)
	compare(targetPgowlAdmin, targetPgowl)
	compare(targetPgowlGuard, targetPgowl)
	compare(targetPgowlGuardCache, targetPgowl)
	compare(targetPgowlGuardCache, targetPgowlGuard)
	compare(targetPgowl, targetPgowlRYWOff)
	if w, ok := r.workload("select-simple-1"); ok && r.has(targetPgowl) && r.has(targetDirect) {
		s, d := r.results.stats(w.key, targetPgowl), r.results.stats(w.key, targetDirect)
		if s.usable() && d.usable() {
			line := fmt.Sprintf("At one client (select-only, -M simple) pgowl adds %.0f µs per statement over a direct connection (%.3f ms vs %.3f ms)",
				(s.latencyMS-d.latencyMS)*1000, s.latencyMS, d.latencyMS)
			if b := r.results.stats(w.key, targetPgBouncer); b.usable() {
				line += fmt.Sprintf("; PgBouncer adds %.0f µs", (b.latencyMS-d.latencyMS)*1000)
			}
			if p := r.results.stats(w.key, targetPgpool); p.usable() {
				line += fmt.Sprintf(", pgpool-II %.0f µs", (p.latencyMS-d.latencyMS)*1000)
			}
			out = append(out, line+".")
		}
	}
	if r.has(targetPgowl) {
		if s := r.results.stats("select-simple-16", targetPgowl); s.usable() && !math.IsNaN(s.cpuPer10k) {
			line := fmt.Sprintf("pgowl spends %.3f CPU seconds per 10,000 statements (select-only, -M simple, 16 clients)", s.cpuPer10k)
			if b := r.results.stats("select-simple-16", targetPgBouncer); b.usable() && !math.IsNaN(b.cpuPer10k) {
				line += fmt.Sprintf("; PgBouncer %.3f", b.cpuPer10k)
			}
			for _, t := range r.ran() {
				if t.name == targetPgowl && t.peakRSS > 0 {
					line += fmt.Sprintf("; its peak RSS over the whole benchmark is %.1f MiB", float64(t.peakRSS)/1024)
				}
			}
			out = append(out, line+".")
		}
	}
	if r.has(targetPgowl) || r.has(targetPgowlNotice) {
		var parts []string
		for _, name := range []string{targetPgowl, targetPgowlNotice} {
			var values []float64
			for _, w := range r.workloads {
				if v := r.results.stats(w.key, name).noticesPerStatement; !math.IsNaN(v) {
					values = append(values, v)
				}
			}
			if len(values) > 0 {
				parts = append(parts, fmt.Sprintf("%s %.2f (%.2f–%.2f)", name, median(values), slices.Min(values), slices.Max(values)))
			}
		}
		if len(parts) > 0 {
			out = append(out, "NOTICEs the clients received per statement, median over workloads (range): "+strings.Join(parts, ", ")+
				". pgowl sends one NOTICE per routed unit and pgbench sends every statement as a unit of its own, so 1.00 is expected with routing.notice on and 0 with it off.")
		}
	}
	var others []float64
	for _, w := range r.workloads {
		for _, t := range r.ran() {
			for _, run := range r.results.runs[w.key][t.name] {
				if !math.IsNaN(run.otherCores) {
					others = append(others, run.otherCores)
				}
			}
		}
	}
	if len(others) > 0 {
		line := fmt.Sprintf("Processes outside the benchmark used a median %.2f and at most %.2f CPU cores during the runs (column \"other load\")",
			median(others), slices.Max(others))
		if slices.Max(others) >= 0.25 {
			line += "; the machine was shared, so runs with high other load are slower than they would be alone, which the interleaved rounds and medians only partly even out"
		}
		out = append(out, line+".")
	}
	var failing []string
	for _, w := range r.workloads {
		for _, t := range r.ran() {
			if s := r.results.stats(w.key, t.name); s.runs > 0 && s.ok < s.runs {
				failing = append(failing, fmt.Sprintf("%s on %s", t.label(), w.title))
			}
		}
	}
	if len(failing) > 0 {
		out = append(out, "Failed runs: "+strings.Join(failing, "; ")+" (see Failures).")
	} else {
		out = append(out, "No run failed.")
	}
	return out
}

// targetLabel returns the display label of a target name.
func (r *report) targetLabel(name string) string {
	for _, t := range r.targets {
		if t.name == name {
			return t.label()
		}
	}
	return name
}

// tables renders the result tables for the terminal.
func (r *report) tables() string {
	var b strings.Builder
	b.WriteString("## Median tps\n\n" + r.summaryTable() + "\n")
	if t := r.ratioTable(); t != "" {
		b.WriteString("## Ratios of median tps\n\n" + t + "\n")
	}
	b.WriteString(r.baselineSection())
	if t := r.latencyTable(); t != "" {
		b.WriteString("## Latency at one client\n\n" + t + "\n")
	}
	b.WriteString("## Proxy cost\n\n" + r.costTable() + "\n")
	for _, w := range r.workloads {
		fmt.Fprintf(&b, "### %s\n\n`%s`\n\n%s\n", w.title, w.commandLine(r.options.duration), r.workloadTable(w))
	}
	for _, line := range r.findings() {
		b.WriteString("- " + line + "\n")
	}
	return b.String()
}

// markdown renders the whole report for docs/benchmarks.md.
func (r *report) markdown() string {
	var b strings.Builder
	b.WriteString("# Benchmarks\n\n")
	fmt.Fprintf(&b, "Generated by `%s` on %s (%s of wall time). Re-run the command to regenerate this file; do not edit it by hand.\n\n",
		r.options.command, r.date.Format("2006-01-02 15:04 MST"), r.elapsed.Round(time.Second))
	fmt.Fprintf(&b, "pgbench runs each workload against each target for %s, %d round(s), interleaved (for each workload, for each round, every target once); "+
		"the numbers are medians over the rounds. ", r.options.duration, r.options.rounds)
	b.WriteString("All processes (pgbench, the proxies and three PostgreSQL servers) share the same machine, described at the end: " +
		"on a small machine the proxies compete with PostgreSQL and pgbench for CPU, so the ratios say more than the absolute numbers.\n\n")

	b.WriteString("## Findings\n\n")
	for _, line := range r.findings() {
		b.WriteString("- " + line + "\n")
	}
	b.WriteString("\n## Median tps\n\n")
	b.WriteString("Transactions per second without initial connection time (pgbench's `tps = ... (without initial connection time)`).\n\n")
	b.WriteString(r.summaryTable() + "\n")
	if t := r.ratioTable(); t != "" {
		b.WriteString("## Ratios of median tps\n\n" + t + "\n")
	}
	b.WriteString(r.baselineSection())
	if t := r.latencyTable(); t != "" {
		b.WriteString("## Added latency per statement at one client\n\n")
		b.WriteString("pgbench -S with one client: pgbench's `latency average` of the target minus that of a direct connection to the primary. " +
			"Each select-only transaction is one statement, so this is the latency a proxy adds to one statement.\n\n")
		b.WriteString(t + "\n")
	}
	b.WriteString("## Proxy cost\n\n")
	b.WriteString("CPU time (user + system, from /proc/<pid>/stat, including the proxy's child processes: pgpool-II forks one per client) " +
		"that the proxy process tree used during a run, divided by the statements the run executed (transactions × statements per transaction: " +
		"1 for select-only, 7 for TPC-B, 1 or 4 per script of the mixed workload). The window includes connecting the run's clients. " +
		"Peak RSS is VmHWM from /proc/<pid>/status at the end of the benchmark.\n\n")
	b.WriteString(r.costTable() + "\n")

	b.WriteString("## Per workload\n\n")
	b.WriteString("`vs PgBouncer` and `vs direct` divide the target's median tps by theirs. A target that fails shows **fails** and the first error line pgbench printed.\n\n")
	for _, w := range r.workloads {
		fmt.Fprintf(&b, "### %s\n\n`%s`\n\n%s\n", w.title, w.commandLine(r.options.duration), r.workloadTable(w))
	}
	if custom := r.customScripts(); custom != "" {
		b.WriteString("The mixed workload's scripts:\n\n" + custom + "\n")
	}

	b.WriteString(r.failureSection())
	b.WriteString(r.setupSection())
	return b.String()
}

// customScripts renders the custom script files of the workloads that ran.
func (r *report) customScripts() string {
	var b strings.Builder
	seen := map[string]bool{}
	for _, w := range r.workloads {
		for _, s := range w.scripts {
			if seen[s.name] {
				continue
			}
			seen[s.name] = true
			fmt.Fprintf(&b, "`%s` (weight %d):\n\n```\n%s```\n\n", s.name, s.weight, s.body)
		}
	}
	return b.String()
}

// failureSection lists every failing (workload, target) pair with pgbench's error output.
func (r *report) failureSection() string {
	var b strings.Builder
	for _, w := range r.workloads {
		for _, t := range r.ran() {
			s := r.results.stats(w.key, t.name)
			if s.firstErr == "" {
				continue
			}
			detail := s.firstDetail
			lines := strings.Split(detail, "\n")
			if len(lines) > failureDetailLines {
				lines = append(lines[:failureDetailLines], fmt.Sprintf("... (%d more lines)", len(lines)-failureDetailLines))
			}
			fmt.Fprintf(&b, "- **%s**, %s: %d of %d rounds failed. First error: `%s`\n", t.label(), w.title, s.runs-s.ok, s.runs, oneLine(s.firstErr))
			if t.name == targetPgBouncer && strings.Contains(s.firstDetail, "prepared statement") {
				b.WriteString("  PgBouncer before 1.21 does not track protocol-level prepared statements in transaction pooling: a client's " +
					"next transaction may run on a server connection that lacks its statement, or already has one of the same name.\n")
			}
			if strings.TrimSpace(detail) != "" {
				b.WriteString("\n  ```\n")
				for _, line := range lines {
					b.WriteString("  " + line + "\n")
				}
				b.WriteString("  ```\n")
			}
		}
	}
	for _, t := range r.targets {
		if t.skipped != "" {
			fmt.Fprintf(&b, "- **%s** was not benchmarked: %s\n", t.label(), oneLine(t.skipped))
		}
		for _, exit := range t.exits {
			fmt.Fprintf(&b, "- **%s** exited during the benchmark and was restarted before its next run: `%s`\n", t.label(), oneLine(exit))
		}
	}
	if b.Len() == 0 {
		return "## Failures\n\nNone: every run of every target succeeded.\n\n"
	}
	return "## Failures\n\n" + b.String() + "\n"
}

// setupSection describes the cluster, the targets, the machine and the versions.
func (r *report) setupSection() string {
	var b strings.Builder
	b.WriteString("## Setup\n\n")
	fmt.Fprintf(&b, "- **Cluster**: a PostgreSQL primary and two streaming standbys from `internal/cluster` on 127.0.0.1, "+
		"with the harness defaults (fsync off, synchronous_commit off) and %s. "+
		"`pgbench -i -s %d` ran once on the primary as `%s` in database `%s` (1,000,000 accounts; not `postgres`, whose server "+
		"connections pgpool-II never caches), and the standbys caught up before any run.\n",
		settingsList(), scale, benchUser, benchDatabase)
	b.WriteString("- **Before each run** every standby has replayed all of the primary's WAL; before each run of a writing workload " +
		"`pgbench_history` is truncated and `pgbench_branches` and `pgbench_tellers` vacuumed on the primary directly " +
		"(what pgbench's own pre-run vacuum does), so pgbench runs with `-n`.\n")
	b.WriteString("- **pgowl source**: " + r.build + ".\n")
	b.WriteString("- **Warm-up**: before the measured runs every target ran the mixed scripts once, unmeasured, for 3 s with 64 clients " +
		"(pgpool-II: 10 s with 100 clients, one per child process, since each child opens its three server connections on its first client), " +
		"so that every pool starts with its server connections open.\n")
	b.WriteString("- **Timing**: pgbench's `-T` includes connecting the clients; `tps` excludes that time, and `initial connection` shows it.\n")
	fmt.Fprintf(&b, "- **Other load** is the CPU (in cores, out of the machine's total) that processes outside the benchmark used during a run: "+
		"/proc/stat's busy time minus the CPU of this command's process tree and the cluster's servers. Before each run the command waits "+
		"until other processes use less than %.1f cores (at most %s in all, spread over the runs, and %s per run); this run waited %s in all.\n",
		quietThreshold, r.options.quietBudget, quietMaxPerRun, r.waited.Round(time.Second))
	b.WriteString("- **Clients** log in as `" + benchUser + "` with a password (SCRAM-SHA-256 end to end), `sslmode=disable`, " +
		"`-j 2` (`-j 1` for one client).\n")
	for _, t := range r.targets {
		if t.skipped != "" {
			fmt.Fprintf(&b, "- **%s**: not run: %s\n", t.label(), oneLine(t.skipped))
			continue
		}
		fmt.Fprintf(&b, "- **%s**: %s.\n", t.label(), t.setup)
	}
	b.WriteString("- **pgowl runs at `log.level: warn`**: at the default `info` level it writes one JSON routing-log line per statement, " +
		"which on this machine would measure the logging more than the proxy. The two pgowl processes (`routing.notice` false and true) " +
		"are separate so that each one's CPU time and memory can be read from /proc.\n")
	b.WriteString("- **What each target does with reads**: direct and PgBouncer send everything to the primary; pgpool-II balances " +
		"sessions over all three nodes; pgowl sends each read to a standby within its lag limit (least lag first) and writes and " +
		"transactions to the primary.\n\n")

	b.WriteString("### Machine\n\n")
	fmt.Fprintf(&b, "- CPUs (`nproc`): %s\n- CPU model: %s\n- Kernel: %s\n- Memory (`free -g`):\n\n```\n%s\n```\n\n",
		r.machine.cpus, r.machine.cpu, r.machine.kernel, r.machine.memory)
	b.WriteString("### Versions\n\n")
	for _, v := range r.versions {
		fmt.Fprintf(&b, "- %s: `%s`\n", v[0], oneLine(v[1]))
	}
	b.WriteString("\n### Reproduce\n\n")
	fmt.Fprintf(&b, "```sh\n%s\n```\n\n", r.options.command)
	b.WriteString("`-quick` runs one 2-second round of five workloads as a smoke test; `-rounds`, `-duration`, `-workloads` and `-targets` " +
		"change the defaults (3 rounds of 5 s, every workload, every target). The command installs PgBouncer and pgpool-II with " +
		"apt-get when they are missing, and removes every process and temporary directory when it ends or on Ctrl-C.\n")
	return b.String()
}

// settingsList renders clusterSettings for the report.
func settingsList() string {
	names := make([]string, 0, len(clusterSettings))
	for name := range clusterSettings {
		names = append(names, name)
	}
	slices.Sort(names)
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = fmt.Sprintf("`%s = %s`", name, clusterSettings[name])
	}
	return strings.Join(parts, ", ")
}

// failureDetailLines is how many lines of a failed run's details the report shows: the proxy's
// log tail (failedRunLogLines and a heading) and the start of pgbench's stderr.
const failureDetailLines = failedRunLogLines + 8
