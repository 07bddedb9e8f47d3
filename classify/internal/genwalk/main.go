package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/pgowl/pgowl/classify/internal/walksource"
)

func main() {
	out := flag.String("out", "walk_generated.go", "file to write")
	flag.Parse()
	source, err := walksource.Generate()
	if err == nil {
		err = os.WriteFile(*out, source, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "genwalk:", err)
		os.Exit(1)
	}
}
