// Command genbuiltins writes classify/pg15_builtin_functions.txt: the distinct names of every
// function in PostgreSQL 15's pg_catalog, one per line, which the classifier embeds as its list of
// known built-in functions. Run it through `go generate ./classify`.
//
// Without -dsn it starts a throw-away cluster with initdb and pg_ctl (as the postgres user when run
// as root), queries pg_proc, and stops and removes the cluster. With -dsn it queries that server
// instead. Either way it refuses a server whose major version is not 15, so the list always
// describes the version the file is named after.
package main
