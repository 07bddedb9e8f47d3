package classify

import "testing"

// TestCacheStatsCountHitsAndMisses: a first classification is a miss, a repeat of the text or of
// its shape with other literals is a hit, and a disabled cache counts nothing.
func TestCacheStatsCountHitsAndMisses(t *testing.T) {
	c := New(Options{})
	steps := []struct {
		sql                  string
		wantHits, wantMisses uint64
	}{
		{"SELECT * FROM t WHERE id = 1", 0, 1},
		{"SELECT * FROM t WHERE id = 1", 1, 1},
		{"SELECT * FROM t WHERE id = 2", 2, 1},
		{"INSERT INTO t VALUES (1)", 2, 2},
	}
	for _, step := range steps {
		c.Classify(step.sql)
		hits, misses := c.CacheStats()
		if hits != step.wantHits || misses != step.wantMisses {
			t.Errorf("after %q: hits=%d misses=%d, want %d and %d", step.sql, hits, misses, step.wantHits, step.wantMisses)
		}
	}
	off := New(Options{CacheSize: -1})
	off.Classify("SELECT 1")
	if hits, misses := off.CacheStats(); hits != 0 || misses != 0 {
		t.Errorf("disabled cache: hits=%d misses=%d, want 0 and 0", hits, misses)
	}
}
