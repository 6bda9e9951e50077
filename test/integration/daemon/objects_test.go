//go:build integration

package daemon_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/internal/testing/localcri"
	"github.com/podsync/podsync/internal/testing/localcri/localcritest"
)

// applyConfigMap stores one ConfigMap of the test's namespace and returns
// its resource version.
func (d *podsyncd) applyConfigMap(ctx context.Context, t *testing.T, cm *podsyncv1.ConfigMap) string {
	t.Helper()
	resp, err := d.client().ApplyObjects(ctx, &podsyncv1.ApplyObjectsRequest{ConfigMaps: []*podsyncv1.ConfigMap{cm}})
	if err != nil {
		t.Fatalf("ApplyObjects: %v", err)
	}
	return resp.GetResults()[0].GetObject().GetResourceVersion()
}

// logLines returns the container's log lines so far.
func (d *podsyncd) logLines(ctx context.Context, t *testing.T, name, container string) []string {
	t.Helper()
	stream, err := d.client().GetContainerLogs(ctx, &podsyncv1.GetContainerLogsRequest{Namespace: namespace, Name: name, Container: container})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("GetContainerLogs: %v", err)
		}
		for _, l := range m.GetLines() {
			out = append(out, string(l.GetContent()))
		}
	}
}

func (d *podsyncd) podStatus(ctx context.Context, t *testing.T, name string) *podsyncv1.PodStatus {
	t.Helper()
	resp, err := d.client().GetPod(ctx, &podsyncv1.GetPodRequest{Namespace: namespace, Name: name})
	if err != nil {
		t.Fatalf("GetPod: %v", err)
	}
	return resp.GetPod().GetStatus()
}

// TestStoredConfigMapUpdatesRunningPod: a pod refers to a ConfigMap
// applied in a separate call, in env and as a volume, and runs; an update
// of the ConfigMap reaches the mounted file inside the running container
// within 2 s — a reader loop there sees the old content, then the new,
// never a mix — while the environment keeps the old value and the
// container is not restarted; an immutable ConfigMap refuses an update.
func TestStoredConfigMapUpdatesRunningPod(t *testing.T) {
	ctx := testContext(t)
	d := startPodsyncd(t, daemonOptions{})
	oldValue, newValue := strings.Repeat("a", 4096), strings.Repeat("b", 4096)
	d.applyConfigMap(ctx, t, &podsyncv1.ConfigMap{Metadata: &podsyncv1.ObjectMeta{Name: "app-config", Namespace: namespace},
		Data: map[string]string{"value": oldValue}})

	app := localcritest.Shell("app", `while true; do v=$(cat /etc/app/value); echo "file:${#v}:${v:0:1}:${v:4095:1} env:${#VALUE}:${VALUE:0:1}"; sleep 0.05; done`)
	app.Env = []corev1.EnvVar{{Name: "VALUE", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}, Key: "value"}}}}
	app.VolumeMounts = []corev1.VolumeMount{{Name: "cfg", MountPath: "/etc/app"}}
	pod := newCorePod(t, "", app)
	pod.Spec.Volumes = []corev1.Volume{{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}}}}}
	res := d.syncPod(ctx, t, pod)
	if res.GetStatus().GetPhase() != "Running" {
		t.Fatalf("pod using a stored ConfigMap: %v", res.GetStatus())
	}
	containerID := res.GetStatus().GetContainerStatuses()[0].GetContainerId()
	const oldLine, newLine = "file:4096:a:a env:4096:a", "file:4096:b:b env:4096:a"
	eventually(ctx, t, "the reader sees the old content", func() bool {
		lines := d.logLines(ctx, t, pod.Name, "app")
		return len(lines) > 0 && lines[len(lines)-1] == oldLine
	})

	start := time.Now()
	d.applyConfigMap(ctx, t, &podsyncv1.ConfigMap{Metadata: &podsyncv1.ObjectMeta{Name: "app-config", Namespace: namespace},
		Data: map[string]string{"value": newValue}})
	var took time.Duration
	eventually(ctx, t, "the reader sees the new content", func() bool {
		lines := d.logLines(ctx, t, pod.Name, "app")
		if len(lines) > 0 && lines[len(lines)-1] == newLine {
			took = time.Since(start)
			return true
		}
		return false
	})
	if took > 2*time.Second+500*time.Millisecond { // the log read's own latency on top
		t.Errorf("the mounted file changed %s after the update, want within 2 s", took)
	}
	seenNew := false
	for i, l := range d.logLines(ctx, t, pod.Name, "app") {
		switch l {
		case oldLine:
			if seenNew {
				t.Errorf("line %d: the old content after the new one", i)
			}
		case newLine:
			seenNew = true
		default:
			t.Errorf("line %d: %q is neither the old content nor the new one (a mix, or env changed)", i, l)
		}
	}
	st := d.podStatus(ctx, t, pod.Name)
	if cs := st.GetContainerStatuses()[0]; cs.GetContainerId() != containerID || cs.GetRestartCount() != 0 {
		t.Errorf("container %s with %d restarts after the update, want %s never restarted", cs.GetContainerId(), cs.GetRestartCount(), containerID)
	}

	frozen := &podsyncv1.ConfigMap{Metadata: &podsyncv1.ObjectMeta{Name: "frozen", Namespace: namespace},
		Data: map[string]string{"k": "1"}, Immutable: ptr.To(true)}
	d.applyConfigMap(ctx, t, frozen)
	frozen.Data["k"] = "2"
	_, err := d.client().ApplyObjects(ctx, &podsyncv1.ApplyObjectsRequest{ConfigMaps: []*podsyncv1.ConfigMap{frozen}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "immutable") {
		t.Errorf("update of an immutable ConfigMap: %v, want INVALID_ARGUMENT naming immutable", err)
	}
}

// TestPodWaitsForMissingSecret: a pod whose env needs a Secret that is
// not stored waits with CreateContainerConfigError, and starts once the
// Secret is applied, without being sent again.
func TestPodWaitsForMissingSecret(t *testing.T) {
	ctx := testContext(t)
	d := startPodsyncd(t, daemonOptions{})
	app := localcritest.Shell("app", `echo "token:$TOKEN"; while true; do sleep 1; done`)
	app.Env = []corev1.EnvVar{{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "app-token"}, Key: "token"}}}}
	pod := newCorePod(t, "", app)
	stream, err := d.client().SyncPod(ctx, &podsyncv1.SyncPodRequest{Pod: podToProto(t, pod)})
	if err != nil {
		t.Fatal(err)
	}
	var res *podsyncv1.SyncPodResult
	for res == nil {
		m, err := stream.Recv()
		if err != nil {
			t.Fatalf("SyncPod: %v", err)
		}
		if s := m.GetStep(); s.GetAction() == podsyncv1.StepAction_STEP_ACTION_START_CONTAINER && s.GetReason() != "CreateContainerConfigError" {
			t.Errorf("start step %s: %s, want CreateContainerConfigError", s.GetOutcome(), s.GetReason())
		}
		res = m.GetResult()
	}
	if w := res.GetStatus().GetContainerStatuses()[0].GetState().GetWaiting(); w.GetReason() != "CreateContainerConfigError" {
		t.Fatalf("pod with a missing Secret: %v, want waiting CreateContainerConfigError", res.GetStatus())
	}
	if _, err := d.client().ApplyObjects(ctx, &podsyncv1.ApplyObjectsRequest{Secrets: []*podsyncv1.Secret{{
		Metadata: &podsyncv1.ObjectMeta{Name: "app-token", Namespace: namespace}, StringData: map[string]string{"token": "s3cret"}}}}); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "the pod starts once its Secret is applied", func() bool {
		return d.podStatus(ctx, t, pod.Name).GetContainerStatuses()[0].GetState().GetRunning() != nil
	})
	eventually(ctx, t, "the container has the Secret's value", func() bool {
		lines := d.logLines(ctx, t, pod.Name, "app")
		return len(lines) > 0 && lines[0] == "token:s3cret"
	})
}

// TestObjectWatchResumesAcrossRestart: a WatchObjects resumed by revision
// after a restart of podsyncd sends every object change after it, in
// order, the ones before and after the restart.
func TestObjectWatchResumesAcrossRestart(t *testing.T) {
	ctx := testContext(t)
	root, logs := t.TempDir(), t.TempDir()
	d := startPodsyncd(t, daemonOptions{RootDir: root, PodLogDir: logs})
	cm := func(name, v string) *podsyncv1.ConfigMap {
		return &podsyncv1.ConfigMap{Metadata: &podsyncv1.ObjectMeta{Name: name, Namespace: namespace}, Data: map[string]string{"k": v}}
	}
	rv := d.applyConfigMap(ctx, t, cm("a", "1"))
	d.applyConfigMap(ctx, t, cm("a", "2"))
	d.Stop()
	d = startPodsyncd(t, daemonOptions{RootDir: root, PodLogDir: logs})
	d.applyConfigMap(ctx, t, cm("b", "1"))
	if _, err := d.client().DeleteObject(ctx, &podsyncv1.DeleteObjectRequest{Kind: podsyncv1.ObjectKind_OBJECT_KIND_CONFIG_MAP, Namespace: namespace, Name: "a"}); err != nil {
		t.Fatal(err)
	}
	since, _ := strconv.ParseInt(rv, 10, 64)
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	stream, err := d.client().WatchObjects(wctx, &podsyncv1.WatchObjectsRequest{SinceRevision: since})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	last := since
	for len(got) < 3 {
		m, err := stream.Recv()
		if err != nil {
			t.Fatalf("WatchObjects after %v: %v", got, err)
		}
		if m.GetRevision() <= last {
			t.Errorf("revision %d after %d", m.GetRevision(), last)
		}
		last = m.GetRevision()
		what := "applied " + m.GetObject().GetName() + "=" + m.GetApplied().GetConfigMap().GetData()["k"]
		if m.GetDeleted() != nil {
			what = "deleted " + m.GetObject().GetName()
		}
		got = append(got, what)
	}
	want := []string{"applied a=2", "applied b=1", "deleted a"}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("watch resumed across a restart: %v, want %v", got, want)
	}
}

// TestManifestDirectory: podsyncd --manifest-dir: a file moved in runs
// its pods; an edit of the command recreates the container; a syntax
// error leaves the pod running and is reported; the API refuses to
// delete a file's pod; all of it survives a restart of podsyncd with no
// second sandbox; rm deletes the pods.
func TestManifestDirectory(t *testing.T) {
	ctx := testContext(t)
	rs := runtimeClient(t)
	root, logs, dir := t.TempDir(), t.TempDir(), t.TempDir()
	args := []string{"--manifest-dir=" + dir, "--manifest-rescan=1s"}
	d := startPodsyncd(t, daemonOptions{RootDir: root, PodLogDir: logs, Args: args})
	name := "static-" + strings.ToLower(strconv.FormatInt(time.Now().UnixNano()%1e6, 36))
	manifest := func(script string) string {
		return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\n  namespace: " + namespace + "\nspec:\n" +
			"  terminationGracePeriodSeconds: 1\n  containers:\n  - name: app\n    image: " + localcri.BusyboxImage + "\n" +
			"    command: [/bin/sh, -c, " + strconv.Quote("trap 'exit 0' TERM; "+script) + "]\n"
	}
	put := func(content string) {
		t.Helper()
		tmp := filepath.Join(t.TempDir(), "web.yaml")
		if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "web.yaml")); err != nil {
			t.Fatal(err)
		}
	}
	running := func() (*podsyncv1.Pod, string) {
		resp, err := d.client().GetPod(ctx, &podsyncv1.GetPodRequest{Namespace: namespace, Name: name})
		if err != nil {
			return nil, ""
		}
		for _, cs := range resp.GetPod().GetStatus().GetContainerStatuses() {
			if cs.GetState().GetRunning() != nil {
				return resp.GetPod(), cs.GetContainerId()
			}
		}
		return resp.GetPod(), ""
	}
	cleanupPod := func() {
		if pod, _ := running(); pod != nil {
			_ = removePodCgroups(pod.GetMetadata().GetUid())
		}
	}
	t.Cleanup(cleanupPod)

	put(manifest("echo one; while true; do sleep 1; done"))
	var first string
	eventually(ctx, t, "the file's pod runs", func() bool { _, first = running(); return first != "" })
	pod, _ := running()
	uid := pod.GetMetadata().GetUid()
	if got := pod.GetMetadata().GetAnnotations()["podsync.io/source"]; got != "file:web.yaml" {
		t.Errorf("source annotation %q, want file:web.yaml", got)
	}
	_, err := d.client().DeletePod(ctx, &podsyncv1.DeletePodRequest{Namespace: namespace, Name: name, GracePeriodSeconds: ptr.To[int64](0)})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(status.Convert(err).Message(), "web.yaml") {
		t.Errorf("DeletePod of a file's pod: %v, want FAILED_PRECONDITION naming the file", err)
	}

	put(manifest("echo two; while true; do sleep 1; done"))
	var second string
	eventually(ctx, t, "the edited command's container runs", func() bool { _, second = running(); return second != "" && second != first })

	put("apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + "\nspec: [\n")
	eventually(ctx, t, "the bad file is reported", func() bool { return d.logHas("manifest file not applied", "web.yaml") })
	if _, id := running(); id != second {
		t.Errorf("after a syntax error the container is %q, want %s still running", id, second)
	}

	// A restart: the pod is the same, in its one sandbox.
	ready, _ := sandboxesOf(ctx, t, rs, uid)
	d.Stop()
	d = startPodsyncd(t, daemonOptions{RootDir: root, PodLogDir: logs, Args: args})
	eventually(ctx, t, "the pod is back after the restart", func() bool { _, id := running(); return id == second })
	time.Sleep(2 * time.Second) // a rescan of the (still bad) file: nothing may change
	if nowReady, notReady := sandboxesOf(ctx, t, rs, uid); len(nowReady) != 1 || nowReady[0] != ready[0] || len(notReady) != 0 {
		t.Errorf("sandboxes after the restart: ready %v, not ready %v, want only %v", nowReady, notReady, ready)
	}
	if _, id := running(); id != second {
		t.Errorf("after the restart the container is %q, want %s", id, second)
	}

	if err := os.Remove(filepath.Join(dir, "web.yaml")); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "rm deletes the pod", func() bool {
		_, err := d.client().GetPod(ctx, &podsyncv1.GetPodRequest{Namespace: namespace, Name: name})
		return status.Code(err) == codes.NotFound
	})
	_ = removePodCgroups(uid)
}
