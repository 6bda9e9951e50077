// Command podsync-vk puts podsync nodes under a Kubernetes control plane:
// it registers each podsyncd it is given as a Node and runs the pods the
// scheduler binds there on it, through Virtual Kubelet's node library.
// See internal/vk for the flags and the config file.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/podsync/podsync/internal/vk"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := vk.Main(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}
