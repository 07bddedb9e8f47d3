// Package catalog loads each database's function catalogue for the classifier: the functions of
// pg_proc (language, volatility, kind, bodies, argument types, search_path settings, comments with
// the pgowl:readonly / pgowl:writes directives), the views with their definitions, the relations,
// the types, operators and casts, and the default search paths, all read from the primary.
//
// A Manager implements classify.CatalogueSource. It reads a database's whole catalogue on its first
// use (the statement that needs it waits at most Options.Wait; past that, or when the read fails,
// the statement is classified without it and unknown functions go to the primary, and the whole
// catalogue is read again Options.RetryAfter after the last failed read, unless a whole read
// succeeds first) and again in the background once Options.RefreshInterval has passed since its
// last whole read. After Changed (a statement that changes functions,
// relations or types passed through pgowl; the classifier names them from the parse tree) it reads
// only the names that changed, in one batch over a connection it keeps while reads follow each
// other, patches the held data (patch: objects added after all held are appended in place, see
// classify.Catalogue.AppendedFunctions) and derives the catalogue's indexes from the held ones
// and what the patch took out and put in (classify.DeriveCatalogue, classify.CatalogueDelta), at
// a cost that grows with the change rather than with the database: this runs between two
// statements of a migration. A change that does not name all it changes (Everything) reads the
// whole catalogue. A name a statement uses that the catalogue does not hold is read the same way.
// A read that finds the same content keeps the old catalogue, so its version (part of the
// classifier's cache keys) and its memoised function analyses survive. A read that changes
// functions, or only adds relations and types under names the catalogue held nothing of (none
// unlogged, row-secured, a domain or in pg_catalog: keepsAnalyses), carries the analyses that
// rest on none of the names read (Catalogue.KeepAnalysesFrom); any other change drops them.
// Holding a current catalogue costs no I/O: two atomic loads per statement.
//
// A function, composite or enum type, or view whose CREATE statement says all of it
// (classify.CreatedObject) is not read: the session tells ChangedAndCreated once the statement has
// committed, and the held catalogue is patched with the rows the statement describes
// (classify.Catalogue.TakeCreated: schema from search_path and the schemas a whole read lists, OR
// REPLACE keeping the held OIDs, new objects OIDs of the Manager's from derivedOIDFloor up, a view
// its query as written with the search_path it was made under), under the same conditions and
// with the same read slot as a session's read below. Such objects stay unconfirmed until a read
// gives PostgreSQL's rows: every read by name reads them too (an aggregate made of such a function,
// a function taking such a type, finds their real OIDs; a view gets its bound definition), a
// whole read confirms them all, and an object whose name an unconfirmed view's query uses is read
// with the view rather than taken (it could change what the view's names resolve to, where
// PostgreSQL bound them when it made the view). Once nothing has been taken for
// Options.ConfirmTakenAfter (a migration's burst is over), the Manager reads them itself, by
// name, so that they do not make the next read, which a statement may wait for, a whole one
// (past maxChangedNamesRead names). A change taken while that read runs waits for it, as for a
// patch. Every read by name reads the list of schemas too: an unqualified CREATE goes to the
// first schema of the search_path that exists, made since the last whole read or not.
//
// The session can derive that patched catalogue ahead, while the node runs the CREATE
// (PrepareTake, a PreparedTake; the proxy also has the object's uses analysed in it,
// classify.Classifier.PrepareUses). Nothing is stored then: once the statement has committed,
// TakePrepared stores the derived catalogue when the held one is still the one it was derived
// from, under ChangedAndCreated's conditions, and otherwise takes the object in as
// ChangedAndCreated does. A statement that failed never has its take stored. The proxy takes the
// database's Generation as it sends the statement and uses ChangedAndCreatedSince and
// TakePreparedSince: when anything was told or looked up since (another session's CREATE OR
// REPLACE of the same object, committed after this one, may already be held), the object is read
// instead, as a SessionRead of an older generation is not used, so that an older definition is
// never stored over a newer one.
//
// A session that makes a change can read it itself (SessionRead, session_read.go): the proxy sends
// the read on the session's own connection right behind the statement that makes the change, and
// ChangedAndRead patches the held catalogue with it, when nothing else was told or looked up since
// the read was prepared and it covers every pending change; else it does what Changed does. The
// patch runs in the session's goroutine before it reads its next statement, holding the
// database's read slot (the reading state below), so that a statement of another session whose
// verdict depends on the catalogue waits for the patch as for any read.
//
// With Options.ChangePollInterval, a database in use has its catalogue rows written since the last
// poll looked for on the primary that often, over a connection of the poll's own
// (change_markers.go: each row's xmin against the last poll's snapshot xmin, less the rows that
// poll selected), and the names found read by name in the background, so that a change made past
// pgowl (on the primary itself, through another instance) is in within about an interval rather
// than at the next whole read. Names a session told of lately are left out.
//
// Per database the manager is in one of four states: no catalogue; current; pending (a change was
// told: Held reports it, statements whose verdict depends on the catalogue wait for a read that
// started after the change); reading (one read runs, or a session's read is patched in; changes
// and lookups arriving meanwhile are read by the next one). Generations order them: every Changed and Lookup advances the database's
// generation, a read reaches the generation it started at, and a statement waits until the held
// catalogue reaches the generation of the last change it must see.
//
// Reads survive DDL running beside them (load.go): each part is its own statement, a part that
// fails on an object that vanished meanwhile is read again with a new snapshot, and objects that
// keep failing are left out with a warning, found by halving the OID range; a view left out of
// the views is left out of the relations too (withoutViewsUnread), so that it is unknown, not a
// plain table. Nor does DDL fail for
// a read: pg_get_viewdef locks the views it prints until its statement ends, so a read and a
// DROP SCHEMA ... CASCADE can each hold a view the other waits for, and PostgreSQL fails whichever
// waited deadlock_timeout first. The Manager's connections and Load wait on a lock for half
// deadlock_timeout at most (100 ms; giveWayToDDL), so the read gives up, lets its locks go and
// is run again (up to 50 times), and the DDL goes on; so are the reads that have no objects to
// leave out (schemas, default search paths, assertions: waitingOutLocks). A SessionRead waits as
// briefly from its read of views on (sessionGiveWay); it is not run again: the change is left to
// the Manager.
package catalog
