// Package owltest runs pgowl in the test process, in front of a cluster
// started by integration/cluster, for the integration test packages
// (integration and integration/clients): it builds the configuration, serves
// on a loopback port, collects the log, and stops the instance when the test
// ends. What each package checks on top (routing NOTICEs, client drivers)
// stays in that package.
package owltest
