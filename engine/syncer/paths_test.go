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

	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/validation"
)

// TestPathChecksAreInvalidSpec: each problem validation's path checks
// find is its own line of the error, marked errdefs.ErrInvalidSpec.
func TestPathChecksAreInvalidSpec(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "a/b", Name: "web", UID: ".."},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{VolumeMounts: []corev1.VolumeMount{{Name: "data", SubPath: "/etc"}}}},
			Volumes:    []corev1.Volume{{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "etc"}}}},
		},
	}
	err := errdefs.InvalidSpec(validation.CheckPodPaths(pod)...)
	want := `pod uid ".." is a relative directory name: invalid pod spec
pod namespace "a/b" is empty or contains '/' or a NUL byte: invalid pod spec
container name "" is empty: invalid pod spec
subPath of volume mount "data" of container "" "/etc" is absolute: invalid pod spec
hostPath "etc" of volume "host" must be an absolute path without '..' or NUL: invalid pod spec`
	if !errors.Is(err, errdefs.ErrInvalidSpec) || err.Error() != want {
		t.Errorf("err = %v, want errdefs.ErrInvalidSpec:\n%s", err, want)
	}
	var pe *validation.PathError
	if !errors.As(err, &pe) || pe.What != "pod uid" {
		t.Errorf("err = %v, want the first *validation.PathError, of the pod uid", err)
	}
	if err := errdefs.InvalidSpec(validation.CheckPodPaths(nil)...); !errors.Is(err, errdefs.ErrInvalidSpec) || err.Error() != "no pod: invalid pod spec" {
		t.Errorf("nil pod: %v", err)
	}
	if err := errdefs.InvalidSpec(nil, validation.CheckLocalPath("path", "a")); err != nil {
		t.Errorf("no error: %v", err)
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
		got, err := resolveSubPath(vol, tc.sub)
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("ResolveSubPath(%q) = %q, want refused", tc.sub, got)
		case tc.want == "" && !errors.Is(err, errdefs.ErrInvalidSpec) && !errors.Is(err, syscall.ENOTDIR) && !errors.Is(err, syscall.ENAMETOOLONG):
			t.Errorf("ResolveSubPath(%q) = %v, want errdefs.ErrInvalidSpec", tc.sub, err)
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

// TestSubPathCreatedWithTheVolumesMode: missing subPath directories get
// the volume directory's mode whatever the process umask, setgid included,
// as the kubelet's doSafeMakeDir chmods them (e2e: EmptyDir volumes when
// FSGroup is specified, nonexistent volume subPath should have the correct
// mode and owner).
func TestSubPathCreatedWithTheVolumesMode(t *testing.T) {
	vol := filepath.Join(t.TempDir(), "vol")
	if err := os.Mkdir(vol, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(vol, 0o777|os.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	if _, err := resolveSubPath(vol, "a/b"); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"a", "a/b"} {
		fi, err := os.Stat(filepath.Join(vol, d))
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode() & (os.ModePerm | os.ModeSetgid); got != 0o777|os.ModeSetgid {
			t.Errorf("%s: mode %v, want %v", d, got, 0o777|os.ModeSetgid)
		}
	}
	// A directory that was there keeps its own mode.
	if err := os.Mkdir(filepath.Join(vol, "kept"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := resolveSubPath(vol, "kept"); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(vol, "kept")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("an existing directory's mode changed: %v %v", fi.Mode(), err)
	}
}

// TestWriteAtomicDoesNotFollowSymlinks: a link planted in a volume of
// files — where a user-visible name, "..data", "..data_tmp" or a
// directory goes — is replaced or refused, never written through, and
// what it points at is left alone.
func TestWriteAtomicDoesNotFollowSymlinks(t *testing.T) {
	out, outFile := outside(t)
	unchanged := func() {
		t.Helper()
		if b, _ := os.ReadFile(outFile); string(b) != "root:x:0:0" {
			t.Errorf("a file outside the volume was written: %q", b)
		}
		if entries, _ := os.ReadDir(out); len(entries) != 1 {
			t.Errorf("the directory outside the volume changed: %v", entries)
		}
	}
	dir := filepath.Join(t.TempDir(), "vol")
	symlink(t, outFile, filepath.Join(dir, "key"))
	symlink(t, out, filepath.Join(dir, "sub"))
	symlink(t, out, filepath.Join(dir, "..data"))
	symlink(t, out, filepath.Join(dir, "..data_tmp"))

	// Links where user-visible names and the writer's go are replaced.
	files := map[string]criconfig.VolumeFile{"key": {Data: []byte("secret"), Mode: 0o600}, "sub/passwd": {Data: []byte("pwned"), Mode: 0o644}}
	if err := writeAtomic(dir, files); err != nil {
		t.Fatal(err)
	}
	unchanged()
	for name, want := range map[string]string{"key": "..data/key", "sub": "..data/sub"} {
		if got, err := os.Readlink(filepath.Join(dir, name)); err != nil || got != want {
			t.Errorf("%s links to %q (%v), want %q", name, got, err, want)
		}
	}
	ts, err := os.Readlink(filepath.Join(dir, "..data"))
	if err != nil || !isTsDirName(ts) {
		t.Fatalf("..data links to %q (%v)", ts, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "sub", "passwd")); err != nil || string(b) != "pwned" {
		t.Errorf("sub/passwd = %q, %v", b, err)
	}

	// "..data" pointing at a timestamped-looking link out of the volume
	// is not trusted: the files are written to a new directory.
	if err := os.RemoveAll(filepath.Join(dir, ts)); err != nil {
		t.Fatal(err)
	}
	symlink(t, out, filepath.Join(dir, ts))
	if err := writeAtomic(dir, files); err != nil {
		t.Fatal(err)
	}
	unchanged()
	if now, _ := os.Readlink(filepath.Join(dir, "..data")); now == ts {
		t.Errorf("..data still names the planted link %q", ts)
	}

	// A link planted below a directory of the timestamped directory is
	// refused when reading, so the content is written afresh.
	ts, _ = os.Readlink(filepath.Join(dir, "..data"))
	if err := os.Remove(filepath.Join(dir, ts, "sub", "passwd")); err != nil {
		t.Fatal(err)
	}
	symlink(t, outFile, filepath.Join(dir, ts, "sub", "passwd"))
	if err := writeAtomic(dir, files); err != nil {
		t.Fatal(err)
	}
	unchanged()
	if b, err := os.ReadFile(filepath.Join(dir, "sub", "passwd")); err != nil || string(b) != "pwned" {
		t.Errorf("sub/passwd = %q, %v", b, err)
	}

	// The volume directory itself may not be a link.
	linked := filepath.Join(t.TempDir(), "linked")
	symlink(t, out, linked)
	if err := writeAtomic(linked, map[string]criconfig.VolumeFile{"x": {Data: []byte("x"), Mode: 0o644}}); err == nil {
		t.Error("a volume directory that is a link was written")
	}
	unchanged()

	// Paths are compared clean: "./a" is kept, not removed as stale.
	clean := t.TempDir()
	if err := writeAtomic(clean, map[string]criconfig.VolumeFile{"./a": {Data: []byte("1"), Mode: 0o644}, "d//b": {Data: []byte("2"), Mode: 0o644}}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"a", "d/b"} {
		if _, err := os.Stat(filepath.Join(clean, p)); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	for _, bad := range []string{"../x", "/etc/x", "a\x00", "", "..data", "..data/x"} {
		if err := writeAtomic(clean, map[string]criconfig.VolumeFile{bad: {Data: []byte("x"), Mode: 0o644}}); !errors.Is(err, errdefs.ErrInvalidSpec) {
			t.Errorf("path %q: %v, want errdefs.ErrInvalidSpec", bad, err)
		}
	}
	// A file that is also a directory is refused.
	if err := writeAtomic(clean, map[string]criconfig.VolumeFile{"f": {Data: []byte("x"), Mode: 0o644}, "f/g": {Data: []byte("y"), Mode: 0o644}}); !errors.Is(err, errdefs.ErrInvalidSpec) {
		t.Errorf("file and directory f: %v, want errdefs.ErrInvalidSpec", err)
	}
}
