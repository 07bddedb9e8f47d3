package main

import (
	"io"
	"net"
	"sync"
)

// startByteRelay runs, in this process, a relay that copies bytes between each client and a new
// connection to upstream and does nothing else: what any proxy written in Go and run in the
// benchmark's process costs on this machine, with no parsing, routing or logging at all.
func startByteRelay(upstream string) (addr string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	open := map[net.Conn]struct{}{}
	track := func(c net.Conn) bool {
		mu.Lock()
		defer mu.Unlock()
		if open == nil {
			c.Close()
			return false
		}
		open[c] = struct{}{}
		return true
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", upstream)
			if err != nil {
				client.Close()
				continue
			}
			if !track(client) || !track(server) {
				client.Close()
				server.Close()
				continue
			}
			wg.Add(2)
			copyThenClose := func(dst, src net.Conn) {
				defer wg.Done()
				io.Copy(dst, src)
				dst.Close()
				src.Close()
			}
			go copyThenClose(server, client)
			go copyThenClose(client, server)
		}
	}()
	stop = func() {
		ln.Close()
		mu.Lock()
		for c := range open {
			c.Close()
		}
		open = nil
		mu.Unlock()
		wg.Wait()
	}
	return ln.Addr().String(), stop, nil
}
