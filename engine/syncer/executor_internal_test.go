package syncer

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func TestApplyDefaultImageTag(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"busybox", "busybox:latest"},
		{"busybox:1.36", "busybox:1.36"},
		{"localhost:5000/a/b", "localhost:5000/a/b:latest"},
		{"127.0.0.1:40123/busybox:local", "127.0.0.1:40123/busybox:local"},
		{"reg.io/x@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "reg.io/x@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},
		{"UPPER/case", ""},
		{"", ""},
		{"a b", ""},
	} {
		got, err := applyDefaultImageTag(tc.in)
		if (err != nil) != (tc.want == "") || got != tc.want {
			t.Errorf("applyDefaultImageTag(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestPullPolicyDefault(t *testing.T) {
	for img, want := range map[string]corev1.PullPolicy{
		"busybox": corev1.PullAlways, "busybox:latest": corev1.PullAlways, "busybox:1": corev1.PullIfNotPresent,
		"x.io/busybox@sha256:0123456789abcdef0123456789abcdef": corev1.PullIfNotPresent,
	} {
		if got := pullPolicy(&corev1.Container{Image: img}); got != want {
			t.Errorf("pullPolicy(%s) = %s, want %s", img, got, want)
		}
	}
}

func TestWriteVolumeFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vol")
	list := func() []string {
		var out []string
		_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				rel, _ := filepath.Rel(dir, p)
				fi, _ := d.Info()
				b, _ := os.ReadFile(p)
				out = append(out, rel+"="+string(b)+" "+fi.Mode().Perm().String())
			}
			return nil
		})
		slices.Sort(out)
		return out
	}
	if err := writeVolumeFiles(dir, map[string]volumeFile{"a": {[]byte("1"), 0o644}, "d/b": {[]byte("2"), 0o600}}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a=1 -rw-r--r--", "d/b=2 -rw-------"}, list()); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	if err := writeVolumeFiles(dir, map[string]volumeFile{"a": {[]byte("3"), 0o644}}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a=3 -rw-r--r--"}, list()); diff != "" {
		t.Errorf("files after update (-want +got):\n%s", diff)
	}
	if err := writeVolumeFiles(dir, map[string]volumeFile{"../escape": {[]byte("x"), 0o644}}); err == nil {
		t.Error("a path leaving the volume was written")
	}
}
