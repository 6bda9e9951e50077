package syncer

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/engine/errdefs"
)

// pathsPod is a pod with one of each name CheckPodPaths looks at.
func pathsPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "0f8fad5b-d9cb-469f-a165-70867728950e"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: "busybox",
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data", SubPath: "sub/dir"}}}},
			Volumes: []corev1.Volume{
				{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/app"}}},
				{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"},
					Items:                []corev1.KeyToPath{{Key: "k", Path: "conf/k.txt"}}}}},
				{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
					SecretName: "sec", Items: []corev1.KeyToPath{{Key: "k", Path: "k"}}}}},
			},
		},
	}
}

// TestCheckPodPaths: every name the engine turns into a path is refused
// when it could leave its directory or cannot be a file name.
func TestCheckPodPaths(t *testing.T) {
	long := strings.Repeat("a", 256)
	for _, tc := range []struct {
		name   string
		mutate func(*corev1.Pod)
		ok     bool
	}{
		{"valid", func(*corev1.Pod) {}, true},
		{"uid ..", func(p *corev1.Pod) { p.UID = ".." }, false},
		{"uid .", func(p *corev1.Pod) { p.UID = "." }, false},
		{"uid with slash", func(p *corev1.Pod) { p.UID = "../../etc" }, false},
		{"uid absolute", func(p *corev1.Pod) { p.UID = "/etc" }, false},
		{"uid with NUL", func(p *corev1.Pod) { p.UID = "a\x00b" }, false},
		{"uid too long", func(p *corev1.Pod) { p.UID = types.UID("u" + long) }, false},
		{"namespace with slash", func(p *corev1.Pod) { p.Namespace = "../x" }, false},
		{"name with slash", func(p *corev1.Pod) { p.Name = "a/b" }, false},
		{"name with NUL", func(p *corev1.Pod) { p.Name = "a\x00" }, false},
		{"name ..", func(p *corev1.Pod) { p.Name = ".." }, true}, // "shop_.._uid" is one name
		{"log directory name too long", func(p *corev1.Pod) { p.Name = strings.Repeat("n", 253) }, false},
		{"container ..", func(p *corev1.Pod) { p.Spec.Containers[0].Name = ".." }, false},
		{"container with slash", func(p *corev1.Pod) { p.Spec.Containers[0].Name = "../../x" }, false},
		{"init container with NUL", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "i\x00"}}
		}, false},
		{"volume ..", func(p *corev1.Pod) { p.Spec.Volumes[0].Name = ".." }, false},
		{"volume with slash", func(p *corev1.Pod) { p.Spec.Volumes[0].Name = "a/../../b" }, false},
		{"volume name too long", func(p *corev1.Pod) { p.Spec.Volumes[0].Name = long }, false},
		{"hostPath relative", func(p *corev1.Pod) { p.Spec.Volumes[1].HostPath.Path = "etc" }, false},
		{"hostPath with ..", func(p *corev1.Pod) { p.Spec.Volumes[1].HostPath.Path = "/var/../etc" }, false},
		{"hostPath with NUL", func(p *corev1.Pod) { p.Spec.Volumes[1].HostPath.Path = "/var/\x00" }, false},
		{"subPath absolute", func(p *corev1.Pod) { p.Spec.Containers[0].VolumeMounts[0].SubPath = "/etc" }, false},
		{"subPath ..", func(p *corev1.Pod) { p.Spec.Containers[0].VolumeMounts[0].SubPath = "a/../../etc" }, false},
		{"subPath with NUL", func(p *corev1.Pod) { p.Spec.Containers[0].VolumeMounts[0].SubPath = "a\x00" }, false},
		{"subPath element too long", func(p *corev1.Pod) { p.Spec.Containers[0].VolumeMounts[0].SubPath = "a/" + long }, false},
		{"subPath too long", func(p *corev1.Pod) {
			p.Spec.Containers[0].VolumeMounts[0].SubPath = strings.Repeat("a/", 2100)
		}, false},
		{"configMap item ..", func(p *corev1.Pod) { p.Spec.Volumes[2].ConfigMap.Items[0].Path = "../k" }, false},
		{"configMap item absolute", func(p *corev1.Pod) { p.Spec.Volumes[2].ConfigMap.Items[0].Path = "/etc/k" }, false},
		{"configMap item empty", func(p *corev1.Pod) { p.Spec.Volumes[2].ConfigMap.Items[0].Path = "" }, false},
		{"secret item ..", func(p *corev1.Pod) { p.Spec.Volumes[3].Secret.Items[0].Path = "a/../../k" }, false},
		{"secret item with NUL", func(p *corev1.Pod) { p.Spec.Volumes[3].Secret.Items[0].Path = "k\x00" }, false},
		{"seccomp localhost ..", func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{
				Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("../../etc/shadow")}}
		}, false},
		{"seccomp localhost absolute", func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{
				Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("/etc/shadow")}}
		}, false},
		{"seccomp localhost relative", func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{
				Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("profiles/audit.json")}}
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := pathsPod()
			tc.mutate(p)
			err := CheckPodPaths(p)
			if (err == nil) != tc.ok {
				t.Fatalf("CheckPodPaths = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, errdefs.ErrInvalidSpec) {
				t.Errorf("error %v does not wrap ErrInvalidSpec", err)
			}
		})
	}
}

// outside is a directory beside the volume with a file a planted link
// points at.
func outside(t *testing.T) (dir, file string) {
	t.Helper()
	dir = t.TempDir()
	file = filepath.Join(dir, "passwd")
	if err := os.WriteFile(file, []byte("root:x:0:0"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, file
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// TestResolveSubPath: a subPath resolves below the volume, creating what
// is missing, and never through a symbolic link a container planted.
func TestResolveSubPath(t *testing.T) {
	out, outFile := outside(t)
	vol := t.TempDir()
	if err := os.Chmod(vol, 0o777); err != nil {
		t.Fatal(err)
	}
	symlink(t, out, filepath.Join(vol, "etc-link"))
	symlink(t, outFile, filepath.Join(vol, "file-link"))
	symlink(t, "real", filepath.Join(vol, "inner-link")) // stays in the volume: refused all the same
	symlink(t, "../../../../../../"+out, filepath.Join(vol, "dir", "rel-link"))
	if err := os.MkdirAll(filepath.Join(vol, "real"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(vol, "real", "f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(vol, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		sub  string
		want string // "" means refused
	}{
		{"real", "real"},
		{"real/f", "real/f"},
		{"./real//f", "real/f"},
		{"new/dir", "new/dir"},
		{"etc-link", ""},
		{"etc-link/passwd", ""},
		{"etc-link/newdir", ""},
		{"file-link", ""},
		{"inner-link", ""},
		{"dir/rel-link/passwd", ""},
		{"real/f/below", ""},
		{"fifo", ""},
		{"../" + filepath.Base(out), ""},
		{"real/../../x", ""},
		{out, ""},
		{"a\x00b", ""},
		{strings.Repeat("x", 256), ""},
	} {
		got, err := ResolveSubPath(vol, tc.sub)
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("ResolveSubPath(%q) = %q, want refused", tc.sub, got)
		case tc.want == "" && !errors.Is(err, errdefs.ErrInvalidSpec) && !errors.Is(err, syscall.ENOTDIR) && !errors.Is(err, syscall.ENAMETOOLONG):
			t.Errorf("ResolveSubPath(%q) = %v, want ErrInvalidSpec", tc.sub, err)
		case tc.want != "" && (err != nil || got != filepath.Join(vol, tc.want)):
			t.Errorf("ResolveSubPath(%q) = %q, %v; want %q", tc.sub, got, err, filepath.Join(vol, tc.want))
		}
	}
	if fi, err := os.Stat(filepath.Join(vol, "new", "dir")); err != nil || !fi.IsDir() {
		t.Errorf("missing subPath not created as a directory: %v", err)
	}
	entries, err := os.ReadDir(out)
	if err != nil || len(entries) != 1 {
		t.Errorf("the directory outside the volume changed: %v %v", entries, err)
	}
}

// TestWriteVolumeFilesDoesNotFollowSymlinks: a link planted in a
// configMap or secret volume is replaced or refused, never written
// through, and what it points at is left alone.
func TestWriteVolumeFilesDoesNotFollowSymlinks(t *testing.T) {
	out, outFile := outside(t)
	dir := filepath.Join(t.TempDir(), "vol")
	symlink(t, outFile, filepath.Join(dir, "key"))
	symlink(t, out, filepath.Join(dir, "sub"))

	// A link where a file goes is replaced by the file.
	if err := writeVolumeFiles(dir, map[string]volumeFile{"key": {[]byte("secret"), 0o600}}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(filepath.Join(dir, "key")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("key is not a regular file: %v %v", fi, err)
	}
	if b, _ := os.ReadFile(outFile); string(b) != "root:x:0:0" {
		t.Errorf("the link's target was written: %q", b)
	}

	// A link where a directory goes is refused.
	symlink(t, out, filepath.Join(dir, "sub"))
	err := writeVolumeFiles(dir, map[string]volumeFile{"sub/passwd": {[]byte("pwned"), 0o644}})
	if !errors.Is(err, errdefs.ErrInvalidSpec) {
		t.Errorf("write through a linked directory = %v, want ErrInvalidSpec", err)
	}
	if b, _ := os.ReadFile(outFile); string(b) != "root:x:0:0" {
		t.Errorf("a file outside the volume was written: %q", b)
	}
	if entries, _ := os.ReadDir(out); len(entries) != 1 {
		t.Errorf("the directory outside the volume changed: %v", entries)
	}

	// The volume directory itself may not be a link.
	linked := filepath.Join(t.TempDir(), "linked")
	symlink(t, out, linked)
	if err := writeVolumeFiles(linked, map[string]volumeFile{"x": {[]byte("x"), 0o644}}); err == nil {
		t.Error("a volume directory that is a link was written")
	}

	// Paths are compared clean: "./a" is kept, not removed as stale.
	clean := t.TempDir()
	if err := writeVolumeFiles(clean, map[string]volumeFile{"./a": {[]byte("1"), 0o644}, "d//b": {[]byte("2"), 0o644}}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"a", "d/b"} {
		if _, err := os.Stat(filepath.Join(clean, p)); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	for _, bad := range []string{"../x", "/etc/x", "a\x00", ""} {
		if err := writeVolumeFiles(clean, map[string]volumeFile{bad: {[]byte("x"), 0o644}}); !errors.Is(err, errdefs.ErrInvalidSpec) {
			t.Errorf("path %q: %v, want ErrInvalidSpec", bad, err)
		}
	}
}
