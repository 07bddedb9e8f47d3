// Package owltest holds what the integration test packages (integration and
// integration/clients) share: it runs pgowl in the test process, in front of
// a cluster started by internal/cluster (building the configuration,
// serving on a loopback port, collecting the log, stopping the instance when
// the test ends), shares one cluster among a package's tests, parses the
// routing NOTICE's DETAIL, reads the nodes' evidence of where statements ran
// and runs client programs. How each package drives its clients (pgx
// connections, other drivers) and how it receives NOTICEs stays in that
// package.
package owltest
