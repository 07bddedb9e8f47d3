package syncbuf

import (
	"strings"
	"sync"
	"testing"
)

// Writes from many goroutines, read meanwhile, each arrive whole and are counted.
func TestConcurrentWritesAndReadsSeeWholeWrites(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				b.Write([]byte("line\n"))
				_ = b.String()
			}
		})
	}
	wg.Wait()
	text, writes := b.Snapshot()
	if writes != 800 || strings.Count(text, "line\n") != 800 || len(text) != 800*len("line\n") {
		t.Errorf("%d writes, %d lines in %d bytes; want 800 whole lines", writes, strings.Count(text, "line\n"), len(text))
	}
	b.Reset()
	if text, writes := b.Snapshot(); text != "" || writes != 0 {
		t.Errorf("after Reset: %q, %d writes", text, writes)
	}
}
