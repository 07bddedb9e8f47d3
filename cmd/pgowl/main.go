// Command pgowl is a PostgreSQL proxy that routes each statement to the node
// that should run it: reads to a standby within the allowed replication lag,
// writes and anything whose effects are unknown to the primary.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCommand().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgowl:", err)
		var exit *exitCode
		if errors.As(err, &exit) {
			os.Exit(exit.code)
		}
		os.Exit(1)
	}
}

// exitCode carries a specific process exit status.
type exitCode struct {
	code int
	err  error
}

func (e *exitCode) Error() string { return e.err.Error() }
func (e *exitCode) Unwrap() error { return e.err }

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "pgowl",
		Short:         "A PostgreSQL proxy that routes each statement by what it does and by the nodes' roles and lag",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newServeCommand(), newDemoCommand(), newVersionCommand())
	root.AddCommand(newExplainCommand())
	return root
}
