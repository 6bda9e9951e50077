//go:build integration

package daemon_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/host/cgroupfs"
)

// TestPodCgroupsAreTheNodesOwn: the pods of the harness's podsyncd have
// their cgroups below its instance's own cgroup root, never below the
// host's /kubepods that another agent on the host may share (a pod's
// cgroup is named by its UID, which podsync derives from namespace and
// name); a second podsyncd on the same cgroup root exits 1 saying the root
// is in use, and the first keeps serving; a podsyncd on a root whose
// besteffort cgroup has a kubelet's CPU shares exits 1 naming a root of
// its own.
func TestPodCgroupsAreTheNodesOwn(t *testing.T) {
	ctx := testContext(t)
	d := startPodsyncd(t, daemonOptions{})
	pod := newPod(t, "", sleeper("app"))
	stream, err := d.client().SyncPod(ctx, &podsyncv1.SyncPodRequest{Pod: pod})
	if err != nil {
		t.Fatal(err)
	}
	if st := lastSyncResult(t, stream).GetStatus(); st.GetPhase() != "Running" {
		t.Fatalf("pod is %s, want Running", st.GetPhase())
	}
	memory, err := cgroupfs.LockHierarchy(criconfig.DefaultCgroupFS)
	if err != nil {
		t.Fatal(err)
	}
	uid := pod.GetMetadata().GetUid()
	if _, err := os.Stat(filepath.Join(memory, inst.CgroupRoot(), "kubepods", "besteffort", "pod"+uid)); err != nil {
		t.Errorf("no pod cgroup below the instance's cgroup root %s: %v", inst.CgroupRoot(), err)
	}
	if _, err := os.Stat(filepath.Join(memory, "kubepods", "besteffort", "pod"+uid)); err == nil {
		t.Errorf("the pod's cgroup is below the host's /kubepods")
	}

	second := func(cgroupRoot string) (int, string) {
		t.Helper()
		dir := t.TempDir()
		return runToExit(t, "--runtime-endpoint="+inst.Endpoint(), "--listen=unix://"+filepath.Join(dir, "podsync.sock"),
			"--root-dir="+filepath.Join(dir, "root"), "--pod-log-dir="+filepath.Join(dir, "logs"),
			"--node-ip=127.0.0.1", "--cgroup-root="+cgroupRoot)
	}
	code, stderr := second(inst.CgroupRoot())
	if code != 1 || !strings.Contains(stderr, `cgroup root \"`+inst.CgroupRoot()+`\" is in use by another podsyncd`) {
		t.Errorf("a second podsyncd on the same cgroup root exited %d, want 1 saying the root is in use:\n%s", code, stderr)
	}
	if _, err := d.client().GetPod(ctx, &podsyncv1.GetPodRequest{Namespace: namespace, Name: pod.GetMetadata().GetName()}); err != nil {
		t.Errorf("the first podsyncd after the second was refused: %v", err)
	}

	kubelet := inst.CgroupRoot() + "/kubelet"
	markAsKubelets(t, kubelet)
	code, stderr = second(kubelet)
	if code != 1 || !strings.Contains(stderr, "belongs to a kubelet") || !strings.Contains(stderr, "--cgroup-root=/podsync") {
		t.Errorf("a podsyncd on a kubelet's cgroup root exited %d, want 1 naming a root of its own:\n%s", code, stderr)
	}
}

// markAsKubelets makes root's kubepods/besteffort cgroup as a kubelet's
// QoS container manager leaves it: CPU shares 2 (weight 1 on cgroup v2).
// The test's cleanup removes root.
func markAsKubelets(t *testing.T, root string) {
	t.Helper()
	fs := criconfig.DefaultCgroupFS
	t.Cleanup(func() {
		hs, _ := cgroupfs.Hierarchies(fs)
		for _, h := range hs {
			if err := cgroupfs.RemoveTree(filepath.Join(h, root), nil); err != nil {
				t.Errorf("remove %s: %v", root, err)
			}
		}
	})
	besteffort := filepath.Join(root, "kubepods", "besteffort")
	if _, err := os.Stat(filepath.Join(fs, "cgroup.controllers")); err != nil {
		// cgroup v1: the cpu controller's hierarchy.
		dir := filepath.Join(fs, "cpu", besteffort)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "cpu.shares"), []byte("2"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	// cgroup v2: the cpu controller enabled from the top down to
	// besteffort.
	dir := filepath.Join(fs, besteffort)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var parents []string
	for p := filepath.Dir(dir); strings.HasPrefix(p, fs+"/"); p = filepath.Dir(p) {
		parents = append(parents, p)
	}
	slices.Reverse(parents)
	for _, p := range parents {
		if err := os.WriteFile(filepath.Join(p, "cgroup.subtree_control"), []byte("+cpu"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "cpu.weight"), []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
}
