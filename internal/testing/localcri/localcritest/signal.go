package localcritest

import (
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap"
)

// teardownOnSignal watches for SIGINT and SIGTERM until the returned func
// is called: on a signal it runs finished (if set) and teardown, and exits
// 1. The returned func stops watching and returns once the watcher has
// ended.
func teardownOnSignal(log *zap.Logger, finished, teardown func() error) (stop func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case sig := <-sigs:
			log.Warn("signal: tearing down", zap.Stringer("signal", sig))
			if finished != nil {
				_ = finished()
			}
			if err := teardown(); err != nil {
				log.Error("teardown", zap.Error(err))
			}
			os.Exit(1)
		case <-done:
		}
	}()
	return func() {
		signal.Stop(sigs)
		close(done)
		<-stopped
	}
}
