package classify

import (
	"errors"
	"fmt"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v5"
	"github.com/pganalyze/pg_query_go/v5/parser"
)

const (
	// DefaultCacheSize is the number of distinct SQL strings cached when Options.CacheSize is zero.
	DefaultCacheSize = 10000
	// DefaultMaxCachedSQLBytes is the longest SQL string cached when Options.MaxCachedSQLBytes is zero.
	DefaultMaxCachedSQLBytes = 64 << 10
	// UnparseablePlaceholder is the Normalized text of input that does not parse; the raw text is never logged.
	UnparseablePlaceholder = "<unparseable statement>"
)

// Options configures a Classifier.
type Options struct {
	// CacheSize is the number of distinct SQL strings whose verdicts are kept: 0 means
	// DefaultCacheSize, a negative value disables the cache.
	CacheSize int
	// MaxCachedSQLBytes is the longest SQL string that is cached: 0 means DefaultMaxCachedSQLBytes.
	MaxCachedSQLBytes int
	// Functions, when non-nil, is asked about functions that are not pg_catalog built-ins when no
	// catalogue is available. It must be safe for concurrent use; call Classifier.Purge when its
	// answers change.
	Functions FunctionResolver
	// MaxDepth bounds nested function and view analysis (classify.max_depth): deeper statements go to
	// the primary with NESTING_TOO_DEEP. 0 means DefaultMaxDepth.
	MaxDepth int
	// Catalogues, when non-nil, gives ClassifyIn each database's function catalogue.
	Catalogues CatalogueSource
}

// DefaultMaxDepth is the function and view nesting analysed when Options.MaxDepth is zero.
const DefaultMaxDepth = 16

// Classifier decides what SQL strings do; it is safe for concurrent use.
type Classifier struct {
	cache          *lruCache
	maxCachedBytes int
	maxDepth       int
	functions      functionTable
	walkPlans      walkPlans
	catalogues     CatalogueSource
}

// New returns a Classifier configured by opts.
func New(opts Options) *Classifier {
	size := opts.CacheSize
	if size == 0 {
		size = DefaultCacheSize
	}
	maxCached := opts.MaxCachedSQLBytes
	if maxCached <= 0 {
		maxCached = DefaultMaxCachedSQLBytes
	}
	maxDepth := opts.MaxDepth
	if maxDepth <= 0 {
		maxDepth = DefaultMaxDepth
	}
	c := &Classifier{
		maxCachedBytes: maxCached,
		maxDepth:       maxDepth,
		catalogues:     opts.Catalogues,
		functions: functionTable{
			builtins:   parseBuiltinNames(pg15BuiltinFunctions),
			writing:    writingBuiltins(),
			prefixes:   writingBuiltinPrefixes(),
			extensions: writingExtensionFunctions(),
			resolver:   opts.Functions,
		},
	}
	if size > 0 {
		c.cache = newLRUCache(size)
	}
	return c
}

// Classify returns the effects of the SQL string without a catalogue or session context: functions
// that are not pg_catalog built-ins are unknown (unless Options.Functions knows them) and relations
// are tables. It never panics and fails closed (Write) on anything it cannot see through.
func (c *Classifier) Classify(sql string) Effects {
	return c.classifyCached(sql, nil, nil, false)
}

// ClassifyIn returns the effects of the SQL string as a session described by ctx would run it: names
// resolve along its search_path in its database's catalogue (from Options.Catalogues; the first use
// of a database may wait, bounded, while the catalogue loads). A statement that changes functions
// or views invalidates the database's catalogue at once.
func (c *Classifier) ClassifyIn(sql string, ctx *Context) Effects {
	fetch := c.catalogues != nil && ctx != nil && ctx.Database != ""
	effects := c.classifyCached(sql, ctx, nil, fetch)
	if effects.CatalogueChange {
		c.Invalidate(ctx)
	}
	return effects
}

// ClassifyWith returns the effects of the SQL string with the given catalogue (nil for none) and
// context, without consulting Options.Catalogues; `pgowl explain --dsn` and tests use it.
func (c *Classifier) ClassifyWith(sql string, ctx *Context, cat *Catalogue) Effects {
	return c.classifyCached(sql, ctx, cat, false)
}

// Invalidate tells the catalogue source that the functions or views of ctx's database changed; the
// proxy calls it again once a statement with CatalogueChange has run.
func (c *Classifier) Invalidate(ctx *Context) {
	if c.catalogues != nil && ctx != nil && ctx.Database != "" {
		c.catalogues.Invalidate(ctx.Database)
	}
}

// keyBufferSize is the size of the stack buffer context keys are built in.
const keyBufferSize = 512

// classifyCached looks the verdict up in the cache (first by text, then, for verdicts that depend on
// the context, by context and text), classifying and caching it on a miss. With fetch, the catalogue
// comes from Options.Catalogues, asked only when the verdict may depend on it.
func (c *Classifier) classifyCached(sql string, ctx *Context, cat *Catalogue, fetch bool) Effects {
	if c.cache == nil || len(sql) > c.maxCachedBytes {
		if fetch {
			cat = c.catalogues.Catalogue(ctx.Database)
		}
		effects, _, _, _ := c.classifyUncached(sql, ctx, cat)
		return effects
	}
	effects, dependent, textKnown := c.cache.get(sql)
	if textKnown && !dependent {
		return effects
	}
	// Statements that differ only in literals share a verdict (see shape.go). A shape hit does
	// not cache the exact text: statements with literals rarely repeat exactly (pgbench -S sends
	// a new aid every time), and caching each would evict useful entries and allocate. The
	// shape is built and looked up in stack buffers, so a shape hit allocates nothing.
	var shapeStack [keyBufferSize]byte
	var shapeBytes []byte
	shaped, shapeDependent := false, false
	if !textKnown {
		// Text never seen (or evicted): most often new literals in a known statement, whose
		// shape is looked up before the context key is built. The hot path of such statements.
		shapeBytes, shaped = appendShape(shapeStack[:0], sql)
		effects, hit, dependent := c.shapeLookup(shapeBytes, shaped)
		if hit && !dependent {
			return effects
		}
		shapeDependent = hit
	}
	if fetch {
		cat = c.catalogues.Catalogue(ctx.Database)
	}
	var stack [keyBufferSize]byte
	key := appendContextKey(stack[:0], ctx, cat)
	prefixLen := len(key)
	key = append(key, sql...)
	if textKnown {
		// The text's verdict depends on the context: it is cached by context and text (the
		// two entries are added together, so an unknown text has no such entry to look for).
		if effects, _, ok := c.cache.getBytes(key); ok {
			return effects
		}
		// None for this context yet: perhaps one for its shape.
		shapeBytes, shaped = appendShape(shapeStack[:0], sql)
		effects, hit, dependent := c.shapeLookup(shapeBytes, shaped)
		if hit && !dependent {
			return effects
		}
		shapeDependent = hit
	}
	if shapeDependent {
		var keyed [keyBufferSize]byte
		if effects, _, ok := c.cache.getBytes(append(append(keyed[:0], key[:prefixLen]...), shapeBytes...)); ok {
			return effects
		}
	}
	shape := ""
	if shaped {
		shape = string(shapeBytes)
	}
	effects, dependent, used, cacheable := c.classifyUncached(sql, ctx, cat)
	if !cacheable {
		return effects
	}
	if !dependent {
		if shaped && shareable(&effects) {
			c.cache.add(shape, effects, false)
		}
		c.cache.add(sql, effects, false)
		return effects
	}
	if used != cat {
		// A lookup replaced the catalogue: key the verdict by the one it was made with.
		key = append(appendContextKey(stack[:0], ctx, used), sql...)
		prefixLen = len(key) - len(sql)
	}
	if shaped && shareable(&effects) {
		c.cache.add(shape, effects, true)
		c.cache.add(string(key[:prefixLen])+shape, effects, false)
	}
	c.cache.add(sql, effects, true)
	c.cache.add(string(key), effects, false)
	return effects
}

// shapeLookup looks a shape up in the cache: hit, and whether its verdict depends on the context
// (then the caller looks the context-keyed shape up).
func (c *Classifier) shapeLookup(shape []byte, shaped bool) (effects Effects, hit, dependent bool) {
	if !shaped {
		return Effects{}, false, false
	}
	effects, dependent, hit = c.cache.getBytes(shape)
	return effects, hit, dependent
}

// Purge empties the cache, for example after the FunctionResolver learned new functions.
func (c *Classifier) Purge() {
	if c.cache != nil {
		c.cache.purge()
	}
}

// classifyUncached runs the fast path or the full parse, converting any panic into a fail-closed
// verdict. It reports whether the verdict depends on the context, which catalogue it used, and
// whether it may be cached (not when a lookup of a missing name could not be made).
func (c *Classifier) classifyUncached(sql string, ctx *Context, cat *Catalogue) (effects Effects, dependent bool, used *Catalogue, cacheable bool) {
	used, cacheable = cat, true
	defer func() {
		if recovered := recover(); recovered != nil {
			effects = failClosed(fmt.Sprintf("internal error: %v", recovered))
			dependent = false
		}
	}()
	if effects, ok := c.classifyFast(sql); ok {
		return effects, false, cat, true
	}
	a := c.newAnalysis(ctx, cat)
	effects = a.full(sql)
	return effects, a.run.dependent, a.run.cat, !a.run.uncacheable
}

// newAnalysis starts the analysis of one statement string.
func (c *Classifier) newAnalysis(ctx *Context, cat *Catalogue) *analysis {
	return &analysis{c: c, env: newEnv(ctx, cat), run: &run{cat: cat, budget: analysisBudget}}
}

// classifyFull parses sql with pg_query and applies the statement rules, without a catalogue.
func (c *Classifier) classifyFull(sql string) Effects {
	return c.newAnalysis(nil, nil).full(sql)
}

// full parses sql with pg_query and applies the statement rules and a leading hint.
func (a *analysis) full(sql string) Effects {
	tree, err := pg_query.Parse(sql)
	if err != nil {
		return unparseable(err)
	}
	verdicts := make([]verdict, 0, len(tree.Stmts))
	for _, raw := range tree.Stmts {
		v := a.statement(raw.GetStmt())
		verdicts = append(verdicts, v)
		if v.searchPath != nil && len(tree.Stmts) > 1 {
			// The statements after it in the string resolve names with the new path.
			a.followSearchPath(v.searchPath)
		}
	}
	effects := combine(verdicts)
	if len(a.run.warnings) > 0 {
		effects.Warnings = append([]string(nil), a.run.warnings...)
	}
	if cat := a.run.cat; cat == nil && a.run.dependent && a.c.catalogues != nil && a.env.database != "" {
		effects.Warnings = appendWarning(effects.Warnings, "no function catalogue for database "+quoteIdent(a.env.database)+" (not loaded yet, or loading failed): user functions and views are not analysed")
	}
	applyHint(leadingHint(sql), &effects)
	return withFingerprint(sql, effects)
}

// withFingerprint fills Fingerprint and Normalized; a failure here means the input did not parse after all.
func withFingerprint(sql string, effects Effects) Effects {
	fingerprint, err := pg_query.Fingerprint(sql)
	if err != nil {
		return unparseable(err)
	}
	normalized, err := redact(sql)
	if err != nil {
		return unparseable(err)
	}
	effects.Fingerprint = fingerprint
	effects.Normalized = normalized
	return effects
}

// combine merges per-statement verdicts: the string is a read only when every statement is; otherwise the
// first writing statement (in statement order) supplies Reason and Subject. Tx is the first statement's,
// Session is the union, and Pgowl is kept only when the string is that one statement.
func combine(verdicts []verdict) Effects {
	effects := Effects{Access: Read, Reason: ReasonReadOnly, Statements: len(verdicts)}
	if len(verdicts) == 0 {
		effects.Subject = "empty query"
		return effects
	}
	effects.Subject = verdicts[0].subject
	effects.Tx = verdicts[0].tx
	for _, v := range verdicts {
		effects.Session |= v.session &^ sessionCatalogueChange
		effects.SetConfigNames = mergeNames(effects.SetConfigNames, v.settings)
		effects.CatalogueChange = effects.CatalogueChange || v.catalogueChange || v.session&sessionCatalogueChange != 0
		switch {
		case v.access == Write && effects.Access == Read:
			effects.Access, effects.Reason, effects.Subject = Write, v.reason, v.subject
			effects.Chain, effects.Detail = v.chain, v.detail
		case v.access == Read && effects.Access == Read && v.reason == ReasonOverride && effects.Reason == ReasonReadOnly:
			effects.Reason, effects.Subject = ReasonOverride, v.subject
		}
	}
	if len(verdicts) == 1 {
		effects.SearchPath = verdicts[0].searchPath
	}
	if len(verdicts) == 1 && verdicts[0].pgowl != nil {
		// The proxy answers the command itself: nothing reaches a server, so no session state changes.
		effects.Pgowl = verdicts[0].pgowl
		effects.Session = 0
	}
	return effects
}

// failClosed is the verdict for anything the classifier could not analyse.
func failClosed(subject string) Effects {
	return Effects{
		Access:     Write,
		Reason:     ReasonUnknownEffect,
		Subject:    subject,
		Normalized: UnparseablePlaceholder,
	}
}

// unparseable is the verdict for input pg_query rejects. The subject omits the parser's quote of the
// input (`at or near "..."`) so that logs of the subject carry no literals; ParseError keeps it.
func unparseable(err error) Effects {
	message := err.Error()
	short := message
	var parseErr *parser.Error
	if errors.As(err, &parseErr) {
		if at := strings.Index(short, ` at or near "`); at >= 0 {
			short = short[:at]
			if parseErr.Cursorpos > 0 {
				short += fmt.Sprintf(" at position %d", parseErr.Cursorpos)
			}
		}
	} else {
		// Not the SQL parser's error (for example the parse tree was too deep to decode): no input is quoted.
		short = "parse tree rejected"
	}
	const maxSubject = 120
	if len(short) > maxSubject {
		short = truncateUTF8(short, maxSubject) + "..."
	}
	if message == "" {
		message = "unknown parse error"
	}
	effects := failClosed("could not parse: " + short)
	effects.ParseError = message
	return effects
}

// truncateUTF8 cuts s to at most n bytes without splitting a UTF-8 sequence.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
