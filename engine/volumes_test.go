package engine_test

import (
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/enginetest"
)

// claimPod is a one-container pod of namespace mounting claim at /data.
func claimPod(namespace, name, uid, claim string) *corev1.Pod {
	pod := enginetest.Pod()
	pod.Namespace, pod.Name, pod.UID = namespace, name, types.UID("uid-"+uid)
	pod.Spec.Containers = pod.Spec.Containers[:1]
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}
	return pod
}

// TestClaimVolumesArePerNamespace: a claimName is a namespace's, as a
// PersistentVolumeClaim is: team-b's pod naming "data" does not mount
// team-a's (it did: one directory per claim name, read-write).
func TestClaimVolumesArePerNamespace(t *testing.T) {
	h := newNodeHarness(t)
	a, b := claimPod("team-a", "app", "a", "data"), claimPod("team-b", "app", "b", "data")
	h.apply(a)
	h.apply(b)
	vols, err := h.node.Volumes().List(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []engine.NamedVolume{
		{Namespace: "team-a", Name: "data", Path: criconfig.ClaimVolumeDir("team-a", "data", h.cfg), Pods: []string{"team-a/app"}},
		{Namespace: "team-b", Name: "data", Path: criconfig.ClaimVolumeDir("team-b", "data", h.cfg), Pods: []string{"team-b/app"}},
	}
	if len(vols) != 2 || vols[0].Path == vols[1].Path || vols[0].Namespace != want[0].Namespace || vols[1].Namespace != want[1].Namespace ||
		vols[0].Path != want[0].Path || vols[1].Path != want[1].Path {
		t.Fatalf("volumes %+v, want %+v", vols, want)
	}
	for _, v := range vols {
		if fi, err := os.Stat(v.Path); err != nil || !fi.IsDir() {
			t.Errorf("volume %s/%s: %v", v.Namespace, v.Name, err)
		}
	}
	if found, err := h.node.Volumes().Delete(h.ctx, "team-c", "data"); found || err != nil {
		t.Errorf("delete of another namespace's claim of that name: %v %v, want not found", found, err)
	}
}

// TestClaimVolumesMigrateToTheirNamespace: the volumes of the layout
// without namespaces (<root>/volumes/<claim>) move, when the node starts,
// to the namespace of the first stored pod that names each — the others'
// pods get a new, empty volume — and one no pod names to "default"; the
// old directory goes.
func TestClaimVolumesMigrateToTheirNamespace(t *testing.T) {
	h := newNodeHarness(t)
	h.apply(claimPod("team-a", "first", "a", "data"))
	h.apply(claimPod("team-b", "second", "b", "data"))
	h.stop()
	legacy := criconfig.LegacyClaimVolumesRoot(h.cfg)
	// What an older podsync left: one shared volume per claim name.
	if err := os.RemoveAll(criconfig.ClaimVolumesRoot(h.cfg)); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"data/team-a-was-here", "unused/kept"} {
		if err := os.MkdirAll(filepath.Join(legacy, filepath.Dir(f)), 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(legacy, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h.start()
	h.eventually("the old volumes directory gone", func() bool { _, err := os.Stat(legacy); return os.IsNotExist(err) })
	for _, f := range []string{"team-a/data/team-a-was-here", "default/unused/kept"} {
		if _, err := os.Stat(filepath.Join(criconfig.ClaimVolumesRoot(h.cfg), f)); err != nil {
			t.Errorf("after the migration: %v", err)
		}
	}
	// team-b's pod gets a volume of its own when its containers next
	// start; none of team-a's data is there.
	if _, err := os.Stat(filepath.Join(criconfig.ClaimVolumeDir("team-b", "data", h.cfg), "team-a-was-here")); !os.IsNotExist(err) {
		t.Errorf("team-a's data in team-b's volume: %v", err)
	}
}
