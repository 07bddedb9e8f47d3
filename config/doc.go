// Package config defines pgowl's configuration: the Config struct that main fills once and passes
// down, its defaults, its validation and a strict decoder.
//
// # Sources and precedence
//
// The package knows nothing about where values come from. cmd/pgowl reads them with viper
// (flags override PGOWL_* environment variables, which override the YAML file, which overrides
// Default) and hands the merged nested map to Decode. Keeping viper out of this package means
// every other package receives a plain struct and tests can build one in a line.
//
// # Keys
//
// A key path is the YAML keys joined with ".", with [i] for list items: "routing.max_replica_lag",
// "nodes[1].port". Keys lists every scalar and list key with its default, which cmd/pgowl turns into
// flags (--routing.max_replica_lag) and environment variables (PGOWL_ROUTING_MAX_REPLICA_LAG).
// config/example.yaml shows every key with its default.
//
// # Strictness
//
// Decode refuses unknown keys at every level, including inside list items, and values of the wrong
// type; Validate refuses values out of range. Every problem is an *Error carrying the key path and
// the problem, so an operator sees e.g.
//
//	config: unknown key "routing.max_lag"
//	config: nodes[1].port: 70000 is out of range 1..65535
//
// All problems found are reported at once (joined with errors.Join); use errors.As to get the first
// *Error.
//
// # Value formats
//
// Durations are Go duration strings ("250ms", "5s", "1h"); a bare 0 is also accepted. Sizes are
// integers in bytes or integers with a unit: B, kB, MB, GB, TB are powers of 1000, KiB, MiB, GiB,
// TiB powers of 1024 ("64MiB" is 67108864 bytes, "1MB" is 1000000). Numbers, booleans, durations
// and sizes may also be given as strings, which is how flags and environment variables arrive.
// A null value in the file leaves the default in place.
package config
