package engine_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/syncer"
)

// TestHostileNamesNeverReachTheFileSystem: a pod whose UID, name or
// container name could leave its directory is refused by Apply and by
// SyncPod before anything is stored or created, and RemovePod of such an
// identity (an orphan's, read from CRI labels) leaves the file system
// alone.
func TestHostileNamesNeverReachTheFileSystem(t *testing.T) {
	t.Parallel()
	h := newNodeHarness(t)
	canary := filepath.Join(h.cfg.RootDir, "canary")
	if err := os.WriteFile(canary, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		mutate func(*corev1.Pod)
	}{
		{"uid ..", func(p *corev1.Pod) { p.UID = ".." }},
		{"uid escaping", func(p *corev1.Pod) { p.UID = "../../../tmp/x" }},
		{"uid with NUL", func(p *corev1.Pod) { p.UID = "u\x00" }},
		{"name with slash", func(p *corev1.Pod) { p.Name = "../../etc" }},
		{"container name escaping", func(p *corev1.Pod) { p.Spec.Containers[0].Name = "../../../../etc" }},
		{"volume name escaping", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "../../../x", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		}},
		{"secret item escaping", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName: "s", Items: []corev1.KeyToPath{{Key: "k", Path: "../../../../../x"}}}}}}
		}},
		{"configMap item absolute", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "c", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "c"}, Items: []corev1.KeyToPath{{Key: "k", Path: "/etc/x"}}}}}}
		}},
		{"hostPath relative", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "h", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "etc"}}}}
		}},
		{"subPath escaping", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "d", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "d", MountPath: "/d", SubPath: "../../etc"}}
		}},
		{"seccomp profile escaping", func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{
				Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("../../etc/shadow")}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := enginetest.Pod()
			tc.mutate(pod)
			if _, err := h.node.Apply(h.ctx, pod, nil, nil, nil); !errors.Is(err, errdefs.ErrInvalidSpec) {
				t.Errorf("Apply = %v, want ErrInvalidSpec", err)
			}
			if _, err := h.st.Get(pod.UID); !errors.Is(err, errdefs.ErrPodNotFound) {
				t.Errorf("the pod was stored: %v", err)
			}
			s, err := syncer.NewSyncer(syncer.SyncerOptions{Runtime: h.rt, Images: h.rt, Config: h.cfg})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.SyncPod(h.ctx, pod, syncer.SyncInput{}, nil); !errors.Is(err, errdefs.ErrInvalidSpec) {
				t.Errorf("SyncPod = %v, want ErrInvalidSpec", err)
			}
			if err := s.RemovePod(h.ctx, pod); err != nil {
				t.Errorf("RemovePod: %v", err)
			}
		})
	}
	if sbs, _ := h.rt.ListPodSandbox(h.ctx, nil); len(sbs) != 0 {
		t.Errorf("%d sandboxes created", len(sbs))
	}
	if _, err := os.Stat(canary); err != nil {
		t.Errorf("the root directory was touched: %v", err)
	}
	if entries, _ := os.ReadDir(h.cfg.RootDir); len(entries) != 1 {
		t.Errorf("root directory holds %v, want only the canary", entries)
	}
}
