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

// bodyParses keeps the parse trees of the texts the analysis of function bodies and view
// definitions parses (SQL bodies, view queries, PL/pgSQL expressions), by text, across catalogues.
// A catalogue change makes a new catalogue whose memoised analyses start empty, and the functions
// analysed again are mostly unchanged: their texts parse to the same trees. Nothing in the analysis
// modifies a parse tree, so one tree serves every analysis, concurrently. When the kept texts
// would exceed maxBodyParseBytes, all are dropped.
type bodyParses struct {
	mu    sync.Mutex
	trees map[string]*pg_query.ParseResult
	bytes int
}

// parse returns pg_query.Parse(sql), from the kept trees when it was parsed before.
func (p *bodyParses) parse(sql string) (*pg_query.ParseResult, error) {
	if len(sql) > maxBodyParseText {
		return pg_query.Parse(sql)
	}
	p.mu.Lock()
	tree, ok := p.trees[sql]
	p.mu.Unlock()
	if ok {
		return tree, nil
	}
	tree, err := pg_query.Parse(sql)
	if err != nil {
		return tree, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.trees == nil || p.bytes+len(sql) > maxBodyParseBytes {
		p.trees, p.bytes = make(map[string]*pg_query.ParseResult), 0
	}
	if _, ok := p.trees[sql]; !ok {
		p.trees[sql] = tree
		p.bytes += len(sql)
	}
	return tree, nil
}

// plpgsqlParses keeps the decoded parses of PL/pgSQL bodies, by the CREATE statement
// createStatement makes of the function, across catalogues, as bodyParses keeps SQL texts': a
// function analysed again (in a new catalogue, or once a read gave it PostgreSQL's OID), or
// parsed ahead while its CREATE statement ran (Classifier.PrepareCreated), is not parsed again.
// Nothing modifies a decoded parse. The same bounds hold.
type plpgsqlParses struct {
	mu    sync.Mutex
	roots map[string]*jsonNode
	bytes int
}

// get returns the kept parse of text, nil when none is kept.
func (p *plpgsqlParses) get(text string) *jsonNode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.roots[text]
}

// keep keeps root as the parse of text.
func (p *plpgsqlParses) keep(text string, root *jsonNode) {
	if len(text) > maxBodyParseText {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.roots == nil || p.bytes+len(text) > maxBodyParseBytes {
		p.roots, p.bytes = make(map[string]*jsonNode), 0
	}
	if _, ok := p.roots[text]; !ok {
		p.roots[text] = root
		p.bytes += len(text)
	}
}
