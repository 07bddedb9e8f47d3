package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"
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

// relayProcess is the byte relay running as a process of its own: its address and process.
type relayProcess struct {
	addr string
	pid  int
	stop func()
}

// startByteRelayProcess starts this binary again as a byte relay to upstream (-serve-byte-relay)
// and waits for the address it listens on. The process takes this one's CPUs (-node-cpus pins
// this process before it starts any proxy), as a proxy's process does.
func startByteRelayProcess(ctx context.Context, upstream string) (relayProcess, error) {
	self, err := os.Executable()
	if err != nil {
		return relayProcess{}, err
	}
	cmd := exec.Command(self, "-serve-byte-relay", upstream)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return relayProcess{}, err
	}
	if err := cmd.Start(); err != nil {
		return relayProcess{}, err
	}
	exited := waitInBackground(cmd)
	stop := func() { terminate(cmd, exited, 10*time.Second) }
	addrs := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		addrs <- strings.TrimSpace(line)
		io.Copy(io.Discard, out)
	}()
	select {
	case addr := <-addrs:
		if addr == "" {
			stop()
			return relayProcess{}, fmt.Errorf("the relay process printed no address")
		}
		return relayProcess{addr: addr, pid: cmd.Process.Pid, stop: stop}, nil
	case <-exited:
		return relayProcess{}, fmt.Errorf("the relay process exited at start")
	case <-ctx.Done():
		stop()
		return relayProcess{}, ctx.Err()
	}
}

// serveByteRelay is the relay process (-serve-byte-relay): it relays to upstream, prints the
// address it listens on, and stops at SIGTERM or SIGINT.
func serveByteRelay(upstream string) error {
	addr, stopRelay, err := startByteRelay(upstream)
	if err != nil {
		return err
	}
	fmt.Println(addr)
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, os.Interrupt)
	<-signals
	stopRelay()
	return nil
}
