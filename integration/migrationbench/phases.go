package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// aheadPhases summarises, from pgowl's debug log, what each statement sent ahead of its session's
// catalogue read (the use right after each change) waited for once it was sent: the read's
// replies (the node runs the read before it), the catalogue taking the read in, and the
// statement's final classification. All three are on the statement's path: its replies reach the
// client only after them. It returns "" when the log holds no such line.
func aheadPhases(log io.Reader) (string, error) {
	type phases struct {
		ReadWait float64 `json:"read_wait_ms"`
		Patch    float64 `json:"patch_ms"`
		Classify float64 `json:"classify_ms"`
	}
	var readWait, patch, classify []time.Duration
	lines := bufio.NewReader(log)
	for {
		line, err := lines.ReadBytes('\n')
		if err == io.EOF && len(line) == 0 {
			break
		}
		if err != nil && err != io.EOF {
			return "", err
		}
		if !strings.Contains(string(line), `"read_wait_ms"`) {
			continue
		}
		var p phases
		if err := json.Unmarshal(line, &p); err != nil {
			continue // a line cut short, or not pgowl's
		}
		for _, d := range []struct {
			into *[]time.Duration
			ms   float64
		}{{&readWait, p.ReadWait}, {&patch, p.Patch}, {&classify, p.Classify}} {
			*d.into = append(*d.into, time.Duration(d.ms*float64(time.Millisecond)))
		}
	}
	if len(readWait) == 0 {
		return "", nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Where the %d statements sent ahead of their session's catalogue read waited once sent, both protocols and every round together, from pgowl's debug log (-log; debug logging slows pgowl, so compare these with each other, not with the tables above):\n\n", len(readWait))
	b.WriteString("| phase | mean | median | p90 |\n| --- | ---: | ---: | ---: |\n")
	for _, row := range []struct {
		name   string
		values []time.Duration
	}{
		{"the read's replies (the node runs the read first)", readWait},
		{"the catalogue taking the read in", patch},
		{"the statement's final classification", classify},
	} {
		slices.Sort(row.values)
		var total time.Duration
		for _, v := range row.values {
			total += v
		}
		n := len(row.values)
		fmt.Fprintf(&b, "| %s | %.0f µs | %.0f µs | %.0f µs |\n", row.name, micros(total/time.Duration(n)), micros(row.values[n/2]), micros(row.values[n*9/10]))
	}
	return b.String(), nil
}

// micros gives d in microseconds.
func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
