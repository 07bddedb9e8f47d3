// Package walksource writes the source of classify/walk_generated.go (see command genwalk) from
// the message descriptors of the pg_query module the build links, and the Go types behind them.
// classify's TestGeneratedWalkIsCurrent compares the file with what it writes now.
package treesource
