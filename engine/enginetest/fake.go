package enginetest

import (
	"slices"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
	"k8s.io/utils/clock"
)

// Exit codes of containers ended by a signal (128 + the signal number).
const (
	// KillExitCode is the exit code of a container killed with SIGKILL:
	// stopped with timeout 0, stopped with its sandbox, removed while
	// running, or still running when a stop's grace period ended.
	KillExitCode = 137
	// TermExitCode is the exit code of a process that SIGTERM ended by its
	// default action.
	TermExitCode = 143
)

// containerd's marks of a container whose StartContainer failed: it is
// left exited with this exit code and reason, the error as its message.
const (
	StartErrorExitCode = 128
	StartErrorReason   = "StartError"
)

// FakeRuntime is an in-memory Runtime that behaves like containerd where the
// engine depends on it. It embeds cri-api's FakeRuntimeService, so its
// Called list, AssertCalls, GetCalls, SetFakeSandboxes and the exported maps
// keep working (lock the embedded service to read them), and holds a
// FakeImageService as Images.
//
// Beyond the embedded fake it:
//   - gives every non-host-network sandbox its own IP from 10.88.0.0/16;
//   - rejects a second sandbox or container with the same metadata (name,
//     namespace, uid, attempt) while the first exists, as containerd
//     reserves names;
//   - refuses to create a container in an unknown sandbox or from an image
//     it does not hold (pull it first, or use WithImages);
//   - sets the container's LogPath (sandbox log directory + config log path)
//     and writes its output there in CRI format;
//   - runs no processes but interprets the command (see interpret): a
//     container may exit right after StartContainer with an exit code,
//     or, with WithTimedSleeps, after the `sleep`s of its script;
//   - StopContainer ends a running container as containerd's SIGTERM, grace
//     period and SIGKILL would: with the `exit N` of its SIGTERM trap; with
//     KillExitCode when it ignores SIGTERM (`trap "" TERM`, or PID 1 in its own PID
//     namespace without a handler) or the timeout is 0; otherwise with
//     TermExitCode. WithStopExitCode replaces the last two;
//   - StopPodSandbox kills the sandbox's running containers (KillExitCode);
//     RemovePodSandbox removes them;
//   - refuses to create or start a container in a sandbox that is not
//     ready; a refused start leaves the container exited with
//     StartErrorExitCode and StartErrorReason, as containerd does;
//   - sets Reason "Completed" or "Error" and FinishedAt on every exit;
//   - answers unknown ids with a gRPC NotFound status from the status and
//     stop calls (containerd 2.x answers stops with success) and with
//     success from the remove calls, as containerd does;
//   - answers a reserved name with FailedPrecondition, as containerd 2.x
//     does (1.6 answers Unknown);
//   - streams CONTAINER_CREATED, _STARTED, _STOPPED and _DELETED events to
//     every GetContainerEvents caller;
//   - reports RuntimeReady and NetworkReady in Status;
//   - answers ContainerStats (and ListContainerStats) of containers it holds with their writable
//     layer's usage (SetWritableLayer).
//
// InjectError works for runtime and image methods alike. Methods are safe for
// concurrent use.
type FakeRuntime struct {
	*critest.FakeRuntimeService
	// Images is the image service; PullImage adds images to it.
	Images *critest.FakeImageService

	clock        clock.PassiveClock
	stopExitCode *int32
	// ignoreStopSignal makes ContainerStatus report no stop signal, as
	// containerd 1.6 does.
	ignoreStopSignal bool
	// sleeps, when set, times the commands' sleeps (WithTimedSleeps).
	sleeps clock.WithDelayedExecution

	// mu guards the fields below. Lock order: FakeRuntimeService, then mu.
	mu       sync.Mutex
	programs map[string]program
	// namespaces are the namespace options each container was created
	// with (NamespaceOptions reads them).
	namespaces map[string]*runtimeapi.NamespaceOption
	logDirs    map[string]string // sandbox id → log directory
	nextIP     int
	subs       map[*subscriber]struct{}
	dropped    int
	writable   map[string]uint64 // container id → writable layer bytes
	// timers end the timed sleeps of running containers, by id.
	timers map[string]clock.Timer
}

var (
	_ Runtime    = (*FakeRuntime)(nil)
	_ TestDouble = (*FakeRuntime)(nil)
)

// Option configures a FakeRuntime.
type Option func(*FakeRuntime)

// WithStopExitCode sets the exit code StopContainer (with a timeout above
// zero) gives every running container that has no `trap 'exit N' TERM`,
// in place of KillExitCode or TermExitCode (see FakeRuntime).
func WithStopExitCode(code int32) Option {
	return func(r *FakeRuntime) { r.stopExitCode = &code }
}

// WithoutStopSignals makes the runtime ignore the stop signal of a
// container's config, as containerd before 2.1 does: ContainerStatus
// reports none. By default it reports the config's, as containerd 2.x.
func WithoutStopSignals() Option {
	return func(r *FakeRuntime) { r.ignoreStopSignal = true }
}

// WithTimedSleeps makes a container's `sleep N` take N on c (the real
// clock when nil), so that a command such as `sh -c "sleep 5; exit 3"`
// exits 3 five seconds after its start (see interpret). Without it a
// sleep runs until the container is stopped.
func WithTimedSleeps(c clock.WithDelayedExecution) Option {
	return func(r *FakeRuntime) {
		if c == nil {
			c = clock.RealClock{}
		}
		r.sleeps = c
	}
}

// WithClock sets the clock that stamps creation, start and finish times.
func WithClock(c clock.PassiveClock) Option {
	return func(r *FakeRuntime) { r.clock = c }
}

// WithImages makes the runtime hold these images from the start.
func WithImages(refs ...string) Option {
	return func(r *FakeRuntime) {
		for _, ref := range refs {
			r.Images.Images[ref] = &runtimeapi.Image{
				Id:       ref,
				RepoTags: []string{ref},
				Spec:     &runtimeapi.ImageSpec{Image: ref},
			}
		}
	}
}

// NewRuntime returns an empty FakeRuntime.
func NewRuntime(opts ...Option) *FakeRuntime {
	r := &FakeRuntime{
		FakeRuntimeService: critest.NewFakeRuntimeService(),
		Images:             critest.NewFakeImageService(),
		clock:              clock.RealClock{},
		programs:           map[string]program{},
		namespaces:         map[string]*runtimeapi.NamespaceOption{},
		logDirs:            map[string]string{},
		subs:               map[*subscriber]struct{}{},
		timers:             map[string]clock.Timer{},
	}
	r.FakeStatus = &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true},
		{Type: runtimeapi.NetworkReady, Status: true},
	}}
	for _, o := range opts {
		o(r)
	}
	return r
}

// IsTestDouble reports true: FakeRuntime runs no processes.
func (r *FakeRuntime) IsTestDouble() bool { return true }

// imageMethods are the methods InjectError routes to Images.
var imageMethods = []string{"ListImages", "ImageStatus", "PullImage", "RemoveImage", "ImageFsInfo"}

// InjectError makes the next call of method (e.g. "StartContainer" or
// "PullImage") return err. Errors queue up per method.
func (r *FakeRuntime) InjectError(method string, err error) {
	if slices.Contains(imageMethods, method) {
		r.Images.InjectError(method, err)
		return
	}
	r.FakeRuntimeService.InjectError(method, err)
}

// enter records a call and pops its injected error; the caller holds the
// embedded service's lock.
func (r *FakeRuntime) enter(method string) error {
	r.Called = append(r.Called, method)
	errs := r.Errors[method]
	if len(errs) == 0 {
		return nil
	}
	r.Errors[method] = errs[1:]
	return errs[0]
}

func notFound(kind, id string) error {
	return status.Errorf(codes.NotFound, "an error occurred when try to find %s %q: not found", kind, id)
}

func (r *FakeRuntime) now() int64 { return r.clock.Now().UnixNano() }
