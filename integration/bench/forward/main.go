// Command forward is the benchmark's floor for any proxy: it accepts TCP
// connections and forwards each, byte for byte, to one fixed address over a
// connection of its own (one server connection per client, as a session-mode
// pooler without a pool). It reads nothing of the protocol, decides nothing
// and pools nothing, with one read and one write per chunk in each
// direction: whatever a proxy costs beyond what this costs is the proxy's
// own work. integration/bench runs it as the "forward" target (not run by
// default: -targets direct,forward,pgowl).
//
// Usage: forward LISTEN_ADDR SERVER_ADDR
package main

import (
	"fmt"
	"io"
	"net"
	"os"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: forward LISTEN_ADDR SERVER_ADDR")
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "forward:", err)
		os.Exit(1)
	}
	for {
		client, err := ln.Accept()
		if err != nil {
			fmt.Fprintln(os.Stderr, "forward:", err)
			os.Exit(1)
		}
		go serve(client, os.Args[2])
	}
}

// serve connects client to a new connection to server until either side ends.
func serve(client net.Conn, server string) {
	defer client.Close()
	upstream, err := net.Dial("tcp", server)
	if err != nil {
		return
	}
	defer upstream.Close()
	go func() {
		pump(upstream, client)
		upstream.Close()
	}()
	pump(client, upstream)
}

// pump copies src to dst with one read and one write per chunk (io.Copy
// would splice through a pipe, two calls per chunk and direction).
func pump(dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
