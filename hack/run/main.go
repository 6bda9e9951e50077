// Command run is `make run`: on a fresh Debian machine, as root, it builds
// podsyncd and podsyncctl into .tmp/bin, starts a private containerd
// (internal/localcri, which installs what it needs), starts podsyncd on a
// socket in .tmp/run, runs the examples with podsyncctl, prints what to
// try next and stays up until ^C; then it deletes the pods, stops podsyncd
// and containerd and removes everything it started.
//
// With --once it does the same and stops right away; it exits non-zero
// when anything failed, including finding a process, mount, link, network
// namespace or cgroup of the run left behind.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/client"
	"github.com/podsync/podsync/internal/localcri"
	"github.com/podsync/podsync/internal/localcri/localcritest"
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
	// uids of the pods the run created, for their cgroups.
	uids []string
	base *snapshot
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
	r.say("done: nothing left behind")
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

	r.say("starting a private %s (the first run installs packages and builds containerd: a few minutes)", f)
	start := time.Now()
	r.inst, err = localcri.Start(ctx, localcri.Options{Flavour: f, Logger: newLogger(), RepoDir: r.repo, LogDir: r.dir})
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
		"--log-format", "console",
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

// demo runs the examples.
func (r *runner) demo(ctx context.Context) error {
	r.say("running the examples (podsyncctl is .tmp/bin/podsyncctl with PODSYNC_ADDRESS=%s)", r.address())
	steps := [][]string{
		{"run", "--wait-for", "ready", "--timeout", "2m", "-f", "examples/web.yaml", "-f", "examples/init-sidecar.yaml", "-f", "examples/config.yaml"},
		{"run", "--wait-for", "succeeded", "--timeout", "2m", "-f", "examples/job.yaml"},
		{"sync", "-f", "examples/crashloop.yaml"},
	}
	for _, args := range steps {
		if err := r.podsyncctl(ctx, true, args...); err != nil {
			return err
		}
	}
	r.recordUIDs(ctx)

	r.printf("\n")
	r.say("waiting for crashloop to crash twice and back off (its container exits 1 after 2 s)")
	if err := r.waitCrashLoop(ctx); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"get", "crashloop"},
		{"plan", "-f", "examples/crashloop.yaml"},
		{"logs", "crashloop", "--previous"},
		{"logs", "job"},
		{"logs", "config"},
	} {
		if err := r.podsyncctl(ctx, true, args...); err != nil {
			return err
		}
	}
	if err := r.getWeb(ctx); err != nil {
		return err
	}
	return r.podsyncctl(ctx, true, "ls", "-o", "wide")
}

// recordUIDs remembers the pods' uids, whose cgroups cleanup removes.
func (r *runner) recordUIDs(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := r.api.ListPods(cctx, &podsyncv1.ListPodsRequest{})
	if err != nil {
		return
	}
	for _, p := range resp.GetPods() {
		if uid := p.GetMetadata().GetUid(); !slices.Contains(r.uids, uid) {
			r.uids = append(r.uids, uid)
		}
	}
}

// waitCrashLoop waits until the crashloop pod's container waits in
// CrashLoopBackOff.
func (r *runner) waitCrashLoop(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := r.api.GetPod(ctx, "default", "crashloop")
		if err == nil {
			for _, cs := range resp.GetPod().GetStatus().GetContainerStatuses() {
				if cs.GetState().GetWaiting().GetReason() == "CrashLoopBackOff" {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("crashloop did not reach CrashLoopBackOff: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// getWeb fetches the web example's page through its host port.
func (r *runner) getWeb(ctx context.Context) error {
	// The host port, from the node itself (the private pod network has no
	// route to the node's other addresses).
	url := "http://127.0.0.1:8080/"
	line := "$ wget -qO- " + url
	if r.tty {
		line = "\x1b[36m" + line + "\x1b[0m"
	}
	r.printf("\n%s\n", line)
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("web's host port: %w", err)
	}
	defer func() { _ = res.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(res.Body, 4096))
	if err != nil {
		return fmt.Errorf("web's host port: %w", err)
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("web's host port: GET %s: %s", url, res.Status)
	}
	_, err = r.out.Write(body)
	return err
}

// nextSteps prints the commands to try.
func (r *runner) nextSteps() {
	ctl := "podsyncctl"
	rel, err := filepath.Rel(mustGetwd(), r.ctl())
	if err == nil && !strings.HasPrefix(rel, "..") {
		ctl = "./" + rel
	}
	sock := strings.TrimPrefix(r.address(), "unix://")
	r.printf(`
podsync is running: podsyncd on %[1]s, containerd on %[3]s.
Try, in another terminal (as root):

  %[2]s --address %[1]s ls -o wide
  export PODSYNC_ADDRESS=%[1]s PATH=%[4]s:$PATH
  podsyncctl logs init-sidecar -c log-shipper -f          # ^C to stop following
  podsyncctl watch                                        # status changes and events, as they happen
  podsyncctl get web -o yaml
  podsyncctl plan -f examples/web.yaml                    # edit it first: the plan names what changed
  podsyncctl sync -f examples/web.yaml
  podsyncctl delete crashloop
  podsyncctl delete job && podsyncctl run -f examples/job.yaml --wait-for succeeded

  grpcurl -unix -plaintext %[5]s list podsync.v1.PodSyncService
  grpcurl -unix -plaintext -d '{"name": "web"}' %[5]s podsync.v1.PodSyncService/GetPod
  %[6]s pods

Logs: .tmp/run/podsyncd.log (podsyncd), %[7]s (containerd).
`, r.address(), ctl, r.inst.Endpoint(), r.bin, sock, r.inst.CrictlHint(), relOrAbs(r.inst.LogPath()))
}

func mustGetwd() string {
	wd, err := os.Getwd()
	if err != nil {
		return "/"
	}
	return wd
}

func relOrAbs(p string) string {
	if rel, err := filepath.Rel(mustGetwd(), p); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return p
}

// cleanup deletes the pods, stops podsyncd and containerd, removes the
// pods' cgroups, checks that nothing is left and, when everything went
// ok, removes the run dir.
func (r *runner) cleanup(ok bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var errs []error
	if r.daemon != nil && r.api != nil {
		r.recordUIDs(ctx)
		if err := r.podsyncctl(ctx, true, "delete", "--all"); err != nil {
			errs = append(errs, err)
		}
	}
	if r.api != nil {
		_ = r.api.Close()
	}
	if r.daemon != nil {
		r.say("stopping podsyncd")
		if err := stopProcess(r.daemon.Process, r.exited, 30*time.Second); err != nil {
			errs = append(errs, fmt.Errorf("stop podsyncd: %w", err))
		}
	}
	if r.inst != nil {
		r.say("stopping containerd %s", r.inst.ID())
		if err := r.inst.Teardown(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	for _, uid := range r.uids {
		for _, qos := range []string{"", "burstable", "besteffort"} {
			if err := localcritest.RemoveCgroups(filepath.Join("/kubepods", qos, "pod"+uid)); err != nil {
				errs = append(errs, fmt.Errorf("remove cgroups of pod %s: %w", uid, err))
			}
		}
	}
	if r.dir != "" {
		// podsyncd's pod volumes are mounts under its root dir: deleting
		// the pods unmounts them.
		mps := mountsUnder(r.dir)
		slices.Reverse(mps)
		for _, mp := range mps {
			errs = append(errs, fmt.Errorf("mount left behind (now unmounted): %s", mp))
			_ = syscall.Unmount(mp, syscall.MNT_DETACH)
		}
	}
	if r.base != nil {
		r.removeNewCgroups()
		if left := r.leftovers(); len(left) > 0 {
			errs = append(errs, fmt.Errorf("left behind:\n  %s", strings.Join(left, "\n  ")))
		}
	}
	// The logs stay when something failed.
	if ok && len(errs) == 0 && r.dir != "" {
		if err := os.RemoveAll(r.dir); err != nil {
			errs = append(errs, fmt.Errorf("remove run dir: %w", err))
		}
	}
	return errors.Join(errs...)
}

// stopProcess sends SIGTERM to p, then SIGKILL after grace, and waits
// until it has exited.
func stopProcess(p *os.Process, exited <-chan struct{}, grace time.Duration) error {
	if err := p.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-exited:
		return nil
	case <-time.After(grace):
	}
	if err := p.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	<-exited
	return fmt.Errorf("pid %d did not stop within %s and was killed", p.Pid, grace)
}

// removeNewCgroups removes the kubepods cgroups that did not exist
// before the run, once empty.
func (r *runner) removeNewCgroups() {
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods")
	more, _ := filepath.Glob("/sys/fs/cgroup/kubepods")
	dirs = append(dirs, more...)
	for _, d := range dirs {
		var all []string
		_ = filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				all = append(all, p)
			}
			return nil
		})
		slices.Reverse(all)
		for _, p := range all {
			if !r.base.cgroups[p] {
				_ = os.Remove(p) // fails, as it should, when not empty
			}
		}
	}
}

// leftovers lists what the run left behind: processes of its binaries or
// run dir, mounts under the run dir, and pod cgroups. (The containerd
// instance's processes, mounts, links and network namespaces are checked
// by its Teardown, which also knows the pods' network namespaces and
// veths.)
func (r *runner) leftovers() []string {
	var out []string
	now := takeSnapshot()
	for pid, cmd := range now.procs {
		if pid == os.Getpid() {
			continue
		}
		if strings.Contains(cmd, r.dir) || strings.Contains(cmd, filepath.Join(r.bin, "podsyncd")) ||
			(r.inst != nil && strings.Contains(cmd, r.inst.ID())) {
			out = append(out, fmt.Sprintf("process %d: %s", pid, cmd))
		}
	}
	for _, uid := range r.uids {
		for p := range now.cgroups {
			if strings.HasSuffix(p, "/pod"+uid) {
				out = append(out, "cgroup "+p)
			}
		}
	}
	slices.Sort(out)
	return out
}

// snapshot is what the leak check compares.
type snapshot struct {
	procs   map[int]string
	cgroups map[string]bool // kubepods cgroups
}

func takeSnapshot() *snapshot {
	s := &snapshot{procs: map[int]string{}, cgroups: map[string]bool{}}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && len(b) > 0 {
			s.procs[pid] = strings.TrimSpace(string(bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
		}
	}
	roots, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods")
	more, _ := filepath.Glob("/sys/fs/cgroup/kubepods")
	for _, root := range append(roots, more...) {
		_ = filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				s.cgroups[p] = true
			}
			return nil
		})
	}
	return s
}

// mountsUnder lists the mount points under dir.
func mountsUnder(dir string) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			out = append(out, f[4])
		}
	}
	return out
}

// state is what a run leaves in .tmp/run/state so that the next one can
// clean up after a run that was killed.
func writeState(dir, instanceID string, podsyncdPID int) error {
	data := fmt.Sprintf("%s %d\n", instanceID, podsyncdPID)
	if err := os.WriteFile(filepath.Join(dir, "state"), []byte(data), 0o644); err != nil {
		return fmt.Errorf("write run state: %w", err)
	}
	return nil
}

// removeStale stops what a killed earlier run left: its podsyncd and its
// containerd instance.
func (r *runner) removeStale(ctx context.Context) error {
	b, err := os.ReadFile(filepath.Join(r.dir, "state"))
	if errors.Is(err, os.ErrNotExist) {
		return os.RemoveAll(r.dir)
	}
	if err != nil {
		return err
	}
	var id string
	var pid int
	if _, err := fmt.Sscanf(string(b), "%s %d", &id, &pid); err != nil {
		return fmt.Errorf("read %s: %w", filepath.Join(r.dir, "state"), err)
	}
	r.say("cleaning up after an earlier run that did not finish (instance %s, podsyncd %d)", id, pid)
	if pid > 0 && localcri.Alive(pid) && strings.Contains(localcri.Cmdline(pid), filepath.Join(r.bin, "podsyncd")) {
		if strings.Contains(localcri.Cmdline(pid), r.address()) {
			p, _ := os.FindProcess(pid)
			_ = p.Signal(syscall.SIGTERM)
			deadline := time.Now().Add(30 * time.Second)
			for localcri.Alive(pid) && time.Now().Before(deadline) {
				time.Sleep(100 * time.Millisecond)
			}
			if localcri.Alive(pid) {
				return fmt.Errorf("podsyncd %d of an earlier run is still running: another make run?", pid)
			}
		}
	}
	infos, err := localcri.ListInstances()
	if err != nil {
		return err
	}
	for _, in := range infos {
		if in.ID == id {
			if in.OwnerAlive {
				return fmt.Errorf("containerd %s of an earlier run is owned by a live process %d: is another make run running?", id, in.OwnerPID)
			}
			if err := localcri.Cleanup(ctx, newLogger(), id); err != nil {
				return err
			}
		}
	}
	for _, mp := range mountsUnder(r.dir) {
		_ = syscall.Unmount(mp, syscall.MNT_DETACH)
	}
	return os.RemoveAll(r.dir)
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
