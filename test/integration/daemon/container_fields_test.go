//go:build integration

package daemon_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/internal/testing/localcri/localcritest"
)

// syncSteps applies pod through SyncPod and returns its steps and result,
// whatever their outcome.
func (d *podsyncd) syncSteps(ctx context.Context, t *testing.T, pod *corev1.Pod) ([]*podsyncv1.SyncStep, *podsyncv1.SyncPodResult) {
	t.Helper()
	stream, err := d.client().SyncPod(ctx, &podsyncv1.SyncPodRequest{Pod: podToProto(t, pod)})
	if err != nil {
		t.Fatal(err)
	}
	var steps []*podsyncv1.SyncStep
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			t.Fatal("SyncPod ended without a result")
		}
		if err != nil {
			t.Fatalf("SyncPod: %v", err)
		}
		if s := m.GetStep(); s != nil {
			steps = append(steps, s)
		}
		if r := m.GetResult(); r != nil {
			return steps, r
		}
	}
}

// sharedDir is a new directory that is a shared mount point, as a
// HostToContainer source must be (the runtime checks; a systemd host's /
// is shared, this machine's is private).
func sharedDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind-mount %s: %v", dir, err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	if err := unix.Mount("", dir, "", unix.MS_SHARED, ""); err != nil {
		t.Fatalf("make %s shared: %v", dir, err)
	}
	return dir
}

// TestContainerFieldsThroughTheAPI runs the container fields of the
// kubelet's hooks and mounts through the API: an httpGet postStart hook
// (pod IP, named port) reaches a busybox httpd in the pod and a failing
// one gives FailedPostStartHook; subPathExpr $(POD_NAME) mounts the pod's
// directory; a HostToContainer hostPath shows a host mount made after the
// start (and one with None does not); stdin and tty reach the runtime;
// and PlanPod names
// lifecycle.preStop when it changes.
func TestContainerFieldsThroughTheAPI(t *testing.T) {
	ctx := testContext(t)
	shared := sharedDir(t)
	d := startPodsyncd(t, daemonOptions{Args: []string{"--allowed-host-paths=" + shared + ":rw"}})

	web := localcritest.Shell("web", `mkdir -p /www/cgi-bin
printf '#!/bin/sh\necho "$REQUEST_METHOD $QUERY_STRING $HTTP_USER_AGENT" > /www/hooked\necho "Content-Type: text/plain"\necho\necho ok\n' > /www/cgi-bin/started
chmod +x /www/cgi-bin/started
echo from-web > /logs/web.log
httpd -f -p 8080 -h /www & wait`)
	web.Stdin, web.TTY = true, true
	web.Env = []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
	web.VolumeMounts = []corev1.VolumeMount{
		{Name: "www", MountPath: "/www"},
		{Name: "logs", MountPath: "/logs", SubPathExpr: "$(POD_NAME)"},
		{Name: "media", MountPath: "/media", ReadOnly: true, MountPropagation: ptr.To(corev1.MountPropagationHostToContainer)},
		{Name: "media", MountPath: "/private", ReadOnly: true, MountPropagation: ptr.To(corev1.MountPropagationNone)},
	}
	pod := newCorePod(t, "", web)
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "www", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "logs", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "media", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: shared, Type: ptr.To(corev1.HostPathDirectory)}}},
	}
	st := d.syncPod(ctx, t, pod).GetStatus()
	webID := strings.TrimPrefix(st.GetContainerStatuses()[0].GetContainerId(), "containerd://")
	rs := runtimeClient(t)
	exec := func(id string, cmd ...string) string {
		t.Helper()
		out, stderr, err := rs.ExecSync(ctx, id, cmd, 30*time.Second)
		if err != nil {
			t.Fatalf("exec %v: %v (%s)", cmd, err, stderr)
		}
		return string(out)
	}

	// subPathExpr: the container's /logs is <volume>/<pod name>.
	opts := criconfig.Options{RootDir: d.opts.RootDir}
	logFile := filepath.Join(criconfig.VolumeDir(pod, criconfig.VolumePluginEmptyDir, "logs", opts.WithDefaults()), pod.Name, "web.log")
	eventually(ctx, t, "web.log below the pod's directory", func() bool {
		data, err := os.ReadFile(logFile)
		return err == nil && string(data) == "from-web\n"
	})

	// HostToContainer: a tmpfs mounted on the host after the start.
	sub := filepath.Join(shared, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", sub, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("mount tmpfs at %s: %v", sub, err)
	}
	t.Cleanup(func() { _ = unix.Unmount(sub, unix.MNT_DETACH) })
	if err := os.WriteFile(filepath.Join(sub, "marker"), []byte("mounted-later\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := exec(webID, "cat", "/media/sub/marker"); got != "mounted-later\n" {
		t.Errorf("/media/sub/marker in the container = %q, want the later host mount's file", got)
	}
	if got := exec(webID, "ls", "-A", "/private/sub"); strings.TrimSpace(got) != "" {
		t.Errorf("/private/sub (propagation None) lists %q, want the empty directory under the host's mount", got)
	}

	// stdin and tty reach the runtime's container config.
	if cs, err := rs.ContainerStatus(ctx, webID, true); err != nil {
		t.Fatal(err)
	} else if info := cs.GetInfo()["info"]; !strings.Contains(info, `"stdin":true`) || !strings.Contains(info, `"tty":true`) {
		t.Errorf("the runtime's config of web has no stdin and tty: %.400s", info)
	}

	// An httpGet postStart hook to the web server, once it listens.
	ip := st.GetPodIp()
	eventually(ctx, t, "web answering", func() bool {
		resp, err := (&http.Client{Timeout: 2 * time.Second}).Get("http://" + net.JoinHostPort(ip, "8080") + "/")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return true
	})
	app := sleeper("app")
	app.Ports = []corev1.ContainerPort{{Name: "web", ContainerPort: 8080}}
	app.Lifecycle = &corev1.Lifecycle{
		PostStart: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/cgi-bin/started?from=app", Port: intstr.FromString("web")}},
		PreStop:   &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 1}},
	}
	pod.Spec.Containers = append(pod.Spec.Containers, app)
	d.syncPod(ctx, t, pod)
	if got := exec(webID, "cat", "/www/hooked"); !strings.HasPrefix(got, "GET from=app kube-lifecycle/") {
		t.Errorf("the hook's request as httpd saw it: %q", got)
	}

	// PlanPod names the changed preStop hook.
	changed := pod.DeepCopy()
	changed.Spec.Containers[1].Lifecycle.PreStop = &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}
	plan, err := d.client().PlanPod(ctx, &podsyncv1.PlanPodRequest{Pod: podToProto(t, changed)})
	if err != nil {
		t.Fatal(err)
	}
	kills := plan.GetPlan().GetContainersToKill()
	if len(kills) != 1 || kills[0].GetName() != "app" || !slices.Equal(kills[0].GetChangedFields(), []string{"lifecycle.preStop"}) {
		t.Errorf("plan kills %v, want app with changed field lifecycle.preStop", kills)
	}

	// A hook to a port nothing listens on.
	bad := sleeper("bad")
	bad.Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/started", Port: intstr.FromInt32(8081)}}}
	pod.Spec.Containers = append(pod.Spec.Containers, bad)
	steps, _ := d.syncSteps(ctx, t, pod)
	// The hook's step and the start's are both START_CONTAINER in the
	// API; the start's message is the kubelet's.
	var sawHook, sawKill bool
	for _, s := range steps {
		switch {
		case s.GetAction() == podsyncv1.StepAction_STEP_ACTION_START_CONTAINER && s.GetTarget() == "bad":
			if s.GetOutcome() == podsyncv1.StepOutcome_STEP_OUTCOME_SUCCEEDED || s.GetReason() != "PostStartHookError" {
				t.Errorf("bad's start: %v %s %q, want PostStartHookError", s.GetOutcome(), s.GetReason(), s.GetMessage())
			}
			sawHook = sawHook || strings.HasPrefix(s.GetMessage(), `HTTP lifecycle hook (/started) for Container "bad"`)
		case s.GetAction() == podsyncv1.StepAction_STEP_ACTION_KILL_CONTAINER && s.GetTarget() == "bad":
			sawKill = s.GetReason() == "FailedPostStartHook"
		}
	}
	if !sawHook || !sawKill {
		t.Errorf("steps %v: want bad's start failed and bad killed with FailedPostStartHook", steps)
	}
	if _, err := d.client().DeletePod(ctx, &podsyncv1.DeletePodRequest{Namespace: pod.Namespace, Name: pod.Name}); err != nil {
		t.Fatal(err)
	}
	if err := removePodCgroups(string(pod.UID)); err != nil {
		t.Error(err)
	}
}
