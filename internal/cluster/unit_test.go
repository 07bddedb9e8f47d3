package cluster

import (
	"strings"
	"testing"
)

func TestParseLSN(t *testing.T) {
	cases := []struct {
		in      string
		want    uint64
		wantErr bool
	}{
		{in: "0/0", want: 0},
		{in: "0/3000148", want: 0x3000148},
		{in: "16/B374D848", want: 0x16_B374D848},
		{in: " 1/0 ", want: 1 << 32},
		{in: "FFFFFFFF/FFFFFFFF", want: ^uint64(0)},
		{in: "", wantErr: true},
		{in: "3000148", wantErr: true},
		{in: "1/G", wantErr: true},
		{in: "100000000/0", wantErr: true},
	}
	for _, tc := range cases {
		got, err := ParseLSN(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ParseLSN(%q) = %#x, %v; want %#x, error %t", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestRenderSettingsOrderAndQuoting(t *testing.T) {
	text := renderSettings(
		map[string]string{"max_connections": "200", "log_line_prefix": "%m [%p] "},
		map[string]string{"max_connections": "50", "search_path": `it's\here`},
		nodeSettings{Name: "pg2", Port: 5555, SocketDir: "/tmp/x/pg2"},
	)
	cases := []struct {
		line  string
		after string // the line must come after this one, if set
	}{
		{line: "log_line_prefix = '%m [%p] '"},
		{line: "max_connections = '200'"},
		{line: "max_connections = '50'", after: "max_connections = '200'"},
		{line: `search_path = 'it''s\\here'`},
		{line: "port = '5555'", after: "max_connections = '50'"},
		{line: "unix_socket_directories = '/tmp/x/pg2'"},
		{line: "cluster_name = 'pg2'"},
	}
	for _, tc := range cases {
		at := strings.Index(text, tc.line+"\n")
		if at < 0 {
			t.Errorf("missing line %q in:\n%s", tc.line, text)
			continue
		}
		if tc.after != "" && strings.Index(text, tc.after+"\n") > at {
			t.Errorf("line %q must follow %q so it wins", tc.line, tc.after)
		}
	}
}

func TestRenderHBASuperuserTrustFirst(t *testing.T) {
	for _, method := range []string{"scram-sha-256", "md5"} {
		lines := strings.Split(renderHBA(method), "\n")
		firstGeneric, superuserTrust := -1, -1
		for index, line := range lines {
			fields := strings.Fields(line)
			if len(fields) == 5 && fields[0] == "host" && fields[1] == "all" {
				if fields[2] == "postgres" && fields[3] == "127.0.0.1/32" && fields[4] == "trust" && superuserTrust < 0 {
					superuserTrust = index
				}
				if fields[2] == "all" && fields[4] == method && firstGeneric < 0 {
					firstGeneric = index
				}
			}
		}
		if superuserTrust < 0 || firstGeneric < 0 || superuserTrust > firstGeneric {
			t.Errorf("%s: superuser trust line %d must precede generic line %d", method, superuserTrust, firstGeneric)
		}
	}
}

func TestDSN(t *testing.T) {
	node := &Node{Host: "127.0.0.1", Port: 6543}
	cases := []struct {
		user, password, database, want string
	}{
		{"app", "pw", "postgres", "postgres://app:pw@127.0.0.1:6543/postgres?sslmode=disable"},
		{"postgres", "", "db", "postgres://postgres@127.0.0.1:6543/db?sslmode=disable"},
		{"app", "p@ss/w:rd", "postgres", "postgres://app:p%40ss%2Fw%3Ard@127.0.0.1:6543/postgres?sslmode=disable"},
	}
	for _, tc := range cases {
		if got := node.DSN(tc.user, tc.password, tc.database); got != tc.want {
			t.Errorf("DSN(%q, %q, %q) = %q, want %q", tc.user, tc.password, tc.database, got, tc.want)
		}
	}
}

func TestResolvedBinDir(t *testing.T) {
	t.Setenv(BinDirEnv, "/from/env")
	if got := (Options{}).ResolvedBinDir(); got != "/from/env" {
		t.Errorf("env override: got %q", got)
	}
	if got := (Options{BinDir: "/explicit"}).ResolvedBinDir(); got != "/explicit" {
		t.Errorf("explicit BinDir: got %q", got)
	}
	t.Setenv(BinDirEnv, "")
	if got := (Options{}).ResolvedBinDir(); got != DefaultBinDir {
		t.Errorf("default: got %q", got)
	}
}
