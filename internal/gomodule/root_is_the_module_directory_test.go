package gomodule

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// From inside the module, Root is the directory that holds its go.mod, which names the module.
func TestRootIsTheModuleDirectory(t *testing.T) {
	root, err := Root(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatalf("Root %s: %v", root, err)
	}
	if !strings.HasPrefix(string(gomod), "module github.com/pgowl/pgowl\n") {
		t.Errorf("Root %s holds the go.mod of another module: %.60q", root, gomod)
	}
}
