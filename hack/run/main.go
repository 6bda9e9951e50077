package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/podsync/podsync/client"
	"github.com/podsync/podsync/internal/testing/localcri"
)

func main() {
	os.Exit(run())
}

// runner is one `make run`.
type runner struct {
	repo   string
	bin    string // .tmp/bin
	dir    string // .tmp/run: socket, podsyncd's root and logs
	once   bool
	out    io.Writer
	tty    bool
	inst   *localcri.Instance
	daemon *exec.Cmd
	exited chan struct{} // closed when podsyncd has exited
	api    *client.Client
	base   *snapshot
}

func (r *runner) address() string { return "unix://" + filepath.Join(r.dir, "podsync.sock") }
func (r *runner) ctl() string     { return filepath.Join(r.bin, "podsyncctl") }

func run() int {
	var flavour string
	r := &runner{out: os.Stdout}
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.BoolVar(&r.once, "once", false, "run the examples, clean up and exit (non-zero if anything failed)")
	fs.StringVar(&flavour, "containerd", os.Getenv("PODSYNC_CONTAINERD"), `containerd flavour: "2" (v2.4.2, the default) or "1.6" (Debian's)`)
	if err := fs.Parse(os.Args[1:]); err != nil {
		return 2
	}
	f, err := localcri.ParseFlavour(flavour)
	if flavour == "" {
		f, err = localcri.FlavourFromEnv()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "run:", err)
		return 2
	}
	r.tty = isTerminal(os.Stdout)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	setupErr := r.setup(ctx, f)
	var demoErr error
	if setupErr == nil {
		demoErr = r.demo(ctx)
		if demoErr == nil && !r.once {
			r.nextSteps()
		}
		switch {
		case demoErr != nil && !r.once && ctx.Err() == nil:
			r.say("something failed (see above); podsync stays up for a look — press ^C to clean up")
			<-ctx.Done()
		case !r.once && ctx.Err() == nil:
			r.say("press ^C to delete the pods, stop podsyncd and containerd and clean up")
			<-ctx.Done()
		}
	}
	if ctx.Err() != nil {
		r.printf("\n")
		r.say("stopping: cleaning up (a second ^C is ignored)")
	}
	cleanupErr := r.cleanup(setupErr == nil && demoErr == nil)
	err = errors.Join(setupErr, demoErr, cleanupErr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "run: %v\n", err)
		if _, serr := os.Stat(r.dir); serr == nil {
			fmt.Fprintf(os.Stderr, "run: logs kept in %s\n", r.dir)
		}
		return 1
	}
	r.say("done: nothing left behind; the logs stay until the next run: %s", r.keptLogs())
	return 0
}

// say prints a progress line.
func (r *runner) say(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if r.tty {
		msg = "\x1b[1m" + msg + "\x1b[0m"
	}
	r.printf("==> %s\n", msg)
}

// printf prints to the run's output; a failed write to stdout is not
// worth failing the run for.
func (r *runner) printf(format string, args ...any) {
	_, _ = fmt.Fprintf(r.out, format, args...)
}

// setup builds the binaries and starts containerd and podsyncd.
func (r *runner) setup(ctx context.Context, f localcri.Flavour) error {
	if os.Geteuid() != 0 {
		return errors.New("make run needs root (it starts containerd and pods): run it as root")
	}
	var err error
	if r.repo, err = localcri.RepoDir(); err != nil {
		return err
	}
	r.bin = filepath.Join(r.repo, ".tmp", "bin")
	r.dir = filepath.Join(r.repo, ".tmp", "run")
	if len(r.address()) > 107+len("unix://") {
		return fmt.Errorf("socket path %s is too long for a unix socket: use a shorter checkout path", r.address())
	}
	if err := r.removeStale(ctx); err != nil {
		return err
	}
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return fmt.Errorf("create run dir: %w", err)
	}
	r.base = takeSnapshot()

	r.say("building podsyncd and podsyncctl into .tmp/bin")
	for _, cmd := range []string{"podsyncd", "podsyncctl"} {
		if err := r.goBuild(ctx, cmd); err != nil {
			return err
		}
	}

	r.say("starting a private %s (the first run installs packages and builds containerd: 5-10 minutes on 2 cores)", f)
	start := time.Now()
	stopTicking := r.tick(start, "still starting containerd")
	r.inst, err = localcri.Start(ctx, localcri.Options{Flavour: f, Logger: r.progressLogger(), RepoDir: r.repo, LogDir: r.dir})
	stopTicking()
	if err != nil {
		return fmt.Errorf("start containerd: %w", err)
	}
	r.say("containerd ready in %s: %s (images %s, %s)", time.Since(start).Round(100*time.Millisecond), r.inst.Endpoint(), localcri.BusyboxImage, localcri.PauseImage)
	if err := writeState(r.dir, r.inst.ID(), 0); err != nil {
		return err
	}

	r.say("starting podsyncd on %s (log: .tmp/run/podsyncd.log)", r.address())
	if err := r.startDaemon(); err != nil {
		return err
	}
	if r.api, err = client.New(ctx, r.address()); err != nil {
		return err
	}
	// Wait until podsyncd serves and its runtime answers.
	if err := r.podsyncctl(ctx, false, "health", "--wait", "60s"); err != nil {
		return fmt.Errorf("podsyncd did not become healthy: %w (see %s)", err, filepath.Join(r.dir, "podsyncd.log"))
	}
	return nil
}

// goBuild builds ./cmd/name into .tmp/bin.
func (r *runner) goBuild(ctx context.Context, name string) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = "/usr/local/go/bin/go"
	}
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", filepath.Join(r.bin, name), "./cmd/"+name)
	cmd.Dir = r.repo
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/%s: %w\n%s", name, err, out)
	}
	return nil
}

func (r *runner) startDaemon() error {
	logf, err := os.OpenFile(filepath.Join(r.dir, "podsyncd.log"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("open podsyncd log: %w", err)
	}
	defer func() { _ = logf.Close() }()
	r.daemon = exec.Command(filepath.Join(r.bin, "podsyncd"),
		"--listen", r.address(),
		"--runtime-endpoint", r.inst.Endpoint(),
		"--root-dir", filepath.Join(r.dir, "root"),
		"--pod-log-dir", filepath.Join(r.dir, "pods"),
		// The pods' cgroups under the instance's own root: never another
		// agent's on the host (the kubelet's, another make run's), and
		// removed with the instance.
		"--cgroup-root", r.inst.CgroupRoot(),
		"--log-format", "console",
		// The default Pod Security level, baseline, refuses host ports;
		// examples/web.yaml publishes 8080, so the run opens that one.
		"--allowed-host-ports", "8080",
		"--shutdown-timeout", "10s")
	r.daemon.Dir = r.repo
	r.daemon.Stdout, r.daemon.Stderr = logf, logf
	// Its own process group: the ^C meant for make reaches this program,
	// which deletes the pods before it stops podsyncd.
	r.daemon.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := r.daemon.Start(); err != nil {
		return fmt.Errorf("start podsyncd: %w", err)
	}
	r.exited = make(chan struct{})
	go func() {
		_ = r.daemon.Wait()
		close(r.exited)
	}()
	return writeState(r.dir, r.inst.ID(), r.daemon.Process.Pid)
}

// podsyncctl runs .tmp/bin/podsyncctl against the run's podsyncd; shown
// prints the command first and its output, as a user would see them.
func (r *runner) podsyncctl(ctx context.Context, shown bool, args ...string) error {
	cmd := exec.CommandContext(ctx, r.ctl(), args...)
	cmd.Dir = r.repo
	cmd.Env = append(os.Environ(), "PODSYNC_ADDRESS="+r.address())
	if shown {
		line := "$ podsyncctl " + strings.Join(args, " ")
		if r.tty {
			line = "\x1b[36m" + line + "\x1b[0m"
		}
		r.printf("\n%s\n", line)
		cmd.Stdout, cmd.Stderr = r.out, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("podsyncctl %s: %w", strings.Join(args, " "), err)
		}
		return nil
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("podsyncctl %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// tickEvery is how often a slow step says it is still going.
const tickEvery = 30 * time.Second

// tick says "what: 1m30s so far" every tickEvery from start until the
// returned func is called.
func (r *runner) tick(start time.Time, what string) (stop func()) {
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		t := time.NewTicker(tickEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				r.say("%s: %s so far", what, time.Since(start).Round(time.Second))
			}
		}
	}()
	return func() {
		close(done)
		<-ended
	}
}

// progressLogger shows localcri's slow steps (its info entries: the
// packages it installs, the containerd build, the image build) as the
// run's own lines, and its warnings and errors on stderr.
func (r *runner) progressLogger() *zap.Logger {
	return zap.New(zapcore.NewTee(newLogger().Core(), sayCore{r: r}))
}

// sayCore writes info entries as "==>   message" lines. "containerd
// instance ready" and later entries are left out: the run says that
// itself.
type sayCore struct{ r *runner }

func (c sayCore) Enabled(l zapcore.Level) bool      { return l == zapcore.InfoLevel }
func (c sayCore) With([]zapcore.Field) zapcore.Core { return c }
func (c sayCore) Sync() error                       { return nil }

func (c sayCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) && !strings.HasPrefix(e.Message, "containerd instance") {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c sayCore) Write(e zapcore.Entry, _ []zapcore.Field) error {
	c.r.say("  %s", e.Message)
	return nil
}

// newLogger logs localcri's warnings and errors to stderr.
func newLogger() *zap.Logger {
	enc := zap.NewDevelopmentEncoderConfig()
	enc.EncodeLevel = zapcore.CapitalLevelEncoder
	return zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.Lock(os.Stderr), zap.WarnLevel))
}

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0 && os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb"
}
