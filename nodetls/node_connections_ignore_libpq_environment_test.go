package nodetls

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgowl/pgowl/config"
)

// TestNodeConnectionsIgnoreLibpqEnvironment: pgconn, as libpq, fills what a connection string
// leaves out from PG* environment variables and from ~/.postgresql. pgowl's node connections must
// depend on its configuration alone: with PGTARGETSESSIONATTRS=read-write every standby would
// look down to the monitor, and a root.crt or client certificate under the home directory would
// replace tls.nodes' "system roots" and "no client certificate". (Not t.Parallel: it sets the
// environment.)
func TestNodeConnectionsIgnoreLibpqEnvironment(t *testing.T) {
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".postgresql"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"root.crt", "postgresql.crt", "postgresql.key"} {
		// Not PEM: any attempt to use them fails the parse.
		if err := os.WriteFile(filepath.Join(home, ".postgresql", name), []byte("not a certificate\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("HOME", home)
	t.Setenv("PGTARGETSESSIONATTRS", "read-write")
	for _, mode := range []string{config.SSLPrefer, config.SSLRequire} {
		t.Run(mode+"_from_home", func(t *testing.T) {
			cfg, err := pgconn.ParseConfig(Settings{SSLMode: mode}.ConnString(Param{Key: "host", Value: "127.0.0.1"}, Param{Key: "port", Value: "5432"}))
			if err != nil {
				t.Fatalf("a node connection read ~/.postgresql: %v", err)
			}
			if cfg.ValidateConnect != nil {
				t.Error("PGTARGETSESSIONATTRS=read-write reached a node connection: standbys would be refused")
			}
			if cfg.TLSConfig == nil || cfg.TLSConfig.RootCAs != nil || len(cfg.TLSConfig.Certificates) != 0 {
				t.Errorf("TLS settings not from tls.nodes alone: %+v", cfg.TLSConfig)
			}
		})
	}
	t.Run("from_the_environment", func(t *testing.T) {
		t.Setenv("PGSSLROOTCERT", filepath.Join(home, "missing-root.crt"))
		t.Setenv("PGSSLCERT", filepath.Join(home, "missing.crt"))
		t.Setenv("PGSSLKEY", filepath.Join(home, "missing.key"))
		if _, err := pgconn.ParseConfig(Settings{SSLMode: config.SSLRequire}.ConnString(Param{Key: "host", Value: "127.0.0.1"}, Param{Key: "port", Value: "5432"})); err != nil {
			t.Fatalf("a node connection read PGSSLROOTCERT, PGSSLCERT or PGSSLKEY: %v", err)
		}
	})
	t.Run("session_settings_from_the_environment", func(t *testing.T) {
		// PGTZ and PGOPTIONS would set every node connection's time zone and options: a
		// client's backend would run with pgowl's, not its own.
		t.Setenv("PGTZ", "Pacific/Chatham")
		t.Setenv("PGOPTIONS", "-c statement_timeout=1")
		cfg, err := pgconn.ParseConfig(Settings{}.ConnString(Param{Key: "host", Value: "127.0.0.1"}, Param{Key: "application_name", Value: "pgowl"}))
		if err != nil {
			t.Fatal(err)
		}
		Settings{}.Apply(cfg)
		if _, ok := cfg.RuntimeParams["timezone"]; ok {
			t.Error("PGTZ reached a node connection")
		}
		if _, ok := cfg.RuntimeParams["options"]; ok {
			t.Error("PGOPTIONS reached a node connection")
		}
		if cfg.RuntimeParams["application_name"] != "pgowl" {
			t.Errorf("the connection string's own application_name was dropped: %v", cfg.RuntimeParams)
		}
	})
	t.Run("configured_files_still_apply", func(t *testing.T) {
		_, err := pgconn.ParseConfig(Settings{SSLMode: config.SSLVerifyFull, CAFile: filepath.Join(home, "configured-ca.crt")}.ConnString(Param{Key: "host", Value: "127.0.0.1"}))
		if err == nil {
			t.Error("tls.nodes.ca_file naming a missing file parsed: the configured file was not used")
		}
	})
}
