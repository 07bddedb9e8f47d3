package main

import (
	"slices"
	"testing"
)

// A pgowl process that fails at start writes Go's or its own text, not zerolog's JSON: the
// report and the start error must still show it, beside the warnings, and without the info lines.
func TestWarningLinesPassOnWarningsAndLinesThatAreNotJSON(t *testing.T) {
	logs := &warningLog{}
	w := &warningLines{next: logs}
	for _, chunk := range []string{
		`{"level":"info","message":"listening"}` + "\n" + `{"level":"warn","mess`,
		`age":"admin.users is empty"}` + "\n",
		"panic: runtime error: index out of range\n",
		"goroutine 1 [running]:\n",
		`{"level":"debug","message":"routed"}` + "\n",
		`{"level":"error","message":"listen tcp: address already in use"}` + "\n",
	} {
		if n, err := w.Write([]byte(chunk)); n != len(chunk) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", chunk, n, err)
		}
	}
	want := []string{
		`{"level":"warn","message":"admin.users is empty"}`,
		"panic: runtime error: index out of range",
		"goroutine 1 [running]:",
		`{"level":"error","message":"listen tcp: address already in use"}`,
	}
	if got := logs.lines(); !slices.Equal(got, want) {
		t.Fatalf("lines passed on:\n%q\nwant:\n%q", got, want)
	}
}
