//go:build integration

package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/convert"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/internal/testing/localcri"
	"github.com/podsync/podsync/internal/testing/localcri/localcritest"
)

// namespace is the namespace of every test pod.
const namespace = "itest"

var nonDNS = regexp.MustCompile(`[^a-z0-9]+`)

// newPod returns a pod named after the test (and suffix), with a fresh
// UID, grace period 1 s and the given containers, as the API carries it.
func newPod(t *testing.T, suffix string, containers ...corev1.Container) *podsyncv1.Pod {
	t.Helper()
	return podToProto(t, newCorePod(t, suffix, containers...))
}

// newCorePod is newPod's pod before conversion.
func newCorePod(t *testing.T, suffix string, containers ...corev1.Container) *corev1.Pod {
	t.Helper()
	n := strings.Trim(nonDNS.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(n) > 40 {
		n = strings.Trim(n[len(n)-40:], "-")
	}
	uid := uuid.NewString()
	if suffix != "" {
		n += "-" + suffix
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: n + "-" + uid[:6], Namespace: namespace, UID: types.UID(uid)},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers:                    containers,
		},
	}
}

// podToProto defaults pod as the API server would and converts it.
func podToProto(t *testing.T, pod *corev1.Pod) *podsyncv1.Pod {
	t.Helper()
	convert.Default(pod)
	p, err := convert.PodToProto(pod)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// sleeper is a container that runs until SIGTERM.
func sleeper(name string) corev1.Container {
	return localcritest.Shell(name, "while true; do sleep 1; done")
}

// testContext is a test's context with the integration tests' deadline.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// removePodCgroups removes the pod-level cgroups (kubepods/<qos>/pod<uid>
// under the instance's cgroup root) of a deleted pod in every hierarchy.
// runc creates them as the parents of the containers' cgroups and leaves
// them behind; the teardown removes the root, the tests that check a pod
// left nothing remove their own.
func removePodCgroups(uid string) error {
	var errs []error
	for _, qos := range []string{"", "burstable", "besteffort"} {
		dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/*", inst.CgroupRoot(), "kubepods", qos, "pod"+uid))
		for _, d := range dirs {
			// Container cgroups go away with their containers; what is
			// left must be empty.
			if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("pod cgroup %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

// grpcurlPath is the grpcurl the Makefile installs (PODSYNC_GRPCURL), else
// .tmp/bin/grpcurl of the checkout. A missing grpcurl fails the test:
// integration tests never skip.
func grpcurlPath(t *testing.T) string {
	t.Helper()
	p := os.Getenv("PODSYNC_GRPCURL")
	if p == "" {
		repo, err := localcri.RepoDir()
		if err != nil {
			t.Fatal(err)
		}
		p = filepath.Join(repo, ".tmp", "bin", "grpcurl")
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("grpcurl not found (%v): run the tests through make test-integration, "+
			"or install it with make tools, or set PODSYNC_GRPCURL", err)
	}
	return p
}

// grpcurl runs grpcurl against podsyncd's unix socket: grpcurl -unix
// -plaintext [flags] SOCKET args... with stdin as the request (-d @ when
// not empty). It returns stdout, and an error carrying stderr when grpcurl
// fails.
func (d *podsyncd) grpcurl(ctx context.Context, stdin string, flags []string, args ...string) (string, error) {
	d.t.Helper()
	all := append([]string{"-unix", "-plaintext"}, flags...)
	if stdin != "" {
		all = append(all, "-d", "@")
	}
	all = append(append(all, d.Socket), args...)
	cmd := exec.CommandContext(ctx, grpcurlPath(d.t), all...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("grpcurl %s: %w\n%s", strings.Join(all, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// requestJSON renders a request as the API's JSON, as podsyncctl convert
// prints it for grpcurl -d @.
func requestJSON(t *testing.T, m proto.Message) string {
	t.Helper()
	b, err := protojson.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// decodeStream decodes grpcurl's output — one JSON object per response
// message — into messages made by newMsg.
func decodeStream[M proto.Message](t *testing.T, out string, newMsg func() M) []M {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	var msgs []M
	for {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return msgs
		}
		if err != nil {
			t.Fatalf("grpcurl output: %v:\n%s", err, out)
		}
		m := newMsg()
		if err := protojson.Unmarshal(raw, m); err != nil {
			t.Fatalf("grpcurl output: %v:\n%s", err, raw)
		}
		msgs = append(msgs, m)
	}
}

// runtimeClient connects to the package's containerd, for checking what it
// really holds.
func runtimeClient(t *testing.T) cri.RuntimeService {
	t.Helper()
	rs, err := inst.RuntimeService(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rs.Close(context.Background()) })
	return rs
}

// sandboxesOf returns the pod's sandboxes by state.
func sandboxesOf(ctx context.Context, t *testing.T, rs cri.RuntimeService, uid string) (ready, notReady []string) {
	t.Helper()
	sbs, err := rs.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{model.LabelPodUID: uid}})
	if err != nil {
		t.Fatalf("ListPodSandbox: %v", err)
	}
	for _, sb := range sbs {
		if sb.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
			ready = append(ready, sb.GetId())
		} else {
			notReady = append(notReady, sb.GetId())
		}
	}
	return ready, notReady
}

// eventually polls cond every 100 ms until it holds, failing the test at
// ctx's deadline with what.
func eventually(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not reached", what)
		case <-tick.C:
		}
	}
}
