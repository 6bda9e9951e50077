package syncer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/host/cgroupfs"
)

// removePodCgroup removes the pod's cgroup (PodCgroupParent) from every
// hierarchy under opts.CgroupFS, as the kubelet's pod container manager
// does once a pod's sandboxes are gone: runc removes the cgroups of the
// containers it ran, not their parent, so without this every deleted pod
// leaves an empty kubepods/<qos>/pod<uid> directory per hierarchy.
//
// Only the cgroupfs driver is handled: with the systemd driver the pod's
// slice is a systemd unit, which systemd itself removes once it is empty.
// A cgroup that still has processes cannot be removed (EBUSY); the error
// says which.
func removePodCgroup(pod *corev1.Pod, opts criconfig.Options) error {
	opts = opts.WithDefaults()
	if opts.CgroupDriver != criconfig.CgroupfsDriver {
		return nil
	}
	parent := criconfig.PodCgroupParent(pod, opts)
	var errs []error
	hs, _ := cgroupfs.Hierarchies(opts.CgroupFS) // none to clean without them
	for _, h := range hs {
		errs = append(errs, cgroupfs.RemoveTree(filepath.Join(h, parent), nil))
	}
	return errors.Join(errs...)
}

// ensurePodCgroup creates the pod's cgroup with the kubelet's pod-level
// values (criconfig.PodCgroupConfig) before its sandbox, as the kubelet's
// pod container manager does (EnsureExists), for a pod with pod-level
// resources: their limits are the pod's, which no container carries.
// Other pods keep the cgroup runc makes without limits, and only the
// cgroupfs driver is handled (with systemd the slice is a unit).
func ensurePodCgroup(pod *corev1.Pod, opts criconfig.Options) error {
	opts = opts.WithDefaults()
	if opts.CgroupDriver != criconfig.CgroupfsDriver || !resourcehelper.IsPodLevelResourcesSet(pod) {
		return nil
	}
	r := criconfig.PodCgroupConfig(pod)
	parent := criconfig.PodCgroupParent(pod, opts)
	root := opts.CgroupFS
	var files []cgroupFile
	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err == nil {
		// cgroup v2: the controllers are enabled down to the pod's cgroup.
		dir := filepath.Join(root, parent)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create pod cgroup: %w", err)
		}
		rel := strings.Split(strings.Trim(parent, "/"), "/")
		for i := range rel {
			ctl := filepath.Join(append([]string{root}, rel[:i]...)...)
			files = append(files, cgroupFile{filepath.Join(ctl, "cgroup.subtree_control"), "+cpu +memory"})
		}
		if r.CPUShares != nil {
			files = append(files, cgroupFile{filepath.Join(dir, "cpu.weight"), strconv.FormatUint(cpuSharesToWeight(*r.CPUShares), 10)})
		}
		if r.CPUQuota != nil && r.CPUPeriod != nil {
			q := "max"
			if *r.CPUQuota > 0 {
				q = strconv.FormatInt(*r.CPUQuota, 10)
			}
			files = append(files, cgroupFile{filepath.Join(dir, "cpu.max"), q + " " + strconv.FormatUint(*r.CPUPeriod, 10)})
		}
		if r.Memory != nil && *r.Memory > 0 {
			files = append(files, cgroupFile{filepath.Join(dir, "memory.max"), strconv.FormatInt(*r.Memory, 10)})
		}
	} else {
		hs, _ := cgroupfs.Hierarchies(root) // none to write without them
		for _, h := range hs {
			controllers := strings.Split(filepath.Base(h), ",")
			dir := filepath.Join(h, parent)
			switch {
			case slices.Contains(controllers, "cpu"):
				if r.CPUShares != nil {
					files = append(files, cgroupFile{filepath.Join(dir, "cpu.shares"), strconv.FormatUint(*r.CPUShares, 10)})
				}
				if r.CPUQuota != nil && r.CPUPeriod != nil {
					q := *r.CPUQuota
					if q <= 0 {
						q = -1
					}
					files = append(files, cgroupFile{filepath.Join(dir, "cpu.cfs_period_us"), strconv.FormatUint(*r.CPUPeriod, 10)},
						cgroupFile{filepath.Join(dir, "cpu.cfs_quota_us"), strconv.FormatInt(q, 10)})
				}
			case slices.Contains(controllers, "memory"):
				if r.Memory != nil && *r.Memory > 0 {
					files = append(files, cgroupFile{filepath.Join(dir, "memory.limit_in_bytes"), strconv.FormatInt(*r.Memory, 10)})
				}
			default:
				continue
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("create pod cgroup: %w", err)
			}
		}
	}
	for _, f := range files {
		if err := os.WriteFile(f.path, []byte(f.value), 0o644); err != nil {
			return fmt.Errorf("set pod cgroup %s to %s: %w", f.path, f.value, err)
		}
	}
	return nil
}

// cgroupFile is one cgroup control file and the value written to it.
type cgroupFile struct{ path, value string }

// cpuSharesToWeight is runc's ConvertCPUSharesToCgroupV2Value.
func cpuSharesToWeight(shares uint64) uint64 {
	if shares == 0 {
		return 0
	}
	return 1 + ((shares-2)*9999)/262142
}
