package eviction

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/syncer"
)

// writableLayers reads the writable layer usage of every podsync
// container in one CRI ListContainerStats, by container id; nil (and no
// error) when the runtime cannot list stats, so that measurePod asks for
// each container's.
func (m *Manager) writableLayers(ctx context.Context) (map[string]int64, error) {
	l, ok := m.rt.(syncer.ContainerStatsLister)
	if !ok {
		return nil, nil
	}
	stats, err := l.ListContainerStats(ctx, &runtimeapi.ContainerStatsFilter{LabelSelector: map[string]string{model.LabelManaged: "true"}})
	if errors.Is(err, syncer.ErrNoContainerStats) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list container stats: %w", err)
	}
	out := make(map[string]int64, len(stats))
	for _, st := range stats {
		if id := st.GetAttributes().GetId(); id != "" && st.GetWritableLayer() != nil {
			out[id] = int64(st.GetWritableLayer().GetUsedBytes().GetValue())
		}
	}
	return out, nil
}

// measurePod measures pod's local storage: its disk-backed emptyDir and
// configMap volumes, its hosts file and, for each running container (the
// id of the newest running instance of each container name, as
// runningContainers lists them), its writable layer (from layers, the
// round's writableLayers, or, for a container missing there, its own CRI
// ContainerStats) and log files, and apart (Claims) the named volumes it
// mounts read-write. Secret and memory emptyDir volumes are tmpfs,
// counted as memory, not here.
func (m *Manager) measurePod(ctx context.Context, pod *corev1.Pod, running map[string]string, layers map[string]int64) (podStorageUsage, error) {
	u := podStorageUsage{Volumes: map[string]int64{}, Containers: map[string]int64{}}
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		var dir string
		switch {
		case v.PersistentVolumeClaim != nil:
			if !mountsReadWrite(pod, v) {
				continue
			}
			used, err := diskUsage(criconfig.ClaimVolumeDir(pod.Namespace, v.PersistentVolumeClaim.ClaimName, m.cfg))
			if err != nil {
				return u, fmt.Errorf("volume %q: %w", v.Name, err)
			}
			u.Claims += used
			continue
		case v.EmptyDir != nil && v.EmptyDir.Medium != corev1.StorageMediumMemory:
			dir = criconfig.VolumeDir(pod, criconfig.VolumePluginEmptyDir, v.Name, m.cfg)
		case v.ConfigMap != nil:
			dir = criconfig.VolumeDir(pod, criconfig.VolumePluginConfigMap, v.Name, m.cfg)
		default:
			continue
		}
		used, err := diskUsage(dir)
		if err != nil {
			return u, fmt.Errorf("volume %q: %w", v.Name, err)
		}
		if v.EmptyDir != nil {
			u.Volumes[v.Name] = used
		}
		u.Total += used
	}
	hosts, err := diskUsage(filepath.Join(criconfig.PodDir(pod, m.cfg), "etc-hosts"))
	if err != nil {
		return u, err
	}
	u.Total += hosts

	stats, _ := m.rt.(syncer.ContainerStatser)
	for _, name := range slices.Sorted(maps.Keys(running)) {
		used, ok := layers[running[name]]
		if !ok {
			if stats == nil {
				return u, syncer.ErrNoContainerStats
			}
			st, err := stats.ContainerStats(ctx, running[name])
			if err != nil {
				return u, fmt.Errorf("container %q stats: %w", name, err)
			}
			used = int64(st.GetWritableLayer().GetUsedBytes().GetValue())
		}
		logs, err := diskUsage(filepath.Join(criconfig.PodLogDirectory(pod, m.cfg), name))
		if err != nil {
			return u, fmt.Errorf("container %q logs: %w", name, err)
		}
		used += logs
		u.Containers[name] = used
		u.Total += used
	}
	return u, nil
}

// mountsReadWrite reports whether a container of pod (of any kind) mounts
// the claim volume v read-write: neither the claim nor the mount says
// readOnly.
func mountsReadWrite(pod *corev1.Pod, v *corev1.Volume) bool {
	if v.PersistentVolumeClaim.ReadOnly {
		return false
	}
	rw := func(mounts []corev1.VolumeMount) bool {
		return slices.ContainsFunc(mounts, func(m corev1.VolumeMount) bool { return m.Name == v.Name && !m.ReadOnly })
	}
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if rw(cs[i].VolumeMounts) {
				return true
			}
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		if rw(pod.Spec.EphemeralContainers[i].VolumeMounts) {
			return true
		}
	}
	return false
}

// runningContainers lists podsync's running containers in one call: for
// each pod UID, the newest running instance of each container name, by
// id. The measurements of a housekeeping round share it, rather than
// reading each pod's view (two lists and a status per object, per pod).
func (m *Manager) runningContainers(ctx context.Context) (map[types.UID]map[string]string, error) {
	ctrs, err := m.rt.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: map[string]string{model.LabelManaged: "true"},
	})
	if err != nil {
		return nil, fmt.Errorf("list running containers: %w", err)
	}
	out := map[types.UID]map[string]string{}
	created := map[string]int64{}
	for _, c := range ctrs {
		l := c.GetLabels()
		uid, name := types.UID(l[model.LabelPodUID]), l[model.LabelContainerName]
		if !model.IsManaged(l) || uid == "" || name == "" || c.GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
			continue
		}
		if out[uid] == nil {
			out[uid] = map[string]string{}
		}
		if id, ok := out[uid][name]; !ok || c.GetCreatedAt() > created[id] {
			out[uid][name] = c.GetId()
		}
		created[c.GetId()] = c.GetCreatedAt()
	}
	return out, nil
}

// diskUsage is the kubelet's du (pkg/volume/util/fs DiskUsage): the
// blocks in use below path, walked without following symbolic links or
// crossing into another file system, each inode counted once. A path that
// does not exist uses nothing.
func diskUsage(path string) (int64, error) {
	var top unix.Stat_t
	if err := unix.Lstat(path, &top); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return 0, nil
		}
		return 0, fmt.Errorf("measure %s: %w", path, err)
	}
	seen := map[uint64]bool{}
	var total int64
	err := filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed while the walk ran
		}
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			if errors.Is(err, unix.ENOENT) {
				return nil
			}
			return err
		}
		if st.Dev != top.Dev {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if st.Nlink > 1 && !d.IsDir() {
			if seen[st.Ino] {
				return nil
			}
			seen[st.Ino] = true
		}
		total += st.Blocks * 512
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("measure %s: %w", path, err)
	}
	return total, nil
}

// deviceOf returns the device of the file system path is on.
func deviceOf(path string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	return st.Dev, nil
}

// fsSpace returns the bytes available to unprivileged users and the size
// of the file system path is on.
func fsSpace(path string) (available, capacity int64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, 0, &os.PathError{Op: "statfs", Path: path, Err: err}
	}
	return int64(st.Bavail) * st.Bsize, int64(st.Blocks) * st.Bsize, nil
}
