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
// catalogue change being taken in (the use right after each change) waited for once it was sent:
// the read's replies (the node runs the read before it), the catalogue taking the read in, or,
// for a function its statement described in full, taking the function in without a read, and
// the statement's final classification. All are on the statement's path: its replies reach the
// client only after them. It returns "" when the log holds no such line.
func aheadPhases(log io.Reader) (string, error) {
	type phases struct {
		ReadWait *float64 `json:"read_wait_ms"`
		Patch    float64  `json:"patch_ms"`
		Classify float64  `json:"classify_ms"`
	}
	var readWait, readPatch, createdPatch, classify []time.Duration
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	lines := bufio.NewReader(log)
	for {
		line, err := lines.ReadBytes('\n')
		if err == io.EOF && len(line) == 0 {
			break
		}
		if err != nil && err != io.EOF {
			return "", err
		}
		if !strings.Contains(string(line), `"classify_ms"`) {
			continue
		}
		var p phases
		if err := json.Unmarshal(line, &p); err != nil {
			continue // a line cut short, or not pgowl's
		}
		if p.ReadWait != nil {
			readWait = append(readWait, ms(*p.ReadWait))
			readPatch = append(readPatch, ms(p.Patch))
		} else {
			createdPatch = append(createdPatch, ms(p.Patch))
		}
		classify = append(classify, ms(p.Classify))
	}
	if len(classify) == 0 {
		return "", nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Where the %d statements sent ahead of their session's catalogue change being taken in waited once sent (%d behind a read of the change, %d behind a function taken from its CREATE statement without a read), both protocols and every round together, from pgowl's debug log (-log; debug logging slows pgowl, so compare these with each other, not with the tables above):\n\n", len(classify), len(readWait), len(createdPatch))
	b.WriteString("| phase | statements | mean | median | p90 |\n| --- | ---: | ---: | ---: | ---: |\n")
	for _, row := range []struct {
		name   string
		values []time.Duration
	}{
		{"the read's replies (the node runs the read first)", readWait},
		{"the catalogue taking the read in", readPatch},
		{"the catalogue taking a created function in (no read)", createdPatch},
		{"the statement's final classification", classify},
	} {
		n := len(row.values)
		if n == 0 {
			continue
		}
		slices.Sort(row.values)
		var total time.Duration
		for _, v := range row.values {
			total += v
		}
		fmt.Fprintf(&b, "| %s | %d | %.0f µs | %.0f µs | %.0f µs |\n", row.name, n, micros(total/time.Duration(n)), micros(row.values[n/2]), micros(row.values[n*9/10]))
	}
	return b.String(), nil
}

// micros gives d in microseconds.
func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
