// Package treesource writes the source of classify's code generated from pg_query's parse tree
// messages (see command gentree): walk_generated.go, eachChild, which hands every message below
// a message to a function in declaration order; decode_generated.go, which decodes the protobuf
// pg_query's C parser returns into the Go messages without protobuf reflection; and
// decodejson_generated.go, which reads the JSON the same parser writes (faster to write in C
// than the protobuf) into the same messages. All three come from the message descriptors of the
// pg_query module the build links and the Go types behind them; classify's
// TestGeneratedTreeCodeIsCurrent compares the files with what this package writes now.
package treesource
