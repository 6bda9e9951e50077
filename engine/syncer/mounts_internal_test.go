package syncer

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/engine/admit"
	"github.com/podsync/podsync/host/mounttable"
)

// countMounts returns how many mounts /proc/self/mountinfo lists at p.
func countMounts(t *testing.T, p string) int {
	t.Helper()
	mps, err := mounttable.Below(p)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mp := range mps {
		if mp == p {
			n++
		}
	}
	return n
}

// mountID is the unique (never reused) ID of the mount p is on, 0 if p
// does not exist.
func mountID(t *testing.T, p string) uint64 {
	t.Helper()
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, p, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID_UNIQUE, &stx); err != nil {
		return 0
	}
	if stx.Mask&unix.STATX_MNT_ID_UNIQUE == 0 {
		t.Fatal("the kernel has no unique mount IDs (statx STATX_MNT_ID_UNIQUE, Linux 6.8)")
	}
	return stx.Mnt_id
}

// TestBindFd ports the kubelet's TestBindSubPath and
// TestSubpath_PrepareSafeSubpath cases that concern the bind mount itself
// (subpath_linux_test.go): a directory and a file are mounted at the
// target, a target directory already there is used, a correct mount is
// reused, a mismatching one (another file, another kind, another
// read-only flag) is replaced, and none is ever stacked.
func TestBindFd(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test bind-mounts as the syncer does and needs root (CI runs the unit tests as root)")
	}
	base := t.TempDir()
	t.Cleanup(func() {
		if err := mounttable.UnmountBelow(base); err != nil {
			t.Error(err)
		}
	})
	vol := filepath.Join(base, "vol")
	for _, d := range []string{"dir0", "dir1"} {
		if err := os.MkdirAll(filepath.Join(vol, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(vol, "file0"), []byte("f"), 0o644); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(base, "volume-subpaths", "vol", "c", "0")
	open := func(name string) int {
		t.Helper()
		fd, err := unix.Open(filepath.Join(vol, name), unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = unix.Close(fd) })
		return fd
	}
	for _, step := range []struct {
		name   string
		source string
		ro     bool
		reuse  bool // the mount already there is kept (same mount ID)
		before func(t *testing.T)
	}{
		{name: "subpath-mountdir-already-exists", source: "dir0", before: func(t *testing.T) {
			if err := os.MkdirAll(target, 0o750); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "subpath-mount-already-exists-with-samefile", source: "dir0", reuse: true},
		{name: "subpath-mount-already-exists-with-mismatching-mount", source: "dir1"},
		{name: "read-only-flag-changed", source: "dir1", ro: true},
		{name: "subpath-file-over-a-directory-mount", source: "file0"},
		{name: "subpath-dir-over-a-file-mount", source: "dir0"},
		{name: "subpath-mount-stacked-twice", source: "dir0", before: func(t *testing.T) {
			// Something mounted over the correct mount: it no longer
			// shows what was checked, so both go.
			if err := unix.Mount(filepath.Join(vol, "dir1"), target, "", unix.MS_BIND, ""); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(step.name, func(t *testing.T) {
			if step.before != nil {
				step.before(t)
			}
			was := mountID(t, target)
			if err := bindFd(open(step.source), target, step.ro); err != nil {
				t.Fatal(err)
			}
			if now := mountID(t, target); (now == was) != step.reuse {
				t.Errorf("mount ID %d, was %d: want reused = %v", now, was, step.reuse)
			}
			if n := countMounts(t, target); n != 1 {
				t.Errorf("%d mounts at the target, want 1", n)
			}
			a, _ := os.Stat(target)
			b, _ := os.Stat(filepath.Join(vol, step.source))
			if !os.SameFile(a, b) {
				t.Errorf("the target does not show %s", step.source)
			}
			var sfs unix.Statfs_t
			if err := unix.Statfs(target, &sfs); err != nil || (sfs.Flags&unix.ST_RDONLY != 0) != step.ro {
				t.Errorf("read-only = %v, want %v (%v)", sfs.Flags&unix.ST_RDONLY != 0, step.ro, err)
			}
		})
	}

	// The kubelet's TestCleanSubPaths: every mount below the directory goes,
	// stacked ones included, and the files of the sources stay.
	if err := unix.Mount(filepath.Join(vol, "dir1"), target, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	if err := mounttable.UnmountBelow(filepath.Join(base, "volume-subpaths")); err != nil {
		t.Fatal(err)
	}
	if mps, _ := mounttable.Below(base); len(mps) != 0 {
		t.Errorf("still mounted: %v", mps)
	}
	if b, err := os.ReadFile(filepath.Join(vol, "file0")); err != nil || string(b) != "f" {
		t.Errorf("a source file changed: %q %v", b, err)
	}
}

// TestOpenHostPathTypes is the kubelet's hostPath type check on what
// openHostPath opens, the *OrCreate types creating beneath the prefix.
func TestOpenHostPathTypes(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.Symlink(dir, filepath.Join(dir, "abs-link")); err != nil {
		t.Fatal(err)
	}
	inDir := admit.Policy{AllowedHostPaths: []admit.HostPathPrefix{{Path: dir}}}
	inRoot := admit.Policy{AllowedHostPaths: []admit.HostPathPrefix{{Path: "/"}}}
	for _, tc := range []struct {
		name   string
		policy admit.Policy
		path   string
		typ    corev1.HostPathType
		ok     bool
	}{
		{"DirectoryOrCreate creates", inDir, filepath.Join(dir, "new", "sub"), corev1.HostPathDirectoryOrCreate, true},
		{"FileOrCreate creates", inDir, file, corev1.HostPathFileOrCreate, true},
		{"File", inDir, file, corev1.HostPathFile, true},
		{"a file is not a Directory", inDir, file, corev1.HostPathDirectory, false},
		{"Directory", inDir, dir, corev1.HostPathDirectory, true},
		{"an absent Directory", inDir, filepath.Join(dir, "absent"), corev1.HostPathDirectory, false},
		{"no type creates a directory, as containerd would", inDir, filepath.Join(dir, "untyped"), corev1.HostPathUnset, true},
		{"a directory is not a Socket", inDir, dir, corev1.HostPathSocket, false},
		{"an absolute link under a prefix is refused", inDir, filepath.Join(dir, "abs-link"), corev1.HostPathDirectory, false},
		{"an absolute link under the prefix / is followed", inRoot, filepath.Join(dir, "abs-link"), corev1.HostPathDirectory, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fd, _, err := openHostPath(tc.policy, &corev1.HostPathVolumeSource{Path: tc.path, Type: ptr.To(tc.typ)})
			if err == nil {
				_ = unix.Close(fd)
			}
			if (err == nil) != tc.ok {
				t.Errorf("openHostPath(%s, %q) = %v, want ok=%v", tc.path, tc.typ, err, tc.ok)
			}
		})
	}
	if fi, err := os.Stat(filepath.Join(dir, "untyped")); err != nil || !fi.IsDir() {
		t.Errorf("untyped hostPath not created as a directory: %v", err)
	}
}
