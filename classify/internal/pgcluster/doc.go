// Package pgcluster starts throw-away PostgreSQL clusters for the classify package's generator and
// tests: initdb into a fresh directory under the temp dir, pg_ctl start on a free 127.0.0.1 port,
// optionally a hot standby made with pg_basebackup, and Stop, which shuts the server down and
// removes the directory.
//
// PostgreSQL refuses to run as root, so when the caller is root every server command runs as the
// operating-system user "postgres" through runuser, and the data directory is handed to that user.
// The binaries come from Options.BinDir, else $PGOWL_PG_BINDIR, else /usr/lib/postgresql/15/bin.
// When they are missing Start returns an error wrapping ErrUnavailable, which tests turn into a skip.
package pgcluster
