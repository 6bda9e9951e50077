package failpoint

// EnvVar is the environment variable that arms failpoints in a build with
// the failpoints tag.
const EnvVar = "PODSYNC_FAILPOINTS"

// The failpoints, in the order a pod meets them.
const (
	// RunPodsAdmitted: RunPods has admitted its batch and applies nothing
	// yet (engine/runpods).
	RunPodsAdmitted = "runpods-admitted"
	// BeforeStorePut: Apply has admitted a pod and not stored it yet.
	BeforeStorePut = "before-store-put"
	// AfterStorePut: Apply has stored the pod (or its update) and not run
	// a pass yet.
	AfterStorePut = "after-store-put"
	// BeforeImagePull: a pass is about to pull a container's image.
	BeforeImagePull = "before-image-pull"
	// AfterSandboxCreated: RunPodSandbox returned; podsync has recorded
	// nothing of the new sandbox (not even its ID or IPs).
	AfterSandboxCreated = "after-sandbox-created"
	// AfterContainerCreated: CreateContainer returned; the container is
	// not started.
	AfterContainerCreated = "after-container-created"
	// AfterContainerStarted: StartContainer returned; no postStart hook
	// ran and no step or status is recorded.
	AfterContainerStarted = "after-container-started"
	// BeforeStatusAppend: a pass is done; its status and events are not
	// in the store yet.
	BeforeStatusAppend = "before-status-append"
	// AfterContainerStopped: a kill stopped a container (StopContainer
	// returned), which is not removed yet.
	AfterContainerStopped = "after-container-stopped"
	// MidSandboxRemoval: a pod's removal stopped a sandbox
	// (StopPodSandbox) and did not remove it yet.
	MidSandboxRemoval = "mid-sandbox-removal"
	// BeforeStoreDelete: a deletion removed the pod from the runtime and
	// the disk; its record is still in the store, marked deleting.
	BeforeStoreDelete = "before-store-delete"
	// GCRemoveContainer: a pass's garbage collection is about to remove a
	// dead container instance.
	GCRemoveContainer = "gc-remove-container"
	// GCRemoveSandbox: a pass's garbage collection stopped a dead sandbox
	// and did not remove it yet.
	GCRemoveSandbox = "gc-remove-sandbox"
	// StoreCommit: the store is about to commit a write transaction (and
	// fdatasync it); sleep(D) delays every write by D (test/robustness).
	StoreCommit = "store-commit"
	// SkipPreconditions: armed "off", the store does not check the
	// revision and uid preconditions of pod writes: a scratch build whose
	// history the robustness test must find wrong.
	SkipPreconditions = "skip-preconditions"
)

// Points returns every failpoint's name, in the order of the constants.
func Points() []string {
	return []string{
		RunPodsAdmitted, BeforeStorePut, AfterStorePut, BeforeImagePull, AfterSandboxCreated,
		AfterContainerCreated, AfterContainerStarted, BeforeStatusAppend, AfterContainerStopped,
		MidSandboxRemoval, BeforeStoreDelete, GCRemoveContainer, GCRemoveSandbox, StoreCommit,
		SkipPreconditions,
	}
}
