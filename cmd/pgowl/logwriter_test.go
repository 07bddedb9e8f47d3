package main

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgowl/pgowl/internal/syncbuf"
)

func TestBatchedLogWritesWholeLinesInBatches(t *testing.T) {
	out := &syncbuf.Buffer{}
	l := newBatchedLog(out)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				fmt.Fprintf(l, "{\"writer\":%d,\"line\":%d,\"pad\":%q}\n", g, i, strings.Repeat("x", g*7))
			}
		}()
	}
	wg.Wait()
	// The flusher writes what waits within the interval, without Close.
	deadline := time.Now().Add(5 * time.Second)
	for {
		text, _ := out.Snapshot()
		if strings.Count(text, "\n") == 4000 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s only %d of 4000 lines were written", 5*time.Second, strings.Count(text, "\n"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	l.Close()
	text, writes := out.Snapshot()
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if !strings.HasPrefix(line, "{\"writer\":") || !strings.HasSuffix(line, "\"}") {
			t.Fatalf("a line was split or interleaved: %q", line)
		}
	}
	if writes >= 4000/10 {
		t.Errorf("%d writes for 4000 lines: the lines were not batched", writes)
	}
}

func TestBatchedLogCloseWritesTheRest(t *testing.T) {
	out := &syncbuf.Buffer{}
	l := newBatchedLog(out)
	fmt.Fprintln(l, "last words")
	l.Close()
	if text, _ := out.Snapshot(); text != "last words\n" {
		t.Errorf("after Close the output is %q", text)
	}
}
