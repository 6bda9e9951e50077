package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/podsync/podsync/internal/testing/localcri"
)

// state is what up leaves in <state-dir>/state.json for status and down.
type state struct {
	HelperPID int              `json:"helperPid"`
	Ready     bool             `json:"ready"`
	Error     string           `json:"error,omitempty"`
	ID        string           `json:"id,omitempty"`
	Flavour   localcri.Flavour `json:"flavour,omitempty"`
	Endpoint  string           `json:"endpoint,omitempty"`
	Crictl    string           `json:"crictl,omitempty"`
	Registry  string           `json:"registry,omitempty"`
	LogPath   string           `json:"logPath,omitempty"`
	Stages    string           `json:"stages,omitempty"`
}

type config struct {
	toolsDir   string
	stateDir   string
	foreground bool
	crictl     bool
}

func main() {
	os.Exit(run())
}

func run() int {
	var cfg config
	fs := flag.NewFlagSet("localcri", flag.ContinueOnError)
	fs.StringVar(&cfg.stateDir, "state-dir", "", "directory of the state file and logs (default <repo>/.tmp/localcri)")
	fs.BoolVar(&cfg.foreground, "foreground", false, "up: own the instance in this process until SIGINT or SIGTERM")
	fs.BoolVar(&cfg.crictl, "crictl", true, "up: install crictl into <repo>/.tmp/bin if missing")
	fs.Usage = func() {
		_, _ = fmt.Fprintf(fs.Output(), "usage: localcri [flags] up|down|status|gc\n\nflags:\n")
		fs.PrintDefaults()
	}
	// Flags may come before or after the command.
	args := os.Args[1:]
	var cmd string
	var rest []string
	for _, a := range args {
		if cmd == "" && !strings.HasPrefix(a, "-") {
			cmd = a
			continue
		}
		rest = append(rest, a)
	}
	if err := fs.Parse(rest); err != nil {
		return 2
	}
	repo, err := localcri.RepoDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, "localcri:", err)
		return 1
	}
	cfg.toolsDir = filepath.Join(repo, ".tmp")
	if cfg.stateDir == "" {
		cfg.stateDir = filepath.Join(cfg.toolsDir, "localcri")
	}
	switch cmd {
	case "up":
		if cfg.foreground {
			err = serve(cfg, true)
		} else {
			err = up(cfg)
		}
	case "serve":
		err = serve(cfg, false)
	case "down":
		err = down(cfg)
	case "status":
		err = status(cfg)
	case "gc":
		err = gc()
	default:
		fs.Usage()
		return 2
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "localcri:", err)
		return 1
	}
	return 0
}

func newLogger() *zap.Logger {
	enc := zap.NewDevelopmentEncoderConfig()
	enc.EncodeLevel = zapcore.CapitalLevelEncoder
	core := zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.Lock(os.Stderr), zap.InfoLevel)
	return zap.New(core)
}

func statePath(cfg config) string { return filepath.Join(cfg.stateDir, "state.json") }

func readState(cfg config) (*state, error) {
	b, err := os.ReadFile(statePath(cfg))
	if err != nil {
		return nil, err
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("parse %s: %w", statePath(cfg), err)
	}
	return &st, nil
}

func writeState(cfg config, st *state) error {
	if err := os.MkdirAll(cfg.stateDir, 0o755); err != nil {
		return fmt.Errorf("create state dir: %w", err)
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("encode state: %w", err)
	}
	tmp := statePath(cfg) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	if err := os.Rename(tmp, statePath(cfg)); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	return nil
}

func printState(st *state) {
	fmt.Printf("CRI endpoint: %s\n", st.Endpoint)
	fmt.Printf("crictl:       %s\n", st.Crictl)
	fmt.Printf("registry:     %s (plain HTTP; also mirrors registry.local)\n", st.Registry)
	fmt.Printf("flavour:      %s\n", st.Flavour)
	fmt.Printf("run id:       %s\n", st.ID)
	fmt.Printf("helper pid:   %d\n", st.HelperPID)
	fmt.Printf("containerd log: %s\n", st.LogPath)
	fmt.Printf("images:       %s %s\n", localcri.PauseImage, localcri.BusyboxImage)
}

// up starts the helper detached and waits until it is ready.
func up(cfg config) error {
	if st, err := readState(cfg); err == nil {
		if st.Ready && localcri.Alive(st.HelperPID) {
			fmt.Println("already running")
			printState(st)
			return nil
		}
		// The last helper died without tearing its instance down.
		if err := cleanupStale(st); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(cfg.stateDir, 0o755); err != nil {
		return fmt.Errorf("create state dir: %w", err)
	}
	_ = os.Remove(statePath(cfg))
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own executable: %w", err)
	}
	logPath := filepath.Join(cfg.stateDir, "helper.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("open helper log: %w", err)
	}
	defer func() { _ = logf.Close() }()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return fmt.Errorf("open %s: %w", os.DevNull, err)
	}
	defer func() { _ = devnull.Close() }()
	helper := exec.Command(self, "serve", "--state-dir", cfg.stateDir, "--crictl="+strconv.FormatBool(cfg.crictl))
	helper.Stdin, helper.Stdout, helper.Stderr = devnull, logf, logf
	helper.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := helper.Start(); err != nil {
		return fmt.Errorf("start helper: %w", err)
	}
	pid := helper.Process.Pid
	// The helper outlives this process; reap it here only if it dies early.
	exited := make(chan struct{})
	go func() {
		_ = helper.Wait()
		close(exited)
	}()
	fmt.Fprintf(os.Stderr, "starting containerd (helper pid %d, log %s)…\n", pid, logPath)
	deadline := time.After(15 * time.Minute)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-exited:
			if st, err := readState(cfg); err == nil && st.Error != "" {
				return fmt.Errorf("helper failed: %s", st.Error)
			}
			return fmt.Errorf("helper exited; see %s", logPath)
		case <-deadline:
			return fmt.Errorf("helper not ready after 15 minutes; see %s", logPath)
		case <-tick.C:
		}
		st, err := readState(cfg)
		if err != nil || st.HelperPID != pid {
			continue
		}
		if st.Error != "" {
			return fmt.Errorf("helper failed: %s", st.Error)
		}
		if st.Ready {
			printState(st)
			return nil
		}
	}
}

// serve owns an instance until SIGINT or SIGTERM.
func serve(cfg config, foreground bool) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log := newLogger()
	defer func() { _ = log.Sync() }()
	st := &state{HelperPID: os.Getpid()}
	if err := writeState(cfg, st); err != nil {
		return err
	}
	fail := func(err error) error {
		st.Error = err.Error()
		_ = writeState(cfg, st)
		return err
	}
	inst, err := localcri.Start(ctx, localcri.Options{Logger: log, LogDir: cfg.stateDir})
	if err != nil {
		return fail(err)
	}
	defer func() {
		tctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := inst.Teardown(tctx); err != nil {
			log.Error("teardown", zap.Error(err))
		}
		_ = os.Remove(statePath(cfg))
	}()
	if cfg.crictl {
		if _, err := localcri.EnsureCrictl(ctx, cfg.toolsDir); err != nil {
			log.Warn("crictl not installed", zap.Error(err))
		}
	}
	st.Ready = true
	st.ID = inst.ID()
	st.Flavour = inst.Flavour()
	st.Endpoint = inst.Endpoint()
	st.Crictl = inst.CrictlHint()
	st.Registry = inst.Registry().Addr()
	st.LogPath = inst.LogPath()
	st.Stages = inst.Stages().String()
	if err := writeState(cfg, st); err != nil {
		return err
	}
	log.Info("ready", zap.String("endpoint", st.Endpoint), zap.String("stages", st.Stages))
	if foreground {
		printState(st)
		fmt.Fprintln(os.Stderr, "press ^C to stop")
	}
	<-ctx.Done()
	log.Info("stopping")
	return nil
}

// down stops the helper, which tears the instance down; if the helper is
// gone, it tears the instance down itself.
func down(cfg config) error {
	st, err := readState(cfg)
	if errors.Is(err, os.ErrNotExist) {
		fmt.Println("not running")
		return nil
	}
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if localcri.Alive(st.HelperPID) && strings.Contains(localcri.Cmdline(st.HelperPID), "localcri") {
		_ = syscall.Kill(st.HelperPID, syscall.SIGTERM)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for localcri.Alive(st.HelperPID) {
			select {
			case <-ctx.Done():
				return fmt.Errorf("helper %d still running: %w", st.HelperPID, ctx.Err())
			case <-tick.C:
			}
		}
	}
	if err := cleanupStale(st); err != nil {
		return err
	}
	_ = os.Remove(statePath(cfg))
	if st.LogPath != "" {
		_ = os.Remove(st.LogPath)
	}
	fmt.Printf("stopped run %s\n", st.ID)
	return nil
}

// cleanupStale tears down the instance of a dead helper, if it is there.
func cleanupStale(st *state) error {
	if st.ID == "" || localcri.Alive(st.HelperPID) {
		return nil
	}
	infos, err := localcri.ListInstances()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, in := range infos {
		if in.ID == st.ID {
			fmt.Fprintf(os.Stderr, "tearing down run %s of a dead helper\n", st.ID)
			return localcri.Cleanup(ctx, newLogger(), st.ID)
		}
	}
	return nil
}

func status(cfg config) error {
	st, err := readState(cfg)
	if errors.Is(err, os.ErrNotExist) {
		fmt.Println("not running")
		return nil
	}
	if err != nil {
		return err
	}
	printState(st)
	if !localcri.Alive(st.HelperPID) {
		return fmt.Errorf("helper %d is gone: run down to clean up", st.HelperPID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	v, err := localcri.ProbeVersion(ctx, st.Endpoint)
	if err != nil {
		return err
	}
	fmt.Printf("status:       running, %s %s (CRI %s)\n", v.RuntimeName, v.RuntimeVersion, v.RuntimeApiVersion)
	return nil
}

// gc tears down instances whose owner process is gone.
func gc() error {
	infos, err := localcri.ListInstances()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var errs []error
	for _, in := range infos {
		if in.OwnerAlive {
			continue
		}
		fmt.Printf("tearing down run %s (owner %d gone)\n", in.ID, in.OwnerPID)
		if err := localcri.Cleanup(ctx, newLogger(), in.ID); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
