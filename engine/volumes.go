package engine

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// etcHostsPath is the node's hosts file, copied for host-network pods.
const etcHostsPath = "/etc/hosts"

// setupVolumes creates the pod's directories and prepares its volumes, as
// the kubelet's makePodDataDirs and volume manager do for the volume types
// podsync supports: emptyDir directories (mode 0777), hostPath type checks
// and the *OrCreate types, and the files of configMap and secret volumes.
// It returns an error wrapping ErrNotFound for a missing ConfigMap, Secret
// or key that is not optional, ErrInvalidSpec for a hostPath of the wrong
// type.
//
// NOTE(podsync): emptyDir with medium Memory is a plain directory (no
// tmpfs), and configMap and secret files are replaced one by one (renamed
// into place) rather than through the kubelet's atomic ..data symlink swap.
func (s *Syncer) setupVolumes(pod *corev1.Pod, in SyncInput) error {
	for _, dir := range []string{PodDir(pod, s.cfg), filepath.Join(PodDir(pod, s.cfg), "volumes"), filepath.Join(PodDir(pod, s.cfg), "containers")} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return fmt.Errorf("create pod directory: %w", err)
		}
	}
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		var err error
		switch {
		case v.EmptyDir != nil:
			dir := VolumeDir(pod, VolumePluginEmptyDir, v.Name, s.cfg)
			if err = os.MkdirAll(dir, 0o777); err == nil {
				err = os.Chmod(dir, 0o777)
			}
		case v.HostPath != nil:
			err = checkHostPath(v.HostPath)
		case v.ConfigMap != nil:
			var files map[string]volumeFile
			if files, err = configMapFiles(pod, v.ConfigMap, in.ConfigMaps); err == nil {
				err = writeVolumeFiles(VolumeDir(pod, VolumePluginConfigMap, v.Name, s.cfg), files)
			}
		case v.Secret != nil:
			var files map[string]volumeFile
			if files, err = secretFiles(pod, v.Secret, in.Secrets); err == nil {
				err = writeVolumeFiles(VolumeDir(pod, VolumePluginSecret, v.Name, s.cfg), files)
			}
		}
		if err != nil {
			return fmt.Errorf("volume %q: %w", v.Name, err)
		}
	}
	return nil
}

// checkHostPath is the kubelet's hostPath type checker.
func checkHostPath(h *corev1.HostPathVolumeSource) error {
	typ := corev1.HostPathUnset
	if h.Type != nil {
		typ = *h.Type
	}
	switch typ {
	case corev1.HostPathUnset:
		return nil
	case corev1.HostPathDirectoryOrCreate:
		if err := os.MkdirAll(h.Path, 0o755); err != nil {
			return fmt.Errorf("create hostPath directory: %w", err)
		}
		return nil
	case corev1.HostPathFileOrCreate:
		f, err := os.OpenFile(h.Path, os.O_CREATE|os.O_RDONLY, 0o644)
		if err != nil {
			return fmt.Errorf("create hostPath file: %w", err)
		}
		return f.Close()
	}
	fi, err := os.Stat(h.Path)
	if err != nil {
		return fmt.Errorf("hostPath type check failed: %s is not a %s: %w", h.Path, typ, ErrInvalidSpec)
	}
	ok := false
	switch typ {
	case corev1.HostPathDirectory:
		ok = fi.IsDir()
	case corev1.HostPathFile:
		ok = fi.Mode().IsRegular()
	case corev1.HostPathSocket:
		ok = fi.Mode()&fs.ModeSocket != 0
	case corev1.HostPathCharDev:
		ok = fi.Mode()&fs.ModeCharDevice != 0
	case corev1.HostPathBlockDev:
		ok = fi.Mode()&fs.ModeDevice != 0 && fi.Mode()&fs.ModeCharDevice == 0
	}
	if !ok {
		return fmt.Errorf("hostPath type check failed: %s is not a %s: %w", h.Path, typ, ErrInvalidSpec)
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
			return nil, fmt.Errorf("configure %s: key %q not found: %w", what, it.Key, ErrNotFound)
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
	cm := findConfigMap(cms, pod.Namespace, src.Name)
	if cm == nil {
		if optional {
			return map[string]volumeFile{}, nil
		}
		return nil, fmt.Errorf("configmap %s/%s: %w", pod.Namespace, src.Name, ErrNotFound)
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
	sec := findSecret(secrets, pod.Namespace, src.SecretName)
	if sec == nil {
		if optional {
			return map[string]volumeFile{}, nil
		}
		return nil, fmt.Errorf("secret %s/%s: %w", pod.Namespace, src.SecretName, ErrNotFound)
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
// wanted are removed.
func writeVolumeFiles(dir string, files map[string]volumeFile) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, rel := range slices.Sorted(maps.Keys(files)) {
		if !filepath.IsLocal(rel) {
			return fmt.Errorf("path %q must be relative and may not contain '..': %w", rel, ErrInvalidSpec)
		}
		f := files[rel]
		p := filepath.Join(dir, rel)
		if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, f.data) {
			if fi, err := os.Stat(p); err == nil && fi.Mode().Perm() == f.mode.Perm() {
				continue
			}
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		tmp, err := os.CreateTemp(filepath.Dir(p), ".tmp-")
		if err != nil {
			return err
		}
		_, werr := tmp.Write(f.data)
		cerr := tmp.Close()
		if err := errors.Join(werr, cerr, os.Chmod(tmp.Name(), f.mode.Perm())); err != nil {
			_ = os.Remove(tmp.Name())
			return err
		}
		if err := os.Rename(tmp.Name(), p); err != nil {
			_ = os.Remove(tmp.Name())
			return err
		}
	}
	// Remove what is no longer wanted, deepest first.
	var stale []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
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
		host, domain, err := PodHostnameAndDomain(pod, s.cfg)
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
	p := filepath.Join(PodDir(pod, s.cfg), "etc-hosts")
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
	p := TerminationMessageFile(pod, name, restartCount, s.cfg)
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
	entries, err := os.ReadDir(filepath.Join(PodLogDirectory(pod, s.cfg), name))
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
