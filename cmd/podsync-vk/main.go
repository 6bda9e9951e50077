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
