package admin

import (
	"io"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgowl/pgowl/config"
)

// scriptedConsole feeds client messages to ServeConsole and keeps what it answers.
type scriptedConsole struct {
	in  [][2]any // {type byte, body []byte}
	out []pgproto3.BackendMessage
}

func (c *scriptedConsole) ReadMessage() (byte, []byte, error) {
	if len(c.in) == 0 {
		return 0, nil, io.EOF
	}
	m := c.in[0]
	c.in = c.in[1:]
	return m[0].(byte), m[1].([]byte), nil
}

func (c *scriptedConsole) Send(msg pgproto3.BackendMessage) error {
	c.out = append(c.out, msg)
	return nil
}

func (c *scriptedConsole) Flush() error { return nil }

func query(sql string) [2]any { return [2]any{byte('Q'), append([]byte(sql), 0)} }

func testRecorder() *Recorder {
	cfg := config.Default()
	cfg.Nodes = []config.Node{{Name: "pg1", Host: "127.0.0.1", Port: 5432}, {Name: "pg2", Host: "127.0.0.1", Port: 5433}}
	cfg.Users = []config.User{{Name: "app", Password: "secret-password"}}
	return New(Sources{Config: cfg, Nodes: nodesFor(cfg), Pool: noPool{}, Version: "test"})
}

// TestConsoleAnswersPgbouncerCommands: each command gets a result, an
// error with a SQLSTATE, or NOTICEs, and always a ReadyForQuery; the
// extended protocol is refused once per Sync.
func TestConsoleAnswersPgbouncerCommands(t *testing.T) {
	r := testRecorder()
	r.Routed(Unit{Node: "pg2", Role: 2, Reason: "READ_ONLY", Outcome: "ok", Database: "postgres", User: "app", Statement: "SELECT $1"})
	c := &scriptedConsole{in: [][2]any{
		query("SHOW VERSION;"), query("show nodes"), query("SHOW HISTORY"), query("SHOW CONFIG"), query("SHOW STATS"),
		query("RELOAD"), query("SHOW NONSENSE"), query(""), query("SHOW HELP"),
		{byte('P'), []byte("\x00SELECT 1\x00\x00\x00")}, {byte('B'), []byte{}}, {byte('S'), []byte{}},
		{byte('X'), []byte{}},
	}}
	if err := r.ServeConsole(c, "ops"); err != nil {
		t.Fatalf("ServeConsole: %v", err)
	}
	var ready, rows, errs, notices int
	var codes []string
	var text strings.Builder
	for _, m := range c.out {
		switch m := m.(type) {
		case *pgproto3.ReadyForQuery:
			ready++
		case *pgproto3.DataRow:
			rows++
			for _, v := range m.Values {
				text.Write(v)
				text.WriteByte('|')
			}
		case *pgproto3.ErrorResponse:
			errs++
			codes = append(codes, m.Code)
		case *pgproto3.NoticeResponse:
			notices++
		}
	}
	if ready != 1+10 { // after startup, after each of the 9 queries, after Sync
		t.Errorf("%d ReadyForQuery, want 11", ready)
	}
	if strings.Join(codes, ",") != "0A000,42601,0A000" {
		t.Errorf("error codes %v, want RELOAD 0A000, SHOW NONSENSE 42601, extended protocol 0A000", codes)
	}
	if notices != len(consoleHelp) {
		t.Errorf("SHOW HELP sent %d NOTICEs, want %d", notices, len(consoleHelp))
	}
	out := text.String()
	for _, want := range []string{"pgowl test|", "pg1||primary|serves writes|", "SELECT $1|", "max_client_conn|10000|", "postgres|1|"} {
		if !strings.Contains(out, want) {
			t.Errorf("the answers lack %q", want)
		}
	}
	if strings.Contains(out, "secret-password") {
		t.Error("the console shows a password")
	}
}

// FuzzConsoleCommand: no command text makes the console fail or skip its ReadyForQuery.
func FuzzConsoleCommand(f *testing.F) {
	for _, seed := range []string{"SHOW POOLS", "show   clients ;", "SHOW", "RELOAD", "SET x = 1", ";;", "SHOW STATS_TOTALS", "\xff\xfe"} {
		f.Add(seed)
	}
	r := testRecorder()
	f.Fuzz(func(t *testing.T, sql string) {
		c := &scriptedConsole{in: [][2]any{query(sql)}}
		if err := r.ServeConsole(c, "ops"); err != io.EOF {
			t.Fatalf("ServeConsole ended with %v, want the script's EOF", err)
		}
		if _, ok := c.out[len(c.out)-1].(*pgproto3.ReadyForQuery); !ok {
			t.Fatalf("%q: the last message is %T, not ReadyForQuery", sql, c.out[len(c.out)-1])
		}
	})
}
