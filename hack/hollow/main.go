package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/podsync/podsync/internal/testing/hollow"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := hollow.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
