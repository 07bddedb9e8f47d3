// Command gentree writes classify/walk_generated.go, classify/decode_generated.go and
// classify/decodejson_generated.go from pg_query's parse tree messages (package treesource): the
// walk the classifier's scanner makes of every statement's tree, the decoding of the protobuf
// pg_query's C parser returns, and the reading of the JSON it writes, each without protobuf
// reflection, which cost a third of an uncached classification and half of a parse. Run it
// through `go generate ./classify`; classify's tests fail when a file is stale.
package main
