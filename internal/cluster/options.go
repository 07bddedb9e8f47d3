package cluster

import (
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"
)

// DefaultBinDir is where Debian and Ubuntu install the PostgreSQL 15 server binaries.
const DefaultBinDir = "/usr/lib/postgresql/15/bin"

// BinDirEnv names the environment variable that overrides DefaultBinDir.
const BinDirEnv = "PGOWL_PG_BIN"

// DefaultHBAMethod is the pg_hba.conf method used for non-superuser TCP connections.
const DefaultHBAMethod = "scram-sha-256"

// DefaultWaitTimeout bounds every wait for an observed state when the caller's context allows longer.
const DefaultWaitTimeout = time.Minute

// Superuser is the database superuser every cluster is created with.
const Superuser = "postgres"

// requiredBinaries are the tools Start needs from the bin directory.
var requiredBinaries = []string{"initdb", "pg_ctl", "pg_basebackup", "postgres"}

// User is a login role created on the primary and replicated to the standbys; it may
// create objects in schema public of database postgres.
type User struct {
	// Name is the role name.
	Name string
	// Password is the role's password, stored with the server's default hashing.
	Password string
}

// Options configures a cluster started by Start.
type Options struct {
	// Standbys is the number of streaming standbys next to the primary (0 or more).
	Standbys int
	// BinDir holds initdb, pg_ctl and friends; empty means $PGOWL_PG_BIN, then DefaultBinDir.
	BinDir string
	// BaseDir is the parent of the cluster's temporary directory; empty means os.TempDir().
	BaseDir string
	// Settings are extra postgresql.conf parameters for every node; they override the defaults.
	Settings map[string]string
	// Users are login roles created on the primary.
	Users []User
	// Logf receives progress messages; nil discards them.
	Logf func(format string, args ...any)
	// HBAMethod authenticates non-superuser TCP connections; empty means DefaultHBAMethod.
	HBAMethod string
}

// ResolvedBinDir returns the bin directory Start will use for these options.
func (o Options) ResolvedBinDir() string {
	if o.BinDir != "" {
		return o.BinDir
	}
	if fromEnv := os.Getenv(BinDirEnv); fromEnv != "" {
		return fromEnv
	}
	return DefaultBinDir
}

// CheckBinaries returns an error with CodeBinariesMissing unless every needed PostgreSQL tool exists.
func CheckBinaries(opts Options) error {
	binDir := opts.ResolvedBinDir()
	var missing []string
	for _, name := range requiredBinaries {
		info, err := os.Stat(binDir + "/" + name)
		if err != nil || info.IsDir() || info.Mode().Perm()&0o111 == 0 {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return newError(CodeBinariesMissing, "",
			fmt.Sprintf("PostgreSQL binaries %s not found in %s (set %s or Options.BinDir)",
				strings.Join(missing, ", "), binDir, BinDirEnv), nil)
	}
	return nil
}

// allowedHBAMethods are the pg_hba.conf methods that make sense for a local test cluster.
var allowedHBAMethods = map[string]bool{
	"trust": true, "reject": true, "scram-sha-256": true, "md5": true, "password": true,
}

// settingNamePattern matches a PostgreSQL parameter name, including custom "ext.name" ones.
var settingNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)

// resolved returns a copy of the options with defaults filled in, or an error if they are invalid.
func (o Options) resolved() (Options, error) {
	invalid := func(format string, args ...any) (Options, error) {
		return Options{}, newError(CodeInvalidOptions, "", fmt.Sprintf(format, args...), nil)
	}
	if o.Standbys < 0 {
		return invalid("Standbys must be 0 or more, got %d", o.Standbys)
	}
	o.BinDir = o.ResolvedBinDir()
	if o.BaseDir == "" {
		o.BaseDir = os.TempDir()
	}
	if o.HBAMethod == "" {
		o.HBAMethod = DefaultHBAMethod
	}
	if !allowedHBAMethods[o.HBAMethod] {
		return invalid("HBAMethod %q is not one of trust, reject, scram-sha-256, md5, password", o.HBAMethod)
	}
	for name := range o.Settings {
		if !settingNamePattern.MatchString(name) {
			return invalid("setting name %q is not a PostgreSQL parameter name", name)
		}
	}
	seen := map[string]bool{}
	for _, user := range o.Users {
		if user.Name == "" {
			return invalid("a user has an empty name")
		}
		if user.Name == Superuser {
			return invalid("user %q already exists as the superuser", user.Name)
		}
		if seen[user.Name] {
			return invalid("user %q is listed twice", user.Name)
		}
		seen[user.Name] = true
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return o, nil
}

// baseSettings returns the parameters every node gets before Options.Settings.
func baseSettings(standbys int) map[string]string {
	return map[string]string{
		"listen_addresses":             "127.0.0.1",
		"shared_preload_libraries":     "pg_stat_statements",
		"pg_stat_statements.track":     "all",
		"wal_level":                    "replica",
		"hot_standby":                  "on",
		"hot_standby_feedback":         "on",
		"max_wal_senders":              fmt.Sprint(standbys + 10),
		"max_replication_slots":        fmt.Sprint(standbys + 10),
		"wal_keep_size":                "128MB",
		"wal_receiver_status_interval": "1s",
		"log_line_prefix":              "%m [%p] %q%u@%d ",
		"log_min_messages":             "warning",
		"fsync":                        "off",
		"synchronous_commit":           "off",
		"max_connections":              "200",
		"logging_collector":            "off",
	}
}

// renderSettings renders node-specific and shared settings as a postgresql.conf include file.
// Later lines win in postgresql.conf, so Options.Settings follow the defaults and the
// node-specific lines (port, socket directory, cluster_name) come last.
func renderSettings(defaults, overrides map[string]string, node nodeSettings) string {
	var b strings.Builder
	b.WriteString("# Written by the pgowl integration cluster harness.\n")
	writeSorted := func(settings map[string]string) {
		names := make([]string, 0, len(settings))
		for name := range settings {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			fmt.Fprintf(&b, "%s = %s\n", name, quoteConfValue(settings[name]))
		}
	}
	writeSorted(defaults)
	b.WriteString("# Options.Settings\n")
	writeSorted(overrides)
	b.WriteString("# node\n")
	writeSorted(map[string]string{
		"port":                    fmt.Sprint(node.Port),
		"unix_socket_directories": node.SocketDir,
		"cluster_name":            node.Name,
	})
	return b.String()
}

// nodeSettings are the per-node parameters of renderSettings.
type nodeSettings struct {
	Name      string
	Port      int
	SocketDir string
}

// renderHBA renders pg_hba.conf: local trust, TCP trust for the superuser, method for the rest.
func renderHBA(method string) string {
	lines := []string{
		"# Written by the pgowl integration cluster harness.",
		"# TYPE  DATABASE     USER      ADDRESS        METHOD",
		"local   all          all                      trust",
		"local   replication  all                      trust",
		"host    all          postgres  127.0.0.1/32   trust",
		"host    all          postgres  ::1/128        trust",
		"host    replication  postgres  127.0.0.1/32   trust",
		"host    replication  postgres  ::1/128        trust",
		"host    all          all       127.0.0.1/32   " + method,
		"host    all          all       ::1/128        " + method,
		"host    replication  all       127.0.0.1/32   " + method,
		"host    replication  all       ::1/128        " + method,
	}
	return strings.Join(lines, "\n") + "\n"
}

// quoteLiteral quotes text as a single-quoted SQL or postgresql.conf string.
func quoteLiteral(text string) string {
	return "'" + strings.ReplaceAll(text, "'", "''") + "'"
}

// quoteConfValue quotes text as a postgresql.conf string value, which also unescapes backslashes.
func quoteConfValue(text string) string {
	text = strings.ReplaceAll(text, `\`, `\\`)
	return "'" + strings.ReplaceAll(text, "'", "''") + "'"
}

// quoteIdentifier quotes text as a double-quoted SQL identifier.
func quoteIdentifier(text string) string {
	return `"` + strings.ReplaceAll(text, `"`, `""`) + `"`
}
