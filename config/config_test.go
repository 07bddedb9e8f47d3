package config

import (
	"errors"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// specExample is the example file from the specification, verbatim; other tools write such files.
const specExample = `listen: 127.0.0.1:6432
nodes:                  # every node, any role: roles are discovered, never configured
  - {name: pg1, host: 127.0.0.1, port: 5432}
  - {name: pg2, host: 127.0.0.1, port: 5433}
users:                  # who may connect; the same credentials log in to the nodes
  - {name: app, password: secret}
monitor: {user: postgres, password: "", database: postgres, interval: 250ms}
routing:
  max_replica_lag: 5s
  notice: true          # one NOTICE per routed statement
  ai_comment_prefix: "/* owlai */"   # statements starting with it are marked ai=true in the log
log: {level: info, format: json}     # format: json | console
`

// specExampleConfig is what specExample must decode to.
func specExampleConfig() Config {
	want := Default()
	want.Nodes = []Node{
		{Name: "pg1", Host: "127.0.0.1", Port: 5432},
		{Name: "pg2", Host: "127.0.0.1", Port: 5433},
	}
	want.Users = []User{{Name: "app", Password: "secret", Auth: AuthSCRAM}}
	return want
}

// parseYAML parses a YAML document into a nested map as viper would hold it.
func parseYAML(t *testing.T, document string) map[string]any {
	t.Helper()
	settings := map[string]any{}
	if err := yaml.Unmarshal([]byte(document), &settings); err != nil {
		t.Fatalf("test YAML does not parse: %v\n%s", err, document)
	}
	return settings
}

// configErrors returns every *Error inside err, following errors.Join trees.
func configErrors(err error) []*Error {
	var found []*Error
	var walk func(error)
	walk = func(err error) {
		if configErr, ok := err.(*Error); ok {
			found = append(found, configErr)
			return
		}
		if joined, ok := err.(interface{ Unwrap() []error }); ok {
			for _, inner := range joined.Unwrap() {
				walk(inner)
			}
			return
		}
		if inner := errors.Unwrap(err); inner != nil {
			walk(inner)
		}
	}
	if err != nil {
		walk(err)
	}
	return found
}

func TestDecodeSpecExample(t *testing.T) {
	got, err := Decode(parseYAML(t, specExample))
	if err != nil {
		t.Fatalf("Decode(spec example) failed: %v", err)
	}
	if want := specExampleConfig(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Decode(spec example):\n got %+v\nwant %+v", got, want)
	}
}

// uncommentKeys turns every commented-out key line ("  # key: value") of example.yaml into a live one.
func uncommentKeys(document string) string {
	commentedKey := regexp.MustCompile(`(?m)^(\s*)# (\s*[a-z_]+:.*)$`)
	return commentedKey.ReplaceAllString(document, "$1$2")
}

// flattenKeys returns the dotted paths of every key in a nested map, not descending into lists.
func flattenKeys(prefix string, settings map[string]any) []string {
	var paths []string
	for name, value := range settings {
		path := joinKey(prefix, name)
		paths = append(paths, path)
		if nested, ok := value.(map[string]any); ok {
			paths = append(paths, flattenKeys(path, nested)...)
		}
	}
	return paths
}

func TestExampleFile(t *testing.T) {
	document, err := os.ReadFile("example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	t.Run("as shipped decodes like the spec example", func(t *testing.T) {
		got, err := Decode(parseYAML(t, string(document)))
		if err != nil {
			t.Fatalf("Decode(example.yaml) failed: %v", err)
		}
		if want := specExampleConfig(); !reflect.DeepEqual(got, want) {
			t.Fatalf("Decode(example.yaml):\n got %+v\nwant %+v", got, want)
		}
	})
	t.Run("commented keys are real keys with their true defaults", func(t *testing.T) {
		uncommented := uncommentKeys(string(document))
		if uncommented == string(document) {
			t.Fatal("example.yaml has no commented-out keys")
		}
		settings := parseYAML(t, uncommented)
		got, err := Decode(settings)
		if err != nil {
			t.Fatalf("Decode(uncommented example.yaml) failed: %v\n%s", err, uncommented)
		}
		want := specExampleConfig()
		want.Classify.Functions = ClassifyFunctions{Readonly: []string{}, Writes: []string{}}
		want.TLS.CipherSuites = []string{}
		want.Access.Rules = []AccessRule{}
		want.Admin.Users = []string{}
		want.Peering.Peers = []Peer{}
		want.Topology.Patroni.URLs = []string{}
		want.Guards = []Guard{}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("uncommented example.yaml does not show the defaults:\n got %+v\nwant %+v", got, want)
		}
		present := flattenKeys("", settings)
		for _, key := range Keys() {
			if !slices.Contains(present, key.Path) {
				t.Errorf("example.yaml does not show key %s", key.Path)
			}
		}
		userKeys := parseYAML(t, uncommented)["users"].([]any)[0].(map[string]any)
		for _, name := range []string{"name", "password", "auth"} {
			if _, ok := userKeys[name]; !ok {
				t.Errorf("example.yaml does not show users[].%s", name)
			}
		}
	})
}

func TestDefaults(t *testing.T) {
	want := map[string]string{
		"listen":                                    "127.0.0.1:6432",
		"shutdown_timeout":                          "30s",
		"nodes":                                     "",
		"users":                                     "",
		"monitor.user":                              "postgres",
		"monitor.password":                          "",
		"monitor.database":                          "postgres",
		"monitor.interval":                          "250ms",
		"monitor.down_after":                        "1s",
		"monitor.query_timeout":                     "500ms",
		"routing.max_replica_lag":                   "5s",
		"routing.max_replica_lag_bytes":             "0",
		"routing.notice":                            "true",
		"routing.ai_comment_prefix":                 "/* owlai */",
		"routing.standby_choice":                    "least_lag",
		"routing.when_no_standby":                   "reject",
		"routing.primary_wait":                      "2s",
		"routing.read_your_writes":                  "session",
		"routing.read_your_writes_wait":             "20ms",
		"routing.read_your_writes_fallback":         "primary",
		"log.level":                                 "info",
		"log.format":                                "json",
		"tls.cert_file":                             "",
		"tls.key_file":                              "",
		"tls.client_mode":                           "prefer",
		"tls.client_ca_file":                        "",
		"tls.min_version":                           "1.2",
		"tls.cipher_suites":                         "",
		"tls.nodes.sslmode":                         "prefer",
		"tls.nodes.ca_file":                         "",
		"tls.nodes.cert_file":                       "",
		"tls.nodes.key_file":                        "",
		"auth.users_file":                           "",
		"auth.query_enabled":                        "false",
		"auth.query":                                DefaultAuthQuery,
		"auth.query_user":                           "postgres",
		"auth.query_password":                       "",
		"auth.query_database":                       "postgres",
		"auth.cache_ttl":                            "10s",
		"access.rules":                              "",
		"admin.users":                               "",
		"limits.max_message_size":                   "64MiB",
		"limits.startup_timeout":                    "10s",
		"limits.max_client_connections":             "10000",
		"limits.max_logins_in_progress":             "1000",
		"limits.max_logins_in_progress_per_address": "100",
		"limits.max_prepared_statements":            "1000",
		"limits.max_prepared_statement_bytes":       "16MiB",
		"limits.query_timeout":                      "0s",
		"limits.idle_transaction_timeout":           "0s",
		"limits.first_reply_timeout":                "1s",
		"pool.mode":                                 "transaction",
		"pool.max_per_node":                         "40",
		"pool.min_idle":                             "0",
		"pool.idle_timeout":                         "5m0s",
		"pool.max_lifetime":                         "1h0m0s",
		"pool.health_check_after":                   "30s",
		"pool.acquire_timeout":                      "2s",
		"pool.dial_timeout":                         "5s",
		"tcp.keepalive_idle":                        "10s",
		"tcp.keepalive_interval":                    "5s",
		"tcp.keepalive_count":                       "3",
		"tcp.user_timeout":                          "30s",
		"classify.max_depth":                        "16",
		"classify.refresh_interval":                 "30s",
		"classify.change_poll_interval":             "1s",
		"classify.cache_size":                       "10000",
		"classify.functions.readonly":               "",
		"classify.functions.writes":                 "",
		"admin.listen":                              "127.0.0.1:6480",
		"admin.history_size":                        "10000",
		"listen_reuse_port":                         "false",
		"peering.instance":                          "0",
		"peering.listen":                            "",
		"peering.peers":                             "",
		"peering.self":                              "",
		"peering.tls.sslmode":                       "prefer",
		"peering.tls.ca_file":                       "",
		"peering.tls.cert_file":                     "",
		"peering.tls.key_file":                      "",
		"topology.patroni.urls":                     "",
		"topology.patroni.ca_file":                  "",
		"topology.patroni.cert_file":                "",
		"topology.patroni.key_file":                 "",
		"guards":                                    "",
	}
	keys := Keys()
	if len(keys) != len(want) {
		t.Errorf("Keys() returned %d keys, the test expects %d", len(keys), len(want))
	}
	for _, key := range keys {
		expected, ok := want[key.Path]
		if !ok {
			t.Errorf("Keys() has unexpected key %q", key.Path)
			continue
		}
		if key.Default != expected {
			t.Errorf("default of %s = %q, want %q", key.Path, key.Default, expected)
		}
		wantList := strings.HasSuffix(key.Path, "nodes") || strings.HasSuffix(key.Path, "users") || strings.HasPrefix(key.Path, "classify.functions.") ||
			key.Path == "tls.cipher_suites" || key.Path == "access.rules" || key.Path == "peering.peers" || key.Path == "topology.patroni.urls" || key.Path == "guards"
		if key.List != wantList {
			t.Errorf("%s: List = %v, want %v", key.Path, key.List, wantList)
		}
		if key.Help == "" {
			t.Errorf("%s has no help text", key.Path)
		}
	}

	defaults := Default()
	if defaults.Nodes != nil || defaults.Users != nil {
		t.Errorf("Default() has nodes or users: %+v %+v", defaults.Nodes, defaults.Users)
	}
	if defaults.Limits.MaxMessageSize != 64*1024*1024 {
		t.Errorf("limits.max_message_size = %d, want 64MiB", defaults.Limits.MaxMessageSize)
	}

	minimal := `
nodes: [{name: only, host: db.internal}]
users: [{name: app, password: pw}]
`
	got, err := Decode(parseYAML(t, minimal))
	if err != nil {
		t.Fatalf("Decode(minimal) failed: %v", err)
	}
	expected := Default()
	expected.Nodes = []Node{{Name: "only", Host: "db.internal", Port: DefaultNodePort}}
	expected.Users = []User{{Name: "app", Password: "pw", Auth: AuthSCRAM}}
	if !reflect.DeepEqual(got, expected) {
		t.Fatalf("Decode(minimal):\n got %+v\nwant %+v", got, expected)
	}
	if got.Nodes[0].Port != 5432 || got.Users[0].Auth != "scram-sha-256" {
		t.Fatalf("list item defaults not applied: %+v %+v", got.Nodes[0], got.Users[0])
	}
}

func TestStructTags(t *testing.T) {
	var check func(reflect.Type)
	check = func(structType reflect.Type) {
		for i := 0; i < structType.NumField(); i++ {
			field := structType.Field(i)
			key := field.Tag.Get("mapstructure")
			if key == "" || key != field.Tag.Get("yaml") {
				t.Errorf("%s.%s: mapstructure tag %q and yaml tag %q must be set and equal",
					structType.Name(), field.Name, key, field.Tag.Get("yaml"))
			}
			fieldType := field.Type
			if fieldType.Kind() == reflect.Slice {
				fieldType = fieldType.Elem()
			}
			if fieldType.Kind() == reflect.Struct && fieldType != reflect.TypeFor[time.Duration]() {
				check(fieldType)
			}
		}
	}
	check(reflect.TypeFor[Config]())
}

func TestErrorFormat(t *testing.T) {
	tests := []struct {
		err  *Error
		want string
	}{
		{&Error{Key: "routing.max_lag", Problem: UnknownKey}, `config: unknown key "routing.max_lag"`},
		{&Error{Key: "nodes[1].port", Problem: "70000 is out of range 1..65535"}, `config: nodes[1].port: 70000 is out of range 1..65535`},
	}
	for _, test := range tests {
		if got := test.err.Error(); got != test.want {
			t.Errorf("Error() = %q, want %q", got, test.want)
		}
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		text    string
		want    uint64
		wantErr bool
	}{
		{text: "0", want: 0},
		{text: "2048", want: 2048},
		{text: "64MiB", want: 64 << 20},
		{text: "1MB", want: 1000000},
		{text: "512kB", want: 512000},
		{text: "1KiB", want: 1024},
		{text: "3GiB", want: 3 << 30},
		{text: "2TB", want: 2e12},
		{text: "7B", want: 7},
		{text: " 16 MiB ", want: 16 << 20},
		{text: "", wantErr: true},
		{text: "MiB", wantErr: true},
		{text: "-1", wantErr: true},
		{text: "1.5MiB", wantErr: true},
		{text: "64mib", wantErr: true},
		{text: "64 MiBs", wantErr: true},
		{text: "99999999999999999999", wantErr: true},
		{text: "20000000TiB", wantErr: true},
	}
	for _, test := range tests {
		got, err := ParseSize(test.text)
		if test.wantErr {
			if err == nil {
				t.Errorf("ParseSize(%q) = %d, want an error", test.text, got)
			}
			continue
		}
		if err != nil || got != test.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", test.text, got, err, test.want)
		}
	}
}

func TestFormatSize(t *testing.T) {
	tests := []struct {
		bytes uint64
		want  string
	}{
		{0, "0"},
		{1, "1"},
		{1000, "1kB"},
		{1024, "1KiB"},
		{64 << 20, "64MiB"},
		{1500, "1500"},
		{5e9, "5GB"},
	}
	for _, test := range tests {
		got := FormatSize(test.bytes)
		if got != test.want {
			t.Errorf("FormatSize(%d) = %q, want %q", test.bytes, got, test.want)
		}
		back, err := ParseSize(got)
		if err != nil || back != test.bytes {
			t.Errorf("ParseSize(FormatSize(%d)) = %d, %v", test.bytes, back, err)
		}
	}
}
