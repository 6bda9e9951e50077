//go:build integration

package daemon_test

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/convert"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/host/mounttable"
	"github.com/podsync/podsync/internal/testing/localcri"
	"github.com/podsync/podsync/internal/testing/localcri/localcritest"
)

// syncPod applies pod (with secrets) through SyncPod and returns the
// result; every step must succeed.
func (d *podsyncd) syncPod(ctx context.Context, t *testing.T, pod *corev1.Pod, secrets ...*corev1.Secret) *podsyncv1.SyncPodResult {
	t.Helper()
	req := &podsyncv1.SyncPodRequest{Pod: podToProto(t, pod)}
	for _, s := range secrets {
		convert.DefaultSecret(s)
		ps, err := convert.SecretToProto(s)
		if err != nil {
			t.Fatal(err)
		}
		req.Secrets = append(req.Secrets, ps)
	}
	stream, err := d.client().SyncPod(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	return lastSyncResult(t, stream)
}

// mountsBelow lists podsyncd's host mounts at or below dir.
func mountsBelow(t *testing.T, dir string) []string {
	t.Helper()
	mps, err := mounttable.Below(dir)
	if err != nil {
		t.Fatal(err)
	}
	return mps
}

// TestMemoryVolumesAreTmpfsInTheContainer: a medium Memory emptyDir and a
// secret volume are tmpfs mounts inside the container (/proc/mounts),
// sized by the emptyDir's sizeLimit and by the pod's memory limit; the
// secret's file is there; deleting the pod leaves no mount on the host.
func TestMemoryVolumesAreTmpfsInTheContainer(t *testing.T) {
	ctx := testContext(t)
	d := startPodsyncd(t, daemonOptions{})
	app := sleeper("app")
	app.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
	app.VolumeMounts = []corev1.VolumeMount{{Name: "cache", MountPath: "/cache"}, {Name: "creds", MountPath: "/creds", ReadOnly: true}}
	pod := newCorePod(t, "", app)
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
			Medium: corev1.StorageMediumMemory, SizeLimit: ptr.To(resource.MustParse("8Mi"))}}},
		{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds"}}},
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: namespace},
		Data: map[string][]byte{"token": []byte("s3cr3t")}}
	res := d.syncPod(ctx, t, pod, secret)
	id := strings.TrimPrefix(res.GetStatus().GetContainerStatuses()[0].GetContainerId(), "containerd://")

	rs := runtimeClient(t)
	stdout, stderr, err := rs.ExecSync(ctx, id, []string{"cat", "/proc/mounts", "/creds/token"}, 30*time.Second)
	if err != nil {
		t.Fatalf("exec: %v (%s)", err, stderr)
	}
	mounts := map[string]string{} // mount point → "fstype options"
	for _, line := range strings.Split(string(stdout), "\n") {
		if f := strings.Fields(line); len(f) >= 4 {
			mounts[f[1]] = f[2] + " " + f[3]
		}
	}
	for dir, size := range map[string]string{"/cache": "size=8192k", "/creds": "size=65536k"} {
		m := strings.Fields(mounts[dir] + " -")
		if m[0] != "tmpfs" || !strings.Contains(","+m[1]+",", ","+size+",") {
			t.Errorf("%s in the container's /proc/mounts: %q, want tmpfs with %s\n%s", dir, m, size, stdout)
		}
	}
	if !strings.HasSuffix(string(stdout), "s3cr3t") {
		t.Errorf("the secret's file in the container: %q", stdout)
	}
	if got := mountsBelow(t, d.opts.RootDir); len(got) != 2 {
		t.Errorf("host mounts below the root directory: %v, want the two tmpfs", got)
	}

	if _, err := d.client().DeletePod(ctx, &podsyncv1.DeletePodRequest{Namespace: pod.Namespace, Name: pod.Name,
		GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	if got := mountsBelow(t, d.opts.RootDir); len(got) != 0 {
		t.Errorf("host mounts left below the root directory after the deletion: %v", got)
	}
	if err := removePodCgroups(string(pod.UID)); err != nil {
		t.Error(err)
	}
}

// TestEmptyDirOverSizeLimitIsEvicted: a container that writes more than
// its emptyDir's sizeLimit gets its pod evicted within a housekeeping
// interval or two — phase Failed, reason Evicted, the kubelet's message —
// and its containers stopped; a pod within its limit keeps running.
func TestEmptyDirOverSizeLimitIsEvicted(t *testing.T) {
	ctx := testContext(t)
	d := startPodsyncd(t, daemonOptions{Args: []string{"--housekeeping-interval=1s"}})
	writer := func(name string, mib int) *corev1.Pod {
		c := localcritest.Shell("app", "dd if=/dev/zero of=/data/blob bs=1M count="+strconv.Itoa(mib)+"; while true; do sleep 1; done")
		c.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
		pod := newCorePod(t, name, c)
		pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
			SizeLimit: ptr.To(resource.MustParse("4Mi"))}}}}
		return pod
	}
	over, within := writer("over", 8), writer("within", 1)
	d.syncPod(ctx, t, over)
	d.syncPod(ctx, t, within)

	var status *podsyncv1.PodStatus
	eventually(ctx, t, "the pod over its sizeLimit evicted", func() bool {
		got, err := d.client().GetPod(ctx, &podsyncv1.GetPodRequest{Namespace: over.Namespace, Name: over.Name})
		if err != nil {
			t.Fatal(err)
		}
		status = got.GetPod().GetStatus()
		return status.GetPhase() == "Failed"
	})
	if status.GetReason() != "Evicted" || status.GetMessage() != `Usage of EmptyDir volume "data" exceeds the limit "4Mi". ` {
		t.Errorf("status: reason %q message %q, want Evicted and the kubelet's emptyDir message", status.GetReason(), status.GetMessage())
	}
	rs := runtimeClient(t)
	eventually(ctx, t, "the evicted pod's containers stopped", func() bool {
		ctrs, err := rs.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{model.LabelPodUID: string(over.UID)}})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range ctrs {
			if c.GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING {
				return false
			}
		}
		return len(ctrs) > 0
	})
	// Measured as often, the pod within its limit still runs.
	got, err := d.client().GetPod(ctx, &podsyncv1.GetPodRequest{Namespace: within.Namespace, Name: within.Name})
	if err != nil {
		t.Fatal(err)
	}
	if st := got.GetPod().GetStatus(); st.GetPhase() != "Running" {
		t.Errorf("the pod within its limit: %s %s %q, want Running", st.GetPhase(), st.GetReason(), st.GetMessage())
	}
}

// TestClaimWriterIsEvictedFirst: on containerd, a pod that writes 8 MiB to
// a named volume it mounts read-write and one that writes 1 MiB to an
// emptyDir; podsyncd then restarts with the store's file system always
// below its threshold (--eviction-store-min-available=100%). The claim's
// writer is evicted first, while the other pod still runs (its writes
// were not measured, and it went last).
func TestClaimWriterIsEvictedFirst(t *testing.T) {
	ctx := testContext(t)
	root, logs := t.TempDir(), t.TempDir()
	d := startPodsyncd(t, daemonOptions{RootDir: root, PodLogDir: logs})
	writer := func(name, volume string, source corev1.VolumeSource, mib int) *corev1.Pod {
		c := localcritest.Shell("app", "dd if=/dev/urandom of=/data/"+name+" bs=1M count="+strconv.Itoa(mib)+
			" && touch /data/"+name+".done; while true; do sleep 1; done")
		c.VolumeMounts = []corev1.VolumeMount{{Name: volume, MountPath: "/data"}}
		pod := newCorePod(t, name, c)
		pod.Spec.Volumes = []corev1.Volume{{Name: volume, VolumeSource: source}}
		return pod
	}
	filler := writer("filler", "data", corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}, 8)
	innocent := writer("innocent", "scratch", corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}, 1)
	for _, w := range []struct {
		pod  *corev1.Pod
		name string
	}{{filler, "filler"}, {innocent, "innocent"}} {
		d.syncPod(ctx, t, w.pod)
		eventually(ctx, t, w.name+" wrote its data", func() bool {
			resp, err := d.client().ExecSync(ctx, &podsyncv1.ExecSyncRequest{Namespace: w.pod.Namespace, Name: w.pod.Name,
				Command: []string{"test", "-f", "/data/" + w.name + ".done"}})
			return err == nil && resp.GetExitCode() == 0
		})
	}
	d.Stop()

	d = startPodsyncd(t, daemonOptions{RootDir: root, PodLogDir: logs,
		Args: []string{"--eviction-store-min-available=100%", "--housekeeping-interval=1s"}})
	phase := func(p *corev1.Pod) string {
		got, err := d.client().GetPod(ctx, &podsyncv1.GetPodRequest{Namespace: p.Namespace, Name: p.Name})
		if err != nil {
			t.Fatal(err)
		}
		return got.GetPod().GetStatus().GetPhase()
	}
	var first string
	eventually(ctx, t, "a pod evicted", func() bool {
		switch {
		case phase(filler) == "Failed":
			first = "filler"
		case phase(innocent) == "Failed":
			first = "innocent"
		}
		return first != ""
	})
	if first != "filler" || phase(innocent) != "Running" {
		t.Errorf("evicted first: %s (the other is %s); want the pod that wrote 8 MiB to its claim, the other still running", first, phase(innocent))
	}
}

// TestImageVolumeThroughPodsyncd: podsyncd asks its runtime's version
// through the instrumented runtime it syncs with (a wrapper once hid it,
// and every image volume failed with "the container runtime does not say
// its version"): on containerd 2.x the image is mounted read-only; on 1.6
// the container waits with the runtime's lack of support as its reason.
func TestImageVolumeThroughPodsyncd(t *testing.T) {
	ctx := testContext(t)
	d := startPodsyncd(t, daemonOptions{})
	app := corev1.Container{Name: "app", Image: localcri.BusyboxImage, Command: []string{"sh", "-c",
		"test -x /img/bin/busybox || exit 3; touch /img/x 2>/dev/null && exit 4; exec sleep 3600"},
		VolumeMounts: []corev1.VolumeMount{{Name: "img", MountPath: "/img"}}}
	pod := newCorePod(t, "", app)
	pod.Spec.Volumes = []corev1.Volume{{Name: "img", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{
		Reference: localcri.BusyboxImage, PullPolicy: corev1.PullIfNotPresent}}}}
	stream, err := d.client().SyncPod(ctx, &podsyncv1.SyncPodRequest{Pod: podToProto(t, pod)})
	if err != nil {
		t.Fatal(err)
	}
	var res *podsyncv1.SyncPodResult
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("SyncPod: %v", err)
		}
		if r := m.GetResult(); r != nil {
			res = r
		}
	}
	cs := res.GetStatus().GetContainerStatuses()
	if len(cs) != 1 {
		t.Fatalf("container statuses = %v", cs)
	}
	if inst.Flavour() == localcri.Containerd16 {
		w := cs[0].GetState().GetWaiting()
		if w.GetReason() != "CreateContainerConfigError" || !strings.Contains(w.GetMessage(), "does not support image volumes") {
			t.Errorf("app on containerd 1.6: %v, want waiting on the runtime's lack of image volumes", cs[0].GetState())
		}
		return
	}
	if cs[0].GetState().GetRunning() == nil {
		t.Errorf("app with an image volume: %v, want running (the image mounted read-only)", cs[0].GetState())
	}
}
