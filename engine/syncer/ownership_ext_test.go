package syncer_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/syncer/syncertest"
)

// owner returns the group and mode bits (with setgid) of path, not
// following a link.
func owner(t *testing.T, path string) (uint32, os.FileMode) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Gid, fi.Mode() & (os.ModePerm | os.ModeSetgid)
}

// fsGroupPod is a pod with fsGroup 2000 and a volume of each kind the
// kubelet gives the group: a Secret at defaultMode 0440 (the issue's
// case: root:2000, group-readable), a ConfigMap at 0400, a downwardAPI
// volume, an emptyDir and a claim.
func fsGroupPod(policy *corev1.PodFSGroupChangePolicy) *corev1.Pod {
	pod := enginetest.Pod()
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: ptr.To[int64](2000), RunAsGroup: ptr.To[int64](3000), FSGroupChangePolicy: policy}
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds", DefaultMode: ptr.To[int32](0o440)}}},
		{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "conf"}, DefaultMode: ptr.To[int32](0o400)}}},
		{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{DefaultMode: ptr.To[int32](0o644),
			Items: []corev1.DownwardAPIVolumeFile{{Path: "name", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}}}}},
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
	}
	for _, v := range pod.Spec.Volumes {
		pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: v.Name, MountPath: "/" + v.Name})
	}
	return pod
}

func fsGroupHarness(t *testing.T, pod *corev1.Pod) *syncertest.Harness {
	h := syncertest.New(t)
	h.In.Secrets = []*corev1.Secret{{ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: pod.Namespace}, Data: map[string][]byte{"token": []byte("s3cr3t")}}}
	h.In.ConfigMaps = []*corev1.ConfigMap{{ObjectMeta: metav1.ObjectMeta{Name: "conf", Namespace: pod.Namespace}, Data: map[string]string{"app.conf": "x=1"}}}
	return h
}

// TestFSGroupOwnsTheVolumes: with fsGroup, the kubelet's volume ownership
// (pkg/volume/volume_linux.go) gives every file of the pod's configMap,
// secret, downwardAPI, emptyDir and claim volumes the group, the group's
// read bit (read and write for the writable emptyDir and claim), and
// every directory setgid; a pass with nothing new writes nothing again.
func TestFSGroupOwnsTheVolumes(t *testing.T) {
	pod := fsGroupPod(nil)
	h := fsGroupHarness(t, pod)
	h.Converged(pod, h.Sync(pod))

	vol := func(plugin, name string) string { return criconfig.VolumeDir(pod, plugin, name, h.Cfg) }
	for _, c := range []struct {
		path string
		mode os.FileMode
	}{
		{filepath.Join(vol(criconfig.VolumePluginSecret, "creds"), "token"), 0o440},
		{vol(criconfig.VolumePluginSecret, "creds"), os.ModeSetgid | 0o755},
		{filepath.Join(vol(criconfig.VolumePluginConfigMap, "conf"), "app.conf"), 0o440},
		{filepath.Join(vol(criconfig.VolumePluginDownwardAPI, "info"), "name"), 0o644},
		{vol(criconfig.VolumePluginEmptyDir, "scratch"), os.ModeSetgid | 0o777},
		{criconfig.ClaimVolumeDir(pod.Namespace, "data", h.Cfg), os.ModeSetgid | 0o777},
	} {
		// Through the ..data link, as a container reads it.
		fi, err := os.Stat(c.path)
		if err != nil {
			t.Fatal(err)
		}
		gid, mode := fi.Sys().(*syscall.Stat_t).Gid, fi.Mode()&(os.ModePerm|os.ModeSetgid)
		if gid != 2000 || mode != c.mode {
			t.Errorf("%s: group %d, mode %v; want 2000, %v", c.path, gid, mode, c.mode)
		}
	}
	secret := vol(criconfig.VolumePluginSecret, "creds")
	ts, err := os.Readlink(filepath.Join(secret, "..data"))
	if err != nil {
		t.Fatal(err)
	}
	if gid, mode := owner(t, filepath.Join(secret, ts)); gid != 2000 || mode != os.ModeSetgid|0o755 {
		t.Errorf("timestamped directory: group %d, mode %v", gid, mode)
	}
	h.Sync(pod)
	if again, _ := os.Readlink(filepath.Join(secret, "..data")); again != ts {
		t.Errorf("a pass with nothing new rewrote the secret: ..data %s, was %s", again, ts)
	}
}

// TestFSGroupLeavesLinksAndWhatTheyName: a link a container plants in a
// shared volume is re-grouped itself, never followed: what it names keeps
// its group and mode.
func TestFSGroupLeavesLinksAndWhatTheyName(t *testing.T) {
	pod := fsGroupPod(nil)
	h := fsGroupHarness(t, pod)
	outside := filepath.Join(t.TempDir(), "node-file")
	if err := os.WriteFile(outside, []byte("node"), 0o600); err != nil {
		t.Fatal(err)
	}
	claim := criconfig.ClaimVolumeDir(pod.Namespace, "data", h.Cfg)
	if err := os.MkdirAll(filepath.Join(claim, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(claim, "sub", "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Dir(outside), filepath.Join(claim, "dir-escape")); err != nil {
		t.Fatal(err)
	}
	h.Converged(pod, h.Sync(pod))

	if gid, mode := owner(t, outside); gid != 0 || mode != 0o600 {
		t.Errorf("the file a link names: group %d, mode %v; want 0, 0600", gid, mode)
	}
	if gid, mode := owner(t, filepath.Dir(outside)); gid != 0 || mode&os.ModeSetgid != 0 {
		t.Errorf("the directory a link names: group %d, mode %v", gid, mode)
	}
	if gid, _ := owner(t, filepath.Join(claim, "sub", "escape")); gid != 2000 {
		t.Errorf("the link itself: group %d, want 2000", gid)
	}
	if gid, mode := owner(t, filepath.Join(claim, "sub")); gid != 2000 || mode != os.ModeSetgid|0o770 {
		t.Errorf("sub: group %d, mode %v; want 2000, setgid 0770", gid, mode)
	}
}

// TestFSGroupChangePolicy: OnRootMismatch leaves a claim whose root has
// the group and mode as it is (what is below it keeps its group); Always
// walks it on every new sandbox; a read-only claim is never changed.
func TestFSGroupChangePolicy(t *testing.T) {
	for _, c := range []struct {
		name     string
		policy   *corev1.PodFSGroupChangePolicy
		readOnly bool
		wantGid  uint32
	}{
		{"OnRootMismatch", ptr.To(corev1.FSGroupChangeOnRootMismatch), false, 0},
		{"Always", ptr.To(corev1.FSGroupChangeAlways), false, 2000},
		{"ReadOnly", nil, true, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			pod := fsGroupPod(c.policy)
			pod.Spec.Volumes[4].PersistentVolumeClaim.ReadOnly = c.readOnly
			h := fsGroupHarness(t, pod)
			claim := criconfig.ClaimVolumeDir(pod.Namespace, "data", h.Cfg)
			if err := os.MkdirAll(claim, 0o777); err != nil {
				t.Fatal(err)
			}
			// The root already as the ownership leaves it.
			if !c.readOnly {
				if err := os.Chown(claim, -1, 2000); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(claim, os.ModeSetgid|0o770); err != nil {
					t.Fatal(err)
				}
			}
			f := filepath.Join(claim, "old")
			if err := os.WriteFile(f, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			// (It would inherit the setgid root's group.)
			if err := os.Chown(f, -1, 0); err != nil {
				t.Fatal(err)
			}
			h.Converged(pod, h.Sync(pod))
			if gid, _ := owner(t, f); gid != c.wantGid {
				t.Errorf("a file below the root: group %d, want %d", gid, c.wantGid)
			}
		})
	}
}

// TestFSGroupReachesAVolumeWrittenBefore: a pod given an fsGroup after
// its files were written (specs change in place on a node) has them
// re-grouped on its next pass.
func TestFSGroupReachesAVolumeWrittenBefore(t *testing.T) {
	pod := fsGroupPod(nil)
	sc := pod.Spec.SecurityContext
	pod.Spec.SecurityContext = nil
	h := fsGroupHarness(t, pod)
	h.Converged(pod, h.Sync(pod))
	token := filepath.Join(criconfig.VolumeDir(pod, criconfig.VolumePluginSecret, "creds", h.Cfg), "token")
	if fi, err := os.Stat(token); err != nil || fi.Sys().(*syscall.Stat_t).Gid != 0 {
		t.Fatalf("without fsGroup: %v, %v", fi, err)
	}
	pod.Spec.SecurityContext = sc
	h.Sync(pod)
	fi, err := os.Stat(token)
	if err != nil {
		t.Fatal(err)
	}
	if gid := fi.Sys().(*syscall.Stat_t).Gid; gid != 2000 || fi.Mode().Perm() != 0o440 {
		t.Errorf("after fsGroup was set: group %d, mode %v", gid, fi.Mode().Perm())
	}
}
