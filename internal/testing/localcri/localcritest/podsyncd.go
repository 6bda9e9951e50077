package localcritest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/internal/testing/localcri"
)

// PodsyncdOptions say how to run one podsyncd child process against a
// private containerd.
type PodsyncdOptions struct {
	// Bin is the podsyncd binary, as Build made it. Required.
	Bin string
	// Instance is the containerd podsyncd runs against
	// (--runtime-endpoint). Required.
	Instance *localcri.Instance
	// Socket is the unix socket podsyncd serves, its first --listen.
	// Required; its directory must not be world-writable (t.TempDir and
	// os.MkdirTemp make 0700 ones).
	Socket string
	// RootDir and PodLogDir are --root-dir and --pod-log-dir. Required:
	// a restart of the same node passes the previous run's.
	RootDir, PodLogDir string
	// NodeName is --node-name; empty leaves podsyncd's default, the host
	// name.
	NodeName string
	// Config is --config, a file; empty means none.
	Config string
	// ShutdownTimeout is --shutdown-timeout; zero means 5 s.
	ShutdownTimeout time.Duration
	// Args are further flags, after those above (more --listen, a
	// --metrics-address, …); a flag given again overrides the one above
	// (a --cgroup-root other than the instance's).
	Args []string
	// Env are variables ("NAME=value") podsyncd gets over those it
	// inherits from the test; Unset are inherited variables it does not
	// get (a failpoint armed in the test's environment, say). GORACE is
	// atexit_sleep_ms=0 unless Env sets it: a race-enabled podsyncd would
	// sleep a second at exit.
	Env, Unset []string
	// Log is the file podsyncd's stdout and stderr go to. Required.
	Log string
	// Name names the process in the test's messages; empty means
	// "podsyncd".
	Name string
	// ExitFails makes an exit before the health AwaitHealth waits for
	// fail the test, showing the exit status and the log: for tests in
	// which podsyncd must not die. Without it AwaitHealth returns false
	// then, for tests that kill podsyncd on purpose (a failpoint,
	// SIGKILL) and restart it.
	ExitFails bool
}

// Podsyncd is one podsyncd child process. StartPodsyncd registers no
// cleanup: the caller stops it (Stop) when its test ends, after whatever
// the test still does through it (deleting its pods); TestMain checks
// with ProcessesOf that none was left running.
type Podsyncd struct {
	t    testing.TB
	opts PodsyncdOptions
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has been reaped
	// Set before done is closed.
	state    *os.ProcessState
	exitedAt time.Time
}

// flags is podsyncd's command line for o.
func (o *PodsyncdOptions) flags() []string {
	shutdown := o.ShutdownTimeout
	if shutdown == 0 {
		shutdown = 5 * time.Second
	}
	args := []string{
		"--runtime-endpoint=" + o.Instance.Endpoint(),
		"--listen=unix://" + o.Socket,
		"--root-dir=" + o.RootDir,
		"--pod-log-dir=" + o.PodLogDir,
		"--node-ip=127.0.0.1",
		"--shutdown-timeout=" + shutdown.String(),
		// The instance's own cgroup root: pod cgroups are never another
		// agent's on the host, and Teardown removes them.
		"--cgroup-root=" + o.Instance.CgroupRoot(),
	}
	if o.NodeName != "" {
		args = append(args, "--node-name="+o.NodeName)
	}
	if o.Config != "" {
		args = append(args, "--config="+o.Config)
	}
	return append(args, o.Args...)
}

// environ is podsyncd's environment for o.
func (o *PodsyncdOptions) environ() []string {
	drop := slices.Clone(o.Unset)
	for _, kv := range o.Env {
		name, _, _ := strings.Cut(kv, "=")
		drop = append(drop, name)
	}
	var env []string
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); !slices.Contains(drop, name) && name != "GORACE" {
			env = append(env, kv)
		}
	}
	if !slices.ContainsFunc(o.Env, func(kv string) bool { return strings.HasPrefix(kv, "GORACE=") }) {
		env = append(env, "GORACE=atexit_sleep_ms=0")
	}
	return append(env, o.Env...)
}

// StartPodsyncd starts podsyncd as o says and returns at once; wait for
// it with AwaitHealth. A failure to start fails the test.
func StartPodsyncd(t testing.TB, o PodsyncdOptions) *Podsyncd {
	t.Helper()
	if o.Name == "" {
		o.Name = "podsyncd"
	}
	d := &Podsyncd{t: t, opts: o, done: make(chan struct{})}
	logf, err := os.Create(o.Log)
	if err != nil {
		t.Fatalf("start %s: %v", o.Name, err)
	}
	d.cmd = exec.Command(o.Bin, o.flags()...)
	d.cmd.Env = o.environ()
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	if err := d.cmd.Start(); err != nil {
		_ = logf.Close()
		t.Fatalf("start %s: %v", o.Name, err)
	}
	go func() {
		_ = d.cmd.Wait()
		d.exitedAt = time.Now()
		d.state = d.cmd.ProcessState
		_ = logf.Close()
		close(d.done)
	}()
	return d
}

// Name names the process in messages.
func (d *Podsyncd) Name() string { return d.opts.Name }

// PID is the process id of podsyncd.
func (d *Podsyncd) PID() int { return d.cmd.Process.Pid }

// Done is closed once the process has exited and been reaped.
func (d *Podsyncd) Done() <-chan struct{} { return d.done }

// Exited reports whether the process has exited.
func (d *Podsyncd) Exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// State is the exited process's state; nil while it runs.
func (d *Podsyncd) State() *os.ProcessState {
	if !d.Exited() {
		return nil
	}
	return d.state
}

// ExitCode is the exited process's exit code; -1 while it runs or if a
// signal killed it.
func (d *Podsyncd) ExitCode() int {
	if st := d.State(); st != nil {
		return st.ExitCode()
	}
	return -1
}

// ExitedAt is when the process was seen to exit; zero while it runs.
func (d *Podsyncd) ExitedAt() time.Time {
	if !d.Exited() {
		return time.Time{}
	}
	return d.exitedAt
}

// KilledBy reports whether the process died of sig.
func (d *Podsyncd) KilledBy(sig syscall.Signal) bool {
	st := d.State()
	if st == nil {
		return false
	}
	ws, ok := st.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

// Signal sends sig to the process, failing the test if it cannot.
func (d *Podsyncd) Signal(sig os.Signal) {
	d.t.Helper()
	if err := d.cmd.Process.Signal(sig); err != nil {
		d.t.Fatalf("signal %s: %v", d.opts.Name, err)
	}
}

// AwaitExit waits up to timeout for the process to exit; false if it did
// not.
func (d *Podsyncd) AwaitExit(timeout time.Duration) bool {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-d.done:
		return true
	case <-t.C:
		return false
	}
}

// Health returns the health conn's podsyncd reports for
// podsync.v1.PodSyncService, or an error, within 5 s.
func Health(ctx context.Context, conn *grpc.ClientConn) (healthpb.HealthCheckResponse_ServingStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx,
		&healthpb.HealthCheckRequest{Service: podsyncv1.PodSyncService_ServiceDesc.ServiceName})
	return resp.GetStatus(), err
}

// AwaitHealth waits until podsyncd reports want over conn, a connection
// to its socket, and returns true. If the process exits first, it returns
// false, or fails the test with ExitFails. It fails the test after
// timeout. It does not use the test's context: cleanups wait too.
func (d *Podsyncd) AwaitHealth(conn *grpc.ClientConn, want healthpb.HealthCheckResponse_ServingStatus, timeout time.Duration) bool {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last string
	for {
		st, err := Health(ctx, conn)
		if err == nil && st == want {
			return true
		}
		last = fmt.Sprintf("%v %v", st, err)
		select {
		case <-d.done:
			if d.opts.ExitFails {
				d.t.Fatalf("%s exited (%v) before reporting %v (last: %s):\n%s", d.opts.Name, d.state, want, last, d.LogText())
			}
			return false
		case <-ctx.Done():
			d.t.Fatalf("%s did not report %v within %s (last: %s)", d.opts.Name, want, timeout, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// AwaitServing is AwaitHealth of SERVING.
func (d *Podsyncd) AwaitServing(conn *grpc.ClientConn, timeout time.Duration) bool {
	d.t.Helper()
	return d.AwaitHealth(conn, healthpb.HealthCheckResponse_SERVING, timeout)
}

// Kill kills the process with SIGKILL and reaps it, failing the test if
// it is still there 30 s later.
func (d *Podsyncd) Kill() {
	d.t.Helper()
	_ = d.cmd.Process.Signal(syscall.SIGKILL)
	if !d.AwaitExit(30 * time.Second) {
		d.t.Fatalf("%s survived SIGKILL", d.opts.Name)
	}
}

// Stop ends the process with SIGTERM, as systemd does, and checks that it
// exits 0; one that ignores SIGTERM for 30 s is killed, and the test
// fails. It does nothing if the process has exited.
func (d *Podsyncd) Stop() {
	d.t.Helper()
	if d.Exited() {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	if d.AwaitExit(30 * time.Second) {
		if !d.state.Success() {
			d.t.Errorf("%s exited with %v after SIGTERM, want 0", d.opts.Name, d.state)
		}
		return
	}
	d.t.Errorf("%s ignored SIGTERM for 30s; killing it", d.opts.Name)
	_ = d.cmd.Process.Kill()
	<-d.done
}

// Log is the path of the process's log.
func (d *Podsyncd) Log() string { return d.opts.Log }

// LogText returns the process's log so far.
func (d *Podsyncd) LogText() string {
	b, err := os.ReadFile(d.opts.Log)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
