// Package classify decides from PostgreSQL's own parse tree what a SQL string does, so that the
// proxy can send reads to a standby and everything else to the primary.
//
// # Effects, not keywords
//
// A statement is judged by what it does, not by its first word. "SELECT nextval('s')" writes a
// sequence; "SELECT ... FOR UPDATE" takes row locks; "WITH d AS (DELETE ...) SELECT ..." deletes;
// "EXPLAIN DELETE" without ANALYZE runs nothing. The classifier therefore parses the string with
// pg_query (PostgreSQL's real grammar) and looks at the tree:
//
//   - Statements are recognised by node type: SELECT/VALUES/TABLE, SHOW, FETCH, MOVE, CLOSE,
//     DEALLOCATE, UNLISTEN, DISCARD, SET/RESET and transaction control are reads; INSERT, UPDATE,
//     DELETE, MERGE, COPY FROM, CALL, DO, LOCK, NOTIFY, VACUUM, ANALYZE, all DDL, GRANT/REVOKE,
//     COMMENT and the two-phase commit commands are writes.
//   - Statements that run a query (SELECT, DECLARE, COPY (query) TO STDOUT, EXPLAIN ANALYZE, and the
//     DML and CREATE TABLE AS forms) are walked completely, by code generated from pg_query's
//     descriptors for every message type (walk_generated.go, go generate; a test fails when a
//     pg_query upgrade leaves it stale), so no node type can hide anything: a locking clause anywhere gives ROW_LOCK, a data-modifying WITH or SELECT
//     INTO anywhere gives WRITE, and every function call is looked up.
//   - Functions: a reviewed table in builtins.go lists the pg_catalog functions that write or only
//     make sense on the primary (nextval, setval, currval, advisory locks, pg_notify, large-object
//     writers, WAL and replication-slot control, ...) → WRITING_FUNCTION. Every other name in
//     pg15_builtin_functions.txt (all of PostgreSQL 15's pg_catalog, generated from a real server
//     by internal/genbuiltins) is a read, except the readers of node-local statistics
//     (pg_stat_get_*, pg_lock_status, ...) → NODE_LOCAL_STATS. Other functions are looked up in the
//     database's Catalogue (see below); without one they are UNKNOWN_EFFECT unless Options.Functions
//     (a FunctionResolver) says otherwise.
//   - Relations: the pg_stat_* / pg_statio_* views, pg_locks, pg_stat_statements and friends are
//     node-local (NODE_LOCAL_STATS, the primary); with a catalogue, a view carries the effects of
//     its definition, recursively, and a relation the catalogue does not hold is UNKNOWN_EFFECT.
//   - PREPARE takes the effect of its query; EXECUTE cannot be seen through and is UNKNOWN_EFFECT.
//   - BEGIN is a write (a read-write transaction needs the primary) unless it says READ ONLY.
//
// Some rules come from what a PostgreSQL 15 hot standby actually refuses, checked by
// TestAgainstPostgres: LISTEN, SET TRANSACTION READ WRITE, serializable transactions and the
// pg_replication_origin_* functions are routed to the primary; a serializable session default is
// accepted by a standby but breaks every later statement there, which SessionSerializableDefault
// reports.
//
// # Functions and views: the catalogue
//
// ClassifyIn classifies in a session's Context (database, user, search_path, Parse parameter
// types) with the database's Catalogue from Options.Catalogues (package catalog loads them from the
// primary and keeps them current). Names resolve along the session's search_path, pg_catalog first
// unless the path places it elsewhere. A function's effect is analysed, not guessed from its
// volatility (analysis.go): an assertion (pgowl:readonly / pgowl:writes in its comment or in
// configuration) decides first; STABLE and IMMUTABLE functions in other languages than SQL and
// PL/pgSQL are trusted reads; SQL bodies (whatever their volatility) are
// parsed statement by statement and PL/pgSQL bodies with pg_query's PL/pgSQL parser (plpgsql.go),
// where EXECUTE of dynamic SQL, CALL, COPY, LOCK, NOTIFY, GRANT, REVOKE, maintenance and labelling
// statements count as writes; other languages are UNKNOWN_EFFECT. In the body of a STABLE or
// IMMUTABLE SQL or PL/pgSQL function, what PostgreSQL refuses there (data-modifying and utility
// statements) and dynamic SQL (which it runs read-only) are taken as reads, and the verdict lists
// the assumption in Effects.Assumptions (takeDeclared); visible nextval(), advisory locks and
// node-local reads still decide. Effects carry through calls with
// memoisation (per catalogue, function and search path) and cycle detection; deeper than
// Options.MaxDepth is NESTING_TOO_DEEP. Overloads are resolved by argument count and evident
// argument types, and when they differ in effect and the call cannot be resolved, the call is
// UNKNOWN_EFFECT. Effects.Chain and Effects.Detail say through which functions and views the
// deciding effect was found.
//
// # Catalogue changes
//
// A statement that changes what the catalogue holds sets Effects.CatalogueChange and names, in
// Effects.CatalogueChanges, the functions, relations and types it changes, or Everything when its
// parse tree does not bound its reach (changes.go). The proxy passes them to CatalogueChanged once
// the statement ran outside a transaction block; the source reads just those names again. While a
// change is pending (CatalogueSource.Held reports it), a statement whose verdict cannot depend on
// the catalogue is classified without waiting; one that may depend on it waits for the read.
// A catalogue derived after a change of functions, or an addition of relations and types under new
// names (none unlogged, row-secured, a domain or in pg_catalog), carries the memoised analyses that do not rest on
// the changed names: every name an analysis resolved a call, read a relation or cast to a type by,
// found or not (Catalogue.KeepAnalysesFrom): in layers shared with the catalogues
// before it, each stamped with the step of the chain it was made at and checked against the step
// of each name's last change, merged newest into next while the newer is at least half the size,
// so that a change costs what was analysed since the last one rather than everything analysed so
// far.
//
// # Hints
//
// A leading /*pgowl:readonly*/ comment makes a statement whose analysis was unsure (UNKNOWN_EFFECT,
// NESTING_TOO_DEEP, NODE_LOCAL_STATS, a user function found to write) a read with reason HINT; a
// leading /*pgowl:primary*/ sends any statement to the primary with reason HINT (hints.go).
//
// # Never fail open
//
// Sending a write to a standby is an error for the client; sending a read to the primary only costs
// capacity. So every doubt resolves to Write: unparseable input, a statement type the classifier does
// not recognise, a function it does not know, an unreadable option value. Classify never panics;
// a panic anywhere below it becomes a Write with UNKNOWN_EFFECT.
//
// # Strings with several statements
//
// A string is a read only when every statement is. Otherwise the first writing statement (in
// statement order) supplies Reason and Subject. Inside one statement the most certain finding wins:
// WRITE (data-modifying WITH, SELECT INTO) over ROW_LOCK over WRITING_FUNCTION over UNKNOWN_EFFECT.
// Tx is the transaction control of the first statement; Session is the union over all statements;
// Pgowl is set only when the string is exactly one SET, RESET or SHOW of a pgowl.* setting.
//
// # Typed facts
//
// Subject is for people. What a proxy acts on is typed (facts.go): Transaction says which
// transaction-control statement the string holds (BEGIN with its isolation level, read-only and
// deferrable options, COMMIT, COMMIT AND CHAIN, ROLLBACK TO SAVEPOINT, RELEASE, ...), Settings
// lists the setting changes the statements make by their own text, each with its name, whether it
// resets, whether it is local, and how it is replayed on another backend (as sent, by reading the
// value back, or not at all), and Deallocates, Loads and DiscardsSequences name what a
// DEALLOCATE, LOAD or DISCARD ends or starts. Merge combines them like the rest, and
// testdata/facts/facts_cases.json is their golden table. The proxy never parses SQL itself.
//
// # Speed
//
// Verdicts are cached in a bounded, sharded LRU keyed by the exact SQL text; a verdict that depends
// on the context (any statement that calls a function or reads a relation) is cached under a key
// that adds the database, the catalogue version, the effective search path and the parameter types,
// built on the stack, so different databases and search paths never share such a verdict. A hit
// takes a few hundred nanoseconds, allocates nothing and does no catalogue I/O. On a miss a keyword fast path handles BEGIN, COMMIT, ROLLBACK, END,
// SET name = literal and SHOW name without building the Go parse tree; TestFastPathMatchesFullPath
// and FuzzClassify check that it always agrees with the full parse. Fingerprint and Normalized are
// computed on a miss only, and after the full parse not at once: they take two more runs of the
// parser (pg_query's Fingerprint and Normalize), and routing needs neither. ClassifyToRoute leaves
// them to Effects.Label, computed once for every copy of the verdict (the cached one too); the
// proxy labels a statement once it has sent it, while the node runs it, and only when its routing
// log or observer will read the labels (SHOW pgowl.explain labels on demand). ClassifyIn, Classify and
// ClassifyWith label before they return. Normalized (pg_query's normalised text, with the literals, SET values and
// comments it keeps masked as well: see Redact) is what logs may carry, and for unparseable input it is
// a fixed placeholder.
//
// The tree comes from PostgreSQL's parser in pg_query's C library, read into pg_query's Go
// messages by generated code: from the JSON the library writes (decode_json.go), which it writes in
// a third of the time its protobuf takes for a short statement, and from the protobuf
// (decode_generated.go) where the JSON cannot say the tree exactly, or could outgrow what the C
// writer holds. Both give what proto.Unmarshal gives (TestJSONTreeMatchesProtobufTree,
// TestGeneratedDecodeMatchesProtoUnmarshal). A statement whose multi-column assignments could copy
// their sources into a tree past sharedTreeBudget is not parsed at all and fails closed, as input
// the parser rejects does.
//
// ProvisionalCreate goes further for one kind of statement: a CREATE [OR REPLACE] FUNCTION,
// PROCEDURE, TYPE or VIEW that is not temporary is a write that changes the catalogue whatever its
// parse says, and its first words say so; the proxy routes it on those effects and classifies it
// while the node runs it. TestProvisionalCreateAgrees and FuzzProvisionalCreate check every
// routing fact against ClassifyIn. ProvisionalSelect is weaker: a SELECT that selects into no
// table is one statement with no transaction control and no pgowl command, and nothing else is
// known of it, so its effects are a write of unknown effect; the proxy sends it early only where
// every verdict sends it to the same primary (a session's next statement after its own catalogue
// change, with no standby to read on). TestProvisionalSelectHoldsNoCommandTheProxyActsOnBeforeTheSend
// and FuzzProvisionalSelect check it against ClassifyIn.
//
// # Testing
//
// Golden tables in testdata/*_cases.json state, per SQL string, the expected access, reason,
// subject, transaction control, session effects and pgowl command; on a mismatch the test writes
// <table>.actual.json next to the table. TestAgainstPostgres starts a throw-away PostgreSQL 15
// primary and hot standby (internal/cluster, the project's one cluster harness) and runs every
// golden read on the standby and the writes a standby must refuse. TestCatalogueGolden creates the functions and views of
// testdata/catalogue/*_cases.json (each case's "setup") in a real server, loads its catalogue,
// checks every case, and runs them on a hot standby (reads must run, cases marked "refused" must be
// refused). Regenerate the built-in list with `go generate ./classify`. docs/routing.md states the
// rules for users.
package classify
