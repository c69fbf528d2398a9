// Command nvstripe is the single nvstripe binary: the CLI, the daemons
// (agent, controller, target) and the one-process demo. All logic lives in
// package cli and the libraries; main only wires the process to it.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/nvstripe/nvstripe/cmd/nvstripe/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first signal starts an orderly shutdown; a second one gets the
	// default action and ends the process, however that shutdown is doing.
	context.AfterFunc(ctx, stop)
	err := cli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "nvstripe:", err)
	}
	os.Exit(cli.ExitCode(err))
}
