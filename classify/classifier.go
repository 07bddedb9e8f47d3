package classify

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	pg_query "github.com/pganalyze/pg_query_go/v5"
	"github.com/pganalyze/pg_query_go/v5/parser"
	"github.com/valyala/fastjson"
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
	catalogues     CatalogueSource
	// bodies keeps the parse trees of function bodies and view definitions across catalogues.
	bodies bodyParses
	// plpgsqlJSON are the parsers of pg_query's JSON of PL/pgSQL bodies (see decodeOrdered);
	// plpgsql keeps their decoded parses, by the CREATE statement createStatement makes of the
	// function, so that a function analysed again (in a new catalogue, or once a read gave it
	// PostgreSQL's OID), or parsed ahead while its CREATE ran (PrepareCreated), is not parsed
	// again.
	plpgsqlJSON fastjson.ParserPool
	plpgsql     keptParses[*jsonNode]
	// cacheMisses counts cached classifications that had to classify: the
	// statement was in neither the text nor the shape cache.
	cacheMisses atomic.Uint64
}

// CacheStats reports how many classifications the cache answered (hits) and
// how many it could not (misses) since the Classifier was made; both are
// zero when the cache is off. A statement longer than the cached limit counts as neither.
func (c *Classifier) CacheStats() (hits, misses uint64) {
	if c.cache == nil {
		return 0, 0
	}
	lookups := c.cache.lookups()
	misses = c.cacheMisses.Load()
	if misses > lookups { // read between the two counters' updates
		misses = lookups
	}
	return lookups - misses, misses
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
	effects := c.classifyCached(sql, nil, nil, false)
	effects.Label()
	return effects
}

// ClassifyIn returns the effects of the SQL string as a session described by ctx would run it: names
// resolve along its search_path in its database's catalogue (from Options.Catalogues; the first use
// of a database may wait, bounded, while the catalogue loads). A statement that changes functions
// or views invalidates the database's catalogue at once.
func (c *Classifier) ClassifyIn(sql string, ctx *Context) Effects {
	effects := c.ClassifyToRoute(sql, ctx)
	effects.Label()
	return effects
}

// ClassifyToRoute is ClassifyIn without the labels: Fingerprint and Normalized may be left for
// Effects.Label to compute, which the proxy calls once the statement is on its way to its node
// (they take two more runs of the parser, and routing needs neither).
func (c *Classifier) ClassifyToRoute(sql string, ctx *Context) Effects {
	fetch := c.catalogues != nil && ctx != nil && ctx.Database != ""
	effects := c.classifyCached(sql, ctx, nil, fetch)
	if effects.CatalogueChange && c.catalogues != nil && ctx != nil && ctx.Database != "" {
		// About to change: the next statement must not be classified with what is held now.
		c.catalogues.Changed(ctx.Database, effects.CatalogueChanges, false)
	}
	return effects
}

// ClassifyWith returns the effects of the SQL string with the given catalogue (nil for none) and
// context, without consulting Options.Catalogues; `pgowl explain --dsn` and tests use it.
func (c *Classifier) ClassifyWith(sql string, ctx *Context, cat *Catalogue) Effects {
	effects := c.classifyCached(sql, ctx, cat, false)
	effects.Label()
	return effects
}

// CatalogueChanged tells the catalogue source what changed in ctx's database (Effects.CatalogueChanges;
// nil means everything), which it reads at once; the proxy calls it as soon as a statement with
// CatalogueChange has run and its transaction ended, so that the session's next statement is
// classified with the change, and the read overlaps the client's next round trip.
func (c *Classifier) CatalogueChanged(ctx *Context, changes *CatalogueChanges) {
	if changes == nil {
		changes = everything()
	}
	if c.catalogues != nil && ctx != nil && ctx.Database != "" {
		c.catalogues.Changed(ctx.Database, changes, true)
	}
}

// Catalogues returns the catalogue source the classifier was built with (Options.Catalogues), or nil.
func (c *Classifier) Catalogues() CatalogueSource { return c.catalogues }

// keyBufferSize is the size of the stack buffer context keys are built in.
const keyBufferSize = 512

// classifyCached looks the verdict up in the cache (first by text, then, for verdicts that depend on
// the context, by context and text), classifying and caching it on a miss. With fetch, the catalogue
// comes from Options.Catalogues, asked only when the verdict may depend on it.
func (c *Classifier) classifyCached(sql string, ctx *Context, cat *Catalogue, fetch bool) Effects {
	if c.cache == nil || len(sql) > c.maxCachedBytes {
		if fetch {
			var current bool
			if cat, current = c.catalogues.Held(ctx.Database); !current {
				effects, independent, _, parsed := c.classifyIndependent(sql, ctx)
				if independent {
					return effects
				}
				cat = c.catalogues.Catalogue(ctx.Database)
				effects, _, _, _ = c.classifyUncached(sql, ctx, cat, parsed)
				return effects
			}
		}
		effects, _, _, _ := c.classifyUncached(sql, ctx, cat, nil)
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
	// parsed is what the classification of sql needs that no catalogue changes, when it was
	// computed while a catalogue read ran.
	var parsed *parsedStatement
	if fetch {
		var current bool
		if cat, current = c.catalogues.Held(ctx.Database); !current {
			// A change is still to be read (or nothing is loaded yet): a statement whose verdict
			// cannot depend on the catalogue (DDL, SET, BEGIN, ...) does not wait for it.
			var effects Effects
			var independent, cacheable bool
			effects, independent, cacheable, parsed = c.classifyIndependent(sql, ctx)
			if independent {
				if cacheable {
					if !shaped {
						shapeBytes, shaped = appendShape(shapeStack[:0], sql)
					}
					if shaped && shareable(&effects) {
						c.cache.add(string(shapeBytes), effects, false)
					}
					c.cache.add(sql, effects, false)
				}
				return effects
			}
			cat = c.catalogues.Catalogue(ctx.Database)
		}
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
	c.cacheMisses.Add(1)
	effects, dependent, used, cacheable := c.classifyUncached(sql, ctx, cat, parsed)
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
//
// parsed, when not nil, is sql's parse computed before (by classifyIndependent, for a statement the
// fast path does not classify).
func (c *Classifier) classifyUncached(sql string, ctx *Context, cat *Catalogue, parsed *parsedStatement) (effects Effects, dependent bool, used *Catalogue, cacheable bool) {
	used, cacheable = cat, true
	defer func() {
		if recovered := recover(); recovered != nil {
			effects = failClosed(fmt.Sprintf("internal error: %v", recovered))
			dependent = false
		}
	}()
	if parsed == nil {
		if effects, ok := c.classifyFast(sql); ok {
			return effects, false, cat, true
		}
	}
	a := c.newAnalysis(ctx, cat)
	effects, _ = a.fullParsed(sql, parsed, false)
	return effects, a.run.dependent, a.run.cat, a.run.cacheable()
}

// classifyIndependent classifies sql without a catalogue when its verdict cannot depend on one
// (DDL, SET, BEGIN, ...): independent is false when it may. It is called while the catalogue is
// being read; when the verdict depends on it, parsed holds what its classification needs that no
// catalogue changes (the parse tree, fingerprint and normalised text), so that only the analysis
// is left once the read is done.
func (c *Classifier) classifyIndependent(sql string, ctx *Context) (effects Effects, independent, cacheable bool, parsed *parsedStatement) {
	defer func() {
		if recovered := recover(); recovered != nil {
			effects, independent, cacheable, parsed = failClosed(fmt.Sprintf("internal error: %v", recovered)), true, true, nil
		}
	}()
	if effects, fast := c.classifyFast(sql); fast {
		return effects, true, true, nil
	}
	a := c.newAnalysis(ctx, nil)
	parsed = &parsedStatement{}
	effects, dependent := a.fullParsed(sql, parsed, true)
	if !dependent {
		return effects, true, a.run.cacheable(), nil
	}
	parsed.finish()
	return effects, false, a.run.cacheable(), parsed
}

// ClassifyWithoutCatalogue classifies sql as if no catalogue were held. When its verdict cannot
// depend on a catalogue, pending is nil and the effects are sql's, as ClassifyIn gives them. When it
// may, the effects are what the statement does where nothing it calls or reads by name is known
// (a user function's effect unknown: a write; a relation a table), with every fact its text alone
// gives: statements,
// transaction control, session effects, settings; they carry no fingerprint. pending then holds
// the parse, for ClassifyPending to give the final effects once the catalogue is current. Nothing
// is cached and no catalogue is asked for. The proxy sends a statement on such effects while the
// read of its session's catalogue change is still on its way, when every verdict would send it to
// the same node.
func (c *Classifier) ClassifyWithoutCatalogue(sql string, ctx *Context) (effects Effects, pending *PendingStatement) {
	defer func() {
		if recovered := recover(); recovered != nil {
			effects, pending = failClosed(fmt.Sprintf("internal error: %v", recovered)), nil
		}
	}()
	if effects, fast := c.classifyFast(sql); fast {
		return effects, nil
	}
	a := c.newAnalysis(ctx, nil)
	parsed := &parsedStatement{provisional: true}
	effects, _ = a.fullParsed(sql, parsed, false)
	if !a.run.dependent {
		if parsed.tree == nil {
			return effects, nil // not parsed: fullParsed's verdict on it, as ClassifyIn gives it
		}
		effects.labels = parsed.labels
		effects.Label()
		return effects, nil
	}
	parsed.provisional = false
	return effects, &PendingStatement{sql: sql, parsed: parsed}
}

// PendingStatement is a statement ClassifyWithoutCatalogue classified before the catalogue it
// depends on was current: its parse, kept for ClassifyPending.
type PendingStatement struct {
	sql    string
	parsed *parsedStatement
}

// Prepare computes what the final classification needs that no catalogue changes (the fingerprint
// and the normalised text), so that ClassifyPending has only the analysis left; the proxy calls it
// while the catalogue read runs.
func (p *PendingStatement) Prepare() {
	p.parsed.finish()
}

// ClassifyPending returns the effects of a statement ClassifyWithoutCatalogue left pending, with
// the catalogue of ctx's database as it is now (waiting for a read under way, as ClassifyIn does),
// from its kept parse. The verdict is not cached (ClassifyIn caches it at the text's next use).
func (c *Classifier) ClassifyPending(p *PendingStatement, ctx *Context) Effects {
	if c.catalogues == nil || ctx == nil || ctx.Database == "" {
		return c.ClassifyIn(p.sql, ctx)
	}
	p.Prepare()
	cat, current := c.catalogues.Held(ctx.Database)
	if !current {
		cat = c.catalogues.Catalogue(ctx.Database)
	}
	effects, _, _, _ := c.classifyUncached(p.sql, ctx, cat, p.parsed)
	effects.Label()
	return effects
}

// parsedStatement is what classifying a statement string needs that no catalogue changes: its
// parse tree, and its fingerprint and normalised text (labels, computed by finish or when first
// asked). Nothing in the analysis modifies the tree, so one parse serves the attempt without a
// catalogue and the analysis with it.
type parsedStatement struct {
	tree   *pg_query.ParseResult
	labels *statementLabels
	// provisional: the effects computed with it are not final; they carry no labels (the final
	// ones do).
	provisional bool
}

// finish computes the fingerprint and the normalised text, when the string parsed.
func (p *parsedStatement) finish() {
	if p.labels != nil {
		p.labels.compute()
	}
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
	effects, _ := a.fullUnless(sql, false)
	effects.Label()
	return effects
}

// fullUnless is full, but when stopIfDependent is set and the verdict depends on the context it
// stops before the finishing touches (fingerprint, normalised text), and reports stopped.
func (a *analysis) fullUnless(sql string, stopIfDependent bool) (effects Effects, stopped bool) {
	return a.fullParsed(sql, nil, stopIfDependent)
}

// fullParsed is fullUnless with sql's parse kept in parsed: a parsedStatement with a tree is used
// (and its labels, shared), an empty one receives the tree and the labels to compute; nil parses
// as fullUnless does.
func (a *analysis) fullParsed(sql string, parsed *parsedStatement, stopIfDependent bool) (effects Effects, stopped bool) {
	a.run.provisional = parsed != nil && parsed.provisional
	var tree *pg_query.ParseResult
	if parsed != nil && parsed.tree != nil {
		tree = parsed.tree
	} else {
		var err error
		if tree, err = parseSQL(sql); err != nil {
			return unparseable(err), false
		}
		if parsed != nil {
			parsed.tree, parsed.labels = tree, &statementLabels{sql: sql}
		}
	}
	verdicts := make([]verdict, 0, len(tree.Stmts))
	// sessionEnv resolves names as the string's session-level changes left the path; a local
	// change (SET LOCAL search_path) holds over it until a statement ends the block.
	sessionEnv, local := a.env, false
	for _, raw := range tree.Stmts {
		v := a.statement(raw.GetStmt())
		if change, ok := loneSetConfig(raw.GetStmt()); ok {
			v.settingChanges = []SettingChange{change}
		}
		verdicts = append(verdicts, v)
		if len(tree.Stmts) == 1 {
			continue
		}
		if v.searchPath != nil {
			// The statements after it in the string resolve names with the new path.
			a.followSearchPath(v.searchPath)
			if v.searchPath.Local {
				local = true
			} else {
				sessionEnv, local = a.env, false
			}
		}
		if local && v.transaction != nil && v.transaction.Kind.EndsBlock() {
			a.env, local = sessionEnv, false
		}
	}
	if stopIfDependent && a.run.dependent {
		return Effects{}, true
	}
	effects = stringEffects(verdicts)
	if len(a.run.warnings) > 0 {
		effects.Warnings = append([]string(nil), a.run.warnings...)
	}
	if len(a.run.assumptions) > 0 && effects.Access == Read {
		effects.Assumptions = append([]string(nil), a.run.assumptions...)
	}
	if cat := a.run.cat; cat == nil && a.run.dependent && a.c.catalogues != nil && a.env.database != "" {
		effects.Warnings = appendWarning(effects.Warnings, "no function catalogue for database "+quoteIdent(a.env.database)+" (not loaded yet, or loading failed): user functions and views are not analysed")
	}
	applyHint(leadingHint(sql), &effects)
	if effects.Access == Read {
		// After the hint: a read asserted by /*pgowl:readonly*/ still runs the definitions it names.
		effects.RestsOn, effects.RestsOnAll = ownedNames(a.run.restsOn), a.run.restsOnAll
	}
	switch {
	case parsed != nil && parsed.provisional:
	case parsed != nil:
		effects.labels = parsed.labels // computed already when the proxy prepared the statement
	default:
		effects.labels = &statementLabels{sql: sql}
	}
	return effects, false
}

// statementLabels computes a statement string's Fingerprint and Normalized once, for every copy of
// the effects that carries it (the cache's among them), when first asked.
type statementLabels struct {
	once                    sync.Once
	sql                     string
	fingerprint, normalized string
}

// Label fills Fingerprint and Normalized when they were left to be computed (ClassifyToRoute). The
// string parsed when it was classified, so the parser does not fail on it now; if it did, the
// fingerprint would stay empty and the normalised text be UnparseablePlaceholder, never the text.
func (e *Effects) Label() {
	if l := e.labels; l != nil {
		l.compute()
		e.Fingerprint, e.Normalized, e.labels = l.fingerprint, l.normalized, nil
	}
}

// compute computes the labels, once.
func (l *statementLabels) compute() {
	l.once.Do(func() {
		fingerprint, err := pg_query.Fingerprint(l.sql)
		normalized := UnparseablePlaceholder
		if err == nil {
			if n, err := redact(l.sql); err == nil {
				normalized = n
			} else {
				fingerprint = ""
			}
		}
		l.fingerprint, l.normalized = fingerprint, normalized
	})
}

// stringEffects gives the effects of a string's statements: each verdict's effects, merged by Merge. A
// string that is exactly one SET, RESET or SHOW of a pgowl.* setting keeps Pgowl and no session
// effects, since the proxy answers it itself.
func stringEffects(verdicts []verdict) Effects {
	if len(verdicts) == 0 {
		return Effects{Access: Read, Reason: ReasonReadOnly, Subject: "empty query"}
	}
	var small [4]Effects // most strings are one statement: no allocation
	parts := small[:0]
	if len(verdicts) > len(small) {
		parts = make([]Effects, 0, len(verdicts))
	}
	for i := range verdicts {
		parts = append(parts, verdicts[i].effects())
	}
	effects := Merge(parts)
	if effects.Pgowl != nil {
		// The proxy answers the command itself: nothing reaches a server, so no session state changes.
		effects.Session = 0
	}
	return effects
}

// effects is the verdict of one statement as Effects. The analysis's catalogue-change mark moves from
// the session bits to CatalogueChange; a chain explains a verdict only when the statement writes.
func (v *verdict) effects() Effects {
	e := Effects{
		Access:          v.access,
		Reason:          v.reason,
		Subject:         v.subject,
		Tx:              v.tx,
		Session:         v.session &^ sessionCatalogueChange,
		Pgowl:           v.pgowl,
		Statements:      1,
		CatalogueChange: v.catalogueChange || v.session&sessionCatalogueChange != 0,
		SetConfigNames:  v.settings,
		SearchPath:      v.searchPath,

		Transaction:       v.transaction,
		EndsBlock:         v.transaction != nil && v.transaction.Kind.EndsBlock(),
		Settings:          v.settingChanges,
		Deallocates:       v.deallocates,
		Prepares:          v.prepares,
		UsesPrepared:      v.usesPrepared,
		Loads:             v.loads,
		DiscardsSequences: v.discardsSequences,
	}
	switch {
	case v.session&sessionCatalogueChange != 0, v.catalogueChange && v.changes == nil:
		e.CatalogueChanges = everything()
	case v.catalogueChange:
		e.CatalogueChanges = v.changes
	}
	if v.access == Write {
		e.Chain, e.Detail = v.chain, v.detail
	}
	return e
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
	var tooCostly *treeTooCostlyError
	if errors.As(err, &tooCostly) {
		effects := failClosed("not parsed: a multi-column assignment could copy its source into too large a tree")
		effects.ParseError = err.Error()
		return effects
	}
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

// mergeChanges returns the union of two catalogue changes in a new value (verdicts are shared).
func mergeChanges(into, more *CatalogueChanges) *CatalogueChanges {
	merged := &CatalogueChanges{}
	merged.Merge(into)
	merged.Merge(more)
	return merged
}

// ownedNames copies names, sorted and without repeats, into one string of their own: names taken
// from a parse tree are parts of the parser's whole output, which a cached verdict must not keep
// alive, and a verdict must not depend on the order its analyses were memoised in.
func ownedNames(names []string) []string {
	if len(names) == 0 {
		return nil
	}
	names = sortedOnce(names)
	size := 0
	for _, name := range names {
		size += len(name)
	}
	var b strings.Builder
	b.Grow(size)
	for _, name := range names {
		b.WriteString(name)
	}
	all := b.String()
	owned := make([]string, len(names))
	at := 0
	for i, name := range names {
		owned[i] = all[at : at+len(name)]
		at += len(name)
	}
	return owned
}

// sortedOnce returns names sorted, each once, in a new slice.
func sortedOnce(names []string) []string {
	return slices.Compact(slices.Sorted(slices.Values(names)))
}
