package classify

import (
	"iter"
	"maps"
)

// minLayered is the fewest changed entries a layered index holds before merging them into its
// base; past that, it merges them when they outnumber the square root of the base's size.
const minLayered = 32

// layered is one index of a catalogue, shared with the catalogues derived from it
// (DeriveCatalogue): base, which no catalogue modifies once built, under the entries changed
// since base was built (set, or removed). A derived catalogue copies only the changed entries
// and adds its own; when they outnumber the square root of base's size, it merges them into a new
// base. With n entries, a derivation copies about √n entries, and the whole index once every √n
// changes, instead of n every time: maps.Clone of a map of pointers costs about what inserting
// does. A lookup costs one more map lookup while changes are held.
type layered[K comparable, V any] struct {
	base    map[K]V
	changed map[K]layeredEntry[V]
	size    int
}

// layeredEntry is an entry changed since a layered index's base: its value, or removed.
type layeredEntry[V any] struct {
	value   V
	present bool
}

// newLayered returns an index of m, which it owns from now on.
func newLayered[K comparable, V any](m map[K]V) layered[K, V] {
	return layered[K, V]{base: m, size: len(m)}
}

// get returns the value of key, and whether the index holds it.
func (l *layered[K, V]) get(key K) (V, bool) {
	if len(l.changed) > 0 {
		if e, ok := l.changed[key]; ok {
			return e.value, e.present
		}
	}
	v, ok := l.base[key]
	return v, ok
}

// at returns the value of key, or V's zero value.
func (l *layered[K, V]) at(key K) V {
	v, _ := l.get(key)
	return v
}

// len returns how many keys the index holds.
func (l *layered[K, V]) len() int { return l.size }

// all yields every key the index holds, with its value, in no particular order.
func (l *layered[K, V]) all() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		for key, e := range l.changed {
			if e.present && !yield(key, e.value) {
				return
			}
		}
		for key, v := range l.base {
			if _, changed := l.changed[key]; !changed && !yield(key, v) {
				return
			}
		}
	}
}

// own makes l, a copy of another catalogue's index, one that set and remove may change without
// changing the other: its changed entries are copied (base stays shared).
func (l *layered[K, V]) own() {
	l.changed = maps.Clone(l.changed)
	if l.changed == nil {
		l.changed = make(map[K]layeredEntry[V])
	}
}

// set makes key's value v; l must be owned (own).
func (l *layered[K, V]) set(key K, v V) {
	if _, ok := l.get(key); !ok {
		l.size++
	}
	l.changed[key] = layeredEntry[V]{value: v, present: true}
}

// remove takes key out; l must be owned (own).
func (l *layered[K, V]) remove(key K) {
	if _, ok := l.get(key); !ok {
		return
	}
	l.size--
	if _, inBase := l.base[key]; inBase {
		l.changed[key] = layeredEntry[V]{}
	} else {
		delete(l.changed, key)
	}
}

// settle merges the changed entries into a new base when they have grown past what a derivation
// should copy (see layered).
func (l *layered[K, V]) settle() {
	if len(l.changed) <= minLayered || len(l.changed)*len(l.changed) <= len(l.base) {
		return
	}
	base := maps.Clone(l.base)
	if base == nil {
		base = make(map[K]V, len(l.changed))
	}
	for key, e := range l.changed {
		if e.present {
			base[key] = e.value
		} else {
			delete(base, key)
		}
	}
	l.base, l.changed = base, nil
}

// owning owns one layered index of a derived catalogue the first time the derivation changes it,
// and settles it at the end only then: an index the change leaves alone stays shared, uncopied.
type owning struct{ owned bool }

// ownable is a layered index of any key and value.
type ownable interface {
	own()
	settle()
}

func (o *owning) own(l ownable) {
	if !o.owned {
		l.own()
		o.owned = true
	}
}

func (o *owning) settle(l ownable) {
	if o.owned {
		l.settle()
	}
}
