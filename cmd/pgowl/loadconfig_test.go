package main

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/pgowl/pgowl/config"
)

// clusterYAML is the part of every test file that the configuration always needs.
const clusterYAML = `
nodes:
  - {name: pg1, host: 127.0.0.1, port: 5432}
  - {name: pg2, host: 127.0.0.1, port: 5433}
users:
  - {name: app, password: secret}
`

// writeFile writes content to a new file in a per-test directory and returns its path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// nestedYAML renders a dotted key path and a YAML scalar as a nested YAML document.
func nestedYAML(path, value string) string {
	var document strings.Builder
	parts := strings.Split(path, ".")
	for depth, part := range parts {
		document.WriteString(strings.Repeat("  ", depth) + part + ":")
		if depth == len(parts)-1 {
			document.WriteString(" " + value)
		}
		document.WriteString("\n")
	}
	return document.String()
}

// parsedFlags returns a flag set with the configuration flags, parsed from args.
func parsedFlags(t *testing.T, args ...string) *pflag.FlagSet {
	t.Helper()
	flags := pflag.NewFlagSet("pgowl", pflag.ContinueOnError)
	addConfigFlags(flags)
	if err := flags.Parse(args); err != nil {
		t.Fatalf("flags.Parse(%v): %v", args, err)
	}
	return flags
}

// clusterConfig is what clusterYAML decodes to on top of the defaults.
func clusterConfig() config.Config {
	cfg := config.Default()
	cfg.Nodes = []config.Node{
		{Name: "pg1", Host: "127.0.0.1", Port: 5432},
		{Name: "pg2", Host: "127.0.0.1", Port: 5433},
	}
	cfg.Users = []config.User{{Name: "app", Password: "secret", Auth: config.AuthSCRAM}}
	return cfg
}

func TestLoadConfigPrecedence(t *testing.T) {
	type layered struct {
		file, env, flag string // the value each layer gives, as written in that layer
	}
	tests := []struct {
		path   string
		values layered
		get    func(config.Config) any
		want   map[string]any // decoded value by winning layer: default, file, env, flag
	}{
		{"listen", layered{`"127.0.0.1:7001"`, "127.0.0.1:7002", "127.0.0.1:7003"},
			func(c config.Config) any { return c.Listen },
			map[string]any{"default": "127.0.0.1:6432", "file": "127.0.0.1:7001", "env": "127.0.0.1:7002", "flag": "127.0.0.1:7003"}},
		{"routing.max_replica_lag", layered{"3s", "4s", "6500ms"},
			func(c config.Config) any { return c.Routing.MaxReplicaLag },
			map[string]any{"default": 5 * time.Second, "file": 3 * time.Second, "env": 4 * time.Second, "flag": 6500 * time.Millisecond}},
		{"routing.notice", layered{"false", "true", "false"},
			func(c config.Config) any { return c.Routing.Notice },
			map[string]any{"default": true, "file": false, "env": true, "flag": false}},
		{"log.level", layered{"debug", "warn", "error"},
			func(c config.Config) any { return c.Log.Level },
			map[string]any{"default": "info", "file": "debug", "env": "warn", "flag": "error"}},
		{"limits.max_message_size", layered{"1MiB", "2MiB", "3MiB"},
			func(c config.Config) any { return c.Limits.MaxMessageSize },
			map[string]any{"default": 64 << 20, "file": 1 << 20, "env": 2 << 20, "flag": 3 << 20}},
		{"routing.max_replica_lag_bytes", layered{"1kB", "2kB", "3kB"},
			func(c config.Config) any { return c.Routing.MaxReplicaLagBytes },
			map[string]any{"default": uint64(0), "file": uint64(1000), "env": uint64(2000), "flag": uint64(3000)}},
		{"monitor.down_after", layered{"2s", "3s", "4s"},
			func(c config.Config) any { return c.Monitor.DownAfter },
			map[string]any{"default": time.Second, "file": 2 * time.Second, "env": 3 * time.Second, "flag": 4 * time.Second}},
		{"pool.max_per_node", layered{"10", "20", "30"},
			func(c config.Config) any { return c.Pool.MaxPerNode },
			map[string]any{"default": 40, "file": 10, "env": 20, "flag": 30}},
	}
	for _, test := range tests {
		// Every combination of layers: bit 0 file, bit 1 env, bit 2 flag.
		for layers := 0; layers < 8; layers++ {
			useFile, useEnv, useFlag := layers&1 != 0, layers&2 != 0, layers&4 != 0
			name := test.path + "/"
			winner := "default"
			document := clusterYAML
			if useFile {
				name += "file+"
				winner = "file"
				document += nestedYAML(test.path, test.values.file)
			}
			environ := []string{"HOME=/nonexistent", "PGOWLISH=ignored"}
			if useEnv {
				name += "env+"
				winner = "env"
				environ = append(environ, environmentName(test.path)+"="+test.values.env)
			}
			var args []string
			if useFlag {
				name += "flag+"
				winner = "flag"
				args = append(args, "--"+test.path+"="+test.values.flag)
			}
			t.Run(strings.TrimSuffix(name, "+"), func(t *testing.T) {
				file := writeFile(t, "pgowl.yaml", document)
				cfg, err := loadConfig(file, parsedFlags(t, args...), environ)
				if err != nil {
					t.Fatalf("loadConfig: %v\nfile:\n%s\nenv: %v\nflags: %v", err, document, environ, args)
				}
				if got, want := test.get(cfg), test.want[winner]; !reflect.DeepEqual(got, want) {
					t.Fatalf("%s = %#v, want %#v from %s", test.path, got, want, winner)
				}
			})
		}
	}
}

func TestLoadConfigExampleFiles(t *testing.T) {
	cfg, err := loadConfig(filepath.Join("..", "..", "config", "example.yaml"), parsedFlags(t), nil)
	if err != nil {
		t.Fatalf("loadConfig(config/example.yaml): %v", err)
	}
	if want := clusterConfig(); !reflect.DeepEqual(cfg, want) {
		t.Fatalf("config/example.yaml:\n got %+v\nwant %+v", cfg, want)
	}
	// A null value leaves the default in place.
	file := writeFile(t, "pgowl.yml", clusterYAML+"routing: {standby_choice: null, notice: false}\nlisten:\n")
	cfg, err = loadConfig(file, nil, nil)
	if err != nil || cfg.Routing.StandbyChoice != config.StandbyLeastLag || cfg.Listen != "127.0.0.1:6432" || cfg.Routing.Notice {
		t.Fatalf("null values must leave the defaults in place: %v %+v", err, cfg)
	}
	// Keys are case-insensitive in the file, as viper treats them, whatever the file's extension.
	file = writeFile(t, "pgowl.conf", clusterYAML+"Routing: {Max_Replica_Lag: 3s}\n")
	cfg, err = loadConfig(file, nil, nil)
	if err != nil || cfg.Routing.MaxReplicaLag != 3*time.Second {
		t.Fatalf("mixed-case keys in a .conf file: %v, max_replica_lag %s", err, cfg.Routing.MaxReplicaLag)
	}
}

func TestLoadConfigRefuses(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "absent.yaml")
	tests := []struct {
		name     string
		document string // file content; empty means no file unless file is set
		file     string // explicit file path, overriding document
		environ  []string
		args     []string
		want     []string // substrings of the error
		wantKey  string   // key path of the *config.Error, if any
	}{
		{name: "missing file", file: missing, want: []string{missing}},
		{name: "unparsable file", document: "listen: [unclosed\n", want: []string{"pgowl.yaml"}},
		{name: "file that is not a mapping", document: "- a\n- b\n", want: []string{"pgowl.yaml"}},
		{name: "unknown nested key in the file", document: clusterYAML + "routing: {max_lag: 5s}\n",
			want: []string{`config: unknown key "routing.max_lag"`}, wantKey: "routing.max_lag"},
		{name: "unknown key in a list item of the file", document: "nodes: [{name: pg1, host: h}]\nusers: [{name: app, password: pw, extra: 1}]\n",
			want: []string{"users[0].extra"}, wantKey: "users[0].extra"},
		{name: "unknown top-level key in the file", document: clusterYAML + "proxy: {}\nport: 1\n",
			want: []string{`unknown key "port"`}, wantKey: "port"},
		{name: "unknown key with a null value in the file", document: clusterYAML + "routing: {max_lag: }\n",
			want: []string{`unknown key "routing.max_lag"`}, wantKey: "routing.max_lag"},
		{name: "unknown top-level key with a null value in the file", document: clusterYAML + "extra:\n",
			want: []string{`unknown key "extra"`}, wantKey: "extra"},
		{name: "invalid value in the file", document: clusterYAML + "routing: {standby_choice: fastest}\n",
			want: []string{"routing.standby_choice", "fastest"}, wantKey: "routing.standby_choice"},
		{name: "unknown environment variable", document: clusterYAML,
			environ: []string{"PGOWL_ROUTING_MAX_LAG=5s", "PGOWL_LISTEN=:1"}, want: []string{"PGOWL_ROUTING_MAX_LAG"}},
		{name: "environment variable for a section", document: clusterYAML,
			environ: []string{"PGOWL_ROUTING=x"}, want: []string{"PGOWL_ROUTING"}},
		{name: "invalid value from the environment", document: clusterYAML,
			environ: []string{"PGOWL_ROUTING_MAX_REPLICA_LAG=soon"}, want: []string{"routing.max_replica_lag", "soon"}, wantKey: "routing.max_replica_lag"},
		{name: "invalid JSON list from the environment", document: clusterYAML,
			environ: []string{"PGOWL_NODES={name: pg1}"}, want: []string{"PGOWL_NODES", "JSON list"}},
		{name: "unknown key in a JSON list item", document: clusterYAML,
			environ: []string{`PGOWL_NODES=[{"name":"pg1","host":"h","role":"primary"}]`}, want: []string{"nodes[0].role"}, wantKey: "nodes[0].role"},
		{name: "invalid value from a flag", document: clusterYAML,
			args: []string{"--pool.max_per_node=many"}, want: []string{"pool.max_per_node", "many"}, wantKey: "pool.max_per_node"},
		{name: "invalid bool from a flag", document: clusterYAML,
			args: []string{"--routing.notice=perhaps"}, want: []string{"routing.notice"}, wantKey: "routing.notice"},
		{name: "no nodes without a file", want: []string{"config: nodes:", "config: users:"}, wantKey: "nodes"},
		{name: "a guard that matches nothing", document: clusterYAML + "guards: [{name: ai, max_cost: 100}]\n",
			want: []string{"config: guards[0].match: matches nothing"}, wantKey: "guards[0].match"},
		{name: "a guard with a negative cost", document: clusterYAML + "guards: [{name: ai, max_cost: -1, match: {ai_comment: true}}]\n",
			want: []string{"config: guards[0].max_cost: -1 is negative"}, wantKey: "guards[0].max_cost"},
		{name: "an unknown key in a guard", document: clusterYAML + "guards: [{name: ai, max_cost: 1, match: {ai_comment: true}, busy: {max_sessions: 3}}]\n",
			want: []string{`config: unknown key "guards[0].busy.max_sessions"`}, wantKey: "guards[0].busy.max_sessions"},
		{name: "a guard from the environment", document: clusterYAML,
			environ: []string{`PGOWL_GUARDS=[{"name":"ai","max_cost":-3,"match":{"users":["app"]}}]`}, want: []string{"guards[0].max_cost"}, wantKey: "guards[0].max_cost"},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			file := test.file
			if file == "" && test.document != "" {
				file = writeFile(t, "pgowl.yaml", test.document)
			}
			cfg, err := loadConfig(file, parsedFlags(t, test.args...), test.environ)
			if err == nil {
				t.Fatalf("loadConfig accepted the configuration: %+v", cfg)
			}
			for _, want := range test.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
			var configErr *config.Error
			if test.wantKey != "" && (!errors.As(err, &configErr) || configErr.Key != test.wantKey) {
				t.Errorf("error %v is not a *config.Error for key %s", err, test.wantKey)
			}
		})
	}
}

func TestLoadConfigEnvironmentLists(t *testing.T) {
	environ := []string{
		`PGOWL_NODES=[{"name":"a","host":"db1"},{"name":"b","host":"db2","port":6000}]`,
		`PGOWL_USERS=[{"name":"app","password":"pw"},{"name":"ro","auth":"trust"}]`,
		`PGOWL_CLASSIFY_FUNCTIONS_READONLY=["public.lookup(integer)"]`,
		`PGOWL_CLASSIFY_FUNCTIONS_WRITES=["audit.touch(text)"]`,
		"PGOWL_CONFIG=/ignored/by/loadConfig.yaml",
		"pgowl_listen=lower-case names are not ours",
	}
	cfg, err := loadConfig("", nil, environ)
	if err != nil {
		t.Fatalf("loadConfig: %v", err)
	}
	want := config.Default()
	want.Nodes = []config.Node{{Name: "a", Host: "db1", Port: 5432}, {Name: "b", Host: "db2", Port: 6000}}
	want.Users = []config.User{{Name: "app", Password: "pw", Auth: config.AuthSCRAM}, {Name: "ro", Auth: config.AuthTrust}}
	want.Classify.Functions = config.ClassifyFunctions{Readonly: []string{"public.lookup(integer)"}, Writes: []string{"audit.touch(text)"}}
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("config from the environment:\n got %+v\nwant %+v", cfg, want)
	}
	// A list from the environment replaces the file's list as a whole.
	file := writeFile(t, "pgowl.yaml", clusterYAML)
	cfg, err = loadConfig(file, nil, environ[:1])
	if err != nil {
		t.Fatalf("loadConfig: %v", err)
	}
	if len(cfg.Nodes) != 2 || cfg.Nodes[0].Name != "a" || cfg.Users[0].Name != "app" {
		t.Fatalf("PGOWL_NODES should replace the file's nodes and keep its users: %+v %+v", cfg.Nodes, cfg.Users)
	}
}

func TestEveryScalarKeyHasFlagAndVariable(t *testing.T) {
	flags := parsedFlags(t)
	variables := map[string]string{}
	var environ, args []string
	for _, key := range config.Keys() {
		name := environmentName(key.Path)
		if other, taken := variables[name]; taken {
			t.Errorf("keys %s and %s share the variable %s", other, key.Path, name)
		}
		variables[name] = key.Path
		if key.List {
			if flags.Lookup(key.Path) != nil {
				t.Errorf("list key %s should have no flag", key.Path)
			}
			continue
		}
		flag := flags.Lookup(key.Path)
		if flag == nil {
			t.Errorf("scalar key %s has no flag", key.Path)
			continue
		}
		if flag.Usage == "" {
			t.Errorf("flag --%s has no usage text", key.Path)
		}
		environ = append(environ, name+"="+key.Default)
		args = append(args, "--"+key.Path+"="+key.Default)
	}
	if len(variables) < 30 {
		t.Fatalf("only %d keys; config.Keys looks incomplete", len(variables))
	}
	// Setting every key to its default, through each source, yields the defaults:
	// every variable and flag name is accepted and reaches a key of the right type.
	file := writeFile(t, "pgowl.yaml", clusterYAML)
	for source, load := range map[string]func() (config.Config, error){
		"environment": func() (config.Config, error) { return loadConfig(file, parsedFlags(t), environ) },
		"flags":       func() (config.Config, error) { return loadConfig(file, parsedFlags(t, args...), nil) },
	} {
		cfg, err := load()
		if err != nil {
			t.Fatalf("every key set to its default through the %s: %v", source, err)
		}
		if want := clusterConfig(); !reflect.DeepEqual(cfg, want) {
			t.Fatalf("every key set to its default through the %s:\n got %+v\nwant %+v", source, cfg, want)
		}
	}
}

func TestUnsetFlagsAndForeignFlagsDoNotOverride(t *testing.T) {
	flags := pflag.NewFlagSet("pgowl", pflag.ContinueOnError)
	addConfigFlags(flags)
	flags.Bool("verbose", false, "a flag that is not a configuration key")
	if err := flags.Parse([]string{"--verbose", "--log.format=console"}); err != nil {
		t.Fatal(err)
	}
	file := writeFile(t, "pgowl.yaml", clusterYAML+"log: {level: warn}\nrouting: {max_replica_lag: 9s}\n")
	cfg, err := loadConfig(file, flags, nil)
	if err != nil {
		t.Fatalf("loadConfig: %v", err)
	}
	if cfg.Log.Level != "warn" || cfg.Routing.MaxReplicaLag != 9*time.Second || cfg.Log.Format != "console" {
		t.Fatalf("unset flags overrode the file or the set flag was lost: %+v %+v", cfg.Log, cfg.Routing)
	}
}
