package syncbuf

import (
	"bytes"
	"sync"
)

// Buffer collects what is written to it under a lock. The zero value is empty and ready.
type Buffer struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	writes int
}

// Write appends p; it never fails.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.writes++
	return b.buf.Write(p)
}

// String returns everything written since the last Reset.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Snapshot returns everything written since the last Reset and how many Write calls wrote it.
func (b *Buffer) Snapshot() (string, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String(), b.writes
}

// Reset empties the buffer.
func (b *Buffer) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Reset()
	b.writes = 0
}
