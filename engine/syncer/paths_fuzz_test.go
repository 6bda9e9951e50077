package syncer

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/podsync/podsync/engine/errdefs"
)

// FuzzResolveSubPath resolves arbitrary subPaths in a volume holding
// symbolic links that point out of it, into it and in circles. It never
// panics; a subPath it accepts resolves to a directory or regular file
// below the volume whose path has no symbolic link below the volume; one
// it refuses is an error wrapping ErrInvalidSpec or a file-system error;
// and nothing is ever created outside the volume.
func FuzzResolveSubPath(f *testing.F) {
	for _, s := range []string{"a", "a/b", "./a//b/", "dir/file", "out", "out/x", "in/x", "loop", "dir/../x", "/etc", "a\x00b", "dir/up/passwd", ".", strings.Repeat("d/", 100)} {
		f.Add(s)
	}
	base := f.TempDir()
	outside := filepath.Join(base, "outside")
	vol := filepath.Join(base, "vol")
	for _, d := range []string{outside, filepath.Join(vol, "dir")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			f.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "passwd"), nil, 0o644); err != nil {
		f.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(vol, "dir", "file"), nil, 0o644); err != nil {
		f.Fatal(err)
	}
	for link, target := range map[string]string{
		"out": outside, "in": "dir", "loop": "loop", "dir/up": "../../outside",
	} {
		if err := os.Symlink(target, filepath.Join(vol, link)); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, sub string) {
		got, err := resolveSubPath(vol, sub)
		if entries, _ := os.ReadDir(outside); len(entries) != 1 {
			t.Fatalf("ResolveSubPath(%q) changed the directory outside the volume: %v", sub, entries)
		}
		if err != nil {
			var pe *os.PathError
			if !errors.Is(err, errdefs.ErrInvalidSpec) && !errors.As(err, &pe) && !isErrno(err) {
				t.Fatalf("ResolveSubPath(%q) = %v: not ErrInvalidSpec nor a file-system error", sub, err)
			}
			return
		}
		rel, rerr := filepath.Rel(vol, got)
		if rerr != nil || !filepath.IsLocal(rel) && rel != "." {
			t.Fatalf("ResolveSubPath(%q) = %q, not below %s", sub, got, vol)
		}
		real, err := filepath.EvalSymlinks(got)
		if err != nil || real != got {
			t.Fatalf("ResolveSubPath(%q) = %q, which resolves to %q (%v)", sub, got, real, err)
		}
		fi, err := os.Lstat(got)
		if err != nil || !fi.IsDir() && !fi.Mode().IsRegular() {
			t.Fatalf("ResolveSubPath(%q) = %q, neither a directory nor a file: %v %v", sub, got, fi, err)
		}
	})
}

// isErrno reports whether err wraps a system call's error number.
func isErrno(err error) bool {
	var errno syscall.Errno
	return errors.As(err, &errno)
}
