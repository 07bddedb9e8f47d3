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
	// Functions, when non-nil, is asked about functions that are not pg_catalog built-ins. It must
	// be safe for concurrent use; call Classifier.Purge when its answers change.
	Functions FunctionResolver
}

// Classifier decides what SQL strings do; it is safe for concurrent use.
type Classifier struct {
	cache          *lruCache
	maxCachedBytes int
	functions      functionTable
	walkPlans      walkPlans
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
	c := &Classifier{
		maxCachedBytes: maxCached,
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

// Classify returns the effects of the SQL string; it never panics and fails closed (Write) on anything it cannot see through.
func (c *Classifier) Classify(sql string) Effects {
	if c.cache != nil {
		if effects, ok := c.cache.get(sql); ok {
			return effects
		}
	}
	if c.cache == nil || len(sql) > c.maxCachedBytes {
		return c.classifyUncached(sql)
	}
	// Statements that differ only in literals share a verdict (see shape.go).
	// The exact text is cached too, so that a repeated statement costs no shaping.
	shape, shaped := shapeOf(sql)
	if shaped {
		if effects, ok := c.cache.get(shape); ok {
			c.cache.add(sql, effects)
			return effects
		}
	}
	effects := c.classifyUncached(sql)
	if shaped && shareable(&effects) {
		c.cache.add(shape, effects)
	}
	c.cache.add(sql, effects)
	return effects
}

// Purge empties the cache, for example after the FunctionResolver learned new functions.
func (c *Classifier) Purge() {
	if c.cache != nil {
		c.cache.purge()
	}
}

// classifyUncached runs the fast path or the full parse, converting any panic into a fail-closed verdict.
func (c *Classifier) classifyUncached(sql string) (effects Effects) {
	defer func() {
		if recovered := recover(); recovered != nil {
			effects = failClosed(fmt.Sprintf("internal error: %v", recovered))
		}
	}()
	if effects, ok := c.classifyFast(sql); ok {
		return effects
	}
	return c.classifyFull(sql)
}

// classifyFull parses sql with pg_query and applies the statement rules.
func (c *Classifier) classifyFull(sql string) Effects {
	tree, err := pg_query.Parse(sql)
	if err != nil {
		return unparseable(err)
	}
	verdicts := make([]verdict, 0, len(tree.Stmts))
	for _, raw := range tree.Stmts {
		verdicts = append(verdicts, c.statement(raw.GetStmt()))
	}
	effects := combine(verdicts)
	return withFingerprint(sql, effects)
}

// withFingerprint fills Fingerprint and Normalized; a failure here means the input did not parse after all.
func withFingerprint(sql string, effects Effects) Effects {
	fingerprint, err := pg_query.Fingerprint(sql)
	if err != nil {
		return unparseable(err)
	}
	normalized, err := pg_query.Normalize(sql)
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
		effects.Session |= v.session
		if v.access == Write && effects.Access == Read {
			effects.Access, effects.Reason, effects.Subject = Write, v.reason, v.subject
		}
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
