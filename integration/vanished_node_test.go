package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/internal/cluster"
	"github.com/pgowl/pgowl/route"
)

// TestVanishedNodeEndsTheStatementWaitingForIt runs a PostgreSQL server in a
// network namespace of its own, behind a veth pair, and makes it vanish while
// a statement runs on it: the namespace's end of the link goes down, so
// nothing from the server reaches pgowl any more and nothing tells pgowl so
// (no FIN, no RST), as when a host loses power or its network is cut. The
// client waiting for that statement must get an error once the keepalive
// probes (tcp.keepalive_*) go unanswered, not wait for ever: before pgowl set
// keepalives on its node connections it relied on pgconn's dialer (5 minutes
// idle, then nine probes 5 minutes apart), and the statement hung.
func TestVanishedNodeEndsTheStatementWaitingForIt(t *testing.T) {
	node := startNodeInNamespace(t, 1)
	// Once the statement runs on the node its request was sent and
	// acknowledged, so only keepalives can find out that the node is gone.
	cut, done := node.runThenCut(t, "SELECT pg_sleep(600)", func(cfg *config.Config) {
		cfg.Routing.WhenNoStandby = config.WhenNoStandbyPrimary
	})
	select {
	case err := <-done:
		waited := time.Since(cut).Round(100 * time.Millisecond)
		if pgErr := wantSQLState(t, "statement on the vanished node", err, "08006"); pgErr != nil {
			t.Logf("the client got %s %q %s after the node vanished", pgErr.Code, pgErr.Message, waited)
		}
		// 1s idle + 2 probes 1s apart, plus a monitor interval and scheduling.
		if waited > 15*time.Second {
			t.Errorf("the client waited %s for the vanished node, want about 3s (tcp.keepalive_*)", waited)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the statement on the vanished node was still waiting 30s after the node vanished (tcp.keepalive_idle 1s, interval 1s, count 2)")
	}
}

// TestWriteIsNotSentTwiceAfterItsReplyWasLost: a write that ran on the node,
// whose reply never arrived because the node went silent, must not be sent
// again on a fresh connection once the node is back: it would run twice. The
// node goes silent while the INSERT sleeps, commits the row, and its reply is
// lost; the keepalives end pgowl's connection; then the link comes back and
// the node is reachable again. pgowl used to send any unit whose first reply
// had not reached the client again ("dead before the statement ran"), and
// the row was inserted twice.
func TestWriteIsNotSentTwiceAfterItsReplyWasLost(t *testing.T) {
	node := startNodeInNamespace(t, 2)
	if out, err := node.psql("CREATE TABLE vn_writes (id serial PRIMARY KEY, v text); GRANT ALL ON vn_writes, vn_writes_id_seq TO " + appUser); err != nil {
		t.Fatalf("create table: %v: %s", err, out)
	}
	cut, done := node.runThenCut(t, "INSERT INTO vn_writes (v) SELECT 'once' FROM pg_sleep(2)", func(cfg *config.Config) {
		// Long enough for the node to be seen again before a resend gives up.
		cfg.Routing.PrimaryWait = 15 * time.Second
	})
	// The INSERT commits about 2s after it started; its reply is lost. The
	// keepalives close pgowl's connection about 3s after the last traffic.
	// Then the link comes back.
	time.Sleep(4 * time.Second)
	node.restore(t)
	select {
	case err := <-done:
		if err == nil {
			t.Errorf("the INSERT whose reply was lost succeeded %s after the cut: it was sent again", time.Since(cut).Round(100*time.Millisecond))
		} else if pgErr := wantSQLState(t, "INSERT whose reply was lost", err, "08006"); pgErr != nil {
			t.Logf("the client got %s %q %s after the cut", pgErr.Code, pgErr.Message, time.Since(cut).Round(100*time.Millisecond))
		}
	case <-time.After(40 * time.Second):
		t.Fatalf("the INSERT was still waiting 40s after the cut")
	}
	out, err := node.psql("SELECT count(*) FROM vn_writes")
	if err != nil {
		t.Fatalf("count rows: %v: %s", err, out)
	}
	if got := strings.TrimSpace(out); got != "1" {
		t.Errorf("the INSERT ran %s times, want once (it committed before the node went silent)", got)
	}
}

// TestVanishedClientTransactionIsRolledBack: a client in a network namespace
// opens a transaction through pgowl, locks a row and goes silent (its end of
// the link goes down: no FIN, no RST). pgowl's keepalives on the client
// connection (tcp.keepalive_*) must end the session, roll the transaction
// back and free the row. With Go's listener defaults (15s idle, nine probes
// 15s apart) the row stayed locked for 2.5 minutes.
func TestVanishedClientTransactionIsRolledBack(t *testing.T) {
	ns := newNetns(t, 3)
	c := sharedClusterFor(t)
	createTable(t, c, "vc_items", "CREATE TABLE vc_items (id int PRIMARY KEY, v text); INSERT INTO vc_items VALUES (1, 'free')")
	o := startOwl(t, c, func(cfg *config.Config) {
		cfg.Listen = ns.hostAddr + ":0"
		cfg.TCP = config.TCP{KeepaliveIdle: time.Second, KeepaliveInterval: time.Second, KeepaliveCount: 2, UserTimeout: 3 * time.Second}
	})
	const app = "vc-victim"
	dsn := fmt.Sprintf("host=%s port=%d user=%s password=%s dbname=postgres sslmode=disable application_name=%s", o.host, o.port, appUser, appPassword, app)
	argv := ns.command("/usr/lib/postgresql/15/bin/psql", dsn, "-X", "-v", "ON_ERROR_STOP=1", "-f", "-")
	client := exec.Command(argv[0], argv[1:]...)
	client.Stdin = strings.NewReader("BEGIN;\nUPDATE vc_items SET v = 'held' WHERE id = 1;\n\\! sleep 120\n")
	var output strings.Builder
	client.Stdout, client.Stderr = &output, &output
	client.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // psql and its sleep, killed together
	client.WaitDelay = time.Second
	if err := client.Start(); err != nil {
		t.Fatalf("start psql in the namespace: %v", err)
	}
	t.Cleanup(func() {
		syscall.Kill(-client.Process.Pid, syscall.SIGKILL)
		client.Wait()
	})

	primary := c.Nodes[0]
	ctx := timeoutCtx(t, time.Minute)
	holding := func() int64 {
		return primaryInt(t, c, "SELECT count(*) FROM pg_stat_activity WHERE application_name = '"+app+"' AND state = 'idle in transaction'")
	}
	deadline := time.Now().Add(15 * time.Second)
	for holding() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the client's transaction did not start on %s; psql said: %s", primary.Name, output.String())
		}
		time.Sleep(20 * time.Millisecond)
	}

	ns.cut(t)
	cut := time.Now()
	for holding() != 0 {
		if time.Since(cut) > 20*time.Second {
			t.Fatalf("the vanished client's transaction still holds its backend on %s 20s after the cut (tcp.keepalive_idle 1s, interval 1s, count 2)", primary.Name)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("the vanished client's transaction was rolled back %s after the cut", time.Since(cut).Round(100*time.Millisecond))
	if err := primary.Exec(ctx, "SET lock_timeout = '2s'; UPDATE vc_items SET v = 'taken' WHERE id = 1"); err != nil {
		t.Errorf("the row is still locked after the vanished client's transaction ended: %v", err)
	}
	if got := primaryInt(t, c, "SELECT count(*) FROM vc_items WHERE v = 'held'"); got != 0 {
		t.Errorf("the vanished client's update was committed")
	}
}

// netns is a network namespace of a test's own, joined to the test's
// namespace by a veth pair: hostAddr is the test's end, nsAddr the other.
type netns struct {
	name, hostLink, nsLink string
	hostAddr, nsAddr       string
}

// newNetns creates a network namespace and a veth pair; index keeps the
// names and addresses of one test run's namespaces apart. It skips when the
// test cannot create namespaces (not root, no ip command, no CAP_SYS_ADMIN);
// everything is removed when t ends.
func newNetns(t *testing.T, index int) *netns {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs the ip command (iproute2) to create a network namespace")
	}
	id := (os.Getpid()%10000)*10 + index
	subnet := fmt.Sprintf("10.%d.%d", 200+index, os.Getpid()%250)
	n := &netns{
		name:     fmt.Sprintf("pgowl-vn%d", id),
		hostLink: fmt.Sprintf("pgvh%d", id),
		nsLink:   fmt.Sprintf("pgvn%d", id),
		hostAddr: subnet + ".1",
		nsAddr:   subnet + ".2",
	}
	if out, err := exec.Command("ip", "netns", "add", n.name).CombinedOutput(); err != nil {
		if strings.Contains(string(out), "not permitted") {
			t.Skipf("cannot create a network namespace here: %s", strings.TrimSpace(string(out)))
		}
		t.Fatalf("ip netns add %s: %v: %s", n.name, err, out)
	}
	t.Cleanup(func() {
		exec.Command("ip", "link", "del", n.hostLink).Run()
		exec.Command("ip", "netns", "del", n.name).Run()
	})
	for _, argv := range [][]string{
		{"ip", "link", "add", n.hostLink, "type", "veth", "peer", "name", n.nsLink},
		{"ip", "link", "set", n.nsLink, "netns", n.name},
		{"ip", "addr", "add", n.hostAddr + "/30", "dev", n.hostLink},
		{"ip", "link", "set", n.hostLink, "up"},
		n.command("ip", "addr", "add", n.nsAddr+"/30", "dev", n.nsLink),
		n.command("ip", "link", "set", n.nsLink, "up"),
		n.command("ip", "link", "set", "lo", "up"),
	} {
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(argv, " "), err, out)
		}
	}
	return n
}

// command returns argv run inside the namespace.
func (n *netns) command(argv ...string) []string {
	return append([]string{"ip", "netns", "exec", n.name}, argv...)
}

// cut takes the namespace's end of the link down: whatever runs there keeps
// running, but nothing it sends reaches the test's namespace, and nothing
// says so (no FIN, no RST), as when a host loses power or its network.
func (n *netns) cut(t *testing.T) {
	t.Helper()
	if out, err := exec.Command("ip", "netns", "exec", n.name, "ip", "link", "set", n.nsLink, "down").CombinedOutput(); err != nil {
		t.Fatalf("take %s down: %v: %s", n.nsLink, err, out)
	}
}

// restore brings the namespace's end of the link up again.
func (n *netns) restore(t *testing.T) {
	t.Helper()
	if out, err := exec.Command("ip", "netns", "exec", n.name, "ip", "link", "set", n.nsLink, "up").CombinedOutput(); err != nil {
		t.Fatalf("bring %s up: %v: %s", n.nsLink, err, out)
	}
}

// namespacedNode is a PostgreSQL server in a network namespace of its own,
// reachable from the test's namespace through a veth pair.
type namespacedNode struct {
	*netns
	addr           string
	port           int
	dir, socketDir string
}

// startNodeInNamespace starts a PostgreSQL primary in a new namespace (see
// newNetns) that trusts the test's end of the link.
func startNodeInNamespace(t *testing.T, index int) *namespacedNode {
	t.Helper()
	ns := newNetns(t, index)
	n := &namespacedNode{netns: ns, addr: ns.nsAddr, port: 5432}
	postgres, err := user.Lookup("postgres")
	if err != nil {
		t.Skipf("no postgres user to run PostgreSQL as: %v", err)
	}
	uid, _ := strconv.Atoi(postgres.Uid)
	gid, _ := strconv.Atoi(postgres.Gid)
	n.dir, err = os.MkdirTemp("", "pgowl-vanished-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(n.dir) })
	n.socketDir = n.dir
	if err := os.Chown(n.dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(n.dir, "data")
	bin := "/usr/lib/postgresql/15/bin/"
	asPostgres := func(argv ...string) []string { return append([]string{"runuser", "-u", "postgres", "--"}, argv...) }
	run := func(argv []string) {
		t.Helper()
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(argv, " "), err, out)
		}
	}
	run(asPostgres(bin+"initdb", "-D", data, "-U", "postgres", "-A", "trust", "--no-sync", "--no-instructions", "-E", "UTF8", "--locale=C"))
	conf := fmt.Sprintf("listen_addresses = '%s'\nport = %d\nunix_socket_directories = '%s'\nfsync = off\n", n.addr, n.port, n.socketDir)
	hba := fmt.Sprintf("host all all %s/32 trust\n", ns.hostAddr)
	for file, text := range map[string]string{"postgresql.conf": conf, "pg_hba.conf": hba} {
		f, err := os.OpenFile(filepath.Join(data, file), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.WriteString(text)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	run(ns.command(asPostgres(bin+"pg_ctl", "-D", data, "-l", filepath.Join(n.dir, "log"), "-w", "-t", "60", "start")...))
	t.Cleanup(func() {
		// Signals and the Unix socket do not need the network: the stop works after the cut.
		exec.Command("runuser", "-u", "postgres", "--", bin+"pg_ctl", "-D", data, "-m", "immediate", "-w", "stop").Run()
	})
	if out, err := n.psql(fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", appUser, appPassword)); err != nil {
		t.Fatalf("create role: %v: %s", err, out)
	}
	return n
}

// psql runs sql on the node through its Unix socket, which the cut does not touch.
func (n *namespacedNode) psql(sql string) (string, error) {
	out, err := exec.Command("runuser", "-u", "postgres", "--", "/usr/lib/postgresql/15/bin/psql",
		"-h", n.socketDir, "-p", strconv.Itoa(n.port), "-U", "postgres", "-d", "postgres", "-X", "-A", "-t", "-c", sql).CombinedOutput()
	return string(out), err
}

// runThenCut starts pgowl in front of the node alone (TCP keepalives 1s, 2
// probes 1s apart, user timeout 3s, then mutate), sends sql through it on a
// client of its own, waits until the node runs it and cuts the link. It
// returns the time of the cut and where the statement's outcome arrives.
func (n *namespacedNode) runThenCut(t *testing.T, sql string, mutate func(*config.Config)) (time.Time, <-chan error) {
	t.Helper()
	c := &cluster.Cluster{Nodes: []*cluster.Node{{Name: "vn", Host: n.addr, Port: n.port}}}
	o := startOwlNoWait(t, c, func(cfg *config.Config) {
		cfg.TCP = config.TCP{KeepaliveIdle: time.Second, KeepaliveInterval: time.Second, KeepaliveCount: 2, UserTimeout: 3 * time.Second}
		mutate(cfg)
	})
	o.waitRoles(t, map[string]route.Role{"vn": route.RolePrimary})
	ctx := timeoutCtx(t, time.Minute)
	conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://%s:%s@%s/postgres?sslmode=disable", appUser, appPassword, o.addr))
	if err != nil {
		t.Fatalf("connect through pgowl: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	done := make(chan error, 1)
	go func() {
		_, err := conn.Exec(ctx, sql)
		done <- err
	}()
	n.waitActive(t, sql)
	n.cut(t)
	return time.Now(), done
}

// waitActive waits until the node runs query.
func (n *namespacedNode) waitActive(t *testing.T, query string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, _ := n.psql("SELECT count(*) FROM pg_stat_activity WHERE query = '" + strings.ReplaceAll(query, "'", "''") + "' AND state = 'active'")
		if strings.TrimSpace(out) == "1" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q did not start on the node: %q", query, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
