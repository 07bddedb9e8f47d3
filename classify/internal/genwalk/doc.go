// Command genwalk writes classify/walk_generated.go: eachChild, which hands every message
// directly below a message of pg_query's parse tree to a function, field by field in declaration
// order, as a walk by protobuf reflection reaches them (a set singular message field, each element
// of a repeated message field, the message a oneof holds). The classifier's scanner walks every
// statement's tree; doing it through protoreflect cost a third of an uncached classification.
//
// It reads the message descriptors of the pg_query module the build uses (File_pg_query_proto)
// and the Go types behind them, so `go generate ./classify` after a pg_query upgrade keeps the
// walk complete; classify's TestGeneratedWalkIsCurrent fails when the file is stale.
package main
