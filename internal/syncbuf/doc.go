// Package syncbuf is a bytes.Buffer that goroutines may write to and read from at once: what tests
// hand a logger or a subprocess as its output while they read what it wrote so far.
package syncbuf
