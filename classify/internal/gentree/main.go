package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/pgowl/pgowl/classify/internal/treesource"
)

func main() {
	dir := flag.String("dir", ".", "directory to write walk_generated.go, decode_generated.go and decodejson_generated.go into")
	flag.Parse()
	for _, file := range []struct {
		name     string
		generate func() ([]byte, error)
	}{
		{"walk_generated.go", treesource.Walk},
		{"decode_generated.go", treesource.Decode},
		{"decodejson_generated.go", treesource.DecodeJSON},
	} {
		source, err := file.generate()
		if err == nil {
			err = os.WriteFile(filepath.Join(*dir, file.name), source, 0o644)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "gentree:", file.name+":", err)
			os.Exit(1)
		}
	}
}
