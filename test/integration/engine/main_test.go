//go:build integration

// Package engine_test runs the engine's executor against a private
// containerd (internal/localcri): PODSYNC_CONTAINERD=2 (default) or 1.6.
package engine_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"

	"github.com/podsync/podsync/internal/localcri"
)

// inst is the package's private containerd, started by TestMain.
var inst *localcri.Instance

// logger writes to stderr, which go test shows.
var logger = zap.New(zapcore.NewCore(
	zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()),
	zapcore.Lock(os.Stderr), zap.InfoLevel))

func TestMain(m *testing.M) {
	// No goroutine may outlive the tests; no library used here needs an
	// exception (klog's flush daemon runs only when klog writes files).
	goleak.VerifyTestMain(runner{m})
}

// runner wraps the tests with the instance's start and teardown, so that
// goleak checks after the teardown.
type runner struct{ m *testing.M }

func (r runner) Run() int {
	// k8s.io/cri-client logs every failed call through klog, including the
	// failures the tests provoke; the tests check the returned errors.
	klog.SetLogger(logr.Discard())
	flavour, err := localcri.FlavourFromEnv()
	if err != nil {
		logger.Error("bad flavour", zap.Error(err))
		return 1
	}
	repo, err := localcri.RepoDir()
	if err != nil {
		logger.Error("no repository", zap.Error(err))
		return 1
	}
	logDir := filepath.Join(repo, ".tmp", "logs")
	// The first start builds containerd v2.4.2 (about 2 minutes).
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	inst, err = localcri.Start(ctx, localcri.Options{Flavour: flavour, Logger: logger, LogDir: logDir})
	if err == nil {
		// Every test's crictl comes from here; install it once.
		_, err = localcri.EnsureCrictl(ctx, inst.ToolsDir())
	}
	cancel()
	if err != nil {
		logger.Error("FAIL: cannot start the private containerd these tests need; "+
			"they need root, Debian's containerd/runc/CNI/busybox packages (installed by apt-get when root) "+
			"and the Go module proxy for the first build", zap.Stringer("flavour", flavour), zap.Error(err))
		if inst != nil {
			tctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			_ = inst.Teardown(tctx)
			cancel()
		}
		return 1
	}
	logger.Info("private containerd ready",
		zap.Stringer("flavour", flavour), zap.String("run_id", inst.ID()),
		zap.String("endpoint", inst.Endpoint()), zap.String("crictl", inst.CrictlHint()),
		zap.String("stages", inst.Stages().String()))

	// A ^C or SIGTERM still tears the instance down.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case sig := <-sigs:
			logger.Warn("signal: tearing down", zap.Stringer("signal", sig))
			tctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if err := inst.Teardown(tctx); err != nil {
				logger.Error("teardown", zap.Error(err))
			}
			_ = removeCgroups(cgroupRoot())
			os.Exit(1)
		case <-done:
		}
	}()

	start := time.Now()
	code := r.m.Run()
	testsTook := time.Since(start)
	logger.Info("tests done", zap.Duration("duration", testsTook))

	signal.Stop(sigs)
	close(done)
	<-stopped
	tctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tstart := time.Now()
	if err := inst.Teardown(tctx); err != nil {
		logger.Error("FAIL: teardown left the machine unclean", zap.Error(err))
		code = 1
	}
	if err := removeCgroups(cgroupRoot()); err != nil {
		logger.Error("FAIL: pod cgroups left behind", zap.Error(err))
		code = 1
	}
	teardown := time.Since(tstart)
	logger.Info("private containerd torn down", zap.Duration("duration", teardown))
	// go test prints a passing package's output only with -v: keep the
	// timings in a file too.
	if f, err := os.OpenFile(filepath.Join(logDir, "integration-timings.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
		_, _ = fmt.Fprintf(f, "%s package=test/integration/engine flavour=%s run=%s exit=%d start: %s; tests %s; teardown %s\n",
			time.Now().UTC().Format(time.RFC3339), flavour, inst.ID(), code, inst.Stages(),
			testsTook.Round(time.Millisecond), teardown.Round(time.Millisecond))
		_ = f.Close()
	}
	if code == 0 {
		_ = os.Remove(inst.LogPath())
	} else {
		logger.Info("containerd log kept", zap.String("path", inst.LogPath()))
	}
	return code
}
