package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/podsync/podsync/engine/criconfig"
)

// fakeCgroupFS is a cgroup v1 layout of plain directories: cpu and memory
// hierarchies.
func fakeCgroupFS(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, h := range []string{"cpu", "memory"} {
		if err := os.Mkdir(filepath.Join(root, h), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// One podsyncd per cgroup root: a second claim of the same root is
// refused with a message that says what to do, one of another root is
// not, and the root is free again once its holder lets go.
func TestClaimCgroupRootIsExclusive(t *testing.T) {
	fs := fakeCgroupFS(t)
	first, err := claimCgroupRoot(fs, criconfig.Options{CgroupRoot: "/podsync-a"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(fs, "memory", "podsync-a", "kubepods")); err != nil {
		t.Errorf("the root's kubepods cgroup was not made in the memory hierarchy: %v", err)
	}
	_, err = claimCgroupRoot(fs, criconfig.Options{CgroupRoot: "/podsync-a/"})
	if err == nil || !strings.Contains(err.Error(), `cgroup root "/podsync-a/" is in use by another podsyncd`) ||
		!strings.Contains(err.Error(), "--cgroup-root") {
		t.Fatalf("second claim: %v, want a refusal naming the root and --cgroup-root", err)
	}
	other, err := claimCgroupRoot(fs, criconfig.Options{CgroupRoot: "/podsync-b"})
	if err != nil {
		t.Fatalf("claim of another root: %v", err)
	}
	_ = other.Close()
	_ = first.Close()
	again, err := claimCgroupRoot(fs, criconfig.Options{CgroupRoot: "/podsync-a"})
	if err != nil {
		t.Fatalf("claim after the holder let go: %v", err)
	}
	_ = again.Close()
}

// A root whose besteffort cgroup has the kubelet's CPU shares is a
// kubelet's: podsyncd refuses it and names a root of its own.
func TestClaimCgroupRootRefusesAKubeletsRoot(t *testing.T) {
	fs := fakeCgroupFS(t)
	be := filepath.Join(fs, "cpu", "kubepods", "besteffort")
	if err := os.MkdirAll(be, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(be, "cpu.shares"), []byte("2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := claimCgroupRoot(fs, criconfig.Options{})
	if err == nil || !strings.Contains(err.Error(), `cgroup root "/" belongs to a kubelet`) ||
		!strings.Contains(err.Error(), "--cgroup-root=/podsync") {
		t.Fatalf("claim of a kubelet's root: %v, want a refusal that names --cgroup-root=/podsync", err)
	}
	f, err := claimCgroupRoot(fs, criconfig.Options{CgroupRoot: "/podsync"})
	if err != nil {
		t.Fatalf("claim of a root beside the kubelet's: %v", err)
	}
	_ = f.Close()
}
