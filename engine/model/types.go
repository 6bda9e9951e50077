package model

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// RuntimeView is what the container runtime holds for one pod: every
// sandbox and container instance podsync created for it, newest first,
// plus the image pull and start failures the executor remembers. It is the
// podsync counterpart of the kubelet's kubecontainer.PodStatus.
type RuntimeView struct {
	// Sandboxes are the pod's sandboxes, newest (highest CreatedAt) first.
	Sandboxes []Sandbox
	// Containers are the pod's container instances across all its
	// sandboxes, newest (highest CreatedAt) first.
	Containers []ContainerInstance
	// PullFailures are the failed image pulls the executor has seen, one
	// entry per image; the runtime keeps no record of them.
	PullFailures []PullFailure
}

// SandboxState is the state of a sandbox.
type SandboxState int

// Sandbox states, as CRI reports them.
const (
	SandboxNotReady SandboxState = iota
	SandboxReady
)

// String returns "Ready" or "NotReady".
func (s SandboxState) String() string {
	if s == SandboxReady {
		return "Ready"
	}
	return "NotReady"
}

// Sandbox is one pod sandbox as the runtime reports it.
type Sandbox struct {
	ID        string
	Attempt   uint32
	State     SandboxState
	CreatedAt time.Time
	// IPs are the sandbox's pod IPs, primary first. Nil means the runtime
	// reported no network status; empty but not nil, a network status
	// without an IP (a host-network sandbox, or one whose network is not
	// set up). PodSandboxChanged tells the two apart.
	IPs []string
	// NetworkMode is the sandbox's network namespace mode: NODE for a
	// host-network sandbox, POD otherwise.
	NetworkMode runtimeapi.NamespaceMode
}

// ContainerState is the state of a container instance.
type ContainerState int

// Container states, as CRI reports them.
const (
	ContainerUnknown ContainerState = iota
	ContainerCreated
	ContainerRunning
	ContainerExited
)

// String returns the kubelet's name for the state.
func (s ContainerState) String() string {
	switch s {
	case ContainerCreated:
		return "created"
	case ContainerRunning:
		return "running"
	case ContainerExited:
		return "exited"
	default:
		return "unknown"
	}
}

// ContainerInstance is one container instance (one CRI container) of a pod.
type ContainerInstance struct {
	ID string
	// SandboxID is the sandbox the instance was created in. CRI's
	// ContainerStatus does not carry it: the reader fills it from
	// ListContainers (NewRuntimeView leaves it empty).
	SandboxID string
	// Name is the container's name in the pod spec.
	Name       string
	State      ContainerState
	CreatedAt  time.Time
	StartedAt  time.Time
	FinishedAt time.Time
	ExitCode   int32
	// Reason and Message are the runtime's (containerd: "Completed",
	// "Error", "OOMKilled").
	Reason  string
	Message string
	// Image is the image the instance was created from; ImageRef is the
	// runtime's resolved reference (digest).
	Image    string
	ImageRef string
	// Hash is the podsync spec hash the instance was created with; Spec the
	// hashed fields, nil if the annotation is absent or unreadable.
	Hash string
	Spec *ContainerSpec
	// Resources are the Linux resources the runtime reports the instance
	// runs with (containerd updates them on a resize); nil if it reports
	// none.
	Resources *RuntimeResources `json:",omitempty"`
	// RestartCount is the kubelet's restart count annotation.
	RestartCount int32
	// TerminationMessagePath and TerminationMessagePolicy are the
	// container's, as annotated when it was created.
	TerminationMessagePath   string
	TerminationMessagePolicy string
	// TerminationMessage is what the executor read from the termination
	// message file (or the log tail, see NeedsLogFallback); the runtime
	// does not report it.
	TerminationMessage string
}

// PullFailure records failed pulls of one image of a pod. The kubelet
// keys its image-pull back-off by pod UID and image, so every container of
// the pod that uses the image shares it.
type PullFailure struct {
	// Image is the image as the containers name it (the kubelet's
	// requested image, before a default tag).
	Image string
	// Failures counts consecutive failed pulls of Image; At is the last.
	Failures int
	At       time.Time
	// Reason and Message are the last failure's, as the kubelet's
	// evalCRIPullErr gives them (ErrImagePull, RegistryUnavailable,
	// SignatureValidationFailed).
	Reason  string `json:",omitempty"`
	Message string
}

// PullBackOffMessage is the kubelet's message of a start held back by the
// image-pull back-off, as the container's waiting state and the sync
// result carry it: "Back-off pulling image IMAGE" with the last failure.
// The BackOff event has the first part only.
func PullBackOffMessage(image string, f *PullFailure) string {
	msg := fmt.Sprintf("Back-off pulling image %q", image)
	if f == nil || f.Message == "" {
		return msg
	}
	return fmt.Sprintf("%s: %s: %s", msg, cmp.Or(f.Reason, "ErrImagePull"), f.Message)
}

// FindContainer returns the newest instance of the named container, or nil
// (the kubelet's FindContainerStatusByName).
func (v *RuntimeView) FindContainer(name string) *ContainerInstance {
	for i := range v.Containers {
		if v.Containers[i].Name == name {
			return &v.Containers[i]
		}
	}
	return nil
}

// HasAnyActiveRegularContainerStarted is the kubelet's (pkg/kubelet/
// container/helpers.go): whether an instance of a regular container, in
// any state, belongs to the active sandbox, the newest one if it is ready
// (the kubelet's ActiveContainerStatuses). A main container that has run
// in the current sandbox means the pod has been initialized; one left over
// from an older sandbox does not.
func (v *RuntimeView) HasAnyActiveRegularContainerStarted(pod *corev1.Pod) bool {
	if len(v.Sandboxes) == 0 || v.Sandboxes[0].State != SandboxReady {
		return false
	}
	active := v.Sandboxes[0].ID
	for i := range v.Containers {
		inst := &v.Containers[i]
		if inst.SandboxID != active {
			continue
		}
		if slices.ContainsFunc(pod.Spec.Containers, func(c corev1.Container) bool { return c.Name == inst.Name }) {
			return true
		}
	}
	return false
}

// PullFailure returns the pull failure recorded for image, or nil.
func (v *RuntimeView) PullFailure(image string) *PullFailure {
	for i := range v.PullFailures {
		if f := &v.PullFailures[i]; f.Image == image {
			return f
		}
	}
	return nil
}

// CurrentPullFailures returns the pull failures of fs that concern the
// pod's current images: a failure of an image no container of the pod
// runs any more is forgotten.
func CurrentPullFailures(pod *corev1.Pod, fs []PullFailure) []PullFailure {
	uses := func(image string) bool {
		is := func(c corev1.Container) bool { return c.Image == image }
		return slices.ContainsFunc(pod.Spec.InitContainers, is) || slices.ContainsFunc(pod.Spec.Containers, is)
	}
	var out []PullFailure
	for _, f := range fs {
		if uses(f.Image) {
			out = append(out, f)
		}
	}
	return out
}

// NewRuntimeView decodes the CRI statuses of one pod's sandboxes and
// containers into a RuntimeView, newest first. Objects without the
// podsync.io/managed label, or of another pod, are skipped: podsync never
// touches CRI objects it did not create.
func NewRuntimeView(uid types.UID, sandboxes []*runtimeapi.PodSandboxStatus, containers []*runtimeapi.ContainerStatus) RuntimeView {
	var v RuntimeView
	for _, s := range sandboxes {
		if s == nil || !IsManaged(s.GetLabels()) || PodFromLabels(s.GetLabels()).UID != uid {
			continue
		}
		v.Sandboxes = append(v.Sandboxes, SandboxFromCRI(s))
	}
	for _, c := range containers {
		if c == nil || !IsManaged(c.GetLabels()) || PodFromLabels(c.GetLabels()).UID != uid {
			continue
		}
		v.Containers = append(v.Containers, containerFromCRI(c))
	}
	slices.SortStableFunc(v.Sandboxes, func(a, b Sandbox) int { return b.CreatedAt.Compare(a.CreatedAt) })
	slices.SortStableFunc(v.Containers, func(a, b ContainerInstance) int {
		return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(b.RestartCount, a.RestartCount))
	})
	return v
}

// SandboxFromCRI decodes one CRI sandbox status.
func SandboxFromCRI(s *runtimeapi.PodSandboxStatus) Sandbox {
	out := Sandbox{
		ID:          s.GetId(),
		Attempt:     s.GetMetadata().GetAttempt(),
		CreatedAt:   fromNanos(s.GetCreatedAt()),
		NetworkMode: s.GetLinux().GetNamespaces().GetOptions().GetNetwork(),
	}
	out.State = SandboxStateFromCRI(s.GetState())
	// The kubelet's determinePodSandboxIPs: none without a network
	// status, else the primary IP if any, then the additional ones.
	// NOTE(podsync): additional IPs without a primary one keep the
	// sandbox, where the kubelet's Ip == "" would replace it; no runtime
	// reports them so.
	net := s.GetNetwork()
	if net == nil {
		return out
	}
	out.IPs = []string{}
	if net.GetIp() != "" {
		out.IPs = append(out.IPs, net.GetIp())
	}
	for _, ip := range net.GetAdditionalIps() {
		if ip.GetIp() != "" {
			out.IPs = append(out.IPs, ip.GetIp())
		}
	}
	return out
}

// containerFromCRI decodes one CRI container status, with what podsync
// recorded in its labels and annotations.
func containerFromCRI(c *runtimeapi.ContainerStatus) ContainerInstance {
	info := ContainerInfoFromLabels(c.GetLabels())
	ann := ContainerAnnotationsFrom(c.GetAnnotations())
	name := info.ContainerName
	if name == "" {
		name = c.GetMetadata().GetName()
	}
	out := ContainerInstance{
		ID:                       c.GetId(),
		Name:                     name,
		CreatedAt:                fromNanos(c.GetCreatedAt()),
		StartedAt:                fromNanos(c.GetStartedAt()),
		FinishedAt:               fromNanos(c.GetFinishedAt()),
		ExitCode:                 c.GetExitCode(),
		Reason:                   c.GetReason(),
		Message:                  c.GetMessage(),
		Image:                    c.GetImage().GetUserSpecifiedImage(),
		ImageRef:                 c.GetImageRef(),
		Hash:                     ann.Hash,
		Spec:                     ann.Spec,
		RestartCount:             ann.RestartCount,
		TerminationMessagePath:   ann.TerminationMessagePath,
		TerminationMessagePolicy: ann.TerminationMessagePolicy,
	}
	if out.Image == "" {
		out.Image = c.GetImage().GetImage()
	}
	if l := c.GetResources().GetLinux(); l != nil {
		out.Resources = &RuntimeResources{CPUShares: l.GetCpuShares(), CPUQuota: l.GetCpuQuota(),
			CPUPeriod: l.GetCpuPeriod(), MemoryLimitInBytes: l.GetMemoryLimitInBytes()}
	}
	out.State = ContainerStateFromCRI(c.GetState())
	return out
}

// SandboxStateFromCRI decodes a CRI sandbox state.
func SandboxStateFromCRI(s runtimeapi.PodSandboxState) SandboxState {
	if s == runtimeapi.PodSandboxState_SANDBOX_READY {
		return SandboxReady
	}
	return SandboxNotReady
}

// ContainerStateFromCRI decodes a CRI container state.
func ContainerStateFromCRI(s runtimeapi.ContainerState) ContainerState {
	switch s {
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		return ContainerCreated
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return ContainerRunning
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		return ContainerExited
	default:
		return ContainerUnknown
	}
}

// NeedsLogFallback reports whether the executor should fill the
// instance's TerminationMessage from the tail of its log because the
// termination message file was empty or absent: policy
// FallbackToLogsOnError and a non-zero exit of a container that ran — one
// the runtime could not even start (reason ContainerCannotRun) has no log
// to read (the kubelet's convertToKubeContainerStatus).
func NeedsLogFallback(c *ContainerInstance) bool {
	return c.State == ContainerExited && c.ExitCode != 0 && c.Reason != ReasonContainerCannotRun &&
		c.TerminationMessagePolicy == "FallbackToLogsOnError" && c.TerminationMessage == ""
}

// ReasonContainerCannotRun is the reason a runtime gives a container it
// could not start.
const ReasonContainerCannotRun = "ContainerCannotRun"

func fromNanos(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

func (c *ContainerInstance) String() string {
	return fmt.Sprintf("%s(%s)", c.Name, c.ID)
}

// RuntimeResources are the Linux resources the runtime reports for a
// running container (CRI ContainerStatus.resources), as it applied them.
type RuntimeResources struct {
	CPUShares          int64
	CPUQuota           int64
	CPUPeriod          int64
	MemoryLimitInBytes int64
}
