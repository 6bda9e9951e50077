package enginetest

import (
	"context"
	"errors"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
)

// RunPodSandbox creates a ready sandbox with an IP (none for host network).
func (r *FakeRuntime) RunPodSandbox(_ context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error) {
	r.Lock()
	defer r.Unlock()
	if err := r.enter("RunPodSandbox"); err != nil {
		return "", err
	}
	if r.ErrorOnSandboxCreate {
		return "", errors.New("error on sandbox create")
	}
	if config.GetMetadata() == nil {
		return "", status.Error(codes.InvalidArgument, "sandbox config must include metadata")
	}
	id := critest.BuildSandboxName(config.Metadata)
	if _, ok := r.Sandboxes[id]; ok {
		return "", status.Errorf(codes.FailedPrecondition, "failed to reserve sandbox name %q: name %q is reserved for %q", id, id, id)
	}
	nsOpts := config.GetLinux().GetSecurityContext().GetNamespaceOptions()
	ip := ""
	if nsOpts.GetNetwork() != runtimeapi.NamespaceMode_NODE {
		r.mu.Lock()
		r.nextIP++
		n := r.nextIP
		r.mu.Unlock()
		ip = netip.AddrFrom4([4]byte{10, 88, byte(n / 254), byte(n%254 + 1)}).String()
	}
	r.mu.Lock()
	r.logDirs[id] = config.GetLogDirectory()
	r.mu.Unlock()
	r.Sandboxes[id] = &critest.FakePodSandbox{
		PodSandboxStatus: runtimeapi.PodSandboxStatus{
			Id:             id,
			Metadata:       proto.Clone(config.Metadata).(*runtimeapi.PodSandboxMetadata),
			State:          runtimeapi.PodSandboxState_SANDBOX_READY,
			CreatedAt:      r.now(),
			Network:        &runtimeapi.PodSandboxNetworkStatus{Ip: ip},
			Linux:          &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{Options: nsOpts}},
			Labels:         maps.Clone(config.Labels),
			Annotations:    maps.Clone(config.Annotations),
			RuntimeHandler: runtimeHandler,
		},
		RuntimeHandler: runtimeHandler,
	}
	return id, nil
}

// StopPodSandbox kills the sandbox's running containers and makes it not
// ready. An unknown id gives NotFound, as containerd 1.6 does (2.x answers
// success).
func (r *FakeRuntime) StopPodSandbox(_ context.Context, podSandboxID string) error {
	r.Lock()
	defer r.Unlock()
	if err := r.enter("StopPodSandbox"); err != nil {
		return err
	}
	s, ok := r.Sandboxes[podSandboxID]
	if !ok {
		return notFound("sandbox", podSandboxID)
	}
	for _, c := range r.sandboxContainers(podSandboxID) {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			r.exit(c, KillExitCode)
		}
	}
	s.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	return nil
}

// RemovePodSandbox removes the sandbox and its containers, killing running
// ones. An unknown id is not an error.
func (r *FakeRuntime) RemovePodSandbox(_ context.Context, podSandboxID string) error {
	r.Lock()
	defer r.Unlock()
	if err := r.enter("RemovePodSandbox"); err != nil {
		return err
	}
	if _, ok := r.Sandboxes[podSandboxID]; !ok {
		return nil
	}
	for _, c := range r.sandboxContainers(podSandboxID) {
		r.remove(c)
	}
	delete(r.Sandboxes, podSandboxID)
	r.mu.Lock()
	delete(r.logDirs, podSandboxID)
	r.mu.Unlock()
	return nil
}

// PodSandboxStatus returns the sandbox's status; an unknown id gives NotFound.
func (r *FakeRuntime) PodSandboxStatus(_ context.Context, podSandboxID string, _ bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	r.Lock()
	defer r.Unlock()
	if err := r.enter("PodSandboxStatus"); err != nil {
		return nil, err
	}
	s, ok := r.Sandboxes[podSandboxID]
	if !ok {
		return nil, notFound("sandbox", podSandboxID)
	}
	return &runtimeapi.PodSandboxStatusResponse{Status: proto.Clone(&s.PodSandboxStatus).(*runtimeapi.PodSandboxStatus)}, nil
}

// sandboxContainers lists the containers of a sandbox, oldest first; the
// caller holds the lock.
func (r *FakeRuntime) sandboxContainers(sandboxID string) []*critest.FakeContainer {
	var out []*critest.FakeContainer
	for _, c := range r.Containers {
		if c.SandboxID == sandboxID {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b *critest.FakeContainer) int {
		if a.CreatedAt != b.CreatedAt {
			return int(a.CreatedAt - b.CreatedAt)
		}
		return strings.Compare(a.Id, b.Id)
	})
	return out
}
