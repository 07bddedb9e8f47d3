// Package gomodule finds the checkout a benchmark program runs from: the programs under
// integration/ that build cmd/pgowl (bench, scale, migrationbench -process) build it from the
// module they are run in.
package gomodule
