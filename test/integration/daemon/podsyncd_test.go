//go:build integration

package daemon_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"k8s.io/utils/ptr"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
)

// daemonOptions configure one podsyncd.
type daemonOptions struct {
	// RootDir and PodLogDir are podsyncd's state and log directories;
	// empty means new ones. A restart passes the previous ones.
	RootDir, PodLogDir string
	// Config is the YAML of --config; empty means none. ConfigFile is a
	// config file to use instead.
	Config, ConfigFile string
	// ExtraListen are listen addresses besides the unix socket every
	// podsyncd here serves (the tests' admin door: uid 0).
	ExtraListen []string
	// ShutdownTimeout is --shutdown-timeout; zero means 5 s.
	ShutdownTimeout time.Duration
	// Args are further flags.
	Args []string
}

// podsyncd is one podsyncd child process.
type podsyncd struct {
	t    *testing.T
	opts daemonOptions
	cmd  *exec.Cmd
	// Socket is the unix socket path; Log the file of its stderr.
	Socket, Log string
	done        chan struct{} // closed when the process has been reaped
	exitCode    int
	exitedAt    time.Time
	conn        *grpc.ClientConn // over Socket, as uid 0 (admin)
}

// flags returns podsyncd's command line for o and the socket path.
func (o *daemonOptions) flags(t *testing.T) (args []string, socket string) {
	t.Helper()
	if o.RootDir == "" {
		o.RootDir = t.TempDir()
	}
	if o.PodLogDir == "" {
		o.PodLogDir = t.TempDir()
	}
	if o.ShutdownTimeout == 0 {
		o.ShutdownTimeout = 5 * time.Second
	}
	// The socket directory must not be world-writable: t.TempDir is 0700.
	socket = filepath.Join(t.TempDir(), "run", "podsync.sock")
	args = []string{
		"--runtime-endpoint=" + inst.Endpoint(),
		"--listen=unix://" + socket,
		"--root-dir=" + o.RootDir,
		"--pod-log-dir=" + o.PodLogDir,
		"--node-name=itest-" + inst.ID(),
		"--node-ip=127.0.0.1",
		"--shutdown-timeout=" + o.ShutdownTimeout.String(),
	}
	for _, l := range o.ExtraListen {
		args = append(args, "--listen="+l)
	}
	if o.Config != "" {
		cfg := filepath.Join(t.TempDir(), "podsyncd.yaml")
		if err := os.WriteFile(cfg, []byte(o.Config), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--config="+cfg)
	} else if o.ConfigFile != "" {
		args = append(args, "--config="+o.ConfigFile)
	}
	return append(args, o.Args...), socket
}

// startPodsyncd starts podsyncd and waits until it reports SERVING on its
// unix socket. When the test ends, every pod it holds is deleted, then it
// gets SIGTERM (SIGKILL after 30 s) and must exit 0; its log is shown if
// the test failed.
func startPodsyncd(t *testing.T, opts daemonOptions) *podsyncd {
	t.Helper()
	args, socket := opts.flags(t)
	d := &podsyncd{t: t, opts: opts, Socket: socket, Log: filepath.Join(t.TempDir(), "podsyncd.log"), done: make(chan struct{})}
	logf, err := os.Create(d.Log)
	if err != nil {
		t.Fatal(err)
	}
	d.cmd = exec.Command(podsyncdBin, args...)
	// A race-enabled podsyncd would sleep a second at exit.
	d.cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	if err := d.cmd.Start(); err != nil {
		_ = logf.Close()
		t.Fatalf("start podsyncd: %v", err)
	}
	go func() {
		err := d.cmd.Wait()
		d.exitedAt = time.Now()
		d.exitCode = 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			d.exitCode = ee.ExitCode()
		} else if err != nil {
			d.exitCode = -1
		}
		_ = logf.Close()
		close(d.done)
	}()
	t.Cleanup(func() {
		d.stop()
		if t.Failed() {
			t.Logf("podsyncd log (%s):\n%s", d.Log, d.logText())
		}
	})
	d.conn, err = grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.conn.Close() })
	d.waitHealth(healthpb.HealthCheckResponse_SERVING, time.Minute)
	// Runs before stop (cleanups run last-in first-out).
	t.Cleanup(d.deleteAll)
	return d
}

// client returns a PodSyncService client over the unix socket (admin).
func (d *podsyncd) client() podsyncv1.PodSyncServiceClient {
	return podsyncv1.NewPodSyncServiceClient(d.conn)
}

// exited reports whether the process has exited.
func (d *podsyncd) exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// health returns the health of podsync.v1.PodSyncService, or an error.
func (d *podsyncd) health(ctx context.Context) (healthpb.HealthCheckResponse_ServingStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(d.conn).Check(ctx,
		&healthpb.HealthCheckRequest{Service: podsyncv1.PodSyncService_ServiceDesc.ServiceName})
	return resp.GetStatus(), err
}

// waitHealth waits until podsyncd reports want, failing the test after
// timeout or if podsyncd exits.
func (d *podsyncd) waitHealth(want healthpb.HealthCheckResponse_ServingStatus, timeout time.Duration) {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(d.t.Context(), timeout)
	defer cancel()
	var last string
	for {
		st, err := d.health(ctx)
		if err == nil && st == want {
			return
		}
		last = fmt.Sprintf("%v %v", st, err)
		select {
		case <-d.done:
			d.t.Fatalf("podsyncd exited with %d before reporting %v (last: %s):\n%s", d.exitCode, want, last, d.logText())
		case <-ctx.Done():
			d.t.Fatalf("podsyncd did not report %v within %s (last: %s)", want, timeout, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// signal sends sig to podsyncd.
func (d *podsyncd) signal(sig syscall.Signal) {
	d.t.Helper()
	if err := d.cmd.Process.Signal(sig); err != nil {
		d.t.Fatalf("signal podsyncd: %v", err)
	}
}

// wait waits up to timeout for podsyncd to exit and returns its exit
// code; it fails the test if podsyncd is still running then.
func (d *podsyncd) wait(timeout time.Duration) int {
	d.t.Helper()
	select {
	case <-d.done:
		return d.exitCode
	case <-time.After(timeout):
		d.t.Fatalf("podsyncd still running %s later", timeout)
		return 0
	}
}

// stop ends podsyncd with SIGTERM and checks that it exits 0; after 30 s
// it is killed.
func (d *podsyncd) stop() {
	if d.exited() {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
		if d.exitCode != 0 {
			d.t.Errorf("podsyncd exited %d after SIGTERM, want 0", d.exitCode)
		}
	case <-time.After(30 * time.Second):
		d.t.Errorf("podsyncd ignored SIGTERM for 30s; killing it")
		_ = d.cmd.Process.Kill()
		<-d.done
	}
}

// deleteAll deletes every pod podsyncd holds, at once (grace 0), and
// removes their pod cgroups.
func (d *podsyncd) deleteAll() {
	t := d.t
	if d.exited() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	list, err := d.client().ListPods(ctx, &podsyncv1.ListPodsRequest{})
	if err != nil {
		t.Errorf("cleanup: list pods: %v", err)
		return
	}
	for _, p := range list.GetPods() {
		md := p.GetMetadata()
		if _, err := d.client().DeletePod(ctx, &podsyncv1.DeletePodRequest{
			Namespace: md.GetNamespace(), Name: md.GetName(), GracePeriodSeconds: ptr.To[int64](0),
		}); err != nil {
			t.Errorf("cleanup: delete pod %s/%s: %v", md.GetNamespace(), md.GetName(), err)
			continue
		}
		if err := removePodCgroups(md.GetUid()); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	}
}

// logText returns podsyncd's log so far.
func (d *podsyncd) logText() string {
	b, err := os.ReadFile(d.Log)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// runToExit runs podsyncd with args (and no defaults) to its exit, for
// configurations it must refuse, and returns its exit code and stderr.
func runToExit(t *testing.T, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, podsyncdBin, args...)
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), stderr.String()
	case err != nil:
		t.Fatalf("run podsyncd: %v", err)
	}
	return 0, stderr.String()
}

// logCount returns the number of podsyncd's log lines containing s.
func (d *podsyncd) logCount(s string) int {
	return strings.Count(d.logText(), s)
}

// logHas reports whether podsyncd's log has a line containing every one
// of parts.
func (d *podsyncd) logHas(parts ...string) bool {
	for line := range strings.Lines(d.logText()) {
		all := true
		for _, p := range parts {
			if !strings.Contains(line, p) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}
