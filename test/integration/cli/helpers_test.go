//go:build integration

package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/internal/testing/localcri/localcritest"
)

// podsyncd is one test's podsyncd, a child process
// (localcritest.Podsyncd) with its own socket, root and log directories.
type podsyncd struct {
	*localcritest.Podsyncd
	t       *testing.T
	address string
}

// startPodsyncd starts podsyncd on the package's containerd and waits
// until it is healthy (through podsyncctl health --wait). When the test
// ends, every pod is deleted, its cgroups removed, podsyncd stopped; it
// must exit 0.
func startPodsyncd(t *testing.T) *podsyncd { return startPodsyncdArgs(t) }

// startPodsyncdArgs is startPodsyncd with further podsyncd flags.
func startPodsyncdArgs(t *testing.T, args ...string) *podsyncd {
	t.Helper()
	return startPodsyncdBin(t, podsyncdBin, args...)
}

// startPodsyncdBin is startPodsyncdArgs with another podsyncd binary.
func startPodsyncdBin(t *testing.T, bin string, args ...string) *podsyncd {
	t.Helper()
	dir, err := os.MkdirTemp("", "ctl-")
	if err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(dir, "podsync.sock")
	d := &podsyncd{t: t, address: "unix://" + socket}
	d.Podsyncd = localcritest.StartPodsyncd(t, localcritest.PodsyncdOptions{
		Bin: bin, Instance: inst, Socket: socket,
		RootDir: filepath.Join(dir, "root"), PodLogDir: filepath.Join(dir, "logs"),
		ShutdownTimeout: 10 * time.Second,
		// The web example publishes a host port, which the default Pod
		// Security level refuses unless the operator opens it.
		Args: append([]string{"--log-format=console", "--allowed-host-ports=1024-65535"}, args...),
		Log:  filepath.Join(dir, "podsyncd.log"),
	})
	t.Cleanup(func() {
		d.cleanup()
		if t.Failed() {
			t.Logf("podsyncd log:\n%s", d.LogText())
		}
		_ = os.RemoveAll(dir)
	})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if r := d.ctl(ctx, "", "health", "--wait", "50s"); r.code != 0 {
		t.Fatalf("podsyncd is not healthy: %+v", r)
	}
	return d
}

// cleanup deletes every pod with podsyncctl, stops podsyncd and removes
// the pods' cgroups.
func (d *podsyncd) cleanup() {
	t := d.t
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var uids []string
	if r := d.ctl(ctx, "", "get", "-o", "proto-json"); r.code == 0 {
		for _, p := range decodeList(t, r.stdout) {
			uids = append(uids, p.GetMetadata().GetUid())
		}
	}
	if r := d.ctl(ctx, "", "delete", "--all", "--grace-period", "0"); r.code != 0 {
		t.Errorf("cleanup: delete --all: %+v", r)
	}
	d.Stop()
	for _, uid := range uids {
		if err := removePodCgroups(uid); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	}
}

// result is one run of podsyncctl.
type result struct {
	code           int
	stdout, stderr string
}

// ctl runs podsyncctl against d, in the checkout (so that examples/… are
// found), with stdin.
func (d *podsyncd) ctl(ctx context.Context, stdin string, args ...string) result {
	cmd := exec.CommandContext(ctx, podsyncctlBin, args...)
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "PODSYNC_ADDRESS="+d.address, "GORACE=atexit_sleep_ms=0")
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errOut.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		r.code = -1
		r.stderr += err.Error()
	}
	return r
}

// mustCtl runs podsyncctl and fails the test unless it exits 0.
func (d *podsyncd) mustCtl(ctx context.Context, args ...string) string {
	d.t.Helper()
	r := d.ctl(ctx, "", args...)
	if r.code != 0 {
		d.t.Fatalf("podsyncctl %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// pod reads a pod with podsyncctl get -o proto-json.
func (d *podsyncd) pod(ctx context.Context, name string) *podsyncv1.Pod {
	d.t.Helper()
	out := d.mustCtl(ctx, "get", name, "-o", "proto-json")
	var p podsyncv1.Pod
	if err := protojson.Unmarshal([]byte(out), &p); err != nil {
		d.t.Fatalf("get %s -o json: %v\n%s", name, err, out)
	}
	return &p
}

// decodeList decodes get -o proto-json's kind: List.
func decodeList(t *testing.T, out string) []*podsyncv1.Pod {
	t.Helper()
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Errorf("get -o proto-json: %v\n%s", err, out)
		return nil
	}
	var pods []*podsyncv1.Pod
	for _, raw := range list.Items {
		var p podsyncv1.Pod
		if err := protojson.Unmarshal(raw, &p); err != nil {
			t.Errorf("get -o proto-json item: %v", err)
			continue
		}
		pods = append(pods, &p)
	}
	return pods
}

// sandboxes returns the ids of the runtime's sandboxes of the pod uid.
func sandboxes(ctx context.Context, t *testing.T, uid string) []string {
	t.Helper()
	rs, err := inst.RuntimeService(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rs.Close(context.Background()) }()
	sbs, err := rs.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{model.LabelPodUID: uid}})
	if err != nil {
		t.Fatalf("ListPodSandbox: %v", err)
	}
	var ids []string
	for _, sb := range sbs {
		ids = append(ids, sb.GetId())
	}
	return ids
}

// removePodCgroups removes the pod-level cgroups (kubepods/<qos>/pod<uid>
// under the instance's cgroup root) runc leaves behind as the parents of
// the containers' cgroups.
func removePodCgroups(uid string) error {
	var errs []error
	for _, qos := range []string{"", "burstable", "besteffort"} {
		dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/*", inst.CgroupRoot(), "kubepods", qos, "pod"+uid))
		for _, d := range dirs {
			if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("pod cgroup %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

// eventually polls cond every 200 ms until it holds, failing the test at
// ctx's deadline.
func eventually(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not reached", what)
		case <-tick.C:
		}
	}
}

// testContext is a test's context with the integration tests' deadline.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// hasRow reports whether out has a table row whose first fields are
// fields.
func hasRow(out string, fields ...string) bool {
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) >= len(fields) && strings.Join(f[:len(fields)], " ") == strings.Join(fields, " ") {
			return true
		}
	}
	return false
}
