package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

func main() {
	addr := flag.String("addr", "", "host:port to connect to")
	count := flag.Int("count", 10000, "connections to open")
	parallel := flag.Int("parallel", 8, "concurrent dialers")
	hold := flag.Duration("hold", time.Minute, "longest time the connections are held")
	flag.Parse()
	if *addr == "" || *count < 1 || *parallel < 1 {
		fmt.Fprintln(os.Stderr, "usage: silentflood -addr host:port [-count N] [-parallel N] [-hold D]")
		os.Exit(2)
	}

	conns, err := open(*addr, *count, *parallel, 30*time.Second)
	if err != nil {
		fmt.Printf("failed %d: %v\n", len(conns), err)
	} else {
		fmt.Printf("open %d\n", len(conns))
	}
	released := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(released)
	}()
	select {
	case <-released:
	case <-time.After(*hold):
	}
	for _, conn := range conns {
		if tcp, ok := conn.(*net.TCPConn); ok {
			tcp.SetLinger(0)
		}
		conn.Close()
	}
}

// open dials count connections with parallel dialers within limit; it
// returns those it opened and the first error.
func open(addr string, count, parallel int, limit time.Duration) ([]net.Conn, error) {
	var (
		mu    sync.Mutex
		conns = make([]net.Conn, 0, count)
		left  = count
		first error
		wg    sync.WaitGroup
	)
	deadline := time.Now().Add(limit)
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				if left == 0 || first != nil {
					mu.Unlock()
					return
				}
				if time.Now().After(deadline) {
					first = fmt.Errorf("not all open within %s", limit)
					mu.Unlock()
					return
				}
				left--
				mu.Unlock()
				conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
				mu.Lock()
				if err != nil {
					if first == nil {
						first = err
					}
				} else {
					conns = append(conns, conn)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return conns, first
}
