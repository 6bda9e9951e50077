package syncer

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsync/podsync/engine/criconfig"
)

// etcHostsPath is the node's hosts file, copied for host-network pods.
const etcHostsPath = "/etc/hosts"

// setupVolumes creates the pod's directories and prepares its volumes, as
// the kubelet's makePodDataDirs and volume manager do for the volume types
// podsync supports: emptyDir directories (mode 0777), hostPath type checks
// and the *OrCreate types (beneath the allowed prefix: mounts.go), and the
// files of configMap, secret, downwardAPI and projected volumes, rendered
// every pass (criconfig.VolumeFiles) and written by the atomic writer
// (writeAtomic: a change, such as of the labels a downwardAPI file shows,
// is swapped in whole; unchanged files are not written).
// It returns an error wrapping ErrNotFound for a missing ConfigMap, Secret
// or key that is not optional, ErrInvalidSpec for a hostPath of the wrong
// type.
//
// Secret, downwardAPI and projected volumes and emptyDir volumes of
// medium Memory are tmpfs mounts (setupTmpfs), as the kubelet's plugins
// wrap a memory emptyDir, sized as the kubelet sizes them
// (criconfig.TmpfsSize); RemovePod unmounts them. newSandbox says that
// the pass creates the pod's sandbox: no container of the pod runs.
func (s *Syncer) setupVolumes(pod *corev1.Pod, in SyncInput, newSandbox bool) error {
	for _, dir := range []string{criconfig.PodDir(pod, s.cfg), filepath.Join(criconfig.PodDir(pod, s.cfg), "volumes"), filepath.Join(criconfig.PodDir(pod, s.cfg), "containers")} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return fmt.Errorf("create pod directory: %w", err)
		}
	}
	files := criconfig.VolumeFilesInput{Pod: pod, ConfigMaps: in.ConfigMaps, Secrets: in.Secrets}
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		var err error
		switch {
		case v.EmptyDir != nil:
			err = s.setupEmptyDir(pod, v, newSandbox)
		case v.HostPath != nil:
			err = s.checkHostPathVolume(v.HostPath)
		case criconfig.IsFileVolume(v):
			err = s.setupFileVolume(pod, v, files, newSandbox)
		case v.PersistentVolumeClaim != nil:
			err = s.setupClaimVolume(pod, v.PersistentVolumeClaim, newSandbox)
		}
		if err != nil {
			return fmt.Errorf("volume %q: %w", v.Name, err)
		}
	}
	return nil
}

// refreshFileVolumes writes the files of the pod's configMap, secret,
// downwardAPI and projected volumes (setupFileVolume) for a pod whose
// containers run.
func (s *Syncer) refreshFileVolumes(pod *corev1.Pod, in SyncInput) error {
	files := criconfig.VolumeFilesInput{Pod: pod, ConfigMaps: in.ConfigMaps, Secrets: in.Secrets}
	var errs []error
	for i := range pod.Spec.Volumes {
		if v := &pod.Spec.Volumes[i]; criconfig.IsFileVolume(v) {
			if err := s.setupFileVolume(pod, v, files, false); err != nil {
				errs = append(errs, fmt.Errorf("volume %q: %w", v.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// setupEmptyDir creates an emptyDir's directory (mode 0777), or mounts
// its tmpfs for medium Memory. A new one is given the pod's fsGroup as the
// kubelet's emptyDir SetUpAt gives it once, when it sets the volume up
// (always, whatever fsGroupChangePolicy says); an existing one is left as
// its containers made it.
func (s *Syncer) setupEmptyDir(pod *corev1.Pod, v *corev1.Volume, newSandbox bool) error {
	dir := criconfig.VolumeDir(pod, criconfig.VolumePluginEmptyDir, v.Name, s.cfg)
	var fresh bool
	if v.EmptyDir.Medium == corev1.StorageMediumMemory {
		var err error
		// 1777, a tmpfs's own default: the kubelet mounts it with no
		// mode, and the e2e tests read the sticky bit (a subPath made in
		// the volume gets the root's mode, dgtrwxrwxrwx with an fsGroup).
		if fresh, err = s.setupTmpfs(tmpfsVolume{dir: dir, size: criconfig.TmpfsSize(pod, v.EmptyDir.SizeLimit, s.cfg), mode: 0o777 | os.ModeSticky}, newSandbox); err != nil {
			return err
		}
	} else {
		_, statErr := os.Lstat(dir)
		fresh = errors.Is(statErr, fs.ErrNotExist)
		if err := os.MkdirAll(dir, 0o777); err != nil {
			return err
		}
		if err := os.Chmod(dir, 0o777); err != nil {
			return err
		}
	}
	if !fresh {
		return nil
	}
	return ownershipOf(pod, false, false).apply(dir)
}

// setupClaimVolume creates the node-local named volume of a
// persistentVolumeClaim on first use (EnsureClaimVolume) and, when the
// pod's sandbox is new and the claim is mounted read-write, gives it the
// pod's fsGroup under its fsGroupChangePolicy, as the kubelet's local
// volume plugin does on a volume's first mount (OnRootMismatch skips a
// volume whose root already has the group and mode).
//
// NOTE(podsync): the kubelet changes a local volume only when no other
// pod mounts it; a named volume is changed for each pod that starts
// with it, so the last pod's fsGroup owns it (with OnRootMismatch, only
// when the root's group differs).
func (s *Syncer) setupClaimVolume(pod *corev1.Pod, claim *corev1.PersistentVolumeClaimVolumeSource, newSandbox bool) error {
	if _, err := EnsureClaimVolume(pod.Namespace, claim.ClaimName, s.cfg); err != nil {
		return err
	}
	if !newSandbox || claim.ReadOnly {
		return nil
	}
	return ownershipOf(pod, false, true).apply(criconfig.ClaimVolumeDir(pod.Namespace, claim.ClaimName, s.cfg))
}

// setupFileVolume renders and writes the files of a configMap, secret,
// downwardAPI or projected volume. All but configMap volumes are a tmpfs
// without a size limit, as the kubelet's plugins wrap a memory emptyDir.
// With an fsGroup, what is written is given its group as the kubelet's
// plugins do from the atomic writer's setPerms: read-only volumes, so the
// group may read every file (ownership.go), and fsGroupChangePolicy does
// not apply.
func (s *Syncer) setupFileVolume(pod *corev1.Pod, v *corev1.Volume, in criconfig.VolumeFilesInput, newSandbox bool) error {
	files, err := criconfig.VolumeFiles(in, v, s.cfg)
	if err != nil {
		return err
	}
	dir := criconfig.VolumeDir(pod, criconfig.VolumePlugin(v), v.Name, s.cfg)
	if v.ConfigMap == nil {
		if _, err := s.setupTmpfs(tmpfsVolume{dir: dir, size: criconfig.TmpfsSize(pod, nil, s.cfg), mode: 0o755, secret: true}, newSandbox); err != nil {
			return err
		}
	}
	own := ownershipOf(pod, true, false)
	if own == nil {
		return writeAtomic(dir, files)
	}
	// The files are written with the group's read bit the ownership adds,
	// so that an unchanged payload compares equal on the next pass.
	for rel, f := range files {
		f.Mode |= ownerROMask
		files[rel] = f
	}
	if err := writeAtomicPerms(dir, files, func() error { return own.apply(dir) }); err != nil {
		return err
	}
	// NOTE(podsync): specs change in place here; a volume written before
	// the pod had this fsGroup is given it on the next pass, where the
	// kubelet changes ownership only when it writes.
	if own.rootMismatch(dir) {
		return own.apply(dir)
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
