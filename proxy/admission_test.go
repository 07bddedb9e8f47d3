package proxy

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// TestLoginGateCountsPerAddress: the gate admits up to its total and up to
// each address's share, and leave makes room again.
func TestLoginGateCountsPerAddress(t *testing.T) {
	g := newLoginGate(5, 2)
	a, b, c := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("::1")
	steps := []struct {
		addr netip.Addr
		want loginRefusal
	}{
		{a, admitted}, {a, admitted}, {a, tooManyLoginsFromAddress},
		{b, admitted}, {b, admitted}, {c, admitted}, {c, tooManyLogins},
	}
	for i, s := range steps {
		if got := g.enter(s.addr); got != s.want {
			t.Fatalf("step %d (%s): %s, want %s", i, s.addr, got, s.want)
		}
	}
	g.leave(a)
	if total, fromA := g.inProgress(a); total != 4 || fromA != 1 {
		t.Errorf("after one leave: %d in all, %d from %s; want 4 and 1", total, fromA, a)
	}
	if got := g.enter(c); got != admitted {
		t.Errorf("after a leave: %s, want admitted", got)
	}
	for _, addr := range []netip.Addr{a, b, b, c, c} {
		g.leave(addr)
	}
	if total, _ := g.inProgress(a); total != 0 || len(g.perAddr) != 0 {
		t.Errorf("after every leave: %d in all, %d addresses kept", total, len(g.perAddr))
	}
}

// TestLoginLogHoldsBackAndCounts: within an interval one line is written and
// the rest are held back, then written as one line that counts them.
func TestLoginLogHoldsBackAndCounts(t *testing.T) {
	var buf syncBuffer
	l := &loginLog{log: zerolog.New(&buf)}
	addr := netip.MustParseAddr("127.0.0.1")
	for range 50 {
		l.note(loginRefused, addr, "limits.max_logins_in_progress_per_address")
	}
	l.note(loginTimedOut, addr, "no complete login within 10s")
	time.Sleep(loginLogInterval + 300*time.Millisecond)
	counts := map[string]int{}
	lines := 0
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if e["level"] != "info" {
			t.Errorf("logged at %v: %s", e["level"], line)
		}
		n, _ := e["count"].(float64)
		counts[e["message"].(string)] += int(n)
		lines++
	}
	if lines != 3 || counts[loginRefused.String()] != 50 || counts[loginTimedOut.String()] != 1 {
		t.Errorf("%d lines counting %v; want 3 lines counting 50 refusals and 1 timeout", lines, counts)
	}
}

// syncBuffer is a bytes.Buffer safe for the flush goroutine.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
