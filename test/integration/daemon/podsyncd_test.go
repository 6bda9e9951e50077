//go:build integration

package daemon_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/utils/ptr"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/internal/testing/localcri/localcritest"
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

// podsyncd is one podsyncd child process (localcritest.Podsyncd) with a
// connection to its unix socket.
type podsyncd struct {
	*localcritest.Podsyncd
	t    *testing.T
	opts daemonOptions
	// Socket is the unix socket path.
	Socket string
	conn   *grpc.ClientConn // over Socket, as uid 0 (admin)
}

// startPodsyncd starts podsyncd and waits until it reports SERVING on its
// unix socket; an exit before fails the test. When the test ends, every
// pod it holds is deleted, then it gets SIGTERM (SIGKILL after 30 s) and
// must exit 0; its log is shown if the test failed.
func startPodsyncd(t *testing.T, opts daemonOptions) *podsyncd {
	t.Helper()
	if opts.RootDir == "" {
		opts.RootDir = t.TempDir()
	}
	if opts.PodLogDir == "" {
		opts.PodLogDir = t.TempDir()
	}
	config := opts.ConfigFile
	if opts.Config != "" {
		config = filepath.Join(t.TempDir(), "podsyncd.yaml")
		if err := os.WriteFile(config, []byte(opts.Config), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	args := make([]string, 0, len(opts.ExtraListen)+len(opts.Args))
	for _, l := range opts.ExtraListen {
		args = append(args, "--listen="+l)
	}
	// The socket directory must not be world-writable: t.TempDir is 0700.
	socket := filepath.Join(t.TempDir(), "run", "podsync.sock")
	p := localcritest.StartPodsyncd(t, localcritest.PodsyncdOptions{
		Bin: podsyncdBin, Instance: inst, Socket: socket,
		RootDir: opts.RootDir, PodLogDir: opts.PodLogDir,
		NodeName: "itest-" + inst.ID(), Config: config, ShutdownTimeout: opts.ShutdownTimeout,
		Args: append(args, opts.Args...),
		Log:  filepath.Join(t.TempDir(), "podsyncd.log"), ExitFails: true,
	})
	d := &podsyncd{Podsyncd: p, t: t, opts: opts, Socket: socket}
	t.Cleanup(func() {
		d.Stop()
		if t.Failed() {
			t.Logf("podsyncd log (%s):\n%s", d.Log(), d.LogText())
		}
	})
	var err error
	d.conn, err = grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.conn.Close() })
	d.AwaitServing(d.conn, time.Minute)
	// Runs before Stop (cleanups run last-in first-out).
	t.Cleanup(d.deleteAll)
	return d
}

// client returns a PodSyncService client over the unix socket (admin).
func (d *podsyncd) client() podsyncv1.PodSyncServiceClient {
	return podsyncv1.NewPodSyncServiceClient(d.conn)
}

// wait waits up to timeout for podsyncd to exit and returns its exit
// code; it fails the test if podsyncd is still running then.
func (d *podsyncd) wait(timeout time.Duration) int {
	d.t.Helper()
	if !d.AwaitExit(timeout) {
		d.t.Fatalf("podsyncd still running %s later", timeout)
	}
	return d.ExitCode()
}

// deleteAll deletes every pod podsyncd holds, at once (grace 0), and
// removes their pod cgroups.
func (d *podsyncd) deleteAll() {
	t := d.t
	if d.Exited() {
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
	return strings.Count(d.LogText(), s)
}

// logHas reports whether podsyncd's log has a line containing every one
// of parts.
func (d *podsyncd) logHas(parts ...string) bool {
	for line := range strings.Lines(d.LogText()) {
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
