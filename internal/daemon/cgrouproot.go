package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/host/cgroupfs"
)

// claimCgroupRoot makes podsyncd the one agent whose pods live under its
// cgroup root (--cgroup-root, --cgroup-driver) on the cgroup file systems
// mounted at fsRoot, or says why it cannot be: pod cgroups are named after
// pod UIDs, which podsync derives from namespace and name, so two agents
// under one root share (and remove) each other's pod cgroups.
//
// It refuses a root whose besteffort QoS cgroup carries a kubelet's mark
// (the kubelet removes the pod cgroups it does not know), then locks the
// root's kubepods cgroup (cgroupfs.Lock) for as long as the returned file
// stays open: a second podsyncd on the same root is refused, one on
// another root is not. The kernel drops the lock when podsyncd ends,
// however it ends.
func claimCgroupRoot(fsRoot string, opts criconfig.Options) (*os.File, error) {
	opts = opts.WithDefaults()
	if marked, file := cgroupfs.KubeletMark(fsRoot, criconfig.QoSCgroup(corev1.PodQOSBestEffort, opts)); marked {
		return nil, fmt.Errorf("cgroup root %q belongs to a kubelet (%s holds the CPU shares a kubelet's QoS manager "+
			"gives it): a kubelet removes the pod cgroups it does not know, so podsyncd's pods cannot live there; "+
			"start podsyncd with a cgroup root of its own, such as --cgroup-root=/podsync (docs/operator.md, "+
			"\"Beside a kubelet\")", opts.CgroupRoot, file)
	}
	h, err := cgroupfs.LockHierarchy(fsRoot)
	if err != nil {
		return nil, fmt.Errorf("cgroup root %q: %w", opts.CgroupRoot, err)
	}
	dir := filepath.Join(h, criconfig.QoSCgroup(corev1.PodQOSGuaranteed, opts))
	f, err := cgroupfs.Lock(dir)
	if errors.Is(err, cgroupfs.ErrLocked) {
		return nil, fmt.Errorf("cgroup root %q is in use by another podsyncd (%w): two agents under one root share "+
			"and remove each other's pod cgroups; give each podsyncd its own --cgroup-root", opts.CgroupRoot, err)
	}
	if err != nil {
		return nil, fmt.Errorf("cgroup root %q: %w", opts.CgroupRoot, err)
	}
	return f, nil
}
