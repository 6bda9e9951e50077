//go:build integration

package engine_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/engine/admit"
	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/plan"
	"github.com/podsync/podsync/engine/syncer"
	"github.com/podsync/podsync/internal/localcri"
	"github.com/podsync/podsync/internal/localcri/localcritest"
)

// webServer is a busybox httpd serving /www, whose CGI script
// /cgi-bin/started writes what the request was to /www/hooked.
func webServer() corev1.Container {
	return localcritest.Shell("web", `mkdir -p /www/cgi-bin
printf '#!/bin/sh\necho "$REQUEST_METHOD $QUERY_STRING $HTTP_USER_AGENT" > /www/hooked\necho "Content-Type: text/plain"\necho\necho ok\n' > /www/cgi-bin/started
chmod +x /www/cgi-bin/started
httpd -f -p 8080 -h /www & wait`)
}

// waitHTTP polls url from the node until it answers.
func waitHTTP(ctx context.Context, t *testing.T, url string) {
	t.Helper()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := (&http.Client{Timeout: 2 * time.Second}).Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s never answered: %v", url, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestHTTPGetPostStartHookReachesThePod: a postStart httpGet hook, with
// no host (the pod's IP) and a named port, reaches a busybox httpd in the
// pod; one to a port nothing listens on fails the start with
// FailedPostStartHook, as the kubelet's.
func TestHTTPGetPostStartHookReachesThePod(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pod := e.newPod()
	pod.Spec.Volumes = []corev1.Volume{{Name: "www", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	web := webServer()
	web.VolumeMounts = []corev1.VolumeMount{{Name: "www", MountPath: "/www"}}
	pod.Spec.Containers = []corev1.Container{web}
	res := e.until(pod, "web running", e.running(pod))
	if len(res.PodIPs) == 0 {
		t.Fatal("the pod has no IP")
	}
	waitHTTP(e.ctx, t, "http://"+net.JoinHostPort(res.PodIPs[0], "8080")+"/")

	// The hooked container is added once the server listens: its hook
	// runs right after its start, as the kubelet's.
	app := localcritest.Busybox("app")
	app.Ports = []corev1.ContainerPort{{Name: "web", ContainerPort: 8080}}
	app.Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{
		Path: "/cgi-bin/started?from=app", Port: intstr.FromString("web"),
	}}}
	pod.Spec.Containers = append(pod.Spec.Containers, app)
	res = e.until(pod, "app running", e.running(pod))
	if s := res.Step(syncer.ActionPostStartHook, "app"); s == nil || s.Err != nil {
		t.Fatalf("steps %v, want the app's postStart hook", steps(res.Steps))
	}
	hooked := filepath.Join(criconfig.VolumeDir(pod, criconfig.VolumePluginEmptyDir, "www", e.cfg), "hooked")
	if data, err := os.ReadFile(hooked); err != nil || !strings.HasPrefix(string(data), "GET from=app kube-lifecycle/") {
		t.Errorf("the hook's request as the server saw it: %q, %v", data, err)
	}

	// A hook to a port nothing listens on.
	bad := localcritest.Busybox("bad")
	bad.Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{
		Path: "/started", Port: intstr.FromInt32(8081),
	}}}
	pod.Spec.Containers = append(pod.Spec.Containers, bad)
	res = e.sync(pod)
	st := res.Step(syncer.ActionStartContainer, "bad")
	if st == nil || st.Reason != syncer.ReasonPostStartHookError || st.Err == nil {
		t.Fatalf("steps %v, want PostStartHookError", steps(res.Steps))
	}
	if !strings.HasPrefix(st.Message, `HTTP lifecycle hook (/started) for Container "bad"`) || !strings.Contains(st.Message, "connection refused") {
		t.Errorf("message %q, want the kubelet's with the refusal", st.Message)
	}
	if !hasStep(res, syncer.ActionKillContainer, "bad", syncer.ReasonFailedPostStartHook) {
		t.Errorf("steps %v, want bad killed with FailedPostStartHook", steps(res.Steps))
	}
	if n := newest(t, res, "bad"); n.State != plan.ContainerExited {
		t.Errorf("bad = %+v, want exited", n)
	}
}

// TestSubPathExprMountsThePodsDirectory: subPathExpr $(POD_NAME), with
// POD_NAME from the downward API, mounts the volume's directory named
// after the pod, created for it.
func TestSubPathExprMountsThePodsDirectory(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pod := e.newPod()
	pod.Spec.Volumes = []corev1.Volume{{Name: "logs", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	c := localcritest.Shell("app", "echo written-by-app > /logs/app.log; while :; do sleep 1; done")
	c.Env = []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
	c.VolumeMounts = []corev1.VolumeMount{{Name: "logs", MountPath: "/logs", SubPathExpr: "$(POD_NAME)"}}
	pod.Spec.Containers = []corev1.Container{c}
	e.until(pod, "running", e.running(pod))
	file := filepath.Join(criconfig.VolumeDir(pod, criconfig.VolumePluginEmptyDir, "logs", e.cfg), pod.Name, "app.log")
	var data []byte
	deadline := time.Now().Add(30 * time.Second)
	for {
		var err error
		if data, err = os.ReadFile(file); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if string(data) != "written-by-app\n" {
		t.Errorf("%s = %q, want what the container wrote to /logs", file, data)
	}

	// A variable the env does not set is refused, as the kubelet's
	// ExpandContainerVolumeMounts: never a directory named "$(UNSET)".
	bad := localcritest.Busybox("bad")
	bad.VolumeMounts = []corev1.VolumeMount{{Name: "logs", MountPath: "/logs", SubPathExpr: "$(UNSET)"}}
	pod.Spec.Containers = append(pod.Spec.Containers, bad)
	res := e.sync(pod)
	st := res.Step(syncer.ActionStartContainer, "bad")
	if st == nil || st.Reason != syncer.ReasonCreateContainerConfigErr || !strings.Contains(st.Message, "missing value for UNSET") {
		t.Errorf("steps %v, want bad refused with CreateContainerConfigError naming UNSET", steps(res.Steps))
	}
}

// TestHostToContainerSeesALaterHostMount: a hostPath mounted with
// mountPropagation HostToContainer shows a mount made on the host below it
// after the container started; one mounted with None does not.
func TestHostToContainerSeesALaterHostMount(t *testing.T) {
	t.Parallel()
	shared := t.TempDir()
	// The runtime needs the source of a HostToContainer mount on a shared
	// (or slave) mount, as on a systemd host; this machine's / is private.
	if err := unix.Mount(shared, shared, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind-mount %s: %v", shared, err)
	}
	t.Cleanup(func() { _ = unix.Unmount(shared, unix.MNT_DETACH) })
	if err := unix.Mount("", shared, "", unix.MS_SHARED, ""); err != nil {
		t.Fatalf("make %s shared: %v", shared, err)
	}
	sub := filepath.Join(shared, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(o *syncer.SyncerOptions) {
		o.HostPaths = admit.Policy{AllowedHostPaths: []admit.HostPathPrefix{{Path: shared}}}
	})
	pod := e.newPod()
	pod.Spec.Volumes = []corev1.Volume{{Name: "media", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
		Path: shared, Type: ptr.To(corev1.HostPathDirectory)}}}}
	watcher := localcritest.Shell("watcher", "while :; do sleep 1; done")
	watcher.VolumeMounts = []corev1.VolumeMount{{Name: "media", MountPath: "/media", ReadOnly: true,
		MountPropagation: ptr.To(corev1.MountPropagationHostToContainer)}}
	private := localcritest.Shell("private", "while :; do sleep 1; done")
	private.VolumeMounts = []corev1.VolumeMount{{Name: "media", MountPath: "/media", ReadOnly: true,
		MountPropagation: ptr.To(corev1.MountPropagationNone)}}
	pod.Spec.Containers = []corev1.Container{watcher, private}
	res := e.until(pod, "running", e.running(pod))

	// After the start: a tmpfs on the host below the volume.
	if err := unix.Mount("tmpfs", sub, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("mount tmpfs at %s: %v", sub, err)
	}
	t.Cleanup(func() { _ = unix.Unmount(sub, unix.MNT_DETACH) })
	if err := os.WriteFile(filepath.Join(sub, "marker"), []byte("mounted-later\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := localcritest.Crictl(t, inst, "exec", newest(t, res, "watcher").ID, "cat", "/media/sub/marker"); got != "mounted-later\n" {
		t.Errorf("watcher (HostToContainer) reads %q, want the file of the later mount", got)
	}
	if got := localcritest.Crictl(t, inst, "exec", newest(t, res, "private").ID, "ls", "-A", "/media/sub"); strings.TrimSpace(got) != "" {
		t.Errorf("private (None) lists %q below /media/sub, want the empty directory under the mount", got)
	}
}

// TestStopSignal: lifecycle.stopSignal stops the container with its
// signal on containerd 2.x (the container's trap gives its exit code);
// containerd 1.6 ignores the field, so the start is refused, saying so,
// and no container is left.
func TestStopSignal(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pod := e.newPod()
	pod.Spec.OS = &corev1.PodOS{Name: corev1.Linux}
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](20)
	c := localcritest.Busybox("app", "/bin/sh", "-c", "trap 'exit 7' USR1; trap 'exit 0' TERM; while :; do sleep 1; done")
	c.Lifecycle = &corev1.Lifecycle{StopSignal: ptr.To(corev1.SIGUSR1)}
	pod.Spec.Containers = []corev1.Container{c}
	if inst.Flavour() == localcri.Containerd16 {
		res := e.sync(pod)
		st := res.Step(syncer.ActionStartContainer, "app")
		if st == nil || st.Reason != syncer.ReasonCreateContainerError ||
			!strings.Contains(st.Message, "ignores lifecycle.stopSignal SIGUSR1") || !errors.Is(st.Err, errdefs.ErrInvalidSpec) {
			t.Fatalf("steps %v, want the start refused for the ignored stop signal", steps(res.Steps))
		}
		if got := localcritest.CrictlIDs(t, inst, "ps", "-a", "--label", "io.kubernetes.pod.uid="+string(pod.UID)); len(got) != 0 {
			t.Errorf("containers left: %v", got)
		}
		return
	}
	e.until(pod, "running", e.running(pod))
	start := time.Now()
	pod.DeletionTimestamp = ptr.To(metav1.Now())
	res := e.sync(pod)
	if n := newest(t, res, "app"); n.State != plan.ContainerExited || n.ExitCode != 7 {
		t.Errorf("app = %+v, want exited 7 (its SIGUSR1 trap)", n)
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("the stop took %s: not the stop signal, the grace period's SIGKILL", took)
	}
}
