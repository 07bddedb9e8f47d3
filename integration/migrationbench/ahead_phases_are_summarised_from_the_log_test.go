package main

import (
	"strings"
	"testing"
)

func TestAheadPhasesAreSummarisedFromTheDebugLog(t *testing.T) {
	log := strings.Join([]string{
		`{"level":"info","message":"routed","duration_ms":0.5}`,
		`{"level":"debug","read_wait_ms":0.100,"patch_ms":0.050,"classify_ms":0.090,"message":"statement sent before its session's catalogue read was read; classified again with the read"}`,
		`{"level":"debug","read_wait_ms":0.300,"patch_ms":0.070,"classify_ms":0.110,"message":"statement sent before its session's catalogue read was read; classified again with the read"}`,
		`{"level":"debug","patch_ms":0.020,"classify_ms":0.100,"message":"statement sent before its session's catalogue change was taken in; classified again with it"}`,
		`{"level":"debug","read_wait_ms":0.2`, // cut short: skipped
		`not JSON`,
	}, "\n")
	got, err := aheadPhases(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Where the 3 statements",
		"(2 behind a read of the change, 1 behind a function taken from its CREATE statement without a read)",
		"| the read's replies (the node runs the read first) | 2 | 200 µs | 300 µs | 300 µs |",
		"| the catalogue taking the read in | 2 | 60 µs | 70 µs | 70 µs |",
		"| the catalogue taking a created function in (no read) | 1 | 20 µs | 20 µs | 20 µs |",
		"| the statement's final classification | 3 | 100 µs | 100 µs | 110 µs |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
	if got, err := aheadPhases(strings.NewReader(`{"level":"info","message":"routed"}`)); err != nil || got != "" {
		t.Errorf("a log without statements ahead of a read: %q, %v; want nothing", got, err)
	}
}
