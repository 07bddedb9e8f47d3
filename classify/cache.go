package classify

import (
	"hash/maphash"
	"sync"
)

// maxCacheShards bounds the number of independently locked shards of the cache.
const maxCacheShards = 16

// lruCache is a bounded least-recently-used map from exact SQL text to Effects. It is split into
// shards, each with its own lock, so that concurrent connections rarely wait for each other. A hit
// allocates nothing: the key is hashed with maphash and the entry is moved to the front of an
// intrusive list.
type lruCache struct {
	seed   maphash.Seed
	shards []lruShard
}

type lruShard struct {
	mu       sync.Mutex
	capacity int
	entries  map[string]*lruEntry
	// sentinel.next is the most recently used entry, sentinel.prev the least.
	sentinel lruEntry
	// textLookups counts get calls, under mu: one per cached classification.
	textLookups uint64
}

type lruEntry struct {
	key     string
	effects Effects
	// dependent marks an entry keyed by SQL text alone whose verdict depends on the context: its
	// effects must not be used, the caller looks the context-keyed entry up instead.
	dependent  bool
	prev, next *lruEntry
}

// newLRUCache returns a cache holding at most size entries in total; size must be positive.
func newLRUCache(size int) *lruCache {
	shardCount := min(size, maxCacheShards)
	cache := &lruCache{seed: maphash.MakeSeed(), shards: make([]lruShard, shardCount)}
	for i := range cache.shards {
		shard := &cache.shards[i]
		// Spread size over the shards exactly, so the total never exceeds it.
		shard.capacity = size / shardCount
		if i < size%shardCount {
			shard.capacity++
		}
		shard.entries = make(map[string]*lruEntry, min(shard.capacity, 1024))
		shard.sentinel.next = &shard.sentinel
		shard.sentinel.prev = &shard.sentinel
	}
	return cache
}

func (c *lruCache) shard(key string) *lruShard {
	return &c.shards[maphash.String(c.seed, key)%uint64(len(c.shards))]
}

// get returns the cached effects for key and marks it most recently used.
func (c *lruCache) get(key string) (effects Effects, dependent, ok bool) {
	shard := c.shard(key)
	shard.mu.Lock()
	shard.textLookups++
	entry, ok := shard.entries[key]
	if !ok {
		shard.mu.Unlock()
		return Effects{}, false, false
	}
	shard.moveToFront(entry)
	effects, dependent = entry.effects, entry.dependent
	shard.mu.Unlock()
	return effects, dependent, true
}

// getBytes is get for a key held in a byte slice; it does not allocate.
func (c *lruCache) getBytes(key []byte) (effects Effects, dependent, ok bool) {
	shard := &c.shards[maphash.Bytes(c.seed, key)%uint64(len(c.shards))]
	shard.mu.Lock()
	entry, ok := shard.entries[string(key)]
	if !ok {
		shard.mu.Unlock()
		return Effects{}, false, false
	}
	shard.moveToFront(entry)
	effects, dependent = entry.effects, entry.dependent
	shard.mu.Unlock()
	return effects, dependent, true
}

// add stores effects for key, evicting the least recently used entry of the shard when it is full.
func (c *lruCache) add(key string, effects Effects, dependent bool) {
	shard := c.shard(key)
	shard.mu.Lock()
	defer shard.mu.Unlock()
	if entry, ok := shard.entries[key]; ok {
		entry.effects, entry.dependent = effects, dependent
		shard.moveToFront(entry)
		return
	}
	var entry *lruEntry
	if len(shard.entries) >= shard.capacity {
		// Reuse the evicted entry's memory for the new key.
		entry = shard.sentinel.prev
		shard.unlink(entry)
		delete(shard.entries, entry.key)
	} else {
		entry = &lruEntry{}
	}
	entry.key, entry.effects, entry.dependent = key, effects, dependent
	shard.pushFront(entry)
	shard.entries[key] = entry
}

// lookups returns the number of get calls so far.
func (c *lruCache) lookups() uint64 {
	var total uint64
	for i := range c.shards {
		shard := &c.shards[i]
		shard.mu.Lock()
		total += shard.textLookups
		shard.mu.Unlock()
	}
	return total
}

// len returns the number of cached entries.
func (c *lruCache) len() int {
	total := 0
	for i := range c.shards {
		shard := &c.shards[i]
		shard.mu.Lock()
		total += len(shard.entries)
		shard.mu.Unlock()
	}
	return total
}

// purge removes every entry.
func (c *lruCache) purge() {
	for i := range c.shards {
		shard := &c.shards[i]
		shard.mu.Lock()
		clear(shard.entries)
		shard.sentinel.next = &shard.sentinel
		shard.sentinel.prev = &shard.sentinel
		shard.mu.Unlock()
	}
}

func (s *lruShard) unlink(entry *lruEntry) {
	entry.prev.next = entry.next
	entry.next.prev = entry.prev
	entry.prev, entry.next = nil, nil
}

func (s *lruShard) pushFront(entry *lruEntry) {
	entry.prev = &s.sentinel
	entry.next = s.sentinel.next
	s.sentinel.next.prev = entry
	s.sentinel.next = entry
}

func (s *lruShard) moveToFront(entry *lruEntry) {
	if s.sentinel.next == entry {
		return
	}
	s.unlink(entry)
	s.pushFront(entry)
}
