package hollow_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/client"
	"github.com/podsync/podsync/convert"
	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/errorinfo"
	"github.com/podsync/podsync/internal/testing/hollow"
)

// node is a hollow node run by Main in this process.
type node struct {
	dir, root, cgroupRoot string
	c                     *client.Client
	cancel                context.CancelFunc
	done                  chan int
	stderr                *syncBuffer
}

// startNode runs Main with podsyncd's flags under a directory of its own
// and connects to it; the test's end stops it and checks it exits 0.
func startNode(t *testing.T) *node {
	t.Helper()
	// A short directory: a socket path is limited to 107 bytes.
	dir, err := os.MkdirTemp("", "hollow-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	config := filepath.Join(dir, "podsyncd.yaml")
	if err := os.WriteFile(config, fmt.Appendf(nil, "security:\n  roles:\n    admin: [\"uid:%d\"]\n", os.Getuid()), 0o600); err != nil {
		t.Fatal(err)
	}
	n := &node{dir: dir, root: filepath.Join(dir, "root"), cgroupRoot: "/" + filepath.Base(dir),
		done: make(chan int, 1), stderr: &syncBuffer{}}
	sock := filepath.Join(dir, "podsync.sock")
	args := []string{"--config", config, "--listen", "unix://" + sock, "--root-dir", n.root,
		"--pod-log-dir", filepath.Join(dir, "pods"), "--node-name", "hollow-1", "--node-ip", "127.0.0.1",
		"--resolv-conf=", "--cgroup-root", n.cgroupRoot, "--shutdown-timeout", "5s", "--log-format", "console"}
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	n.cancel = cancel
	go func() { n.done <- hollow.Main(ctx, args, n.stderr, n.stderr) }()
	t.Cleanup(func() {
		n.cancel()
		select {
		case code := <-n.done:
			if code != 0 {
				t.Errorf("hollow node exited %d; its log:\n%s", code, n.stderr.String())
			}
		case <-time.After(20 * time.Second):
			t.Errorf("hollow node still running 20 s after its context ended")
		}
	})
	if n.c, err = client.New(t.Context(), "unix://"+sock); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.c.Close() })
	wait(t, 20*time.Second, "the node serves", func() (bool, string) {
		_, err := n.c.GetNode(t.Context())
		return err == nil, fmt.Sprint(err)
	})
	return n
}

// wait polls cond every 50 ms until it holds or timeout passes.
func wait(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s (last: %s)", what, timeout, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestHollowNode: a hollow node is podsyncd on a simulated runtime: a
// pod applied through its API runs at once, its container that sleeps
// exits on schedule with the script's code and output, its volumes are
// written to plain directories (nothing mounted, no cgroup made on the
// host), its stats are plausible, exec is refused with the reason, and
// a deleted pod goes with its directory.
func TestHollowNode(t *testing.T) {
	n := startNode(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{
				{Name: "app", Image: "registry.example/app:1", Command: []string{"sleep", "infinity"},
					VolumeMounts: []corev1.VolumeMount{{Name: "creds", MountPath: "/creds"}}},
				{Name: "job", Image: "registry.example/job:latest", Command: []string{"sh", "-c", "echo start; sleep 1; echo done; exit 3"}},
			},
			Volumes: []corev1.Volume{{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds"}}}},
		},
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: "default"}, Data: map[string][]byte{"token": []byte("s3cr3t")}}
	req, err := client.SyncPodRequestFromPod(pod, nil, []*corev1.Secret{secret})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := n.c.SyncPod(ctx, req, nil); err != nil {
		t.Fatalf("SyncPod: %v", err)
	}
	var got *corev1.Pod
	get := func() (*corev1.Pod, error) {
		resp, err := n.c.GetPod(ctx, "default", "web")
		if err != nil {
			return nil, err
		}
		return convert.PodFromProto(resp.GetPod())
	}
	wait(t, 10*time.Second, "app running, job exited", func() (bool, string) {
		if got, err = get(); err != nil {
			return false, err.Error()
		}
		var app, job bool
		for _, cs := range got.Status.ContainerStatuses {
			app = app || cs.Name == "app" && cs.State.Running != nil
			job = job || cs.Name == "job" && cs.State.Terminated != nil
		}
		return app && job, fmt.Sprintf("%+v", got.Status.ContainerStatuses)
	})
	if took := time.Since(start); took < time.Second {
		t.Errorf("job exited %s after the apply, before its sleep of 1 s", took)
	}
	if got.Status.Phase != corev1.PodRunning {
		t.Errorf("phase %s, want Running", got.Status.Phase)
	}
	for _, cs := range got.Status.ContainerStatuses {
		if term := cs.State.Terminated; cs.Name == "job" && (term.ExitCode != 3 || term.Reason != "Error") {
			t.Errorf("job terminated with %d (%s), want 3 (Error)", term.ExitCode, term.Reason)
		}
	}

	// The secret is a plain directory under the root; nothing is mounted
	// and no cgroup is made on the host; the cgroup root's lock is a
	// directory of the node's.
	vol := criconfig.VolumeDir(got, criconfig.VolumePluginSecret, "creds", criconfig.Options{RootDir: n.root})
	if data, err := os.ReadFile(filepath.Join(vol, "token")); err != nil || string(data) != "s3cr3t" {
		t.Errorf("secret file = %q, %v", data, err)
	}
	if m := mountsBelow(t, n.dir); len(m) > 0 {
		t.Errorf("mounts below the node's directory: %v, want none", m)
	}
	for _, h := range []string{criconfig.DefaultCgroupFS, filepath.Join(criconfig.DefaultCgroupFS, "memory")} {
		if _, err := os.Stat(filepath.Join(h, n.cgroupRoot)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("cgroup root under %s: %v, want none made", h, err)
		}
	}
	if fi, err := os.Stat(filepath.Join(n.root, hollow.CgroupDir, n.cgroupRoot, "kubepods")); err != nil || !fi.IsDir() {
		t.Errorf("the cgroup root's lock directory in the node's root: %v", err)
	}

	// Plausible usage: a millicore and 4 MiB for the running container.
	st, err := n.c.GetPodStats(ctx, "default", "web")
	if err != nil {
		t.Fatalf("GetPodStats: %v", err)
	}
	if len(st.GetContainers()) != 1 || st.GetContainers()[0].GetName() != "app" ||
		st.GetContainers()[0].GetCpu().GetUsageNanoCores() != hollow.ContainerNanoCores ||
		st.GetContainers()[0].GetMemory().GetWorkingSetBytes() != hollow.ContainerMemoryBytes {
		t.Errorf("container stats %v, want app alone, with a millicore and 4 MiB", st.GetContainers())
	}
	if st.GetSource() != "cri" || st.GetMemory().GetWorkingSetBytes() != hollow.ContainerMemoryBytes+hollow.SandboxMemoryBytes {
		t.Errorf("pod stats from %q with %d bytes, want cri with %d", st.GetSource(), st.GetMemory().GetWorkingSetBytes(),
			hollow.ContainerMemoryBytes+hollow.SandboxMemoryBytes)
	}

	// The job's log holds what it echoed, before and after its sleep.
	var lines []string
	if err := n.c.Logs(ctx, &podsyncv1.GetContainerLogsRequest{Namespace: "default", Name: "web", Container: "job"},
		func(l *podsyncv1.LogLine) error { lines = append(lines, string(l.GetContent())); return nil }); err != nil {
		t.Fatalf("Logs: %v", err)
	}
	if strings.Join(lines, "|") != "start|done" {
		t.Errorf("job's log %q, want start, done", lines)
	}

	// Exec is refused with the reason.
	_, err = n.c.Exec(ctx, client.ExecOptions{Namespace: "default", Name: "web", Container: "app", Command: []string{"true"}})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Code != codes.Unavailable || ce.Reason != errorinfo.ReasonStreamFailed || !strings.Contains(ce.Message, "hollow") {
		t.Errorf("Exec: %v, want UNAVAILABLE %s saying the node is hollow", err, errorinfo.ReasonStreamFailed)
	}

	if _, err := n.c.DeletePod(ctx, &podsyncv1.DeletePodRequest{Namespace: "default", Name: "web"}); err != nil {
		t.Fatalf("DeletePod: %v", err)
	}
	podDir := criconfig.PodDir(got, criconfig.Options{RootDir: n.root})
	wait(t, 10*time.Second, "the pod and its directory gone", func() (bool, string) {
		_, err := n.c.GetPod(ctx, "default", "web")
		_, serr := os.Stat(podDir)
		return errors.As(err, &ce) && ce.Code == codes.NotFound && errors.Is(serr, fs.ErrNotExist), fmt.Sprint(err, serr)
	})
}

// mountsBelow lists the mount points of this process's mount table at
// or below dir.
func mountsBelow(t *testing.T, dir string) []string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && (fields[4] == dir || strings.HasPrefix(fields[4], dir+"/")) {
			out = append(out, fields[4])
		}
	}
	return out
}
