//go:build integration

package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/podsync/podsync/internal/testing/localcluster"
	"github.com/podsync/podsync/internal/testing/localcri"
	"github.com/podsync/podsync/internal/testing/localcri/localcritest"
)

// inClusterImage runs testdata/incluster, an in-cluster client.
const inClusterImage = "registry.local/podsync-test/incluster:1"

// tokenMaxAge is podsync-vk's --token-max-age in the cluster user's
// cluster.
const tokenMaxAge = 20 * time.Second

// clusterUser is a cluster of two podsync nodes for what a cluster user
// does every day, with kubectl.
type clusterUser struct {
	t *testing.T
	c *localcluster.Cluster
}

// startClusterUser starts a control plane, the two nodes (on the
// package's containerds) and podsync-vk, with the in-cluster client's
// image on both nodes.
func startClusterUser(t *testing.T) *clusterUser {
	t.Helper()
	dir, err := os.MkdirTemp("", "podsync-habits-")
	if err != nil {
		t.Fatal(err)
	}
	repo, err := localcri.RepoDir()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "incluster")
	build := exec.Command("go", "build", "-o", bin, "./test/integration/cluster/testdata/incluster")
	build.Dir, build.Env = repo, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the in-cluster client: %v\n%s", err, out)
	}
	prog, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	tar := filepath.Join(dir, "images.tar")
	if err := localcri.WriteImageArchive([]localcri.ImageSpec{{Ref: inClusterImage,
		Files:  []localcri.ImageFile{{Path: "incluster", Mode: 0o755, Data: prog}},
		Config: v1.Config{Entrypoint: []string{"/incluster"}, User: "65534"}}}, filepath.Join(dir, "layout"), tar); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	c, err := localcluster.Start(ctx, localcluster.Options{Dir: filepath.Join(dir, "cluster"), RepoDir: repo, KubeBin: kubeBin,
		Runtimes: insts[:], PodsyncdBin: podsyncdBin, VKBin: vkBin, Logger: localcritest.Logger(),
		// Service-account tokens renewed at 20 s of age at the latest,
		// so that a rotation happens within a subtest (the API server's
		// shortest lifetime, 10 minutes, would make it wait 8).
		VKArgs:        []string{"--token-max-age", tokenMaxAge.String()},
		Images:        []localcluster.Images{{Tar: tar, Refs: []string{inClusterImage}}},
		MetricsServer: filepath.Join(kubeBin, "metrics-server")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range append([]*localcluster.Process{c.VK, c.MetricsServer}, c.Podsyncds()...) {
				t.Logf("%s log ends:\n%s", p.Name, tailFile(p.Log, 4000))
			}
		}
		// Pods first, so that the nodes' containerds are left empty for
		// the package's other tests.
		out, _ := c.Kubectl(context.Background(), "delete", "pods,jobs", "--all", "--all-namespaces", "--grace-period=1", "--wait=true", "--timeout=2m")
		if err := c.Stop(context.Background()); err != nil {
			t.Errorf("stop the cluster: %v (%s)", err, out)
		}
		if t.Failed() {
			t.Logf("logs kept in %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	return &clusterUser{t: t, c: c}
}

// kubectl runs kubectl and fails the test on an error.
func (u *clusterUser) kubectl(args ...string) string {
	u.t.Helper()
	ctx, cancel := context.WithTimeout(u.t.Context(), 3*time.Minute)
	defer cancel()
	out, err := u.c.Kubectl(ctx, args...)
	if err != nil {
		u.t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// apply applies a manifest.
func (u *clusterUser) apply(manifest string) {
	u.t.Helper()
	f := filepath.Join(u.t.TempDir(), "m.yaml")
	if err := os.WriteFile(f, []byte(manifest), 0o600); err != nil {
		u.t.Fatal(err)
	}
	u.kubectl("apply", "-f", f)
}

// pod reads a pod.
func (u *clusterUser) pod(name string) *corev1.Pod {
	u.t.Helper()
	var p corev1.Pod
	if err := json.Unmarshal([]byte(u.kubectl("get", "pod", name, "-o", "json")), &p); err != nil {
		u.t.Fatal(err)
	}
	return &p
}

// eventually polls cond every second until it holds or timeout passes.
func (u *clusterUser) eventually(timeout time.Duration, what string, cond func() (bool, string)) {
	u.t.Helper()
	eventually(u.t, timeout, what, cond)
}

// sleeper applies a pod name of one busybox container app that sleeps,
// and waits until it is Ready.
func (u *clusterUser) sleeper(name string) {
	u.t.Helper()
	u.apply(`apiVersion: v1
kind: Pod
metadata: {name: ` + name + `, namespace: default}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: ` + localcri.BusyboxImage + `
    command: ["sleep", "3600"]
`)
	u.kubectl("wait", "--for=condition=Ready", "pod/"+name, "--timeout=120s")
}

// kubectlCmd is a kubectl command on the cluster, ended with ctx.
func (u *clusterUser) kubectlCmd(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, filepath.Join(kubeBin, "kubectl"), append([]string{"--kubeconfig", u.c.Kube.Kubeconfig}, args...)...)
}

// session runs kubectl (attach, debug -i) with its stdin kept open, as a
// user at a keyboard: it types line, waits until the output shows want,
// then types exit and ends stdin, and returns kubectl's output once it
// exits. A stdin that ended at once would end the session before the
// shell answers: kubectl debug's container has stdinOnce unset, and
// containerd detaches an attached client at the end of its stdin (as on a
// kubelet's node) — the output is then only in the container's log.
//
// With no answer after sessionRetype, it types line again, as a user
// who sees no prompt presses enter (kubectl's own hint): containerd's
// attach starts copying stdin before it adds the client's stdout
// (ContainerIO.Attach), so a line typed before the attach is up can be
// answered before the client listens, and that answer is only in the
// log — on a kubelet's node too. line's output must be computed, so that
// no echo of the input passes for it.
func (u *clusterUser) session(line, want string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(u.t.Context(), 2*time.Minute)
	defer cancel()
	cmd := u.kubectlCmd(ctx, args...)
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", err
	}
	if err := cmd.Start(); err != nil {
		return "", err
	}
	_, err = io.WriteString(stdin, line+"\n")
	typed := time.Now()
	for err == nil && !strings.Contains(out.String(), want) {
		if ctx.Err() != nil {
			err = fmt.Errorf("no %q in the output within 2m", want)
			break
		}
		if time.Since(typed) > sessionRetype {
			u.t.Logf("kubectl %s: no %q after %s; typing the line again", args[0], want, sessionRetype)
			_, err = io.WriteString(stdin, line+"\n")
			typed = time.Now()
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err == nil {
		_, err = io.WriteString(stdin, "exit\n")
	}
	_ = stdin.Close()
	return out.String(), errors.Join(err, cmd.Wait())
}

// sessionRetype is how long session waits for an answer before it types
// its line again.
const sessionRetype = 10 * time.Second

// stillRunning checks that pod name is Running with its container app
// never restarted, and returns it.
func (u *clusterUser) stillRunning(name string) *corev1.Pod {
	u.t.Helper()
	p := u.pod(name)
	if p.Status.Phase != corev1.PodRunning {
		u.t.Errorf("pod %s: %s (%s %s), want Running", name, p.Status.Phase, p.Status.Reason, p.Status.Message)
	}
	if len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].RestartCount != 0 || p.Status.ContainerStatuses[0].State.Running == nil {
		u.t.Errorf("pod %s: container statuses %+v, want app running, never restarted", name, p.Status.ContainerStatuses)
	}
	return p
}

// ephemeralStatus is the status of pod's ephemeral container name.
func ephemeralStatus(p *corev1.Pod, name string) *corev1.ContainerStatus {
	for i := range p.Status.EphemeralContainerStatuses {
		if p.Status.EphemeralContainerStatuses[i].Name == name {
			return &p.Status.EphemeralContainerStatuses[i]
		}
	}
	return nil
}
