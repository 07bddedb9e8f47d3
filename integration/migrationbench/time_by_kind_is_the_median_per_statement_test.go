package main

import (
	"strings"
	"testing"
	"time"
)

// The breakdown by kind gives, per protocol and kind, the median over the runs of the time per
// statement directly and what each other target added to it.
func TestTimeByKindIsTheMedianPerStatement(t *testing.T) {
	run := func(perCall time.Duration) timing {
		return timing{
			byKind: map[string]time.Duration{kindFunctionCall: 200 * perCall, kindView: 50 * 2 * perCall},
			counts: map[string]int{kindFunctionCall: 200, kindView: 50},
		}
	}
	results := map[string][]timing{
		"simple/" + targetDirect:    {run(100 * time.Microsecond), run(300 * time.Microsecond), run(120 * time.Microsecond)},
		"simple/" + targetPgowl:     {run(150 * time.Microsecond), run(170 * time.Microsecond), run(900 * time.Microsecond)},
		"simple/" + targetByteRelay: {run(130 * time.Microsecond), run(130 * time.Microsecond), run(130 * time.Microsecond)},
	}
	got := kindBreakdown(results, []string{targetDirect, targetPgowl, targetByteRelay})
	for _, want := range []string{
		"| direct | pgowl: added | relay: added |",
		// direct: median of 100, 120, 300 = 120; pgowl: median 170 (+50); relay 130 (+10).
		"| simple | SELECT f_n(n) | 200 | 120 µs | +50 µs | +10 µs |",
		"| simple | CREATE VIEW | 50 | 240 µs | +100 µs | +20 µs |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("breakdown lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, kindType) || strings.Contains(got, "extended") {
		t.Errorf("breakdown has a kind or protocol no run had:\n%s", got)
	}
}
