package cgroupfs

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// On a plain directory tree (not a cgroup file system) RemoveTree
// removes empty directories deepest first, keeps what keep names, and
// reports the directories it could not remove.
func TestRemoveTree(t *testing.T) {
	root := t.TempDir()
	tree := filepath.Join(root, "agent")
	for _, d := range []string{"kubepods/besteffort/pod1/c1", "kubepods/besteffort/pod2", "kubepods/burstable/kept/c2", "busy"} {
		if err := os.MkdirAll(filepath.Join(tree, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A file stands for a cgroup's processes: its directory stays.
	if err := os.WriteFile(filepath.Join(tree, "busy", "procs"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	kept := filepath.Join(tree, "kubepods/burstable/kept")
	err := RemoveTree(tree, func(p string) bool { return p == kept })
	if err == nil || !strings.Contains(err.Error(), filepath.Join(tree, "busy")) {
		t.Errorf("error = %v, want it to name the busy directory", err)
	}
	var left []string
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			rel, _ := filepath.Rel(root, p)
			left = append(left, rel)
		}
		return nil
	})
	want := []string{".", "agent", "agent/busy", "agent/kubepods", "agent/kubepods/burstable", "agent/kubepods/burstable/kept"}
	if !slices.Equal(left, want) {
		t.Errorf("left %v, want %v", left, want)
	}
	if err := RemoveTree(filepath.Join(root, "gone"), nil); err != nil {
		t.Errorf("a tree already gone: %v", err)
	}
}

// Hierarchies finds the unified mount itself, or each v1 hierarchy
// without the links that alias joined controllers.
func TestHierarchies(t *testing.T) {
	v2 := t.TempDir()
	if err := os.WriteFile(filepath.Join(v2, "cgroup.controllers"), []byte("cpu memory\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := Hierarchies(v2); err != nil || !slices.Equal(got, []string{v2}) {
		t.Errorf("unified: %v %v, want the mount itself", got, err)
	}
	v1 := t.TempDir()
	for _, d := range []string{"cpu,cpuacct", "memory", "unified"} {
		if err := os.Mkdir(filepath.Join(v1, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("cpu,cpuacct", filepath.Join(v1, "cpu")); err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(v1, "cpu,cpuacct"), filepath.Join(v1, "memory"), filepath.Join(v1, "unified")}
	if got, err := Hierarchies(v1); err != nil || !slices.Equal(got, want) {
		t.Errorf("v1: %v %v, want %v", got, err, want)
	}
}
