package clients

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgowl/pgowl/internal/cluster"
)

// stepTimeout bounds one driver step; the large result gets largeStepTimeout.
const (
	stepTimeout      = 60 * time.Second
	largeStepTimeout = 2 * time.Minute
)

// stepper runs the matrix's steps with one client library: a driver program,
// or a goClient for the libraries that run inside the test binary.
type stepper interface {
	// clientName names the library, for tags and messages.
	clientName() string
	// step runs one step and returns its answer; it fails t if the step cannot run.
	step(t *testing.T, timeout time.Duration, name string, args ...any) *stepResult
}

// driver is a client program that runs steps on request (see the package documentation).
type driver struct {
	name    string
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	replies chan driverReply
	stderr  *logBuffer
	done    chan struct{}
	dead    string
}

type driverReply struct {
	line []byte
	err  error
}

// stepResult is a driver's answer to one step.
type stepResult struct {
	Step string `json:"step"`
	// Error is the database error the step's main operation raised, if any.
	Error *stepError `json:"error"`
	// Notices are the NOTICEs every connection of the driver received during the step.
	Notices []notice `json:"notices"`
	// Result holds the step's values.
	Result map[string]any `json:"result"`
	// Crash describes a failure of the driver itself (not a database error).
	Crash string `json:"crash"`
}

// stepError is a database error as the client library reported it.
type stepError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *stepError) String() string {
	if e == nil {
		return "<no error>"
	}
	return fmt.Sprintf("SQLSTATE %s: %s", e.Code, e.Message)
}

// num returns a numeric result, or fails t.
func (r *stepResult) num(t *testing.T, key string) int64 {
	t.Helper()
	switch v := r.Result[key].(type) {
	case float64:
		return int64(v)
	case int64:
		return v
	case int:
		return int64(v)
	case int32:
		return int64(v)
	case string:
		n, err := strconv.ParseInt(v, 10, 64)
		if err == nil {
			return n
		}
	}
	t.Fatalf("step %s: result %q is %v (%T), want a number; result %v", r.Step, key, r.Result[key], r.Result[key], r.Result)
	return 0
}

// str returns a string result ("" if absent).
func (r *stepResult) str(key string) string {
	s, _ := r.Result[key].(string)
	return s
}

// notifications returns the step's "notifications" result as channel/payload pairs.
func (r *stepResult) notifications() [][2]string {
	var out [][2]string
	list, _ := r.Result["notifications"].([]any)
	for _, item := range list {
		m, _ := item.(map[string]any)
		ch, _ := m["channel"].(string)
		payload, _ := m["payload"].(string)
		out = append(out, [2]string{ch, payload})
	}
	return out
}

// startDriver starts a driver program in dir with the connection settings of
// ep (the MATRIX_* variables) plus env, and stops it when t ends.
func startDriver(t *testing.T, name, dir string, ep endpoint, tb clientTables, env []string, prog string, args ...string) *driver {
	t.Helper()
	cmd := exec.Command(prog, args...)
	cmd.Dir = dir
	cmd.Env = append(cleanEnv(),
		"MATRIX_HOST="+ep.host,
		"MATRIX_PORT="+strconv.Itoa(ep.port),
		"MATRIX_USER="+appUser,
		"MATRIX_PASSWORD="+appPassword,
		"MATRIX_DATABASE="+appDatabase,
		"MATRIX_ITEMS="+tb.items,
		"MATRIX_COPY="+tb.copy,
	)
	cmd.Env = append(cmd.Env, env...)
	d := &driver{name: name, cmd: cmd, replies: make(chan driverReply, 1), stderr: &logBuffer{}, done: make(chan struct{})}
	cmd.Stderr = d.stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	d.stdin = stdin
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the %s driver (%s): %v", name, prog, err)
	}
	go func() {
		r := bufio.NewReaderSize(stdout, 64<<10)
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				d.replies <- driverReply{err: err}
				close(d.replies)
				return
			}
			d.replies <- driverReply{line: line}
		}
	}()
	go func() { cmd.Wait(); close(d.done) }()
	t.Cleanup(func() { d.stop(t) })
	return d
}

func (d *driver) clientName() string { return d.name }

// stop asks the driver to quit, kills it if it does not, and requires a zero
// exit status from a driver that was not given up on.
func (d *driver) stop(t *testing.T) {
	select {
	case <-d.done:
	default:
		fmt.Fprintln(d.stdin, "quit")
		d.stdin.Close()
		select {
		case <-d.done:
		case <-time.After(10 * time.Second):
			d.dead = "it did not quit within 10s"
			t.Errorf("%s driver did not quit within 10s of being asked", d.name)
			d.cmd.Process.Kill()
			<-d.done
		}
	}
	if code := d.cmd.ProcessState.ExitCode(); d.dead == "" && code != 0 {
		t.Errorf("%s driver exited with status %d", d.name, code)
	}
	if t.Failed() {
		t.Logf("%s driver stderr (tail):\n%s", d.name, d.stderr.Tail(8<<10))
	}
}

// step runs one step and returns the driver's answer. A driver that does not
// answer within timeout, or that crashes, fails t and is not used again.
func (d *driver) step(t *testing.T, timeout time.Duration, name string, args ...any) *stepResult {
	t.Helper()
	if d.dead != "" {
		t.Fatalf("%s driver: not running step %s: %s", d.name, name, d.dead)
	}
	fields := []string{name}
	for _, a := range args {
		s := fmt.Sprint(a)
		if strings.ContainsAny(s, "\t\n") {
			t.Fatalf("step argument %q holds a tab or newline", s)
		}
		fields = append(fields, s)
	}
	if _, err := fmt.Fprintln(d.stdin, strings.Join(fields, "\t")); err != nil {
		d.dead = fmt.Sprintf("writing to it failed: %v", err)
		t.Fatalf("%s driver: send step %s: %v\nstderr:\n%s", d.name, name, err, d.stderr.Tail(8<<10))
	}
	select {
	case reply, ok := <-d.replies:
		if !ok || reply.err != nil {
			d.dead = fmt.Sprintf("its output ended during step %s", name)
			<-d.done
			t.Fatalf("%s driver ended during step %s (%v)\nstderr:\n%s", d.name, name, d.cmd.ProcessState, d.stderr.Tail(8<<10))
		}
		var r stepResult
		if err := json.Unmarshal(reply.line, &r); err != nil {
			d.dead = "it wrote a line that is not JSON"
			t.Fatalf("%s driver: step %s: answer is not JSON (%v): %q", d.name, name, err, reply.line)
		}
		if r.Step != name {
			d.dead = "it answered out of step"
			t.Fatalf("%s driver: answered step %q to request %q", d.name, r.Step, name)
		}
		if r.Crash != "" {
			t.Fatalf("%s driver: step %s crashed: %s", d.name, name, r.Crash)
		}
		return &r
	case <-time.After(timeout):
		d.dead = fmt.Sprintf("step %s did not answer within %s", name, timeout)
		d.cmd.Process.Kill()
		t.Fatalf("%s driver: step %s did not answer within %s\nstderr:\n%s", d.name, name, timeout, d.stderr.Tail(8<<10))
	}
	return nil
}

// wantOK requires that the step raised no database error.
func wantOK(t *testing.T, r *stepResult) {
	t.Helper()
	if r.Error != nil {
		t.Fatalf("step %s failed: %v; NOTICEs %v", r.Step, r.Error, r.Notices)
	}
}

// wantCode requires that the step raised a database error with SQLSTATE code.
func wantCode(t *testing.T, r *stepResult, code string) {
	t.Helper()
	if r.Error == nil {
		t.Errorf("step %s succeeded, want SQLSTATE %s; result %v", r.Step, code, r.Result)
		return
	}
	if r.Error.Code != code {
		t.Errorf("step %s: got %v, want SQLSTATE %s", r.Step, r.Error, code)
	}
}

// driverCaps says how a client library behaves where libraries differ.
type driverCaps struct {
	// extended: the library can send a statement with the extended protocol.
	extended bool
	// sqlPrepare: the prepared step uses SQL PREPARE/EXECUTE, not protocol-level statements.
	sqlPrepare bool
	// authCodeInMessage: the library reports a failed login without a SQLSTATE field, and the
	// message is checked instead.
	authCodeInMessage bool
	// copyOutDropsNotices: the library discards NOTICEs that come with COPY TO STDOUT.
	copyOutDropsNotices bool
	// copyInTx: the library runs COPY FROM STDIN only inside a transaction.
	copyInTx bool
	// noCopyOut, when set, says why the library cannot run COPY TO STDOUT.
	noCopyOut string
	// listenerQuiet: the library's listening connection neither reports
	// NOTICEs nor runs statements for the caller (lib/pq's pq.Listener).
	listenerQuiet bool
}

// runMatrix runs the features every client shares through d, checking each
// answer and the nodes' evidence. Large results go through a pgowl process of
// their own, whose memory is measured.
func runMatrix(t *testing.T, c *cluster.Cluster, d stepper, tb clientTables, caps driverCaps) {
	name := d.clientName()
	connected := false
	t.Run("auth_scram", func(t *testing.T) {
		r := d.step(t, stepTimeout, "connect")
		wantOK(t, r)
		connected = true
		if got := r.str("user"); got != appUser {
			t.Errorf("current_user through pgowl = %q, want %q", got, appUser)
		}
		r = d.step(t, stepTimeout, "auth_bad")
		if r.Error == nil {
			t.Fatalf("a login with a wrong password succeeded")
		}
		if caps.authCodeInMessage && r.Error.Code == "" {
			if !strings.Contains(r.Error.Message, "authentication failed") {
				t.Errorf("wrong password: got %v, want a message saying authentication failed", r.Error)
			}
		} else if r.Error.Code != "28P01" {
			t.Errorf("wrong password: got %v, want SQLSTATE 28P01", r.Error)
		}
	})
	if !connected {
		t.Fatalf("%s could not log in through pgowl; the other steps need its connection", name)
	}

	t.Run("simple_read", func(t *testing.T) {
		tag := marker(name + "-simple-read")
		resetStats(t, c)
		r := d.step(t, stepTimeout, "simple_read", tag)
		wantOK(t, r)
		if got := r.num(t, "count"); got < seedItems {
			t.Errorf("count = %d, want at least %d", got, seedItems)
		}
		rs := wantRoutes(t, "simple read", r.Notices, "", 1, "standby", "READ_ONLY")
		onOneStandby(t, c, "simple read", tag, rs)
	})

	t.Run("simple_write", func(t *testing.T) {
		tag := marker(name + "-simple-write")
		resetStats(t, c)
		r := d.step(t, stepTimeout, "simple_write", tag)
		wantOK(t, r)
		wantRoutes(t, "simple write", r.Notices, "", 1, "primary", "WRITE")
		onPrimary(t, c, "simple write", tag, 1)
	})

	if caps.extended {
		t.Run("extended_read", func(t *testing.T) {
			tag := marker(name + "-ext-read")
			resetStats(t, c)
			r := d.step(t, stepTimeout, "extended_read", tag)
			wantOK(t, r)
			if got := r.str("v"); got != "item 3" {
				t.Errorf("extended read returned %q, want \"item 3\"", got)
			}
			rs := wantRoutes(t, "extended read", r.Notices, "", 1, "standby", "READ_ONLY")
			onOneStandby(t, c, "extended read", tag, rs)
		})
		t.Run("extended_write", func(t *testing.T) {
			tag := marker(name + "-ext-write")
			resetStats(t, c)
			r := d.step(t, stepTimeout, "extended_write", tag)
			wantOK(t, r)
			id := r.num(t, "id")
			wantRoutes(t, "extended write", r.Notices, "", 1, "primary", "WRITE")
			onPrimary(t, c, "extended write", tag, 1)
			if got := primaryInt(t, c, fmt.Sprintf("SELECT count(*) FROM %s WHERE id = $1 AND v = 'extended write'", tb.items), id); got != 1 {
				t.Errorf("the primary does not hold the row the extended write returned (id %d)", id)
			}
		})
	}

	t.Run("prepared", func(t *testing.T) {
		const n = 6
		readTag, writeTag := marker(name+"-prep-read"), marker(name+"-prep-write")
		resetStats(t, c)
		r := d.step(t, stepTimeout, "prepared", readTag, writeTag, n)
		if caps.sqlPrepare {
			// PREPARE pins the session (README: SESSION_PINNED); the writes must still work.
			t.Logf("SQL PREPARE/EXECUTE NOTICEs: %v", routesOf(t, r.Notices, ""))
		}
		wantOK(t, r)
		if got := r.num(t, "reads"); got != n {
			t.Errorf("%d of %d prepared reads returned the right row", got, n)
		}
		if got := r.num(t, "writes"); got != n {
			t.Errorf("%d of %d prepared writes returned an id", got, n)
		}
		if caps.sqlPrepare {
			// Once pinned, every statement runs on the pinned node: it must be the
			// primary, since the session writes.
			onPrimary(t, c, "SQL-prepared write", writeTag, n)
			ev := evidence(t, c, readTag)
			var sum int64
			for _, v := range ev {
				sum += v
			}
			if sum != n {
				t.Errorf("SQL-prepared read ran %d times in all, want %d (per node %v)", sum, n, ev)
			}
			return
		}
		rs := routesOf(t, r.Notices, "main")
		var standby, primary int
		for _, rn := range rs {
			switch {
			case rn.Role == "standby" && rn.Reason == "READ_ONLY":
				standby++
			case rn.Role == "primary" && rn.Reason == "WRITE":
				primary++
			default:
				t.Errorf("prepared statements: unexpected NOTICE %v", rn)
			}
		}
		if standby != n || primary != n {
			t.Errorf("prepared statements: %d standby READ_ONLY and %d primary WRITE NOTICEs, want %d of each (one per execution; preparing runs nothing): %v", standby, primary, n, rs)
		}
		onStandbys(t, c, "prepared read", readTag, n)
		onPrimary(t, c, "prepared write", writeTag, n)
	})

	t.Run("tx_commit", func(t *testing.T) {
		tag := marker(name + "-tx-read")
		value := marker(name + "-tx-commit")
		resetStats(t, c)
		r := d.step(t, stepTimeout, "tx_commit", tag, value)
		wantOK(t, r)
		if got := r.str("seen"); got != value {
			t.Errorf("the transaction read %q back, want its own uncommitted row %q", got, value)
		}
		checkTxRoutes(t, "write transaction", r.Notices, "primary", "WRITE")
		onPrimary(t, c, "read inside a write transaction", tag, 1)
		if got := primaryInt(t, c, fmt.Sprintf("SELECT count(*) FROM %s WHERE v = $1", tb.items), value); got != 1 {
			t.Errorf("after COMMIT the primary holds %d rows %q, want 1", got, value)
		}
	})

	t.Run("tx_rollback", func(t *testing.T) {
		value := marker(name + "-tx-rollback")
		r := d.step(t, stepTimeout, "tx_rollback", value)
		wantOK(t, r)
		checkTxRoutes(t, "rolled back transaction", r.Notices, "primary", "WRITE")
		if got := primaryInt(t, c, fmt.Sprintf("SELECT count(*) FROM %s WHERE v = $1", tb.items), value); got != 0 {
			t.Errorf("after ROLLBACK the primary holds %d rows %q, want 0", got, value)
		}
	})

	catchUp(t, c)
	t.Run("tx_readonly", func(t *testing.T) {
		tag := marker(name + "-tx-ro")
		resetStats(t, c)
		r := d.step(t, stepTimeout, "tx_readonly", tag)
		wantOK(t, r)
		if got := r.num(t, "count"); got < seedItems {
			t.Errorf("count = %d, want at least %d", got, seedItems)
		}
		rs := checkTxRoutes(t, "read-only transaction", r.Notices, "standby", "READ_ONLY")
		onOneStandby(t, c, "read inside a read-only transaction", tag, rs)
	})

	const copyRows = 5000
	t.Run("copy_in", func(t *testing.T) {
		r := d.step(t, stepTimeout, "copy_in", copyRows)
		wantOK(t, r)
		if caps.copyInTx {
			checkTxRoutes(t, "COPY FROM STDIN in a transaction", r.Notices, "primary", "WRITE")
		} else {
			wantRoutes(t, "COPY FROM STDIN", r.Notices, "main", 1, "primary", "WRITE")
		}
		if got := primaryInt(t, c, fmt.Sprintf("SELECT count(*) FROM %s WHERE v = 'copy row ' || id", tb.copy)); got != copyRows {
			t.Errorf("after COPY FROM STDIN the primary holds %d matching rows, want %d", got, copyRows)
		}
	})

	catchUp(t, c)
	t.Run("copy_out", func(t *testing.T) {
		if caps.noCopyOut != "" {
			t.Skipf("skipping: %s", caps.noCopyOut)
		}
		tag := marker(name + "-copy-out")
		resetStats(t, c)
		r := d.step(t, stepTimeout, "copy_out", tag)
		wantOK(t, r)
		if got := r.num(t, "lines"); got != copyRows {
			t.Errorf("COPY TO STDOUT gave %d lines, want %d", got, copyRows)
		}
		if got := r.num(t, "id_sum"); got != copyRows*(copyRows+1)/2 {
			t.Errorf("COPY TO STDOUT ids sum to %d, want %d", got, copyRows*(copyRows+1)/2)
		}
		var rs []routeNotice
		if !caps.copyOutDropsNotices {
			rs = wantRoutes(t, "COPY TO STDOUT", r.Notices, "main", 1, "standby", "READ_ONLY")
		}
		onOneStandby(t, c, "COPY TO STDOUT", tag, rs)
	})

	t.Run("batch_error", func(t *testing.T) {
		first, third := marker(name+"-batch-a"), marker(name+"-batch-c")
		r := d.step(t, stepTimeout, "batch_error", first, third)
		wantCode(t, r, "22012")
		if got := r.num(t, "after"); got != 42 {
			t.Errorf("the statement after the failed batch returned %d, want 42", got)
		}
		if got := primaryInt(t, c, fmt.Sprintf("SELECT count(*) FROM %s WHERE v IN ($1, $2)", tb.items), first, third); got != 0 {
			t.Errorf("the failed batch left %d of its rows on the primary, want 0", got)
		}
		t.Logf("batch NOTICEs: %v", routesOf(t, r.Notices, ""))
	})

	t.Run("cancel", func(t *testing.T) {
		r := d.step(t, stepTimeout, "cancel")
		wantCode(t, r, "57014")
		if ms := r.num(t, "elapsed_ms"); ms > 5000 {
			t.Errorf("the cancelled statement took %dms to fail, want well under 5s", ms)
		}
		if got := r.num(t, "after"); got != 42 {
			t.Errorf("the statement after the cancel returned %d, want 42", got)
		}
		for _, n := range c.Nodes {
			var running int64
			err := n.QueryRow(timeoutCtx(t, statementTimeout), "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%pg_sleep(30)%' AND pid <> pg_backend_pid()").Scan(&running)
			if err != nil {
				t.Fatalf("pg_stat_activity on %s: %v", n.Name, err)
			}
			if running != 0 {
				t.Errorf("%s is still running the cancelled statement", n.Name)
			}
		}
	})

	t.Run("listen_notify", func(t *testing.T) {
		channel := strings.ReplaceAll(marker("matrix_"+name), "-", "_")
		payload := "hello from " + name
		runListenNotify(t, c, channel, payload, caps.listenerQuiet,
			func() *stepResult { return d.step(t, stepTimeout, "listen", channel) },
			func() *stepResult { return d.step(t, stepTimeout, "notify", channel, payload) },
			func() *stepResult { return d.step(t, stepTimeout, "wait_notification", 3000) },
			func() *stepResult { return d.step(t, stepTimeout, "poll_notification") },
			func(tag string) *stepResult { return d.step(t, stepTimeout, "listener_read", tag) },
			func() *stepResult { return d.step(t, stepTimeout, "unlisten") },
		)
	})

	t.Run("large_result", func(t *testing.T) {
		p := startOwlProcess(t, c)
		// A small run first, on the same connection, warms pgowl up.
		r := d.step(t, stepTimeout, "large", p.port, 100, largeWidth)
		wantOK(t, r)
		before := p.memoryBaseline(t)
		r = d.step(t, largeStepTimeout, "large", p.port, largeRows, largeWidth, "close")
		wantOK(t, r)
		if got := r.num(t, "rows"); got != largeRows {
			t.Errorf("the large result had %d rows, want %d", got, largeRows)
		}
		p.checkFlatMemory(t, name+" large result", before, r.num(t, "bytes"))
		if rs := routesOf(t, r.Notices, ""); len(rs) == 0 || rs[0].Role != "standby" {
			t.Errorf("large result: NOTICEs %v, want the first to name a standby", rs)
		}
		t.Logf("streamed in %dms", r.num(t, "elapsed_ms"))
	})
}

// checkTxRoutes checks a transaction's NOTICEs: at least one, all on one node
// with the given role, the first with reason first, the others IN_TRANSACTION.
func checkTxRoutes(t *testing.T, what string, ns []notice, role, first string) []routeNotice {
	t.Helper()
	rs := routesOf(t, ns, "")
	if len(rs) == 0 {
		t.Errorf("%s: no pgowl NOTICE", what)
		return nil
	}
	for i, r := range rs {
		want := "IN_TRANSACTION"
		if i == 0 {
			want = first
		}
		if r.Role != role || r.Reason != want || r.Node != rs[0].Node {
			t.Errorf("%s: NOTICE %d of %v is %v, want %s on %s with reason %s", what, i+1, rs, r, role, rs[0].Node, want)
		}
	}
	return rs
}

// runListenNotify checks LISTEN/NOTIFY through pgowl: the listener's LISTEN
// and the other connection's NOTIFY run on the primary, and the notification
// reaches the listener while it waits without sending anything. When it does
// not, poll shows whether it arrives with the listener's next statement.
// Then a read on the listener runs on the primary, pinned by LISTEN, and
// after UNLISTEN * on a standby. A quiet listener (see driverCaps) is checked
// by the nodes' evidence only.
func runListenNotify(t *testing.T, c *cluster.Cluster, channel, payload string, quiet bool,
	listen, notify, wait, poll func() *stepResult, listenerRead func(tag string) *stepResult, unlisten func() *stepResult) {
	t.Helper()
	resetStats(t, c)
	r := listen()
	wantOK(t, r)
	if !quiet {
		wantRoutes(t, "LISTEN", r.Notices, "listener", 1, "primary", "")
	}
	r = notify()
	wantOK(t, r)
	wantRoutes(t, "NOTIFY from another connection", r.Notices, "notifier", 1, "primary", "WRITE")
	onPrimary(t, c, "LISTEN and NOTIFY", channel, 2)

	r = wait()
	wantOK(t, r)
	got := r.notifications()
	want := [2]string{channel, payload}
	if len(got) != 1 || got[0] != want {
		r2 := poll()
		later := r2.notifications()
		diagnosis := "it did not arrive after the listener's next statement either"
		if len(later) == 1 && later[0] == want {
			diagnosis = "it arrived only with the listener's next statement: pgowl reads the listener's backend only while a statement runs, so a notification for an idle client waits in the socket until the client sends something"
		}
		t.Errorf("the idle listener received %v within 3s, want exactly %v; %s (NOTICEs with the next statement: %v)",
			got, want, diagnosis, routesOf(t, r2.Notices, ""))
	}

	if quiet {
		return
	}
	tag := marker("listener-read")
	resetStats(t, c)
	r = listenerRead(tag)
	wantOK(t, r)
	wantRoutes(t, "read on the listening session", r.Notices, "listener", 1, "primary", "SESSION_PINNED")
	onPrimary(t, c, "read on the listening session", tag, 1)

	// UNLISTEN * ends the pin: reads go to a standby again.
	r = unlisten()
	wantOK(t, r)
	tag = marker("unlistened-read")
	resetStats(t, c)
	r = listenerRead(tag)
	wantOK(t, r)
	rs := wantRoutes(t, "read after UNLISTEN *", r.Notices, "listener", 1, "standby", "READ_ONLY")
	onOneStandby(t, c, "read after UNLISTEN *", tag, rs)
}

// goStep is one step of a goClient: it returns the step's values and the
// database error its main operation raised, if any (values may come with it).
type goStep func(ctx context.Context, args []string) (map[string]any, error)

// goClient runs the matrix's steps with a client library inside the test
// binary. The library's notice handlers report through note.
type goClient struct {
	name  string
	steps map[string]goStep
	// errorOf returns the database error inside err, if there is one.
	errorOf func(err error) *stepError

	mu      sync.Mutex
	notices []notice
}

func (g *goClient) clientName() string { return g.name }

// note records a NOTICE received on the connection named conn.
func (g *goClient) note(n notice) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.notices = append(g.notices, n)
}

func (g *goClient) takeNotices() []notice {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := g.notices
	g.notices = nil
	return out
}

// step runs a step within timeout; an error that is not a database error fails t.
func (g *goClient) step(t *testing.T, timeout time.Duration, name string, args ...any) *stepResult {
	t.Helper()
	fn := g.steps[name]
	if fn == nil {
		t.Fatalf("%s: no step %s", g.name, name)
	}
	strs := make([]string, len(args))
	for i, a := range args {
		strs[i] = fmt.Sprint(a)
	}
	g.takeNotices()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	result, err := fn(ctx, strs)
	r := &stepResult{Step: name, Result: result, Notices: g.takeNotices()}
	if r.Result == nil {
		r.Result = map[string]any{}
	}
	if err != nil {
		r.Error = g.errorOf(err)
		if r.Error == nil {
			t.Fatalf("%s: step %s failed: %v", g.name, name, err)
		}
	}
	return r
}

// notificationList turns channel/payload pairs into a step's "notifications" value.
func notificationList(pairs ...[2]string) []any {
	out := []any{}
	for _, p := range pairs {
		out = append(out, map[string]any{"channel": p[0], "payload": p[1]})
	}
	return out
}

// countLines counts the lines of COPY text output and sums their first column.
type countLines struct {
	lines, idSum int64
	rest         []byte
}

func (w *countLines) Write(p []byte) (int, error) {
	data := append(w.rest, p...)
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		line := data[:i]
		data = data[i+1:]
		w.lines++
		id, _, _ := bytes.Cut(line, []byte{'\t'})
		n, err := strconv.ParseInt(string(id), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("COPY line %q: %w", line, err)
		}
		w.idSum += n
	}
	w.rest = append(w.rest[:0], data...)
	return len(p), nil
}

// copyInput is the text COPY FROM STDIN data of n rows "i<TAB>copy row i".
func copyInput(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "%d\tcopy row %d\n", i, i)
	}
	return b.String()
}

// batchSQL are the three statements of the batch_error step: the second fails.
func batchSQL(tb clientTables, first, third string) [3]string {
	return [3]string{
		fmt.Sprintf("INSERT INTO %s (v) VALUES ('%s')", tb.items, first),
		fmt.Sprintf("SELECT 1 / (SELECT count(*) - count(*) FROM %s)", tb.items),
		fmt.Sprintf("INSERT INTO %s (v) VALUES ('%s')", tb.items, third),
	}
}

// atoi parses a step argument.
func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
