package syncer

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/validation"
)

// The atomic writer's reserved names in a volume directory, the kubelet's.
const (
	dataDirName    = "..data"
	newDataDirName = "..data_tmp"
	// tsDirLayout is the timestamped directory's prefix, as the kubelet's
	// newTimestampDir formats it (UTC); a random number follows.
	tsDirLayout = "..2006_01_02_15_04_05."
)

// writeAtomic makes the volume directory dir show exactly files, the
// kubelet's AtomicWriter.Write (pkg/volume/util/atomic_writer.go): the
// files live in a timestamped directory "..2006_01_02_15_04_05.<n>",
// "..data" is a symbolic link to it, and every user-visible top-level
// name is a link into "..data". A change is written to a new timestamped
// directory, published by renaming a new "..data_tmp" link over "..data"
// (rename is atomic: a reader sees the old set or the new one, never a
// mix or a half-written file), then the old directory is removed. When
// the current directory already holds files — same paths, content and
// modes — nothing is written.
//
// Paths are compared clean ("./a" is "a"); a path that is empty,
// absolute, holds "..", or starts with ".." (the writer's names) is an
// error wrapping ErrInvalidSpec. Nothing below dir is followed if it is a
// symbolic link: every element is opened relative to its parent with
// O_NOFOLLOW, links are replaced rather than written through, and "..data"
// is trusted only when it names a timestamped directory of dir, so a link
// planted in the volume cannot redirect a write out of it. dir itself must
// not be a symbolic link; it is created (0755) if missing.
//
// NOTE(podsync): unlike the kubelet's, a change of a file's mode alone is
// a change, and user-visible names that are not links into "..data" (a
// planted file, or the files of podsync's earlier file-by-file writer)
// are replaced.
func writeAtomic(dir string, files map[string]criconfig.VolumeFile) error {
	return writeAtomicPerms(dir, files, nil)
}

// writeAtomicPerms is writeAtomic with the kubelet's setPerms: when a new
// timestamped directory is written, setPerms (if not nil) runs after its
// files are and before it is published, so that a reader never sees the
// new files with other permissions (the volume's ownership, ownership.go).
func writeAtomicPerms(dir string, files map[string]criconfig.VolumeFile, setPerms func() error) error {
	payload := make(map[string]criconfig.VolumeFile, len(files))
	for _, rel := range slices.Sorted(maps.Keys(files)) {
		if err := checkPayloadPath(rel); err != nil {
			return err
		}
		payload[filepath.Clean(rel)] = files[rel]
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	root, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open volume directory %s: %w", dir, err)
	}
	defer func() { _ = unix.Close(root) }()

	oldTs := currentTsDir(root)
	if oldTs == "" || !payloadMatches(root, oldTs, payload) {
		ts, err := newTsDir(root)
		if err != nil {
			return err
		}
		if err := writePayload(root, ts, payload); err != nil {
			_ = removeAt(dir, ts)
			return fmt.Errorf("write %s: %w", ts, err)
		}
		if setPerms != nil {
			if err := setPerms(); err != nil {
				_ = removeAt(dir, ts)
				return err
			}
		}
		_ = removeAt(dir, newDataDirName)
		if err := unix.Symlinkat(ts, root, newDataDirName); err != nil {
			_ = removeAt(dir, ts)
			return fmt.Errorf("link %s: %w", newDataDirName, err)
		}
		// rename replaces "..data" — a link, or whatever was planted —
		// without following it.
		if err := unix.Renameat(root, newDataDirName, root, dataDirName); err != nil {
			_ = removeAt(dir, newDataDirName)
			_ = removeAt(dir, ts)
			return fmt.Errorf("publish %s: %w", ts, err)
		}
	}
	return syncVisible(dir, root, payload)
}

// checkPayloadPath is the kubelet's validatePath, with podsync's path
// rules (validation.CheckLocalPath).
func checkPayloadPath(rel string) error {
	if err := errdefs.InvalidSpec(validation.CheckLocalPath("path", rel)); err != nil {
		return err
	}
	if first, _, _ := strings.Cut(filepath.Clean(rel), string(filepath.Separator)); strings.HasPrefix(first, "..") {
		return fmt.Errorf("path %q: must not start with '..', the names of the volume's own links and directories: %w", rel, errdefs.ErrInvalidSpec)
	}
	return nil
}

// isTsDirName reports whether name is one of the writer's timestamped
// directory names.
func isTsDirName(name string) bool {
	stamp, n, ok := strings.Cut(strings.TrimPrefix(name, ".."), ".")
	if !ok || !strings.HasPrefix(name, "..") || n == "" || strings.ContainsFunc(n, func(r rune) bool { return r < '0' || r > '9' }) {
		return false
	}
	_, err := time.Parse(strings.TrimSuffix(strings.TrimPrefix(tsDirLayout, ".."), "."), stamp)
	return err == nil
}

// currentTsDir returns the timestamped directory "..data" names, or ""
// when it is missing, not a link, or names anything else.
func currentTsDir(root int) string {
	buf := make([]byte, 256)
	n, err := unix.Readlinkat(root, dataDirName, buf)
	if err != nil || n >= len(buf) {
		return ""
	}
	ts := string(buf[:n])
	if !isTsDirName(ts) {
		return ""
	}
	fd, err := unix.Openat(root, ts, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return ""
	}
	_ = unix.Close(fd)
	return ts
}

// newTsDir creates a new timestamped directory of root, mode 0755
// whatever the umask.
func newTsDir(root int) (string, error) {
	prefix := time.Now().UTC().Format(tsDirLayout)
	for range 100 {
		n, err := rand.Int(rand.Reader, big.NewInt(1e9))
		if err != nil {
			return "", err
		}
		name := prefix + n.String()
		switch err := unix.Mkdirat(root, name, 0o755); {
		case errors.Is(err, unix.EEXIST):
			continue
		case err != nil:
			return "", fmt.Errorf("create %s: %w", name, err)
		}
		fd, err := unix.Openat(root, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return "", err
		}
		err = unix.Fchmod(fd, 0o755)
		_ = unix.Close(fd)
		return name, err
	}
	return "", fmt.Errorf("create a timestamped directory: %w", unix.EEXIST)
}

// payloadMatches reports whether the timestamped directory ts holds
// exactly payload: the same regular files with the same content and
// permission bits, and nothing else.
func payloadMatches(root int, ts string, payload map[string]criconfig.VolumeFile) bool {
	fd, err := unix.Openat(root, ts, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	have := map[string]bool{}
	if err := listFiles(fd, "", have); err != nil {
		return false
	}
	if len(have) != len(payload) {
		return false
	}
	for rel, f := range payload {
		if !have[rel] {
			return false
		}
		if same, err := fileMatches(root, filepath.Join(ts, rel), f); err != nil || !same {
			return false
		}
	}
	return true
}

// listFiles adds to out every non-directory below the directory dirfd
// (which it closes), by path relative to it; links are not followed.
func listFiles(dirfd int, prefix string, out map[string]bool) error {
	d := os.NewFile(uintptr(dirfd), prefix)
	defer func() { _ = d.Close() }()
	entries, err := d.ReadDir(-1)
	if err != nil {
		return err
	}
	for _, e := range entries {
		rel := filepath.Join(prefix, e.Name())
		if !e.IsDir() {
			out[rel] = true
			continue
		}
		fd, err := unix.Openat(int(d.Fd()), e.Name(), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		if err := listFiles(fd, rel, out); err != nil {
			return err
		}
	}
	return nil
}

// openParentNoFollow opens the parent directory of rel below root,
// element by element without following a link, creating missing
// directories (0755) when create is set; it returns the parent's
// descriptor (the caller closes it) and rel's last element.
func openParentNoFollow(root int, rel string, create bool) (int, string, error) {
	elems := strings.Split(rel, string(filepath.Separator))
	parent, err := unix.Dup(root)
	if err != nil {
		return -1, "", err
	}
	for _, e := range elems[:len(elems)-1] {
		fd, err := openDirAt(parent, e, create)
		_ = unix.Close(parent)
		if err != nil {
			return -1, "", err
		}
		parent = fd
	}
	return parent, elems[len(elems)-1], nil
}

// fileMatches reports whether rel below root is a regular file (not a
// link) with f's content and permission bits.
func fileMatches(root int, rel string, f criconfig.VolumeFile) (bool, error) {
	parent, name, err := openParentNoFollow(root, rel, false)
	if err != nil {
		return false, err
	}
	defer func() { _ = unix.Close(parent) }()
	fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, err
	}
	file := os.NewFile(uintptr(fd), name)
	defer func() { _ = file.Close() }()
	fi, err := file.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != os.FileMode(f.Mode).Perm() || fi.Size() != int64(len(f.Data)) {
		return false, err
	}
	old, err := io.ReadAll(file)
	return err == nil && bytes.Equal(old, f.Data), err
}

// writePayload writes payload below the new timestamped directory ts of
// root. The directory is new, so every file is created exclusively.
func writePayload(root int, ts string, payload map[string]criconfig.VolumeFile) error {
	for _, rel := range slices.Sorted(maps.Keys(payload)) {
		f := payload[rel]
		parent, name, err := openParentNoFollow(root, filepath.Join(ts, rel), true)
		if err != nil {
			return fmt.Errorf("%q: %w", rel, err)
		}
		err = func() error {
			defer func() { _ = unix.Close(parent) }()
			fd, err := unix.Openat(parent, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
			if err != nil {
				if errors.Is(err, unix.EEXIST) || errors.Is(err, unix.EISDIR) {
					return fmt.Errorf("%q is both a file and a directory of the volume: %w", rel, errdefs.ErrInvalidSpec)
				}
				return err
			}
			file := os.NewFile(uintptr(fd), name)
			_, werr := file.Write(f.Data)
			// Chmod after the write: the mode is the payload's whatever
			// the umask (the kubelet's writePayloadToDir).
			merr := file.Chmod(os.FileMode(f.Mode).Perm())
			return errors.Join(werr, merr, file.Close())
		}()
		if err != nil {
			return fmt.Errorf("%q: %w", rel, err)
		}
	}
	return nil
}

// syncVisible makes dir's user-visible names the links into "..data" of
// payload's top-level names (the kubelet's createUserVisibleFiles and
// removeUserVisiblePaths), and removes what else is there: names that
// are no longer wanted, and every writer's name but "..data" and the
// directory it names (an earlier timestamped directory, an interrupted
// write's).
func syncVisible(dir string, root int, payload map[string]criconfig.VolumeFile) error {
	want := map[string]bool{}
	for rel := range payload {
		first, _, _ := strings.Cut(rel, string(filepath.Separator))
		want[first] = true
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		target := filepath.Join(dataDirName, name)
		buf := make([]byte, len(target)+1)
		if n, err := unix.Readlinkat(root, name, buf); err == nil && string(buf[:n]) == target {
			continue
		}
		if err := removeAt(dir, name); err != nil {
			return err
		}
		if err := unix.Symlinkat(target, root, name); err != nil {
			return fmt.Errorf("link %q: %w", name, err)
		}
	}
	current := currentTsDir(root)
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	names, err := d.Readdirnames(-1)
	_ = d.Close()
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range names {
		if want[name] || name == dataDirName || name == current {
			continue
		}
		errs = append(errs, removeAt(dir, name))
	}
	return errors.Join(errs...)
}

// removeAt removes name (one element) of dir and what is below it.
// RemoveAll removes a link, not its target, and opens what it walks
// relative to its parent without following links.
func removeAt(dir, name string) error {
	if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
		return fmt.Errorf("remove %q: %w", name, err)
	}
	return nil
}

// openDirAt opens the directory name of dirfd, refusing a symbolic link
// or another kind of file; when create is set a missing directory is
// created (0755).
func openDirAt(dirfd int, name string, create bool) (int, error) {
	for range 2 {
		fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		switch {
		case err == nil:
			return fd, nil
		case errors.Is(err, unix.ENOENT) && create:
			if err := unix.Mkdirat(dirfd, name, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
				return -1, fmt.Errorf("create directory %q: %w", name, err)
			}
		case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
			return -1, fmt.Errorf("%q is a symbolic link or not a directory, which podsync does not follow: %w", name, errdefs.ErrInvalidSpec)
		default:
			return -1, fmt.Errorf("open directory %q: %w", name, err)
		}
	}
	return -1, fmt.Errorf("directory %q appeared and vanished while being created: %w", name, unix.ENOENT)
}
