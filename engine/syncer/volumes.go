package syncer

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/validation"
)

// etcHostsPath is the node's hosts file, copied for host-network pods.
const etcHostsPath = "/etc/hosts"

// setupVolumes creates the pod's directories and prepares its volumes, as
// the kubelet's makePodDataDirs and volume manager do for the volume types
// podsync supports: emptyDir directories (mode 0777), hostPath type checks
// and the *OrCreate types (beneath the allowed prefix: mounts.go), and the
// files of configMap and secret volumes.
// It returns an error wrapping ErrNotFound for a missing ConfigMap, Secret
// or key that is not optional, ErrInvalidSpec for a hostPath of the wrong
// type.
//
// Secret volumes and emptyDir volumes of medium Memory are tmpfs mounts
// (setupTmpfs), sized as the kubelet sizes them (criconfig.TmpfsSize);
// RemovePod unmounts them. newSandbox says that the pass creates the
// pod's sandbox: no container of the pod runs.
//
// NOTE(podsync): configMap and secret files are replaced one by one
// (renamed into place, never written through a symbolic link) rather than
// through the kubelet's atomic ..data symlink swap.
func (s *Syncer) setupVolumes(pod *corev1.Pod, in SyncInput, newSandbox bool) error {
	for _, dir := range []string{criconfig.PodDir(pod, s.cfg), filepath.Join(criconfig.PodDir(pod, s.cfg), "volumes"), filepath.Join(criconfig.PodDir(pod, s.cfg), "containers")} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return fmt.Errorf("create pod directory: %w", err)
		}
	}
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		var err error
		switch {
		case v.EmptyDir != nil:
			dir := criconfig.VolumeDir(pod, criconfig.VolumePluginEmptyDir, v.Name, s.cfg)
			if v.EmptyDir.Medium == corev1.StorageMediumMemory {
				err = setupTmpfs(tmpfsVolume{dir: dir, size: criconfig.TmpfsSize(pod, v.EmptyDir.SizeLimit, s.cfg), mode: 0o777}, newSandbox)
			} else if err = os.MkdirAll(dir, 0o777); err == nil {
				err = os.Chmod(dir, 0o777)
			}
		case v.HostPath != nil:
			err = s.checkHostPathVolume(v.HostPath)
		case v.ConfigMap != nil:
			var files map[string]volumeFile
			if files, err = configMapFiles(pod, v.ConfigMap, in.ConfigMaps); err == nil {
				err = writeVolumeFiles(criconfig.VolumeDir(pod, criconfig.VolumePluginConfigMap, v.Name, s.cfg), files)
			}
		case v.Secret != nil:
			var files map[string]volumeFile
			dir := criconfig.VolumeDir(pod, criconfig.VolumePluginSecret, v.Name, s.cfg)
			if files, err = secretFiles(pod, v.Secret, in.Secrets); err == nil {
				// A memory emptyDir without a size limit, as the
				// kubelet's secret plugin wraps one.
				if err = setupTmpfs(tmpfsVolume{dir: dir, size: criconfig.TmpfsSize(pod, nil, s.cfg), mode: 0o755, secret: true}, newSandbox); err == nil {
					err = writeVolumeFiles(dir, files)
				}
			}
		}
		if err != nil {
			return fmt.Errorf("volume %q: %w", v.Name, err)
		}
	}
	return nil
}

// volumeFile is one file of a configMap or secret volume.
type volumeFile struct {
	data []byte
	mode os.FileMode
}

// projectFiles is the kubelet's MakePayload: every key, or the listed
// items, with their modes.
func projectFiles(data map[string][]byte, items []corev1.KeyToPath, defaultMode *int32, optional bool, what string) (map[string]volumeFile, error) {
	mode := os.FileMode(corev1.ConfigMapVolumeSourceDefaultMode)
	if defaultMode != nil {
		mode = os.FileMode(*defaultMode)
	}
	out := map[string]volumeFile{}
	if len(items) == 0 {
		for k, v := range data {
			out[k] = volumeFile{data: v, mode: mode}
		}
		return out, nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if optional {
				continue
			}
			return nil, fmt.Errorf("configure %s: key %q not found: %w", what, it.Key, errdefs.ErrNotFound)
		}
		m := mode
		if it.Mode != nil {
			m = os.FileMode(*it.Mode)
		}
		out[it.Path] = volumeFile{data: v, mode: m}
	}
	return out, nil
}

func configMapFiles(pod *corev1.Pod, src *corev1.ConfigMapVolumeSource, cms []*corev1.ConfigMap) (map[string]volumeFile, error) {
	optional := src.Optional != nil && *src.Optional
	cm := criconfig.FindConfigMap(cms, pod.Namespace, src.Name)
	if cm == nil {
		if optional {
			return map[string]volumeFile{}, nil
		}
		return nil, fmt.Errorf("configmap %s/%s: %w", pod.Namespace, src.Name, errdefs.ErrNotFound)
	}
	data := make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	maps.Copy(data, cm.BinaryData)
	return projectFiles(data, src.Items, src.DefaultMode, optional, "configmap "+pod.Namespace+"/"+src.Name)
}

func secretFiles(pod *corev1.Pod, src *corev1.SecretVolumeSource, secrets []*corev1.Secret) (map[string]volumeFile, error) {
	optional := src.Optional != nil && *src.Optional
	sec := criconfig.FindSecret(secrets, pod.Namespace, src.SecretName)
	if sec == nil {
		if optional {
			return map[string]volumeFile{}, nil
		}
		return nil, fmt.Errorf("secret %s/%s: %w", pod.Namespace, src.SecretName, errdefs.ErrNotFound)
	}
	data := maps.Clone(sec.Data)
	if data == nil {
		data = map[string][]byte{}
	}
	for k, v := range sec.StringData {
		data[k] = []byte(v)
	}
	return projectFiles(data, src.Items, src.DefaultMode, optional, "secret "+pod.Namespace+"/"+src.SecretName)
}

// writeVolumeFiles makes dir hold exactly files: changed files are
// written to a temporary file and renamed into place, files no longer
// wanted are removed. Nothing below dir is followed if it is a symbolic
// link: every element is opened relative to its parent with O_NOFOLLOW,
// a file is replaced (renamed over) rather than written through, and a
// symbolic link or file where a directory belongs is an error wrapping
// ErrInvalidSpec, so a link planted in the volume cannot redirect a write
// out of it. dir itself must not be a symbolic link.
func writeVolumeFiles(dir string, files map[string]volumeFile) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	root, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open volume directory %s: %w", dir, err)
	}
	defer func() { _ = unix.Close(root) }()
	// Paths are compared clean ("./a" is "a"), as the kubelet's
	// AtomicWriter does.
	clean := make(map[string]volumeFile, len(files))
	for _, rel := range slices.Sorted(maps.Keys(files)) {
		if err := errdefs.InvalidSpec(validation.CheckLocalPath("path", rel)); err != nil {
			return err
		}
		clean[filepath.Clean(rel)] = files[rel]
	}
	files = clean
	for _, rel := range slices.Sorted(maps.Keys(files)) {
		if err := writeVolumeFile(root, rel, files[rel]); err != nil {
			return fmt.Errorf("write %q: %w", rel, err)
		}
	}
	// Remove what is no longer wanted, deepest first. WalkDir does not
	// follow symbolic links, and RemoveAll removes a link, not its target.
	var stale []string
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			keep := false
			for f := range files {
				keep = keep || strings.HasPrefix(f, rel+string(filepath.Separator))
			}
			if !keep {
				stale = append(stale, p)
				return filepath.SkipDir
			}
			return nil
		}
		if _, ok := files[rel]; !ok {
			stale = append(stale, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, p := range stale {
		if err := os.RemoveAll(p); err != nil {
			return err
		}
	}
	return nil
}

// writeVolumeFile writes one file at rel (clean, local) below the
// directory root without following symbolic links.
func writeVolumeFile(root int, rel string, f volumeFile) error {
	parent := root
	elems := strings.Split(rel, string(filepath.Separator))
	for _, e := range elems[:len(elems)-1] {
		fd, err := openDirNoFollow(parent, e)
		if parent != root {
			_ = unix.Close(parent)
		}
		if err != nil {
			return err
		}
		parent = fd
	}
	if parent != root {
		defer func() { _ = unix.Close(parent) }()
	}
	name := elems[len(elems)-1]
	if same, err := sameFile(parent, name, f); err != nil || same {
		return err
	}
	tmp := fmt.Sprintf(".tmp-%s-%d", name, time.Now().UnixNano())
	if len(tmp) > validation.MaxFileNameBytes {
		tmp = fmt.Sprintf(".tmp-%d", time.Now().UnixNano())
	}
	fd, err := unix.Openat(parent, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("create temporary file: %w", err)
	}
	file := os.NewFile(uintptr(fd), tmp)
	_, werr := file.Write(f.data)
	merr := file.Chmod(f.mode.Perm())
	cerr := file.Close()
	if err := errors.Join(werr, merr, cerr); err != nil {
		_ = unix.Unlinkat(parent, tmp, 0)
		return err
	}
	// rename replaces whatever is at name, a symbolic link included,
	// without following it.
	if err := unix.Renameat(parent, tmp, parent, name); err != nil {
		_ = unix.Unlinkat(parent, tmp, 0)
		return fmt.Errorf("rename into place: %w", err)
	}
	return nil
}

// openDirNoFollow opens (creating it, mode 0755, if missing) the directory
// name of dirfd, refusing a symbolic link or another kind of file.
func openDirNoFollow(dirfd int, name string) (int, error) {
	for range 2 {
		fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		switch {
		case err == nil:
			return fd, nil
		case errors.Is(err, unix.ENOENT):
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

// sameFile reports whether name in dirfd is a regular file (not a link)
// with f's content and permission bits.
func sameFile(dirfd int, name string, f volumeFile) (bool, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, nil // absent, a link (ELOOP) or unreadable: rewrite it
	}
	file := os.NewFile(uintptr(fd), name)
	defer func() { _ = file.Close() }()
	fi, err := file.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != f.mode.Perm() || fi.Size() != int64(len(f.data)) {
		return false, nil
	}
	old, err := io.ReadAll(file)
	return err == nil && bytes.Equal(old, f.data), nil
}

// ensureHostsFile writes the pod's /etc/hosts, as the kubelet's
// ensureHostsFile: a managed file naming the pod's IPs and hostname, or for
// a host-network pod the node's hosts file; both with the pod's
// hostAliases. The file is rewritten in place so that running containers,
// which bind-mount it, see the change.
func (s *Syncer) ensureHostsFile(pod *corev1.Pod, podIPs []string) error {
	var b bytes.Buffer
	if pod.Spec.HostNetwork {
		node, err := os.ReadFile(etcHostsPath)
		if err != nil {
			return fmt.Errorf("read node hosts file: %w", err)
		}
		b.WriteString("# Kubernetes-managed hosts file (host network).\n")
		b.Write(node)
	} else {
		host, domain, err := criconfig.PodHostnameAndDomain(pod, s.cfg)
		if err != nil {
			return err
		}
		b.WriteString("# Kubernetes-managed hosts file.\n")
		b.WriteString("127.0.0.1\tlocalhost\n")
		b.WriteString("::1\tlocalhost ip6-localhost ip6-loopback\n")
		b.WriteString("fe00::0\tip6-localnet\n")
		b.WriteString("fe00::0\tip6-mcastprefix\n")
		b.WriteString("fe00::1\tip6-allnodes\n")
		b.WriteString("fe00::2\tip6-allrouters\n")
		for _, ip := range podIPs {
			if domain != "" {
				fmt.Fprintf(&b, "%s\t%s.%s\t%s\n", ip, host, domain, host)
			} else {
				fmt.Fprintf(&b, "%s\t%s\n", ip, host)
			}
		}
	}
	if len(pod.Spec.HostAliases) > 0 {
		b.WriteString("\n# Entries added by HostAliases.\n")
		for _, a := range pod.Spec.HostAliases {
			fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
		}
	}
	p := filepath.Join(criconfig.PodDir(pod, s.cfg), "etc-hosts")
	if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
		return err
	}
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		return err
	}
	return os.Chmod(p, 0o644)
}

// createTerminationMessageFile creates the empty file mounted at a
// container instance's terminationMessagePath (mode 0666, as the
// kubelet's, so any user in the container can write it).
func (s *Syncer) createTerminationMessageFile(pod *corev1.Pod, name string, restartCount int32) error {
	p := criconfig.TerminationMessageFile(pod, name, restartCount, s.cfg)
	if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
		return err
	}
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Chmod(p, 0o666)
}

// logFilePattern matches container log files: <restartCount>.log, with
// rotation suffixes.
var logFilePattern = regexp.MustCompile(`^([0-9]+)\.log(\..*)?$`)

// restartCountFromLogDir is the kubelet's calcRestartCountByLogDir: when
// the runtime has no instance of a container (its state was lost, or its
// instances were removed), the next restart count is one more than the
// highest log file's, so that logs are not overwritten.
func (s *Syncer) restartCountFromLogDir(pod *corev1.Pod, name string) int32 {
	entries, err := os.ReadDir(filepath.Join(criconfig.PodLogDirectory(pod, s.cfg), name))
	if err != nil {
		return 0
	}
	n := int32(0)
	for _, e := range entries {
		m := logFilePattern.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		if c, err := strconv.ParseInt(m[1], 10, 32); err == nil && int32(c)+1 > n {
			n = int32(c) + 1
		}
	}
	return n
}
