// Command silentflood opens many TCP connections to an address and sends
// nothing on them, the way an attacker ties up a server's logins in
// progress. The integration tests run it as a separate process, so that its
// sockets do not count against the test process's open-file limit.
//
// It prints "open N" once N connections are open (or "failed N: reason"),
// then holds them until its standard input closes or -hold has passed, and
// closes them with a reset (no TIME_WAIT left behind).
package main
