package server

import (
	"context"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
)

// GetNode returns what admission knows of the node and what it says of
// its machine.
func (s *service) GetNode(ctx context.Context, _ *podsyncv1.GetNodeRequest) (*podsyncv1.GetNodeResponse, error) {
	n := s.backend(ctx).Node.Info()
	si := n.System
	out := &podsyncv1.Node{
		Name:        n.Name,
		Labels:      maps.Clone(n.Labels),
		Capacity:    quantities(n.Capacity),
		Allocatable: quantities(n.Allocatable),
		SystemInfo: &podsyncv1.NodeSystemInfo{
			MachineId: si.MachineID, SystemUuid: si.SystemUUID, BootId: si.BootID, KernelVersion: si.KernelVersion,
			OsImage: si.OSImage, ContainerRuntimeVersion: si.ContainerRuntimeVersion,
			OperatingSystem: si.OperatingSystem, Architecture: si.Architecture,
		},
	}
	if out.Name == "" {
		out.Name = s.nodeName
	}
	for _, t := range n.Taints {
		out.Taints = append(out.Taints, &podsyncv1.Taint{Key: t.Key, Value: t.Value, Effect: string(t.Effect)})
	}
	l, err := s.backend(ctx).Leases.Get(ctx)
	if err != nil {
		return nil, err
	}
	out.Lease, out.RequireLease = leaseToProto(l), s.requireLease
	return &podsyncv1.GetNodeResponse{Node: out}, nil
}

func quantities(l corev1.ResourceList) map[string]string {
	if len(l) == 0 {
		return nil
	}
	out := make(map[string]string, len(l))
	for _, name := range slices.Sorted(maps.Keys(l)) {
		q := l[name]
		out[string(name)] = q.String()
	}
	return out
}
