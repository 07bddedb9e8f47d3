package main

import (
	"math"
	"strings"
	"testing"
)

func TestRoundOrderReversesInEvenRoundsSoNoTargetAlwaysRunsFirst(t *testing.T) {
	var targets []*target
	for _, name := range []string{targetDirect, targetPgowl, baselineName(targetPgowl), targetPgowlNotice, baselineName(targetPgowlNotice), targetForward} {
		targets = append(targets, &target{name: name})
	}
	names := func(ts []*target) string {
		var out []string
		for _, t := range ts {
			out = append(out, t.name)
		}
		return strings.Join(out, " ")
	}
	if got, want := names(roundOrder(targets, 1)), "direct pgowl pgowl@baseline pgowl+notice pgowl+notice@baseline forward"; got != want {
		t.Errorf("round 1: %s, want %s", got, want)
	}
	if got, want := names(roundOrder(targets, 2)), "forward pgowl+notice@baseline pgowl+notice pgowl@baseline pgowl direct"; got != want {
		t.Errorf("round 2: %s, want %s", got, want)
	}
	if got := names(targets); got != "direct pgowl pgowl@baseline pgowl+notice pgowl+notice@baseline forward" {
		t.Errorf("roundOrder changed its argument: %s", got)
	}
}

func TestBaselineFlagAddsATwinPerPgowlTarget(t *testing.T) {
	o, err := parseFlags([]string{"-baseline", "HEAD~1", "-targets", "direct,pgowl,pgowl+notice", "-rounds", "2", "-duration", "1s"})
	if err != nil {
		t.Fatal(err)
	}
	if o.baseline != "HEAD~1" || o.runTargets() != 5 {
		t.Errorf("baseline %q, %d targets per round; want HEAD~1, 5", o.baseline, o.runTargets())
	}
	o, err = parseFlags([]string{"-targets", "direct,pgowl"})
	if err != nil {
		t.Fatal(err)
	}
	if o.runTargets() != 2 {
		t.Errorf("without -baseline: %d targets per round, want 2", o.runTargets())
	}
}

func TestBaselineVerdictJudgesTheDifferenceAgainstTheSpread(t *testing.T) {
	cases := []struct {
		diff, cur, base float64
		want            string
	}{
		{1.5, 3, 2, "within the spread"},
		{-2.9, 1, 3, "within the spread"},
		{8, 3, 2, "faster, beyond the spread"},
		{-8, 3, 2, "**slower, beyond the spread**"},
		{-8, math.NaN(), math.NaN(), "one round: no spread to judge by"},
		{math.NaN(), 1, 1, "—"},
	}
	for _, tc := range cases {
		if got := baselineVerdict(tc.diff, tc.cur, tc.base); got != tc.want {
			t.Errorf("diff %.1f, spreads %.1f/%.1f: %q, want %q", tc.diff, tc.cur, tc.base, got, tc.want)
		}
	}
	s := stats{tps: 1000, perRound: []float64{950, math.NaN(), 1000, 1050}}
	if got := spreadPct(s); math.Abs(got-10) > 1e-9 {
		t.Errorf("spread of 950..1050 around 1000: %.2f%%, want 10%%", got)
	}
}
