package proxy

import (
	"strconv"
	"testing"
	"time"
)

// TestVerdictCacheExpiresAndStaysBounded checks that a cost verdict is
// reused only within its lifetime and that the cache never holds more than
// verdictCacheSize verdicts.
func TestVerdictCacheExpiresAndStaysBounded(t *testing.T) {
	var c verdictCache
	now := time.Now()
	v := &costVerdict{total: 42}
	c.put("a", v, now.Add(time.Second))
	if got, ok := c.get("a", now); !ok || got != v {
		t.Fatal("a fresh verdict is not reused")
	}
	if _, ok := c.get("a", now.Add(time.Second)); ok {
		t.Fatal("an expired verdict is reused")
	}
	for i := 0; i < 3*verdictCacheSize; i++ {
		c.put(strconv.Itoa(i), v, now.Add(time.Minute))
	}
	if n := len(c.entries); n > verdictCacheSize {
		t.Fatalf("the cache holds %d verdicts, more than %d", n, verdictCacheSize)
	}
	if _, ok := c.get(strconv.Itoa(3*verdictCacheSize-1), now); !ok {
		t.Fatal("the latest verdict was evicted")
	}
}
