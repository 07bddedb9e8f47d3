package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/pgowl/pgowl/config"
)

// The report says pgowl runs "with its default configuration but for its log level". By default
// the admin listener is on, so pgowl has an observer (proxy/run.go: admin.listen or admin.users
// set) that records every routed unit and reads its labels (fingerprint, normalised text: two more
// runs of the parser, proxy.labelsRead). The pgowl process (-process, -baseline-binary) must do
// that work too, as the pgowl in this process (config.Default()) does.
func TestTheProcessPgowlRecordsUnitsAsItsDefaultConfigurationDoes(t *testing.T) {
	dir := t.TempDir()
	kept := filepath.Join(dir, "kept.yaml")
	fake := filepath.Join(dir, "fake-pgowl")
	// Called as: fake serve --config PATH. Keep the configuration, then exit at start.
	script := "#!/bin/sh\ncp \"$3\" " + kept + "\nexit 1\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	nodes := []config.Node{{Name: "pg1", Host: "127.0.0.1", Port: 5432}}
	if _, err := startPgowlBinary(ctx, nodes, pgowlLog{}, fake); err == nil {
		t.Fatal("the fake pgowl started")
	}
	data, err := os.ReadFile(kept)
	if err != nil {
		t.Fatal(err)
	}
	var settings map[string]any
	if err := yaml.Unmarshal(data, &settings); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Decode(settings)
	if err != nil {
		t.Fatal(err)
	}
	def := config.Default()
	observed := func(c config.Config) bool { return c.Admin.Listen != "" || len(c.Admin.Users) > 0 }
	if observed(cfg) != observed(def) || cfg.Admin.HistorySize != def.Admin.HistorySize {
		t.Errorf("the pgowl process runs with admin %+v; by default (and in this process) admin is %+v: "+
			"with no observer it neither records units nor computes their labels", cfg.Admin, def.Admin)
	}
}
