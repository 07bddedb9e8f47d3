package main

import (
	"slices"
	"testing"
	"time"
)

// Each round's pgowl run is divided by the direct run of the same round, not by the median or
// by another round's run, and the ratios come back sorted.
func TestRoundRatiosPairRunsOfTheSameRound(t *testing.T) {
	run := func(ms int) timing { return timing{total: time.Duration(ms) * time.Millisecond} }
	direct := []timing{run(100), run(200), run(150)}
	owl := []timing{run(180), run(220), run(300)}
	got := roundRatios(direct, owl)
	want := []float64{1.1, 1.8, 2.0}
	if len(got) != len(want) {
		t.Fatalf("roundRatios = %v, want %v", got, want)
	}
	for i := range want {
		if d := got[i] - want[i]; d > 1e-9 || d < -1e-9 {
			t.Fatalf("roundRatios = %v, want %v", got, want)
		}
	}
	if !slices.IsSorted(got) {
		t.Errorf("roundRatios = %v, not sorted", got)
	}
	// A round missing its pgowl run (the sitting stopped early) pairs nothing.
	if got := roundRatios(direct, owl[:1]); len(got) != 1 || got[0] != 1.8 {
		t.Errorf("roundRatios with one pgowl run = %v, want [1.8]", got)
	}
	if got := roundRatios(nil, nil); len(got) != 1 || got[0] != 0 {
		t.Errorf("roundRatios of no runs = %v, want [0]", got)
	}
}
