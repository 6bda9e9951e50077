package syncer

import (
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/plan"
	"github.com/podsync/podsync/logx"
)

// StepAction names what a step did. The first five are the kubelet's
// SyncAction names (pkg/kubelet/container/sync_result.go); the others are
// podsync's, for work the kubelet does outside SyncPod or reports only as
// events.
type StepAction string

// Step actions.
const (
	ActionCreatePodSandbox StepAction = "CreatePodSandbox"
	// ActionConfigPodSandbox is the sandbox config a pass that starts
	// containers builds them with. The kubelet (v1.37) still names the
	// action but reports no result for it: it builds the config lazily
	// before its first start and fails the pass if it cannot.
	ActionConfigPodSandbox StepAction = "ConfigPodSandbox"
	ActionKillPodSandbox   StepAction = "KillPodSandbox"
	ActionStartContainer   StepAction = "StartContainer"
	ActionKillContainer    StepAction = "KillContainer"

	// ActionPullImage is a pull of a container's image (the kubelet's
	// Pulling/Pulled events). A failed pull also fails the container's
	// StartContainer step, as in the kubelet.
	ActionPullImage StepAction = "PullImage"
	// ActionPostStartHook and ActionPreStopHook are runs of lifecycle
	// hooks. A failed postStart hook also fails the StartContainer step; a
	// failed preStop hook does not stop the kill.
	ActionPostStartHook StepAction = "PostStartHook"
	ActionPreStopHook   StepAction = "PreStopHook"
	// ActionMountVolumes prepares the pod's directories and volumes
	// (emptyDir, hostPath, configMap, secret); it is reported only when it
	// fails, as the kubelet's FailedMount event.
	ActionMountVolumes StepAction = "MountVolumes"
	// ActionRemoveContainer and ActionRemovePodSandbox are removals of dead
	// instances and sandboxes: init containers purged for a new sandbox,
	// and the per-pod garbage collection at the end of a pass.
	ActionRemoveContainer  StepAction = "RemoveContainer"
	ActionRemovePodSandbox StepAction = "RemovePodSandbox"
)

// Failure reasons of steps: the kubelet's error names
// (pkg/kubelet/container/sync_result.go, pkg/kubelet/images/types.go,
// pkg/kubelet/kuberuntime), plus podsync's for its own actions.
// ReasonCrashLoopBackOff, ReasonImagePullBackOff and ReasonErrImagePull
// are declared with the planner and the status.
const (
	ReasonCreatePodSandboxError    = "CreatePodSandboxError"
	ReasonConfigPodSandboxError    = "ConfigPodSandboxError"
	ReasonKillPodSandboxError      = "KillPodSandboxError"
	ReasonKillContainerError       = "KillContainerError"
	ReasonCreateContainerConfigErr = "CreateContainerConfigError"
	ReasonCreateContainerError     = "CreateContainerError"
	ReasonRunContainerError        = "RunContainerError"
	ReasonPostStartHookError       = "PostStartHookError"
	ReasonPreStopHookError         = "PreStopHookError"
	ReasonErrImageNeverPull        = "ErrImageNeverPull"
	ReasonImageInspectError        = "ImageInspectError"
	ReasonInvalidImageName         = "InvalidImageName"
	ReasonRegistryUnavailable      = "RegistryUnavailable"
	ReasonSignatureValidation      = "SignatureValidationFailed"
	ReasonFailedMount              = "FailedMount"
	ReasonRemoveContainerError     = "RemoveContainerError"
	ReasonRemovePodSandboxError    = "RemovePodSandboxError"
)

// ReasonFailedPostStartHook is the reason and the message of the kill of a
// container whose postStart hook failed (the kubelet's
// reasonFailedPostStartHook; its Killing event shows the message).
const ReasonFailedPostStartHook = "FailedPostStartHook"

// PostStartHookFailedMessage is the message of a failed PostStartHook step
// and of the kubelet's FailedPostStartHook event: what the hook printed is
// in the StartContainer step's message only, as the kubelet keeps it out
// of events.
const PostStartHookFailedMessage = "PostStartHook failed"

// Reasons of successful removal steps.
const (
	// ReasonInitContainersPurged: a new sandbox starts init containers
	// from the first, so their old instances are removed (the kubelet's
	// purgeInitContainers).
	ReasonInitContainersPurged = "InitContainersPurged"
	// ReasonGarbageCollected: a dead instance or an empty stopped sandbox
	// no longer needed for status or back-off.
	ReasonGarbageCollected = "GarbageCollected"
)

// ContainerType says which list of the spec a container is in.
type ContainerType string

// Container types.
const (
	ContainerTypeInit    ContainerType = "init"
	ContainerTypeSidecar ContainerType = "sidecar"
	ContainerTypeRegular ContainerType = "regular"
	// ContainerTypeEphemeral is a debug container of spec.ephemeralContainers.
	ContainerTypeEphemeral ContainerType = "ephemeral"
	// ContainerTypeUnknown is a running container no longer in the spec.
	ContainerTypeUnknown ContainerType = "unknown"
)

// StepResult is one step of a sync pass, reported as soon as it finished.
type StepResult struct {
	// Action is what was done; Target what it was done to: the container
	// name for container steps, the image for PullImage, the pod
	// (name_namespace(uid)) for CreatePodSandbox, the pod's UID for
	// KillPodSandbox (one step stops every sandbox of the pod, as the
	// kubelet's killPodWithSyncResult reports it) and the sandbox ID for
	// ConfigPodSandbox and RemovePodSandbox.
	Action StepAction
	Target string
	// ContainerType is set for container steps.
	ContainerType ContainerType
	// Err is the error of a failed step, nil otherwise. Back-off steps
	// (Reason CrashLoopBackOff or ImagePullBackOff) have no error: waiting
	// is not a failure.
	Err error
	// Reason is the kubelet's reason: a failure class (ErrImagePull,
	// RunContainerError, …) when Err is set, a back-off reason, or the
	// planner's reason for doing the step (DefinitionChanged, Exited,
	// NewSandbox, …).
	Reason string
	// Message is human-readable detail: the planner's message, or the
	// kubelet's message for a failure.
	Message string
	// Cause is the error text of a failed CreatePodSandbox without the
	// kubelet's wording around it: its FailedCreatePodSandBox event says
	// "Failed to create pod sandbox: CAUSE" where the step's message says
	// "Failed to create sandbox for pod "NAME_NS(UID)": CAUSE".
	Cause string `json:",omitempty"`
	// Start is when the step began; Duration how long it took.
	Start    time.Time
	Duration time.Duration
	// NextRetry is when a backed-off start may be tried again.
	NextRetry time.Time
	// ContainerID and SandboxID name the CRI objects involved, when known.
	ContainerID string
	SandboxID   string
	// Attempt is the restart count of the container instance, or the
	// attempt of the sandbox, the step is about.
	Attempt uint32
	// ImagePresent is set on a StartContainer step whose image was
	// present and not pulled (the kubelet's "already present on machine"
	// Pulled event).
	ImagePresent bool `json:",omitempty"`
}

// Failed reports whether the step failed.
func (s StepResult) Failed() bool { return s.Err != nil }

// BackedOff reports whether the step is a start that must wait.
func (s StepResult) BackedOff() bool {
	return s.Reason == plan.ReasonCrashLoopBackOff || s.Reason == plan.ReasonImagePullBackOff
}

// ContainerName returns the container a container step is about, or "".
func (s StepResult) ContainerName() string {
	if s.ContainerType == "" {
		return ""
	}
	return s.Target
}

// SyncResult is what one sync pass did.
type SyncResult struct {
	// Plan is what the planner decided at the start of the pass.
	Plan plan.PodActions
	// Steps are the steps in the order they finished.
	Steps []StepResult
	// View is the runtime's view of the pod at the end of the pass (after
	// garbage collection), with the pull failures the syncer remembers;
	// feed it to ComputePodStatus.
	View model.RuntimeView
	// ViewMark is the SyncInput.ReadMark taken before the read behind
	// View; 0 without ReadMark.
	ViewMark uint64
	// SandboxID is the sandbox the pod's containers run in, if any.
	SandboxID string
	// PodIPs are the sandbox's IPs.
	PodIPs []string
	// PullFailures are the pod's failed image pulls after the pass:
	// SyncInput.PullFailures of the pod's current containers and images,
	// with the pass's failed pulls counted and its successful ones
	// forgotten. Set also when the pass fails; pass it to the next pass.
	PullFailures []model.PullFailure
}

// Err joins the errors of the failed steps; nil if none failed.
func (r SyncResult) Err() error {
	var errs []error
	for _, s := range r.Steps {
		if s.Err != nil {
			errs = append(errs, s.Err)
		}
	}
	return errors.Join(errs...)
}

// Step returns the last step with action on target, or nil.
func (r SyncResult) Step(action StepAction, target string) *StepResult {
	for i := len(r.Steps) - 1; i >= 0; i-- {
		if r.Steps[i].Action == action && r.Steps[i].Target == target {
			return &r.Steps[i]
		}
	}
	return nil
}

// stepFields are the fields of one step's log line.
func stepFields(st StepResult) []zap.Field {
	f := []zap.Field{zap.String(logx.Action, string(st.Action))}
	if st.ContainerName() != "" {
		f = append(f, zap.String(logx.ContainerName, st.ContainerName()))
	}
	if st.ContainerID != "" {
		f = append(f, zap.String(logx.ContainerID, st.ContainerID))
	}
	if st.SandboxID != "" {
		f = append(f, zap.String(logx.SandboxID, st.SandboxID))
	}
	if st.ContainerType != "" {
		f = append(f, zap.Uint32(logx.RestartCount, st.Attempt))
	} else if st.SandboxID != "" {
		f = append(f, zap.Uint32(logx.Attempt, st.Attempt))
	}
	if st.Reason != "" {
		f = append(f, zap.String(logx.Reason, st.Reason))
	}
	if !st.NextRetry.IsZero() {
		f = append(f, zap.Time(logx.NextRetry, st.NextRetry))
	}
	return append(f, zap.Duration(logx.Duration, st.Duration.Round(time.Millisecond)))
}
