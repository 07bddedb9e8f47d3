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
//     DML and CREATE TABLE AS forms) are walked completely, by protobuf reflection, so no node type
//     can hide anything: a locking clause anywhere gives ROW_LOCK, a data-modifying WITH or SELECT
//     INTO anywhere gives WRITE, and every function call is looked up.
//   - Functions: a reviewed table in builtins.go lists the pg_catalog functions that write or only
//     make sense on the primary (nextval, setval, currval, advisory locks, pg_notify, large-object
//     writers, WAL and replication-slot control, ...) → WRITING_FUNCTION. Every other name in
//     pg15_builtin_functions.txt (all of PostgreSQL 15's pg_catalog, generated from a real server
//     by internal/genbuiltins) is a read. A function that is not a pg_catalog built-in, or is
//     qualified with another schema, is UNKNOWN_EFFECT until Options.Functions (a FunctionResolver,
//     for the later per-database catalogue) says otherwise.
//   - PREPARE takes the effect of its query; EXECUTE cannot be seen through and is UNKNOWN_EFFECT.
//   - BEGIN is a write (a read-write transaction needs the primary) unless it says READ ONLY.
//
// Some rules come from what a PostgreSQL 15 hot standby actually refuses, checked by
// TestAgainstPostgres: LISTEN, SET TRANSACTION READ WRITE, serializable transactions and the
// pg_replication_origin_* functions are routed to the primary; a serializable session default is
// accepted by a standby but breaks every later statement there, which SessionSerializableDefault
// reports.
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
// # Speed
//
// Verdicts are cached in a bounded, sharded LRU keyed by the exact SQL text; a hit takes about
// 100 ns and allocates nothing. On a miss a keyword fast path handles BEGIN, COMMIT, ROLLBACK, END,
// SET name = literal and SHOW name without building the Go parse tree; TestFastPathMatchesFullPath
// and FuzzClassify check that it always agrees with the full parse. Fingerprint and Normalized are
// computed on a miss only; Normalized (literals replaced by $n) is what logs may carry, and for
// unparseable input it is a fixed placeholder.
//
// # Testing
//
// Golden tables in testdata/*_cases.json state, per SQL string, the expected access, reason,
// subject, transaction control, session effects and pgowl command; on a mismatch the test writes
// <table>.actual.json next to the table. TestAgainstPostgres starts a throw-away PostgreSQL 15
// primary and hot standby (internal/pgcluster) and runs every golden read on the standby and the
// writes a standby must refuse. Regenerate the built-in list with `go generate ./classify`.
package classify
