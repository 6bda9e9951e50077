package enginetest

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// SetWritableLayer sets the bytes ContainerStats reports in use by the
// writable layer of the container with id (zero until set).
func (r *FakeRuntime) SetWritableLayer(containerID string, usedBytes uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.writable == nil {
		r.writable = map[string]uint64{}
	}
	r.writable[containerID] = usedBytes
}

// ContainerStats answers as containerd does for a container it holds:
// its writable layer's usage (SetWritableLayer), with the container's
// attributes and the fake clock's time; an unknown id gives NotFound.
func (r *FakeRuntime) ContainerStats(_ context.Context, containerID string) (*runtimeapi.ContainerStats, error) {
	r.Lock()
	defer r.Unlock()
	if err := r.enter("ContainerStats"); err != nil {
		return nil, err
	}
	c, ok := r.Containers[containerID]
	if !ok {
		return nil, notFound("container", containerID)
	}
	r.mu.Lock()
	used := r.writable[containerID]
	r.mu.Unlock()
	now := r.now()
	return &runtimeapi.ContainerStats{
		Attributes: &runtimeapi.ContainerAttributes{Id: c.Id, Metadata: c.Metadata, Labels: c.Labels, Annotations: c.Annotations},
		WritableLayer: &runtimeapi.FilesystemUsage{Timestamp: now, UsedBytes: &runtimeapi.UInt64Value{Value: used},
			FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: "/var/lib/containerd"}},
	}, nil
}

// ListContainerStats answers as ContainerStats does, for every container
// the filter selects (by id, sandbox and labels), in one call.
func (r *FakeRuntime) ListContainerStats(_ context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	r.Lock()
	defer r.Unlock()
	if err := r.enter("ListContainerStats"); err != nil {
		return nil, err
	}
	now := r.now()
	var out []*runtimeapi.ContainerStats
	for _, c := range r.Containers {
		if filter.GetId() != "" && filter.GetId() != c.Id || filter.GetPodSandboxId() != "" && filter.GetPodSandboxId() != c.SandboxID {
			continue
		}
		if !labelsMatch(filter.GetLabelSelector(), c.Labels) {
			continue
		}
		r.mu.Lock()
		used := r.writable[c.Id]
		r.mu.Unlock()
		out = append(out, &runtimeapi.ContainerStats{
			Attributes: &runtimeapi.ContainerAttributes{Id: c.Id, Metadata: c.Metadata, Labels: c.Labels, Annotations: c.Annotations},
			WritableLayer: &runtimeapi.FilesystemUsage{Timestamp: now, UsedBytes: &runtimeapi.UInt64Value{Value: used},
				FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: "/var/lib/containerd"}},
		})
	}
	return out, nil
}

// labelsMatch reports whether labels hold every key and value of sel.
func labelsMatch(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}
