package engine

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/podsync/podsync/engine/admit"
	"github.com/podsync/podsync/engine/eviction"
	"github.com/podsync/podsync/engine/logs"
	"github.com/podsync/podsync/engine/plan"
	"github.com/podsync/podsync/engine/podworkers"
	"github.com/podsync/podsync/engine/runpods"
	"github.com/podsync/podsync/engine/sessions"
	"github.com/podsync/podsync/engine/stats"
	"github.com/podsync/podsync/engine/store"
	"github.com/podsync/podsync/engine/syncer"
)

// The Node's vocabulary: the types its methods take and return, and the
// values a caller compares them with, named here so that a caller (the
// server, podsync-vk's provider, the manifest directory) imports the
// facade alone, never the rooms behind it. Each is the room's own type,
// under the facade's name (an alias, not a copy).

// Pods and the revision log (engine/store).
type (
	// PodRecord is a stored pod with its status and revisions.
	PodRecord = store.PodRecord
	// PodRef names a stored pod.
	PodRef = store.PodRef
	// PodFilter selects stored pods (List, ListShared).
	PodFilter = store.Filter
	// Entry is one entry of the revision log (Watch).
	Entry = store.Entry
	// EntryKind says what an Entry records.
	EntryKind = store.Kind
	// Watcher follows the revision log.
	Watcher = store.Watcher
	// Event is a Kubernetes-like event about a pod.
	Event = store.Event
	// EventFilter selects pods' events (Events).
	EventFilter = store.EventFilter
	// ObjectRef names a stored ConfigMap or Secret.
	ObjectRef = store.ObjectRef
	// ObjectKind is ConfigMap or Secret.
	ObjectKind = store.ObjectKind
	// ObjectPut is one object to store, with its preconditions.
	ObjectPut = store.ObjectPut
	// ObjectResult is what storing one object did.
	ObjectResult = store.ObjectResult
	// ObjectRecord is a stored object.
	ObjectRecord = store.ObjectRecord
	// ObjectFilter selects stored objects.
	ObjectFilter = store.ObjectFilter
)

// RefOf names pod as the store does.
func RefOf(pod *corev1.Pod) PodRef { return store.RefOf(pod) }

// The kinds of revision log entries and of stored objects.
const (
	EntryStatus        = store.KindStatus
	EntryEvent         = store.KindEvent
	EntryDeleted       = store.KindDeleted
	EntryObjectApplied = store.KindObjectApplied
	EntryObjectDeleted = store.KindObjectDeleted
	KindConfigMap      = store.KindConfigMap
	KindSecret         = store.KindSecret
)

// Passes and their steps (engine/syncer, engine/plan).
type (
	// StepResult is one finished step of a sync pass.
	StepResult = syncer.StepResult
	// StepAction names what a step did (the kubelet's action names).
	StepAction = syncer.StepAction
	// ContainerType is the kind of container a step concerns.
	ContainerType = syncer.ContainerType
	// PodActions is the plan of a pass (Plan).
	PodActions = plan.PodActions
	// ContainerAction is one decision of a plan about one container.
	ContainerAction = plan.ContainerAction
	// ContainerResources are a container's CPU and memory as the runtime
	// applies them (a plan's resizes).
	ContainerResources = plan.ContainerResources
	// PodSyncer runs the pod workers' passes (NodeOptions.Syncer).
	PodSyncer = podworkers.PodSyncer
)

// The actions of steps and the kinds of containers.
const (
	ActionCreatePodSandbox          = syncer.ActionCreatePodSandbox
	ActionConfigPodSandbox          = syncer.ActionConfigPodSandbox
	ActionKillPodSandbox            = syncer.ActionKillPodSandbox
	ActionRemovePodSandbox          = syncer.ActionRemovePodSandbox
	ActionPullImage                 = syncer.ActionPullImage
	ActionMountVolumes              = syncer.ActionMountVolumes
	ActionStartContainer            = syncer.ActionStartContainer
	ActionKillContainer             = syncer.ActionKillContainer
	ActionRemoveContainer           = syncer.ActionRemoveContainer
	ActionPostStartHook             = syncer.ActionPostStartHook
	ActionPreStopHook               = syncer.ActionPreStopHook
	ActionUpdateContainerResources  = syncer.ActionUpdateContainerResources
	ActionUpdatePodSandboxResources = syncer.ActionUpdatePodSandboxResources
	ContainerTypeInit               = syncer.ContainerTypeInit
	ContainerTypeSidecar            = syncer.ContainerTypeSidecar
	ContainerTypeRegular            = syncer.ContainerTypeRegular
	ContainerTypeEphemeral          = syncer.ContainerTypeEphemeral
)

// The kubelet's event reasons the workers record (pkg/kubelet/events).
const (
	EventPulling             = podworkers.EventPulling
	EventPulled              = podworkers.EventPulled
	EventFailed              = podworkers.EventFailed
	EventBackOff             = podworkers.EventBackOff
	EventCreated             = podworkers.EventCreated
	EventStarted             = podworkers.EventStarted
	EventKilling             = podworkers.EventKilling
	EventUnhealthy           = podworkers.EventUnhealthy
	EventSandboxChanged      = podworkers.EventSandboxChanged
	EventFailedCreateSandbox = podworkers.EventFailedCreateSandbox
	EventFailedKillPod       = podworkers.EventFailedKillPod
	EventFailedMount         = podworkers.EventFailedMount
	EventFailedPostStartHook = podworkers.EventFailedPostStartHook
	EventFailedPreStopHook   = podworkers.EventFailedPreStopHook
	EventErrImageNeverPull   = podworkers.EventErrImageNeverPull
)

// NodeInfo is what the node says of itself (Info): what admission knows
// of it — its name, labels, taints, capacity and allocatable resources,
// and the runtime's features — and its machine's system info.
type NodeInfo struct {
	admit.Node
	// System is what the node says of its machine, kernel and runtime
	// (NodeOptions.SystemInfo).
	System SystemInfo
}

// SystemInfo is what the node says of its machine, kernel and container
// runtime: core/v1 NodeSystemInfo's fields that podsyncd reads, as the
// kubelet reads them. An empty field is unknown.
type SystemInfo struct {
	// MachineID is /etc/machine-id.
	MachineID string
	// SystemUUID is the SMBIOS product UUID.
	SystemUUID string
	// BootID is /proc/sys/kernel/random/boot_id.
	BootID string
	// KernelVersion is the kernel's release (uname -r).
	KernelVersion string
	// OSImage is /etc/os-release's PRETTY_NAME.
	OSImage string
	// ContainerRuntimeVersion is "<runtime name>://<version>" as CRI
	// Version answers (the kubelet's form: "containerd://2.1.4").
	ContainerRuntimeVersion string
	// OperatingSystem and Architecture are GOOS and GOARCH.
	OperatingSystem, Architecture string
}

// RunPods (engine/runpods).
type (
	// RunPodsRequest is a batch of pods to run.
	RunPodsRequest = runpods.Request
	// RunPodsProgress is a step or a status of a pod of the batch.
	RunPodsProgress = runpods.Progress
	// RunPodsSummary is the outcome of a batch.
	RunPodsSummary = runpods.Summary
	// RunPodsResult is the outcome of one pod of a batch.
	RunPodsResult = runpods.Result
	// WaitFor is the target the pods of a batch are waited for.
	WaitFor = runpods.WaitFor
	// Outcome is how one pod of a batch ended.
	Outcome = runpods.Outcome
)

// Targets, outcomes and the default timeout of RunPods.
const (
	DefaultRunPodsTimeout = runpods.DefaultTimeout
	WaitForRunning        = runpods.Running
	WaitForReady          = runpods.Ready
	WaitForSucceeded      = runpods.Succeeded
	ReachedTarget         = runpods.ReachedTarget
	Rejected              = runpods.Rejected
	Failed                = runpods.Failed
	TimedOut              = runpods.TimedOut
)

// Sessions, stats and logs (engine/sessions, engine/stats, engine/logs).
type (
	// ContainerRef names a container of a stored pod.
	ContainerRef = sessions.ContainerRef
	// StreamOptions are the standard streams of a session.
	StreamOptions = sessions.StreamOptions
	// TerminalSize is a terminal's size in cells.
	TerminalSize = sessions.TerminalSize
	// ExecSyncResult is what an ExecSync's command wrote and how it ended.
	ExecSyncResult = sessions.ExecSyncResult
	// PodStats is a pod's usage.
	PodStats = stats.PodStats
	// ContainerStats is a running container's usage.
	ContainerStats = stats.ContainerStats
	// NodeStats is the machine's usage.
	NodeStats = stats.NodeStats
	// StatsSummary is the node's usage and its pods' (/stats/summary).
	StatsSummary = stats.Summary
	// CPUStats, MemoryStats, NetworkStats and FsStats are parts of a
	// usage.
	CPUStats     = stats.CPUStats
	MemoryStats  = stats.MemoryStats
	NetworkStats = stats.NetworkStats
	FsStats      = stats.FsStats
	// LogsRequest selects a container's output.
	LogsRequest = logs.Request
	// LogLine is one line of a container's output.
	LogLine = logs.Line
	// LogStream is stdout or stderr.
	LogStream = logs.Stream
	// LogRotation configures container log rotation
	// (NodeOptions.LogRotation).
	LogRotation = logs.Rotation
)

// The streams of a container's output.
const (
	LogStdout = logs.Stdout
	LogStderr = logs.Stderr
)

// DefaultStreamIdleTimeout ends a session idle for that long (the
// kubelet's --streaming-connection-idle-timeout).
const DefaultStreamIdleTimeout = sessions.DefaultStreamIdleTimeout

// Eviction (engine/eviction).
type (
	// EvictionPolicy configures the local storage eviction
	// (NodeOptions.Eviction).
	EvictionPolicy = eviction.Policy
	// StorageThreshold is an amount of free space.
	StorageThreshold = eviction.StorageThreshold
)

// The eviction's defaults, reason and signals.
const (
	DefaultHousekeepingInterval     = eviction.DefaultHousekeepingInterval
	DefaultStoreMinAvailablePercent = eviction.DefaultStoreMinAvailablePercent
	DefaultStoreReserve             = eviction.DefaultStoreReserve
	ReasonEvicted                   = eviction.ReasonEvicted
	SignalEmptyDirFsLimit           = eviction.SignalEmptyDirFsLimit
	SignalEphemeralPodFsLimit       = eviction.SignalEphemeralPodFsLimit
	SignalEphemeralContainerFsLimit = eviction.SignalEphemeralContainerFsLimit
	SignalNodeFsAvailable           = eviction.SignalNodeFsAvailable
)
