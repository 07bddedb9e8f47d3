package pool

import (
	"net"
	"path/filepath"
	"strconv"
	"testing"
)

// TestACancelGoesWhereTheConnectionWent: the CancelRequest for a backend goes to the address its
// connection is connected to, not to the node's host name resolved again (which may name another
// server by then, or several), and to the node's socket for a node on a Unix socket.
func TestACancelGoesWhereTheConnectionWent(t *testing.T) {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close()
	go func() {
		if conn, err := listener.Accept(); err == nil {
			defer conn.Close()
			conn.Read(make([]byte, 1))
		}
	}()
	port := listener.Addr().(*net.TCPAddr).Port
	conn, err := net.Dial("tcp", listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	byName := Target{Node: "pg1", Host: "localhost", Port: port}
	if network, address := cancelAddress(byName, conn); network != "tcp" || address != "127.0.0.1:"+strconv.Itoa(port) {
		t.Errorf("a node named localhost, connected at 127.0.0.1:%d: cancels go to %s %s", port, network, address)
	}

	dir := t.TempDir()
	socketPath := filepath.Join(dir, ".s.PGSQL.5432")
	socket, err := net.Listen("unix", socketPath)
	if err != nil {
		t.Fatal(err)
	}
	defer socket.Close()
	go func() {
		if conn, err := socket.Accept(); err == nil {
			defer conn.Close()
			conn.Read(make([]byte, 1))
		}
	}()
	unixConn, err := net.Dial("unix", socketPath)
	if err != nil {
		t.Fatal(err)
	}
	defer unixConn.Close()
	onSocket := Target{Node: "pg1", Host: dir, Port: 5432}
	if network, address := cancelAddress(onSocket, unixConn); network != "unix" || address != socketPath {
		t.Errorf("a node on its Unix socket: cancels go to %s %s, want unix %s", network, address, socketPath)
	}
}
