package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// validBase is a small valid configuration that the cases below modify.
const validBase = `
nodes:
  - {name: pg1, host: 127.0.0.1, port: 5432}
  - {name: pg2, host: 127.0.0.1, port: 5433}
users:
  - {name: app, password: secret}
`

// mergeSettings deep-merges overlay into base; lists and scalars in overlay replace those in base.
func mergeSettings(base, overlay map[string]any) map[string]any {
	for name, value := range overlay {
		nestedOverlay, overlayIsMap := value.(map[string]any)
		nestedBase, baseIsMap := base[name].(map[string]any)
		if overlayIsMap && baseIsMap {
			base[name] = mergeSettings(nestedBase, nestedOverlay)
			continue
		}
		base[name] = value
	}
	return base
}

// decodeWith decodes validBase overlaid with the YAML document overlay.
func decodeWith(t *testing.T, overlay string) (Config, error) {
	t.Helper()
	return Decode(mergeSettings(parseYAML(t, validBase), parseYAML(t, overlay)))
}

func TestDecodeRefusesWithKeyPath(t *testing.T) {
	tests := []struct {
		name    string
		overlay string
		key     string
		problem string // substring of the problem; a full message when it starts with "config:"
	}{
		// Unknown keys, at every level.
		{"unknown top-level key", `listen_addr: ":1"`, "listen_addr", UnknownKey},
		{"unknown nested key", `routing: {max_lag: 5s}`, "routing.max_lag", `config: unknown key "routing.max_lag"`},
		{"unknown key two levels down", `classify: {functions: {maybe: []}}`, "classify.functions.maybe", UnknownKey},
		{"unknown key in a node", `nodes: [{name: pg1, host: h, role: primary}]`, "nodes[0].role", UnknownKey},
		{"unknown key in the second node", `nodes: [{name: pg1, host: h}, {name: pg2, host: h, weight: 2}]`, "nodes[1].weight", UnknownKey},
		{"unknown key in a user", `users: [{name: app, pass: secret}]`, "users[0].pass", UnknownKey},
		{"key given twice in different case", `{routing: {notice: true, Notice: false}}`, "routing.notice", "given twice"},

		// Type errors.
		{"string expected", `listen: 6432`, "listen", "must be a string"},
		{"string expected in a list item", `users: [{name: 42, password: x}]`, "users[0].name", "must be a string"},
		{"bool expected", `routing: {notice: maybe}`, "routing.notice", "not a boolean"},
		{"bool expected, got a number", `routing: {notice: 1}`, "routing.notice", "must be true or false"},
		{"duration without unit", `routing: {max_replica_lag: 5}`, "routing.max_replica_lag", "duration with a unit"},
		{"duration unparsable", `monitor: {interval: "5 seconds"}`, "monitor.interval", "not a duration"},
		{"integer expected", `nodes: [{name: pg1, host: h, port: abc}]`, "nodes[0].port", "not an integer"},
		{"integer with a fraction", `pool: {max_per_node: 1.5}`, "pool.max_per_node", "must be an integer"},
		{"integer too large", `pool: {max_per_node: 99999999999999999999}`, "pool.max_per_node", ""},
		{"size with a bad unit", `limits: {max_message_size: 64 MiBs}`, "limits.max_message_size", "unknown unit"},
		{"negative size", `routing: {max_replica_lag_bytes: -1}`, "routing.max_replica_lag_bytes", "negative"},
		{"negative size as a string", `routing: {max_replica_lag_bytes: "-1"}`, "routing.max_replica_lag_bytes", "not a size"},
		{"list expected", `nodes: pg1`, "nodes", "must be a list"},
		{"mapping expected", `routing: fast`, "routing", "must be a mapping"},
		{"mapping expected for a list item", `nodes: [pg1]`, "nodes[0]", "must be a mapping"},
		{"empty list item", `users: [null]`, "users[0]", "is empty"},
		{"list of strings expected", `classify: {functions: {readonly: [{a: b}]}}`, "classify.functions.readonly[0]", "must be a string"},

		// Invalid values.
		{"listen without port", `listen: localhost`, "listen", "not host:port"},
		{"listen port out of range", `listen: "127.0.0.1:99999"`, "listen", "not a number in 0..65535"},
		{"no nodes", `nodes: []`, "nodes", "at least one node"},
		{"node port out of range", `nodes: [{name: pg1, host: h}, {name: pg2, host: h, port: 70000}]`, "nodes[1].port", "config: nodes[1].port: 70000 is out of range 1..65535"},
		{"several hosts in one node", `nodes: [{name: pg1, host: "a,b"}]`, "nodes[0].host", "each server as a node of its own"},
		{"node port zero", `nodes: [{name: pg1, host: h, port: 0}]`, "nodes[0].port", "out of range"},
		{"node name empty", `nodes: [{name: "", host: h}]`, "nodes[0].name", "must not be empty"},
		{"node name missing", `nodes: [{host: h}]`, "nodes[0].name", "must not be empty"},
		{"node name with a space", `nodes: [{name: "pg 1", host: h}]`, "nodes[0].name", "may only contain"},
		{"node name with a dot", `nodes: [{name: "pg.1", host: h}]`, "nodes[0].name", "may only contain"},
		{"node names repeated", `nodes: [{name: pg1, host: a}, {name: pg1, host: b}]`, "nodes[1].name", "already the name of nodes[0]"},
		{"node host empty", `nodes: [{name: pg1, host: ""}]`, "nodes[0].host", "must not be empty"},
		{"no users", `users: []`, "users", "at least one user"},
		{"user name empty", `users: [{password: x}]`, "users[0].name", "must not be empty"},
		{"user names repeated", `users: [{name: a, password: x}, {name: a, password: y}]`, "users[1].name", "already the name of users[0]"},
		{"unknown auth", `users: [{name: a, password: x, auth: plain}]`, "users[0].auth", `"plain" is not one of scram-sha-256, md5, trust`},
		{"scram without password", `users: [{name: a}]`, "users[0].password", "must be set when auth is scram-sha-256"},
		{"md5 without password", `users: [{name: a, auth: md5}]`, "users[0].password", "must be set when auth is md5"},
		{"monitor user empty", `monitor: {user: ""}`, "monitor.user", "must not be empty"},
		{"monitor database empty", `monitor: {database: ""}`, "monitor.database", "must not be empty"},
		{"monitor interval zero", `monitor: {interval: 0s, down_after: 1s}`, "monitor.interval", "greater than 0"},
		{"monitor down_after below interval", `monitor: {interval: 1s, down_after: 500ms}`, "monitor.down_after", "less than monitor.interval"},
		{"monitor query_timeout zero", `monitor: {query_timeout: 0}`, "monitor.query_timeout", "greater than 0"},
		{"max_replica_lag zero", `routing: {max_replica_lag: 0s}`, "routing.max_replica_lag", "greater than 0"},
		{"max_replica_lag negative", `routing: {max_replica_lag: -1s}`, "routing.max_replica_lag", "greater than 0"},
		{"unknown standby_choice", `routing: {standby_choice: fastest}`, "routing.standby_choice", `config: routing.standby_choice: "fastest" is not one of least_lag, round_robin, least_connections`},
		{"unknown when_no_standby", `routing: {when_no_standby: wait}`, "routing.when_no_standby", `"wait" is not one of reject, primary`},
		{"negative primary_wait", `routing: {primary_wait: -1ms}`, "routing.primary_wait", "must not be negative"},
		{"unknown log level", `log: {level: verbose}`, "log.level", `"verbose" is not one of debug, info, warn, error`},
		{"unknown log format", `log: {format: text}`, "log.format", `"text" is not one of json, console`},
		{"max_message_size too small", `limits: {max_message_size: 512}`, "limits.max_message_size", "out of range 1024.."},
		{"max_message_size 1kB is below 1KiB", `limits: {max_message_size: 1kB}`, "limits.max_message_size", "1000 is out of range"},
		{"max_message_size too large", `limits: {max_message_size: 2GiB}`, "limits.max_message_size", "out of range"},
		{"startup_timeout zero", `limits: {startup_timeout: 0s}`, "limits.startup_timeout", "greater than 0"},
		{"max_client_connections zero", `limits: {max_client_connections: 0}`, "limits.max_client_connections", "less than 1"},
		{"unknown pool mode", `pool: {mode: statement}`, "pool.mode", `"statement" is not one of transaction, session`},
		{"max_per_node zero", `pool: {max_per_node: 0}`, "pool.max_per_node", "less than 1"},
		{"min_idle negative", `pool: {min_idle: -1}`, "pool.min_idle", "less than 0"},
		{"min_idle above max_per_node", `pool: {min_idle: 41}`, "pool.min_idle", "more than pool.max_per_node (40)"},
		{"idle_timeout negative", `pool: {idle_timeout: -1s}`, "pool.idle_timeout", "must not be negative"},
		{"max_lifetime negative", `pool: {max_lifetime: -1h}`, "pool.max_lifetime", "must not be negative"},
		{"health_check_after negative", `pool: {health_check_after: -1s}`, "pool.health_check_after", "must not be negative"},
		{"acquire_timeout zero", `pool: {acquire_timeout: 0s}`, "pool.acquire_timeout", "greater than 0"},
		{"dial_timeout zero", `pool: {dial_timeout: 0s}`, "pool.dial_timeout", "greater than 0"},
		{"keepalive_idle negative", `tcp: {keepalive_idle: -1s}`, "tcp.keepalive_idle", "must not be negative"},
		{"keepalive_idle too long", `tcp: {keepalive_idle: 10h}`, "tcp.keepalive_idle", "more than 32767s"},
		{"keepalive_interval zero", `tcp: {keepalive_interval: 0s}`, "tcp.keepalive_interval", "greater than 0"},
		{"keepalive_count zero", `tcp: {keepalive_count: 0}`, "tcp.keepalive_count", "out of range 1..127"},
		{"user_timeout negative", `tcp: {user_timeout: -1s}`, "tcp.user_timeout", "must not be negative"},
		{"max_depth zero", `classify: {max_depth: 0}`, "classify.max_depth", "less than 1"},
		{"refresh_interval zero", `classify: {refresh_interval: 0s}`, "classify.refresh_interval", "greater than 0"},
		{"cache_size negative", `classify: {cache_size: -1}`, "classify.cache_size", "less than 0"},
		{"function without arguments", `classify: {functions: {readonly: [lookup]}}`, "classify.functions.readonly[0]", "not of the form"},
		{"function with an empty argument", `classify: {functions: {writes: ["f(int,)"]}}`, "classify.functions.writes[0]", "empty argument"},
		{"function both readonly and writes", `classify: {functions: {readonly: ["public.f(int)"], writes: ["g()", "PUBLIC.f( int )"]}}`, "classify.functions.writes[1]", "also listed in classify.functions.readonly[0]"},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			got, err := decodeWith(t, test.overlay)
			if err == nil {
				t.Fatalf("Decode accepted %s: %+v", test.overlay, got)
			}
			problems := configErrors(err)
			if len(problems) != 1 {
				t.Fatalf("want exactly one problem, got %d: %v", len(problems), err)
			}
			problem := problems[0]
			if problem.Key != test.key {
				t.Fatalf("problem names key %q, want %q (error: %v)", problem.Key, test.key, err)
			}
			if !strings.Contains(err.Error(), test.key) {
				t.Fatalf("error text %q does not name key %q", err.Error(), test.key)
			}
			if strings.HasPrefix(test.problem, "config:") {
				if err.Error() != test.problem {
					t.Fatalf("error = %q, want %q", err.Error(), test.problem)
				}
			} else if !strings.Contains(problem.Problem, test.problem) {
				t.Fatalf("problem = %q, want it to contain %q", problem.Problem, test.problem)
			}
			if !reflect.DeepEqual(got, Config{}) {
				t.Fatalf("Decode returned a config alongside an error: %+v", got)
			}
		})
	}
}

func TestDecodeReportsEveryProblem(t *testing.T) {
	_, err := decodeWith(t, `{routing: {max_lag: 1s, notice: 3}, listen: 1, extra: 2}`)
	var keys []string
	for _, problem := range configErrors(err) {
		keys = append(keys, problem.Key)
	}
	want := []string{"extra", "listen", "routing.max_lag", "routing.notice"}
	if !reflect.DeepEqual(keys, want) {
		t.Fatalf("problems name keys %v, want %v (error: %v)", keys, want, err)
	}
	var first *Error
	if !errors.As(err, &first) || first.Key != "extra" {
		t.Fatalf("errors.As does not find the first problem: %v", err)
	}
	// Type and unknown-key problems are reported without validation problems piling up.
	_, err = decodeWith(t, `{nodes: [], extra: 1}`)
	if problems := configErrors(err); len(problems) != 1 || problems[0].Key != "extra" {
		t.Fatalf("decode problems should be reported before validation: %v", err)
	}
	// Several validation problems are all reported.
	_, err = decodeWith(t, `{nodes: [], users: [], log: {level: x}}`)
	keys = nil
	for _, problem := range configErrors(err) {
		keys = append(keys, problem.Key)
	}
	if want := []string{"nodes", "users", "log.level"}; !reflect.DeepEqual(keys, want) {
		t.Fatalf("validation problems name keys %v, want %v", keys, want)
	}
}

func TestDecodeAcceptedValues(t *testing.T) {
	tests := []struct {
		name    string
		overlay string
		check   func(Config) any // returns the decoded value to compare with want
		want    any
	}{
		{"size in MiB", `limits: {max_message_size: 64MiB}`, func(c Config) any { return c.Limits.MaxMessageSize }, 64 << 20},
		{"size in MB", `limits: {max_message_size: 1MB}`, func(c Config) any { return c.Limits.MaxMessageSize }, 1000000},
		{"size in kB", `limits: {max_message_size: 512kB}`, func(c Config) any { return c.Limits.MaxMessageSize }, 512000},
		{"size as bytes", `limits: {max_message_size: 2048}`, func(c Config) any { return c.Limits.MaxMessageSize }, 2048},
		{"size as a numeric string", `limits: {max_message_size: "4096"}`, func(c Config) any { return c.Limits.MaxMessageSize }, 4096},
		{"size at the minimum", `limits: {max_message_size: 1KiB}`, func(c Config) any { return c.Limits.MaxMessageSize }, 1024},
		{"byte lag in MiB", `routing: {max_replica_lag_bytes: 16MiB}`, func(c Config) any { return c.Routing.MaxReplicaLagBytes }, uint64(16 << 20)},
		{"byte lag as bytes", `routing: {max_replica_lag_bytes: 123}`, func(c Config) any { return c.Routing.MaxReplicaLagBytes }, uint64(123)},
		{"duration in ms", `routing: {max_replica_lag: 250ms}`, func(c Config) any { return c.Routing.MaxReplicaLag }, 250 * time.Millisecond},
		{"duration compound", `pool: {idle_timeout: 1m30s}`, func(c Config) any { return c.Pool.IdleTimeout }, 90 * time.Second},
		{"duration bare zero", `routing: {primary_wait: 0}`, func(c Config) any { return c.Routing.PrimaryWait }, time.Duration(0)},
		{"duration zero with unit", `pool: {max_lifetime: 0s}`, func(c Config) any { return c.Pool.MaxLifetime }, time.Duration(0)},
		{"bool false", `routing: {notice: false}`, func(c Config) any { return c.Routing.Notice }, false},
		{"bool as a string", `routing: {notice: "false"}`, func(c Config) any { return c.Routing.Notice }, false},
		{"integer as a string", `pool: {max_per_node: "7"}`, func(c Config) any { return c.Pool.MaxPerNode }, 7},
		{"integer as a whole float (JSON)", `pool: {max_per_node: 8.0}`, func(c Config) any { return c.Pool.MaxPerNode }, 8},
		{"null keeps the default", `routing: {standby_choice: null}`, func(c Config) any { return c.Routing.StandbyChoice }, StandbyLeastLag},
		{"keys are case-insensitive", `{Listen: "0.0.0.0:7000"}`, func(c Config) any { return c.Listen }, "0.0.0.0:7000"},
		{"listen on every interface", `listen: ":6432"`, func(c Config) any { return c.Listen }, ":6432"},
		{"listen on an ephemeral port", `listen: "127.0.0.1:0"`, func(c Config) any { return c.Listen }, "127.0.0.1:0"},
		{"listen on IPv6", `listen: "[::1]:6432"`, func(c Config) any { return c.Listen }, "[::1]:6432"},
		{"trust needs no password", `users: [{name: app, auth: trust}]`, func(c Config) any { return c.Users }, []User{{Name: "app", Auth: AuthTrust}}},
		{"md5 user", `users: [{name: app, password: pw, auth: md5}]`, func(c Config) any { return c.Users }, []User{{Name: "app", Password: "pw", Auth: AuthMD5}}},
		{"node names with _ and -", `nodes: [{name: Pg_1-a, host: h, port: 1}]`, func(c Config) any { return c.Nodes }, []Node{{Name: "Pg_1-a", Host: "h", Port: 1}}},
		{"every enum choice", `{routing: {standby_choice: least_connections, when_no_standby: primary}, pool: {mode: session}, log: {level: debug, format: console}}`,
			func(c Config) any {
				return []string{c.Routing.StandbyChoice, c.Routing.WhenNoStandby, c.Pool.Mode, c.Log.Level, c.Log.Format}
			}, []string{"least_connections", "primary", "session", "debug", "console"}},
		{"down_after equal to interval", `monitor: {interval: 2s, down_after: 2s}`, func(c Config) any { return c.Monitor.DownAfter }, 2 * time.Second},
		{"function signatures", `classify: {functions: {readonly: ["lookup(integer)", "public.f()"], writes: ["\"My Schema\".\"touch\"(text, double precision)", "g(numeric(10,2), int[])"]}}`,
			func(c Config) any { return c.Classify.Functions },
			ClassifyFunctions{Readonly: []string{"lookup(integer)", "public.f()"}, Writes: []string{`"My Schema"."touch"(text, double precision)`, "g(numeric(10,2), int[])"}}},
		{"empty ai_comment_prefix", `routing: {ai_comment_prefix: ""}`, func(c Config) any { return c.Routing.AICommentPrefix }, ""},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			got, err := decodeWith(t, test.overlay)
			if err != nil {
				t.Fatalf("Decode refused %s: %v", test.overlay, err)
			}
			if value := test.check(got); !reflect.DeepEqual(value, test.want) {
				t.Fatalf("decoded %#v, want %#v", value, test.want)
			}
		})
	}
}

func TestFunctionSignatures(t *testing.T) {
	tests := []struct {
		signature string
		valid     bool
	}{
		{"f()", true},
		{"lookup(integer)", true},
		{"public.lookup(integer, text)", true},
		{`"Odd ""name"""."f"(text)`, true},
		{"f(numeric(10,2))", true},
		{"f(int[], timestamp with time zone)", true},
		{"  f ( int )  ", true},
		{"f", false},
		{"f(", false},
		{"f)", false},
		{".f()", false},
		{"a.b.c()", false},
		{"s.()", false},
		{"f(,)", false},
		{"f(int,)", false},
		{"f(int))", false},
		{"f((int)", false},
		{`"unterminated(int)`, false},
		{`""()`, false},
		{"1f()", false},
		{"f() extra", false},
		{"", false},
	}
	for _, test := range tests {
		err := checkFunctionSignature(test.signature)
		if (err == nil) != test.valid {
			t.Errorf("checkFunctionSignature(%q) = %v, want valid=%v", test.signature, err, test.valid)
		}
	}
}

func TestTLSFiles(t *testing.T) {
	dir := t.TempDir()
	cert := filepath.Join(dir, "server.crt")
	key := filepath.Join(dir, "server.key")
	for _, path := range []string{cert, key} {
		if err := os.WriteFile(path, []byte("test"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	missing := filepath.Join(dir, "missing.crt")
	tests := []struct {
		name     string
		tls      TLS
		wantKeys []string
	}{
		{"neither", TLS{}, nil},
		{"both existing", TLS{CertFile: cert, KeyFile: key}, nil},
		{"cert file missing", TLS{CertFile: missing, KeyFile: key}, []string{"tls.cert_file"}},
		{"key file missing", TLS{CertFile: cert, KeyFile: missing}, []string{"tls.key_file"}},
		{"only cert", TLS{CertFile: cert}, []string{"tls.key_file"}},
		{"only key", TLS{KeyFile: key}, []string{"tls.cert_file"}},
		{"cert is a directory", TLS{CertFile: dir, KeyFile: key}, []string{"tls.cert_file"}},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			cfg, err := decodeWith(t, "{}")
			if err != nil {
				t.Fatal(err)
			}
			cfg.TLS.CertFile, cfg.TLS.KeyFile = test.tls.CertFile, test.tls.KeyFile
			err = cfg.Validate()
			var keys []string
			for _, problem := range configErrors(err) {
				keys = append(keys, problem.Key)
			}
			if !reflect.DeepEqual(keys, test.wantKeys) {
				t.Fatalf("Validate problems name %v, want %v (error: %v)", keys, test.wantKeys, err)
			}
			if test.name == "cert file missing" && !strings.Contains(err.Error(), missing) {
				t.Fatalf("error %q does not name the missing file", err)
			}
		})
	}
	// The same check runs through Decode.
	_, err := decodeWith(t, "tls: {cert_file: "+missing+", key_file: "+key+"}")
	if problems := configErrors(err); len(problems) != 1 || problems[0].Key != "tls.cert_file" {
		t.Fatalf("Decode with a missing cert file: %v", err)
	}
}
