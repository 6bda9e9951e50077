package mounttable

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test mounts and needs root (CI runs the unit tests as root)")
	}
}

func mount(t *testing.T, src, target, fstype string, flags uintptr) {
	t.Helper()
	if err := unix.Mount(src, target, fstype, flags, ""); err != nil {
		t.Fatalf("mount %s at %s: %v", src, target, err)
	}
}

// TestBelowAndUnmountBelow: mount points are found through a symbolic link
// and with the kernel's escapes undone (a space in a name), stacked mounts
// count once each, the visible one decides IsTmpfs, and UnmountBelow
// leaves nothing mounted while the bind mount's source keeps its files.
func TestBelowAndUnmountBelow(t *testing.T) {
	requireRoot(t)
	tmp := t.TempDir()
	base := filepath.Join(tmp, "pod dir")
	vol, sub, src := filepath.Join(base, "vol"), filepath.Join(base, "vol", "sub"), filepath.Join(tmp, "src")
	for _, d := range []string{vol, src} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(src, "keep"), []byte("k"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(tmp, "link")
	if err := os.Symlink(base, link); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := UnmountBelow(base); err != nil {
			t.Error(err)
		}
	})

	if mps, err := Below(link); err != nil || len(mps) != 0 {
		t.Fatalf("Below before any mount = %v, %v; want none", mps, err)
	}
	if ok, err := IsTmpfs(vol); err != nil || ok {
		t.Fatalf("IsTmpfs of a plain directory = %v, %v", ok, err)
	}
	mount(t, "tmpfs", vol, "tmpfs", 0)
	if ok, err := IsTmpfs(filepath.Join(link, "vol")); err != nil || !ok {
		t.Fatalf("IsTmpfs of a tmpfs through a link = %v, %v", ok, err)
	}
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	mount(t, src, sub, "", unix.MS_BIND)
	mount(t, src, vol, "", unix.MS_BIND) // stacked over the tmpfs, hiding sub
	if ok, err := IsTmpfs(vol); err != nil || ok {
		t.Fatalf("IsTmpfs with a bind mount stacked over the tmpfs = %v, %v; want false", ok, err)
	}
	mps, err := Below(link)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(mps)
	if want := []string{vol, vol, sub}; !slices.Equal(mps, want) {
		t.Fatalf("Below = %q, want %q", mps, want)
	}
	if mps, err := Below(filepath.Join(tmp, "pod")); err != nil || len(mps) != 0 {
		t.Fatalf("Below of a name that only prefixes the mounts' = %v, %v; want none", mps, err)
	}

	if err := UnmountBelow(link); err != nil {
		t.Fatal(err)
	}
	if mps, err := Below(base); err != nil || len(mps) != 0 {
		t.Fatalf("after UnmountBelow: %v, %v; want nothing mounted", mps, err)
	}
	if b, err := os.ReadFile(filepath.Join(src, "keep")); err != nil || string(b) != "k" {
		t.Errorf("the bind mount's source changed: %q, %v", b, err)
	}
}

// TestUnmountedAndMissing: a directory with nothing mounted, and one that
// does not exist, have no mounts and nothing to undo.
func TestUnmountedAndMissing(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{dir, filepath.Join(dir, "missing")} {
		if mps, err := Below(d); err != nil || len(mps) != 0 {
			t.Errorf("Below(%s) = %v, %v; want none", d, mps, err)
		}
		if err := UnmountBelow(d); err != nil {
			t.Errorf("UnmountBelow(%s): %v", d, err)
		}
		if err := UnmountAll(d); err != nil {
			t.Errorf("UnmountAll(%s): %v", d, err)
		}
	}
	if _, err := IsTmpfs(filepath.Join(dir, "missing")); err == nil {
		t.Error("IsTmpfs of a missing directory: no error")
	}
}
