package cgroupfs

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// A second Lock of a cgroup fails with ErrLocked while the first holds
// it, and succeeds once it is closed; Lock makes a missing cgroup.
func TestLock(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "memory", "podsync", "kubepods")
	first, err := Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("Lock did not make the cgroup: %v", err)
	}
	if f, err := Lock(dir); !errors.Is(err, ErrLocked) {
		if f != nil {
			_ = f.Close()
		}
		t.Fatalf("second Lock: %v, want ErrLocked", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := Lock(dir)
	if err != nil {
		t.Fatalf("Lock after the holder closed: %v", err)
	}
	_ = again.Close()
}

// LockHierarchy picks the unified mount, or the memory hierarchy of v1,
// or the first one when there is no memory hierarchy.
func TestLockHierarchy(t *testing.T) {
	v2 := t.TempDir()
	if err := os.WriteFile(filepath.Join(v2, "cgroup.controllers"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	v1 := t.TempDir()
	noMemory := t.TempDir()
	for _, d := range []string{filepath.Join(v1, "cpu"), filepath.Join(v1, "memory"), filepath.Join(noMemory, "blkio"), filepath.Join(noMemory, "cpu")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct{ root, want string }{{v2, v2}, {v1, filepath.Join(v1, "memory")}, {noMemory, filepath.Join(noMemory, "blkio")}} {
		if got, err := LockHierarchy(tt.root); err != nil || got != tt.want {
			t.Errorf("LockHierarchy(%s) = %q, %v; want %q", tt.root, got, err, tt.want)
		}
	}
	if _, err := LockHierarchy(t.TempDir()); err == nil {
		t.Error("LockHierarchy of an empty root: no error")
	}
}

// KubeletMark finds the kubelet's minimum CPU shares (weight on v2) on the
// besteffort cgroup, and nothing on a cgroup a runtime made as a parent.
func TestKubeletMark(t *testing.T) {
	write := func(t *testing.T, file, value string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(value+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name       string
		file, val  string // relative to the root
		besteffort string
		marked     bool
	}{
		{"v1 kubelet", "cpu/kubepods/besteffort/cpu.shares", "2", "/kubepods/besteffort", true},
		{"v1 joined controllers", "cpu,cpuacct/k/kubepods/besteffort/cpu.shares", "2", "/k/kubepods/besteffort", true},
		{"v1 runtime's parent", "cpu/kubepods/besteffort/cpu.shares", "1024", "/kubepods/besteffort", false},
		{"v2 kubelet", "kubepods/besteffort/cpu.weight", "1", "/kubepods/besteffort", true},
		{"v2 runtime's parent", "kubepods/besteffort/cpu.weight", "100", "/kubepods/besteffort", false},
		{"another root", "cpu/kubepods/besteffort/cpu.shares", "2", "/podsync/kubepods/besteffort", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			write(t, filepath.Join(root, tt.file), tt.val)
			marked, file := KubeletMark(root, tt.besteffort)
			if marked != tt.marked {
				t.Fatalf("KubeletMark = %v (%s), want %v", marked, file, tt.marked)
			}
			if marked && file != filepath.Join(root, tt.file) {
				t.Errorf("file = %s, want %s", file, filepath.Join(root, tt.file))
			}
		})
	}
}
