//go:build integration

package engine_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/syncer"
	"github.com/podsync/podsync/internal/testing/localcri"
	"github.com/podsync/podsync/internal/testing/localcri/localcritest"
)

// genLabels are 30 labels all of value gen-<n>: a file that mixes two
// generations, or is cut short, is visible to a reader.
func genLabels(n int) map[string]string {
	out := map[string]string{}
	for i := range 30 {
		out[fmt.Sprintf("k%02d", i)] = fmt.Sprintf("gen-%d-%s", n, strings.Repeat("x", 40))
	}
	return out
}

// readerScript reads the downwardAPI and projected labels files in a loop
// and keeps every read that is not one whole generation in /out/bad-*.
const readerScript = `n=0
check() {
  c=$(cat "$1")
  lines=$(echo "$c" | grep -c '^k')
  gens=$(echo "$c" | cut -d'"' -f2 | sort -u | wc -l)
  if [ "$lines" != 30 ] || [ "$gens" != 1 ]; then echo "$c" > /out/bad-$2-$n; fi
}
while :; do
  check /info/labels info
  check /all/labels all
  n=$((n+1))
  echo $n > /out/count.tmp && mv /out/count.tmp /out/count
done`

// TestProjectedAndDownwardAPIVolumes: a projected volume (configMap with
// an item mode, secret, downwardAPI labels) and a downwardAPI volume
// (labels, name, a resource with a divisor) render the expected files
// and modes; updating the pod's labels swaps the new files in through
// "..data" while a reader in the container never sees a mixed or short
// file, and the container keeps running.
func TestProjectedAndDownwardAPIVolumes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pod := e.newPod("app")
	pod.Labels = genLabels(0)
	e.in.ConfigMaps = []*corev1.ConfigMap{{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "cfg"}, Data: map[string]string{"mode": "fast"}}}
	e.in.Secrets = []*corev1.Secret{{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "creds"}, Data: map[string][]byte{"token": []byte("s3cr3t")}}}
	labels := corev1.DownwardAPIVolumeFile{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}}
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "all", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: ptr.To[int32](0o640), Sources: []corev1.VolumeProjection{
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"},
				Items: []corev1.KeyToPath{{Key: "mode", Path: "conf/mode", Mode: ptr.To[int32](0o400)}}}},
			{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{labels}}},
		}}}},
		{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
			labels,
			{Path: "name", Mode: ptr.To[int32](0o444), FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}},
			{Path: "cpu", ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "app", Resource: "limits.cpu", Divisor: resource.MustParse("1m")}},
		}}}},
		{Name: "out", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	c := &pod.Spec.Containers[0]
	*c = localcritest.Shell("app", readerScript)
	c.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}
	c.VolumeMounts = []corev1.VolumeMount{{Name: "all", MountPath: "/all"}, {Name: "info", MountPath: "/info"}, {Name: "out", MountPath: "/out"},
		{Name: "all", MountPath: "/etc/mode", SubPath: "conf/mode"}}

	res := e.until(pod, "running", e.running(pod))
	id := newest(t, res, "app").ID
	all := criconfig.VolumeDir(pod, criconfig.VolumePluginProjected, "all", e.cfg)
	info := criconfig.VolumeDir(pod, criconfig.VolumePluginDownwardAPI, "info", e.cfg)
	out := criconfig.VolumeDir(pod, criconfig.VolumePluginEmptyDir, "out", e.cfg)
	wantLabels := func(n int) string {
		var b strings.Builder
		for i := range 30 {
			fmt.Fprintf(&b, "k%02d=%q\n", i, fmt.Sprintf("gen-%d-%s", n, strings.Repeat("x", 40)))
		}
		return strings.TrimSuffix(b.String(), "\n")
	}
	for _, f := range []struct {
		path, data string
		mode       os.FileMode
	}{
		{filepath.Join(all, "conf", "mode"), "fast", 0o400},
		{filepath.Join(all, "token"), "s3cr3t", 0o640},
		{filepath.Join(all, "labels"), wantLabels(0), 0o640},
		{filepath.Join(info, "labels"), wantLabels(0), 0o644},
		{filepath.Join(info, "name"), pod.Name, 0o444},
		{filepath.Join(info, "cpu"), "250", 0o644},
	} {
		fi, err := os.Stat(f.path)
		b, rerr := os.ReadFile(f.path)
		if err != nil || rerr != nil || string(b) != f.data || fi.Mode().Perm() != f.mode {
			t.Errorf("%s: %q mode %v (%v %v), want %q mode %v", f.path, b, fi.Mode().Perm(), err, rerr, f.data, f.mode)
		}
	}
	// The container sees them too.
	if got := localcritest.Crictl(t, inst, "exec", id, "cat", "/all/conf/mode", "/info/name", "/etc/mode"); got != "fast"+pod.Name+"fast" {
		t.Errorf("in the container: %q", got)
	}

	count := func() int {
		b, _ := os.ReadFile(filepath.Join(out, "count"))
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return n
	}
	waitCount := func(min int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for count() < min {
			if time.Now().After(deadline) {
				t.Fatalf("the reader made %d reads, want %d", count(), min)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitCount(1)
	for gen := 1; gen <= 20; gen++ {
		before, _ := os.Readlink(filepath.Join(info, "..data"))
		pod.Labels = genLabels(gen)
		res := e.sync(pod)
		if len(res.Steps) != 0 {
			t.Fatalf("generation %d: a change of labels did %v", gen, steps(res.Steps))
		}
		after, _ := os.Readlink(filepath.Join(info, "..data"))
		if b, _ := os.ReadFile(filepath.Join(info, "labels")); string(b) != wantLabels(gen) || after == before {
			t.Fatalf("generation %d: labels file %q, ..data %q (was %q)", gen, b, after, before)
		}
		// Let the reader read across the swap.
		waitCount(count() + 3)
	}
	if got := strings.TrimSpace(localcritest.Crictl(t, inst, "exec", id, "cat", "/all/labels")); got != wantLabels(20) {
		t.Errorf("projected labels in the container: %q", got)
	}
	if n := newest(t, e.sync(pod), "app"); n.ID != id {
		t.Errorf("the container was replaced: %s, was %s", n.ID, id)
	}
	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range entries {
		if strings.HasPrefix(en.Name(), "bad-") {
			b, _ := os.ReadFile(filepath.Join(out, en.Name()))
			t.Errorf("the reader saw a partial file (%s):\n%s", en.Name(), b)
		}
	}
}

// TestClaimSharedBetweenPods: two pods naming the same claim share its
// data; removing both keeps it.
func TestClaimSharedBetweenPods(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	claim := "shared-" + uuid.NewString()[:8]
	withClaim := func(p *corev1.Pod, script string) {
		p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}
		p.Spec.Containers[0] = localcritest.Shell("app", script)
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	}
	a, b := e.newPod("app"), e.newPod("app")
	a.Name, b.Name = a.Name+"-a", b.Name+"-b"
	withClaim(a, "echo from-a > /data/a; sleep 3600 & wait")
	withClaim(b, "while [ ! -f /data/a ]; do sleep 0.1; done; cp /data/a /data/seen-by-b; sleep 3600 & wait")
	e.until(a, "a running", e.running(a))
	e.until(b, "b running", e.running(b))
	dir := criconfig.ClaimVolumeDir(namespace, claim, e.cfg)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "seen-by-b")); err == nil && string(data) == "from-a\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b did not see a's file in the shared volume %s", dir)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, p := range []*corev1.Pod{a, b} {
		if err := e.s.RemovePod(e.ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if data, err := os.ReadFile(filepath.Join(dir, "seen-by-b")); err != nil || string(data) != "from-a\n" {
		t.Errorf("the claim's data after both pods were removed: %q, %v", data, err)
	}
}

// TestImageVolume: on containerd 2.x an image volume mounts the image's
// file system read-only; on 1.6 the container is refused with a reason
// saying the runtime does not support image volumes.
func TestImageVolume(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pod := e.newPod("app")
	pod.Spec.Volumes = []corev1.Volume{{Name: "img", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{
		Reference: localcri.BusyboxImage, PullPolicy: corev1.PullIfNotPresent}}}}
	c := &pod.Spec.Containers[0]
	*c = localcritest.Shell("app", "test -x /img/bin/busybox || exit 3; touch /img/x 2>/dev/null && exit 4; sleep 3600 & wait")
	c.VolumeMounts = []corev1.VolumeMount{{Name: "img", MountPath: "/img"}}
	if inst.Flavour() == localcri.Containerd16 {
		res := e.sync(pod)
		s := res.Step(syncer.ActionStartContainer, "app")
		if s == nil || s.Err == nil || s.Reason != syncer.ReasonCreateContainerConfigErr || !strings.Contains(s.Message, "does not support image volumes") {
			t.Fatalf("app's start on containerd 1.6: %+v (steps %v)", s, steps(res.Steps))
		}
		t.Logf("refused: %s", s.Message)
		return
	}
	e.until(pod, "running with the image mounted", e.running(pod))
}
