// Package catalog loads each database's function catalogue for the classifier: the functions of
// pg_proc (language, volatility, kind, bodies, argument types, search_path settings, comments with
// the pgowl:readonly / pgowl:writes directives), the views with their definitions, the relations,
// the types and the default search paths, all read from the primary in one snapshot.
//
// A Manager implements classify.CatalogueSource. It loads a database's catalogue on its first use
// (the statement that needs it waits at most Options.Wait; past that, or when the load fails, the
// statement is classified without it and unknown functions go to the primary), reloads it in the
// background every Options.RefreshInterval, reloads it before the next statement after Invalidate
// (a CREATE, ALTER or DROP FUNCTION, CREATE OR REPLACE VIEW, COMMENT ON FUNCTION, ... passed through
// pgowl), and reloads it when a statement names a function or relation it does not hold, so that a
// function created elsewhere is found on its first use. A reload that finds the same content keeps
// the old catalogue, so its version (part of the classifier's cache keys) and its memoised function
// analyses survive. Holding a current catalogue costs no I/O: two atomic loads per statement.
package catalog
