package classify

import (
	"sync"

	pg_query "github.com/pganalyze/pg_query_go/v5"
)

// Bounds of bodyParses: the texts it keeps add up to at most maxBodyParseBytes (a parse tree
// takes some ten times its text), and a longer text than maxBodyParseText is not kept.
const (
	maxBodyParseBytes = 1 << 20
	maxBodyParseText  = 8 << 10
)

// keptParses keeps parses by the text they were made of, across catalogues: a catalogue change
// makes a new catalogue whose memoised analyses start empty, and the functions analysed again are
// mostly unchanged, their texts parse the same. Nothing in the analysis modifies a parse, so one
// serves every analysis, concurrently. A text longer than maxBodyParseText is not kept; when the
// kept texts would exceed maxBodyParseBytes, all are dropped.
type keptParses[T any] struct {
	mu     sync.Mutex
	parses map[string]T
	bytes  int
}

// get returns the kept parse of text.
func (k *keptParses[T]) get(text string) (T, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	parse, ok := k.parses[text]
	return parse, ok
}

// keep keeps parse as that of text.
func (k *keptParses[T]) keep(text string, parse T) {
	if len(text) > maxBodyParseText {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.parses == nil || k.bytes+len(text) > maxBodyParseBytes {
		k.parses, k.bytes = make(map[string]T), 0
	}
	if _, ok := k.parses[text]; !ok {
		k.parses[text] = parse
		k.bytes += len(text)
	}
}

// len is how many parses are kept.
func (k *keptParses[T]) len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.parses)
}

// bodyParses keeps the parse trees of the texts the analysis of function bodies and view
// definitions parses (SQL bodies, view queries, PL/pgSQL expressions).
type bodyParses struct {
	keptParses[*pg_query.ParseResult]
}

// parse returns parseSQL(sql), from the kept trees when it was parsed before.
func (p *bodyParses) parse(sql string) (*pg_query.ParseResult, error) {
	if tree, ok := p.get(sql); ok {
		return tree, nil
	}
	tree, err := parseSQL(sql)
	if err != nil {
		return tree, err
	}
	p.keep(sql, tree)
	return tree, nil
}
