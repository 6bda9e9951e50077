// Command podsyncd is the podsync daemon: it serves the podsync.v1 API on
// a node and keeps the pods it is given converged on the node's CRI
// runtime. See internal/daemon for the flags and the config file.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/podsync/podsync/internal/daemon"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := daemon.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
