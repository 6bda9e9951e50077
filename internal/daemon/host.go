package daemon

import (
	"context"
	"fmt"
	"io"

	cri "k8s.io/cri-api/pkg/apis"

	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/syncer"
)

// Host is what podsyncd reaches outside its own files and sockets: the
// container runtime, the cgroup file systems it claims its cgroup root
// on and makes pod cgroups in, and the kernel's mounts of the pods'
// memory-backed volumes. The zero Host is the machine's, which Run
// uses; RunOn takes another. Only the hollow node (internal/testing/hollow,
// run by hack/hollow for the scale benchmarks, as kubemark's hollow
// kubelet) gives one: podsyncd itself, with its store, pod workers, planner,
// syncer and server, on an in-process runtime, under a directory of its
// own.
type Host struct {
	// Runtime, if set, is the container runtime — both CRI services —
	// in place of those --runtime-endpoint and --image-endpoint reach;
	// no containerd event service is followed (the runtime is to offer
	// CRI container events). It outlives the run: RunOn does not close
	// it.
	Runtime interface {
		cri.RuntimeService
		cri.ImageManagerService
	}
	// CgroupFS, if set, says where the cgroup file systems are mounted
	// for the configuration, in place of /sys/fs/cgroup: podsyncd locks
	// its cgroup root there and makes and removes its pods' cgroups
	// there. It is called once, before anything else is started.
	CgroupFS func(Config) (string, error)
	// Mounter, if set, makes the pods' tmpfs mounts in place of the
	// kernel (syncer.Mounter).
	Mounter syncer.Mounter
}

// RunOn is Run on host: podsyncd with its runtime, cgroup file systems
// and mounts replaced by host's (see Host).
func RunOn(ctx context.Context, args []string, stdout, stderr io.Writer, host Host) int {
	return runMain(ctx, args, stdout, stderr, host)
}

// cgroupFS is where the cgroup file systems are for cfg.
func (h Host) cgroupFS(cfg Config) (string, error) {
	if h.CgroupFS == nil {
		return criconfig.DefaultCgroupFS, nil
	}
	dir, err := h.CgroupFS(cfg)
	if err != nil {
		return "", fmt.Errorf("cgroup file systems: %w", err)
	}
	return dir, nil
}

// dial connects to the runtime: Host.Runtime, or the endpoints of cfg.
// The returned func closes what was opened.
func (d *daemon) dial(ctx context.Context) (*syncer.RemoteRuntime, func(), error) {
	if rt := d.host.Runtime; rt != nil {
		return &syncer.RemoteRuntime{RuntimeService: rt, ImageManagerService: rt}, func() {}, nil
	}
	return dialRuntime(ctx, d.cfg.RuntimeEndpoint, d.cfg.ImageEndpoint, d.tracer)
}
