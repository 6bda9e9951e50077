package syncer_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/syncer"
	"github.com/podsync/podsync/engine/syncer/syncertest"
)

// TestDownwardAPIFilesFollowTheLabels: a downwardAPI file is rendered
// every pass, so a pass after the pod's labels changed swaps the new file
// in (a new ..data directory) without touching the running containers,
// and a pass with nothing new writes nothing.
func TestDownwardAPIFilesFollowTheLabels(t *testing.T) {
	h := syncertest.New(t)
	pod := enginetest.Pod()
	pod.Labels = map[string]string{"app": "web"}
	pod.Spec.Volumes = []corev1.Volume{{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
		DefaultMode: ptr.To[int32](0o644),
		Items:       []corev1.DownwardAPIVolumeFile{{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.labels"}}},
	}}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "info", MountPath: "/info"}}
	h.Converged(pod, h.Sync(pod))
	dir := criconfig.VolumeDir(pod, criconfig.VolumePluginDownwardAPI, "info", h.Cfg)
	read := func() (string, string) {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, "labels"))
		if err != nil {
			t.Fatal(err)
		}
		ts, err := os.Readlink(filepath.Join(dir, "..data"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b), ts
	}
	got, ts := read()
	if got != `app="web"` {
		t.Fatalf("labels = %q", got)
	}
	pod.Labels["tier"] = "gold"
	res := h.Sync(pod)
	if len(res.Steps) != 0 {
		t.Errorf("a change of labels did %v", syncertest.Summary(res.Steps))
	}
	got, ts2 := read()
	if got != "app=\"web\"\ntier=\"gold\"" || ts2 == ts || !strings.HasPrefix(ts2, "..") {
		t.Errorf("after the change: labels %q, ..data %q (was %q)", got, ts2, ts)
	}
	h.Sync(pod)
	if _, ts3 := read(); ts3 != ts2 {
		t.Errorf("a pass without a change wrote a new ..data %q", ts3)
	}
}

// TestImageVolumeRefusedWithoutRuntimeSupport: a runtime whose version
// does not mount image volumes (the fake says fakeRuntime 0.1.0) refuses
// the container with a reason saying so; the rest of the pod runs.
func TestImageVolumeRefusedWithoutRuntimeSupport(t *testing.T) {
	h := syncertest.New(t)
	pod := enginetest.Pod()
	pod.Spec.Volumes = []corev1.Volume{{Name: "model", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{
		Reference: enginetest.Image, PullPolicy: corev1.PullIfNotPresent}}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "model", MountPath: "/model"}}
	res := h.Sync(pod)
	s := res.Step(syncer.ActionStartContainer, "app")
	if s == nil || s.Err == nil || s.Reason != syncer.ReasonCreateContainerConfigErr ||
		!strings.Contains(s.Message, "does not support image volumes") || !strings.Contains(s.Message, "fakeRuntime 0.1.0") {
		t.Fatalf("app's start: %+v", s)
	}
	if s := res.Step(syncer.ActionStartContainer, "helper"); s == nil || s.Err != nil {
		t.Errorf("helper's start: %+v", s)
	}
}

// TestSubPathOfAnAtomicVolume: a subPath of a configMap volume resolves
// through the writer's links (key -> ..data/key -> the timestamped
// directory), all inside the volume, to the file.
func TestSubPathOfAnAtomicVolume(t *testing.T) {
	h := syncertest.New(t)
	pod := enginetest.Pod()
	h.In.ConfigMaps = []*corev1.ConfigMap{{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "shop"}, Data: map[string]string{"mode": "fast"}}}
	pod.Spec.Volumes = []corev1.Volume{{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "conf", MountPath: "/etc/mode", SubPath: "mode"}}
	h.Converged(pod, h.Sync(pod))
	b, err := os.ReadFile(syncer.MountTarget(pod, h.Cfg, "conf", "app", 0))
	if err != nil || string(b) != "fast" {
		t.Errorf("the subPath's bind mount holds %q, %v", b, err)
	}
}
