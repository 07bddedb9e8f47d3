package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// A baseline run (-baseline <git rev>) answers "did this change make anything worse?" in one
// run: pgowl is also built at rev, and every pgowl target gets a twin running that build,
// measured in the same rounds, right beside it, against the same cluster. Measured in one run,
// the comparison is not confounded by a machine that is busier one day than another; the
// spread of each side's rounds says how much of a difference is noise.

// baselineSuffix marks a twin target running the baseline build: "pgowl@baseline".
const baselineSuffix = "@baseline"

// isPgowlTarget reports whether name is one of the targets that run the pgowl binary.
func isPgowlTarget(name string) bool {
	return name == targetPgowl || name == targetPgowlNotice || name == targetPgowlAdmin
}

// baselineName is the name of the twin of target name.
func baselineName(name string) string { return name + baselineSuffix }

// runTargets is how many targets each round runs: the chosen ones, plus a twin for every pgowl
// target when a baseline is named.
func (o options) runTargets() int {
	n := len(o.targets)
	if o.baseline == "" {
		return n
	}
	for name := range o.targets {
		if isPgowlTarget(name) {
			n++
		}
	}
	return n
}

// baselineBuildEstimate is roughly how long exporting and building the baseline takes with a
// warm Go build cache (the cgo parser is cached when the baseline's dependencies match).
const baselineBuildEstimate = 50 * time.Second

// baselineSetup is what a baseline adds to the setup.
func (o options) baselineSetup() time.Duration {
	if o.baseline == "" {
		return 0
	}
	return baselineBuildEstimate
}

// resolveBaseline checks that rev names a commit of the module's repository and returns its
// full hash and a one-line description.
func resolveBaseline(ctx context.Context, moduleDir, rev string) (commit, describe string, err error) {
	out, err := exec.CommandContext(ctx, "git", "-C", moduleDir, "rev-parse", "--verify", "--quiet", rev+"^{commit}").Output()
	if err != nil {
		return "", "", fmt.Errorf("-baseline %q: not a commit of %s", rev, moduleDir)
	}
	commit = strings.TrimSpace(string(out))
	describe = commandOutput(ctx, "git", "-C", moduleDir, "log", "-1", "--format=%h %s", commit)
	return commit, describe, nil
}

// buildBaseline builds ./cmd/pgowl as of commit into dir/baseline-bin/pgowl. The commit is
// exported with git archive into dir/baseline-src, so neither the checkout nor the repository's
// worktree list is touched, and an interrupted run leaves nothing behind but the temporary
// directory, which run removes.
func buildBaseline(ctx context.Context, moduleDir, dir, commit string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	source := filepath.Join(dir, "baseline-src")
	binDir := filepath.Join(dir, "baseline-bin")
	for _, d := range []string{source, binDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", err
		}
	}
	archive := exec.CommandContext(ctx, "sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "export", moduleDir, commit, source)
	if out, err := archive.CombinedOutput(); err != nil {
		return "", fmt.Errorf("export %s with git archive: %w\n%s", commit, err, out)
	}
	binary := filepath.Join(binDir, "pgowl")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", binary, "./cmd/pgowl")
	cmd.Dir = source
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/pgowl at %s: %w\n%s", commit, err, out)
	}
	return binary, nil
}

// startBaselineTwin starts the twin of pgowl target name on the baseline binary, with the same
// configuration, in a directory of its own; nil when name has no twin or no baseline is named.
func (l *lab) startBaselineTwin(ctx context.Context, name, binary, describe string) *target {
	if binary == "" || !isPgowlTarget(name) {
		return nil
	}
	twinLab := *l
	twinLab.dir = filepath.Join(l.dir, "baseline")
	if err := os.MkdirAll(twinLab.dir, 0o755); err != nil {
		return &target{name: baselineName(name), skipped: err.Error()}
	}
	t := twinLab.startPgowl(ctx, binary, name)
	t.name = baselineName(name)
	if t.skipped != "" {
		t.skipped = "the baseline build " + t.skipped + " (an older pgowl may refuse a configuration key this one writes)"
	} else {
		t.setup += "; the baseline build: " + describe
	}
	return t
}

// roundOrder is the order targets run in a round: as listed in odd rounds, reversed in even
// rounds. Machine drift within a round (a warming cache, another process) then favours no target:
// every pair of targets runs A B in one round and B A in the next, a pgowl target and its
// baseline twin (listed side by side) as well as pgowl and pgowl-ryw-off.
func roundOrder(targets []*target, round int) []*target {
	order := slices.Clone(targets)
	if round%2 == 0 {
		slices.Reverse(order)
	}
	return order
}

// spreadPct is the range of a side's successful rounds as a percentage of their median; NaN
// with fewer than two.
func spreadPct(s stats) float64 {
	var ok []float64
	for _, v := range s.perRound {
		if !math.IsNaN(v) {
			ok = append(ok, v)
		}
	}
	if len(ok) < 2 || s.tps == 0 {
		return math.NaN()
	}
	return (slices.Max(ok) - slices.Min(ok)) / s.tps * 100
}

// baselineVerdict says whether a difference between medians stands out of the spreads.
func baselineVerdict(diffPct, currentSpread, baseSpread float64) string {
	if math.IsNaN(diffPct) {
		return "—"
	}
	noise := max(currentSpread, baseSpread)
	switch {
	case math.IsNaN(noise):
		return "one round: no spread to judge by"
	case math.Abs(diffPct) <= noise:
		return "within the spread"
	case diffPct > 0:
		return "faster, beyond the spread"
	default:
		return "**slower, beyond the spread**"
	}
}

// baselineTable compares each pgowl target with its baseline twin, per workload: median tps,
// the difference, and each side's spread over the rounds.
func (r *report) baselineTable() string {
	var pairs []string
	for _, t := range r.ran() {
		if isPgowlTarget(t.name) && r.has(baselineName(t.name)) {
			pairs = append(pairs, t.name)
		}
	}
	if len(pairs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("| workload | target | tps (rounds) | baseline tps (rounds) | difference | spread: this / baseline | verdict |\n")
	b.WriteString("| --- | --- | --- | --- | ---: | ---: | --- |\n")
	for _, w := range r.workloads {
		for _, name := range pairs {
			cur, base := r.results.stats(w.key, name), r.results.stats(w.key, baselineName(name))
			if cur.runs == 0 && base.runs == 0 {
				continue
			}
			diff := math.NaN()
			if cur.usable() && base.usable() && base.tps > 0 {
				diff = (cur.tps/base.tps - 1) * 100
			}
			cs, bs := spreadPct(cur), spreadPct(base)
			fmt.Fprintf(&b, "| %s | %s | %s (%s) | %s (%s) | %s | %s / %s | %s |\n",
				w.title, name, fmtTPS(cur), fmtRounds(cur.perRound), fmtTPS(base), fmtRounds(base.perRound),
				fmtFloat(diff, "%+.1f %%"), fmtFloat(cs, "%.1f %%"), fmtFloat(bs, "%.1f %%"), baselineVerdict(diff, cs, bs))
		}
	}
	return b.String()
}

// baselineSection is the report's comparison with the baseline build, empty without one.
func (r *report) baselineSection() string {
	table := r.baselineTable()
	if table == "" {
		if r.options.baseline != "" {
			return "## Against the baseline\n\nNo baseline twin ran (see the setup for why).\n\n"
		}
		return ""
	}
	return "## Against the baseline\n\n" +
		"The same pgowl targets built at the baseline, " + r.options.baselineBuild + ", ran beside this build in every round " +
		"(the order of all targets is reversed in even rounds). Difference: this build's median tps over the baseline's. Spread: a side's range over " +
		"its rounds as a share of its median; a difference within the larger spread is noise.\n\n" + table + "\n"
}
