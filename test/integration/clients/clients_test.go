//go:build integration

package clients_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/convert"
	"github.com/podsync/podsync/internal/testing/localcri"
	"github.com/podsync/podsync/internal/testing/localcri/localcritest"
)

// node is one podsync node whose podsyncd a test stops and starts again
// on the same socket, root and log directories.
type node struct {
	t                       *testing.T
	socket, root, logs, log string
	d                       *localcritest.Podsyncd
}

func newNode(t *testing.T) *node {
	// The socket directory must not be world-writable: t.TempDir is 0700.
	n := &node{t: t, socket: filepath.Join(t.TempDir(), "run", "podsync.sock"),
		root: t.TempDir(), logs: t.TempDir(), log: filepath.Join(t.TempDir(), "podsyncd.log")}
	n.start()
	t.Cleanup(func() {
		if n.d != nil {
			n.d.Stop()
		}
		if t.Failed() {
			b, _ := os.ReadFile(n.log)
			t.Logf("podsyncd log (%s):\n%s", n.log, b)
		}
	})
	return n
}

// start starts podsyncd and waits until it serves.
func (n *node) start() {
	n.t.Helper()
	n.d = localcritest.StartPodsyncd(n.t, localcritest.PodsyncdOptions{
		Bin: podsyncdBin, Instance: inst, Socket: n.socket, RootDir: n.root, PodLogDir: n.logs,
		NodeName: "itest-" + inst.ID(), Log: n.log, ExitFails: true,
	})
	conn := n.conn()
	defer func() { _ = conn.Close() }()
	n.d.AwaitServing(conn, time.Minute)
}

func (n *node) conn() *grpc.ClientConn {
	n.t.Helper()
	conn, err := grpc.NewClient("unix://"+n.socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		n.t.Fatal(err)
	}
	return conn
}

// runRequest writes a RunPodsRequest of one sleeping pod, as podsyncctl
// convert prints it, and returns its file and the pod.
func runRequest(t *testing.T, name string) (string, *podsyncv1.Pod) {
	t.Helper()
	uid := uuid.NewString()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-" + uid[:6], Namespace: "itest", UID: types.UID(uid)},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers:                    []corev1.Container{localcritest.Shell("app", "while true; do sleep 1; done")},
		},
	}
	convert.Default(pod)
	p, err := convert.PodToProto(pod)
	if err != nil {
		t.Fatal(err)
	}
	b, err := protojson.Marshal(&podsyncv1.RunPodsRequest{Pods: []*podsyncv1.Pod{p}})
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "run.json")
	if err := os.WriteFile(f, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return f, p
}

// repoFile is a path in the repository.
func repoFile(t *testing.T, parts ...string) string {
	t.Helper()
	repo, err := localcri.RepoDir()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(append([]string{repo}, parts...)...)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%v: run the clients' tests with make test-clients, which generates and builds them", err)
	}
	return p
}

// followAcrossRestart runs a client's example (cmd), which runs the pod of
// its request and follows WatchPods printing "KIND REVISION NS/NAME" per
// change; once it has synced, podsyncd is stopped and started again, and
// once the example has resumed, the pod is deleted: the example must see
// the deletion and exit 0, its revisions after synced strictly
// increasing across the break.
func followAcrossRestart(t *testing.T, n *node, pod *podsyncv1.Pod, cmd *exec.Cmd) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- cmd.Wait()
	}()
	var seen []string
	await := func(prefix string) string {
		t.Helper()
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("the client exited before %q: %v\n%s\nstderr:\n%s", prefix, <-exited, strings.Join(seen, "\n"), stderr.String())
				}
				seen = append(seen, l)
				if strings.HasPrefix(l, prefix) {
					return l
				}
			case <-ctx.Done():
				_ = cmd.Process.Kill()
				t.Fatalf("no %q from the client: %v\n%s\nstderr:\n%s", prefix, ctx.Err(), strings.Join(seen, "\n"), stderr.String())
			}
		}
	}
	await("ran 1 of 1")
	await("synced ")
	n.d.Stop()
	await("broken ")
	n.start()
	// The client resumes; a change after the restart reaches it.
	conn := n.conn()
	defer func() { _ = conn.Close() }()
	if _, err := podsyncv1.NewPodSyncServiceClient(conn).DeletePod(ctx, &podsyncv1.DeletePodRequest{
		Namespace: pod.GetMetadata().GetNamespace(), Name: pod.GetMetadata().GetName(), GracePeriodSeconds: ptr.To[int64](0),
	}); err != nil {
		t.Fatal(err)
	}
	await("deleted ")
	for range lines {
	}
	if err := <-exited; err != nil {
		t.Fatalf("the client: %v\nstderr:\n%s", err, stderr.String())
	}

	// After synced, each change's revision is above the one before, the
	// break notwithstanding: nothing twice, nothing out of order.
	var last int64
	synced := false
	for _, l := range seen {
		f := strings.Fields(l)
		if len(f) != 3 || f[0] == "broken" || f[0] == "ran" {
			continue
		}
		rev, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		if f[0] == "synced" {
			synced, last = true, rev
			continue
		}
		if synced && rev <= last {
			t.Errorf("revision %d after %d:\n%s", rev, last, strings.Join(seen, "\n"))
		}
		if synced {
			last = rev
		}
	}
	t.Logf("the client's lines:\n%s", strings.Join(seen, "\n"))
}

// TestPythonClient: the Python client (Debian's grpcio, code generated by
// protoc and the gRPC Python plugin) runs a pod with RunPods and follows
// WatchPods over gRPC across a restart of podsyncd until its deletion.
func TestPythonClient(t *testing.T) {
	n := newNode(t)
	req, pod := runRequest(t, "python")
	cmd := exec.Command("/usr/bin/python3", repoFile(t, "clients", "python", "example.py"),
		"--target", "unix://"+n.socket, "--until-deleted", req)
	followAcrossRestart(t, n, pod, cmd)
}

// TestTypeScriptClient: the TypeScript client (protoc-gen-es, connect-node)
// does the same over the Connect protocol, JSON over HTTP/1.1 on the same
// unix socket.
func TestTypeScriptClient(t *testing.T) {
	n := newNode(t)
	req, pod := runRequest(t, "typescript")
	cmd := exec.Command("node", repoFile(t, "clients", "typescript", "dist", "example.js"),
		"--socket", n.socket, "--until-deleted", req)
	followAcrossRestart(t, n, pod, cmd)
}
