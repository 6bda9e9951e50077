package localcritest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"

	"github.com/podsync/podsync/internal/testing/localcri"
)

// Config says what a test package needs around its private containerd.
type Config struct {
	// Package names the package in the timings log, such as
	// "test/integration/engine".
	Package string
	// Started is called once the instance answers CRI, before any test;
	// an error fails the run (after teardown). Required: it is how the
	// package gets its instance.
	Started func(*localcri.Instance) error
	// Finished, if set, runs after the tests and before teardown, also
	// after a signal; an error fails the run (for example a check that
	// nothing was left behind).
	Finished func() error
	// Logger defaults to Logger().
	Logger *zap.Logger
	// DefaultRoute gives the instance's pods a default route
	// (localcri.Options.DefaultRoute), as a cluster's pod network needs.
	DefaultRoute bool
}

// Logger is a console logger to stderr, which go test shows.
func Logger() *zap.Logger {
	return zap.New(zapcore.NewCore(
		zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()),
		zapcore.Lock(os.Stderr), zap.InfoLevel))
}

// Main starts the instance (flavour from PODSYNC_CONTAINERD), runs the
// tests, tears the instance down, verifies no goroutine leaked and exits.
// A runtime that cannot start fails the run: integration tests never skip.
func Main(m *testing.M, cfg Config) {
	if cfg.Logger == nil {
		cfg.Logger = Logger()
	}
	// No goroutine may outlive the tests; no library used here needs an
	// exception (klog's flush daemon runs only when klog writes files).
	goleak.VerifyTestMain(runner{m: m, cfg: cfg})
}

// runner wraps the tests with the instance's start and teardown, so that
// goleak checks after the teardown.
type runner struct {
	m   *testing.M
	cfg Config
}

func (r runner) Run() int {
	log := r.cfg.Logger
	// k8s.io/cri-client logs every failed call through klog, including the
	// failures the tests provoke; the tests check the returned errors.
	klog.SetLogger(logr.Discard())
	flavour, err := localcri.FlavourFromEnv()
	if err != nil {
		log.Error("bad flavour", zap.Error(err))
		return 1
	}
	repo, err := localcri.RepoDir()
	if err != nil {
		log.Error("no repository", zap.Error(err))
		return 1
	}
	logDir := filepath.Join(repo, ".tmp", "logs")
	// The first start builds containerd v2.4.2 (5 to 10 minutes on 2 cores):
	// the timeout leaves room for it.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	inst, err := localcri.Start(ctx, localcri.Options{Flavour: flavour, Logger: log, LogDir: logDir, DefaultRoute: r.cfg.DefaultRoute})
	cancel()
	if err != nil {
		log.Error("FAIL: cannot start the private containerd these tests need; "+
			"they need root, Debian's containerd/runc/CNI/busybox packages (installed by apt-get when root) "+
			"and the Go module proxy for the first build", zap.Stringer("flavour", flavour), zap.Error(err))
		return 1
	}
	teardown := func() error {
		tctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		return inst.Teardown(tctx)
	}
	if err := r.cfg.Started(inst); err != nil {
		log.Error("FAIL: test package setup", zap.Error(err))
		_ = teardown()
		return 1
	}
	log.Info("private containerd ready",
		zap.Stringer("flavour", flavour), zap.String("run_id", inst.ID()),
		zap.String("endpoint", inst.Endpoint()), zap.String("crictl", inst.CrictlHint()),
		zap.String("stages", inst.Stages().String()))

	// A ^C or SIGTERM still tears the instance down.
	stopWatching := teardownOnSignal(log, r.cfg.Finished, teardown)

	start := time.Now()
	code := r.m.Run()
	testsTook := time.Since(start)
	log.Info("tests done", zap.Duration("duration", testsTook))

	stopWatching()
	if r.cfg.Finished != nil {
		if err := r.cfg.Finished(); err != nil {
			log.Error("FAIL: after the tests", zap.Error(err))
			code = 1
		}
	}
	tstart := time.Now()
	if err := teardown(); err != nil {
		log.Error("FAIL: teardown left the machine unclean", zap.Error(err))
		code = 1
	}
	teardownTook := time.Since(tstart)
	log.Info("private containerd torn down", zap.Duration("duration", teardownTook))
	r.writeTimings(logDir, inst, code, testsTook, teardownTook)
	if code == 0 {
		_ = os.Remove(inst.LogPath())
	} else {
		log.Info("containerd log kept", zap.String("path", inst.LogPath()))
	}
	return code
}
