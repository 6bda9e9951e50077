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
