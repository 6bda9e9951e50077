package enginetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
	"k8s.io/utils/clock"
	utilexec "k8s.io/utils/exec"
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
//     container may exit right after StartContainer with an exit code;
//   - StopContainer ends a running container as containerd's SIGTERM, grace
//     period and SIGKILL would: with the `exit N` of its SIGTERM trap; with
//     KillExitCode when it ignores SIGTERM (`trap "" TERM`, or PID 1 in its own PID
//     namespace without a handler) or the timeout is 0; otherwise with
//     TermExitCode. WithStopExitCode replaces the last two;
//   - StopPodSandbox kills the sandbox's running containers (KillExitCode);
//     RemovePodSandbox removes them;
//   - sets Reason "Completed" or "Error" and FinishedAt on every exit;
//   - answers unknown ids with a gRPC NotFound status from the status and
//     stop calls (containerd 2.x answers stops with success) and with
//     success from the remove calls, as containerd does;
//   - answers a reserved name with FailedPrecondition, as containerd 2.x
//     does (1.6 answers Unknown);
//   - streams CONTAINER_CREATED, _STARTED, _STOPPED and _DELETED events to
//     every GetContainerEvents caller;
//   - reports RuntimeReady and NetworkReady in Status.
//
// InjectError works for runtime and image methods alike. Methods are safe for
// concurrent use.
type FakeRuntime struct {
	*critest.FakeRuntimeService
	// Images is the image service; PullImage adds images to it.
	Images *critest.FakeImageService

	clock        clock.PassiveClock
	stopExitCode *int32

	// mu guards the fields below. Lock order: FakeRuntimeService, then mu.
	mu       sync.Mutex
	programs map[string]program
	logDirs  map[string]string // sandbox id → log directory
	nextIP   int
	subs     map[*subscriber]struct{}
	dropped  int
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
		logDirs:            map[string]string{},
		subs:               map[*subscriber]struct{}{},
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

// imageRef returns the id of a held image, by name or id.
func (r *FakeRuntime) imageRef(name string) (string, bool) {
	r.Images.Lock()
	defer r.Images.Unlock()
	if img, ok := r.Images.Images[name]; ok {
		return img.Id, true
	}
	for _, img := range r.Images.Images {
		if img.Id == name || slices.Contains(img.RepoTags, name) {
			return img.Id, true
		}
	}
	return "", false
}

// CreateContainer creates a container in a known sandbox from a held image.
func (r *FakeRuntime) CreateContainer(_ context.Context, podSandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	r.Lock()
	defer r.Unlock()
	if err := r.enter("CreateContainer"); err != nil {
		return "", err
	}
	if config.GetMetadata() == nil {
		return "", status.Error(codes.InvalidArgument, "container config must include metadata")
	}
	if _, ok := r.Sandboxes[podSandboxID]; !ok {
		return "", notFound("sandbox", podSandboxID)
	}
	ref, ok := r.imageRef(config.GetImage().GetImage())
	if !ok {
		return "", notFound("image", config.GetImage().GetImage())
	}
	id := critest.BuildContainerName(config.Metadata, podSandboxID)
	if _, ok := r.Containers[id]; ok {
		return "", status.Errorf(codes.FailedPrecondition, "failed to reserve container name %q: name %q is reserved for %q", id, id, id)
	}
	r.mu.Lock()
	logDir := r.logDirs[podSandboxID]
	r.mu.Unlock()
	if sandboxConfig.GetLogDirectory() != "" {
		logDir = sandboxConfig.GetLogDirectory()
	}
	logPath := ""
	if config.GetLogPath() != "" {
		logPath = filepath.Join(logDir, config.GetLogPath())
	}
	c := &critest.FakeContainer{
		ContainerStatus: runtimeapi.ContainerStatus{
			Id:          id,
			Metadata:    proto.Clone(config.Metadata).(*runtimeapi.ContainerMetadata),
			Image:       proto.Clone(config.Image).(*runtimeapi.ImageSpec),
			ImageRef:    ref,
			ImageId:     ref,
			CreatedAt:   r.now(),
			State:       runtimeapi.ContainerState_CONTAINER_CREATED,
			Labels:      maps.Clone(config.Labels),
			Annotations: maps.Clone(config.Annotations),
			LogPath:     logPath,
		},
		SandboxID:      podSandboxID,
		LinuxResources: config.GetLinux().GetResources(),
	}
	r.Containers[id] = c
	r.mu.Lock()
	prog := interpret(append(slices.Clone(config.Command), config.Args...))
	prog.pid1 = config.GetLinux().GetSecurityContext().GetNamespaceOptions().GetPid() == runtimeapi.NamespaceMode_CONTAINER
	r.programs[id] = prog
	r.mu.Unlock()
	r.emit(c, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT)
	return id, nil
}

// StartContainer starts a created container in a ready sandbox, writes its
// output to its log and, when its command ends by itself, makes it exit.
func (r *FakeRuntime) StartContainer(_ context.Context, containerID string) error {
	r.Lock()
	defer r.Unlock()
	if err := r.enter("StartContainer"); err != nil {
		return err
	}
	c, ok := r.Containers[containerID]
	if !ok {
		return notFound("container", containerID)
	}
	if c.State != runtimeapi.ContainerState_CONTAINER_CREATED {
		return status.Errorf(codes.FailedPrecondition, "container %q is in %s state, not created", containerID, c.State)
	}
	if s := r.Sandboxes[c.SandboxID]; s == nil || s.State != runtimeapi.PodSandboxState_SANDBOX_READY {
		return status.Errorf(codes.FailedPrecondition, "sandbox %q of container %q is not ready", c.SandboxID, containerID)
	}
	if c.LogPath != "" {
		if err := appendLog(c.LogPath, nil, r.clock.Now()); err != nil {
			return fmt.Errorf("create container log: %w", err)
		}
	}
	c.State = runtimeapi.ContainerState_CONTAINER_RUNNING
	c.StartedAt = r.now()
	r.emit(c, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT)
	r.mu.Lock()
	p := r.programs[containerID]
	r.mu.Unlock()
	if c.LogPath != "" && len(p.output) > 0 {
		if err := appendLog(c.LogPath, p.output, r.clock.Now()); err != nil {
			return fmt.Errorf("write container log: %w", err)
		}
	}
	if p.exits {
		r.exit(c, p.exitCode)
	}
	return nil
}

// StopContainer ends a running container (see FakeRuntime for its exit
// code); stopping one that is not running does nothing. An unknown id gives
// NotFound, as containerd 1.6 does (2.x answers success).
func (r *FakeRuntime) StopContainer(_ context.Context, containerID string, timeout int64) error {
	r.Lock()
	defer r.Unlock()
	if err := r.enter("StopContainer"); err != nil {
		return err
	}
	c, ok := r.Containers[containerID]
	if !ok {
		return notFound("container", containerID)
	}
	if c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return nil
	}
	code := int32(KillExitCode)
	if timeout > 0 {
		r.mu.Lock()
		p := r.programs[containerID]
		r.mu.Unlock()
		code = p.stopExitCode()
		if r.stopExitCode != nil && p.termExit == nil {
			code = *r.stopExitCode
		}
	}
	r.exit(c, code)
	return nil
}

// RemoveContainer removes a container, killing it if it runs. An unknown
// id is not an error.
func (r *FakeRuntime) RemoveContainer(_ context.Context, containerID string) error {
	r.Lock()
	defer r.Unlock()
	if err := r.enter("RemoveContainer"); err != nil {
		return err
	}
	if c, ok := r.Containers[containerID]; ok {
		r.remove(c)
	}
	return nil
}

// ContainerStatus returns the container's status; an unknown id gives
// NotFound.
func (r *FakeRuntime) ContainerStatus(_ context.Context, containerID string, _ bool) (*runtimeapi.ContainerStatusResponse, error) {
	r.Lock()
	defer r.Unlock()
	if err := r.enter("ContainerStatus"); err != nil {
		return nil, err
	}
	c, ok := r.Containers[containerID]
	if !ok {
		return nil, notFound("container", containerID)
	}
	return &runtimeapi.ContainerStatusResponse{Status: proto.Clone(&c.ContainerStatus).(*runtimeapi.ContainerStatus)}, nil
}

// ExecSync interprets cmd like a container command (see interpret) in a
// running container: it returns what the echo statements print, and a
// k8s.io/utils/exec.CodeExitError for a non-zero exit, as k8s.io/cri-client
// does. A command that would keep running returns at once with status 0.
func (r *FakeRuntime) ExecSync(_ context.Context, containerID string, cmd []string, _ time.Duration) ([]byte, []byte, error) {
	r.Lock()
	defer r.Unlock()
	if err := r.enter("ExecSync"); err != nil {
		return nil, nil, err
	}
	c, ok := r.Containers[containerID]
	if !ok {
		return nil, nil, notFound("container", containerID)
	}
	if c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return nil, nil, status.Errorf(codes.FailedPrecondition, "container %q is not running", containerID)
	}
	p := interpret(cmd)
	var stdout, stderr []byte
	for _, l := range p.output {
		if l.stream == "stderr" {
			stderr = append(stderr, l.text+"\n"...)
		} else {
			stdout = append(stdout, l.text+"\n"...)
		}
	}
	if p.exits && p.exitCode != 0 {
		return stdout, stderr, utilexec.CodeExitError{
			Err:  fmt.Errorf("command '%s' exited with %d: %s", strings.Join(cmd, " "), p.exitCode, stderr),
			Code: int(p.exitCode),
		}
	}
	return stdout, stderr, nil
}

// ExitContainer makes a running container write lines to its stdout log and
// exit with exitCode, as if its process ended by itself.
func (r *FakeRuntime) ExitContainer(containerID string, exitCode int32, lines ...string) error {
	r.Lock()
	defer r.Unlock()
	c, ok := r.Containers[containerID]
	if !ok {
		return notFound("container", containerID)
	}
	if c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return fmt.Errorf("container %q is in %s state, not running", containerID, c.State)
	}
	if err := r.writeLog(c, "stdout", lines); err != nil {
		return err
	}
	r.exit(c, exitCode)
	return nil
}

// WriteLog appends lines on stream ("stdout" or "stderr") to a container's
// log in CRI format.
func (r *FakeRuntime) WriteLog(containerID, stream string, lines ...string) error {
	r.Lock()
	defer r.Unlock()
	c, ok := r.Containers[containerID]
	if !ok {
		return notFound("container", containerID)
	}
	return r.writeLog(c, stream, lines)
}

func (r *FakeRuntime) writeLog(c *critest.FakeContainer, stream string, lines []string) error {
	if len(lines) == 0 {
		return nil
	}
	if c.LogPath == "" {
		return fmt.Errorf("container %q has no log path", c.Id)
	}
	ll := make([]logLine, 0, len(lines))
	for _, l := range lines {
		ll = append(ll, logLine{stream: stream, text: l})
	}
	return appendLog(c.LogPath, ll, r.clock.Now())
}

// exit ends a container with code; the caller holds the lock.
func (r *FakeRuntime) exit(c *critest.FakeContainer, code int32) {
	c.State = runtimeapi.ContainerState_CONTAINER_EXITED
	c.ExitCode = code
	c.FinishedAt = r.now()
	c.Reason = "Completed"
	if code != 0 {
		c.Reason = "Error"
	}
	r.emit(c, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT)
}

// remove kills a running container and deletes it; the caller holds the lock.
func (r *FakeRuntime) remove(c *critest.FakeContainer) {
	if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
		r.exit(c, KillExitCode)
	}
	delete(r.Containers, c.Id)
	r.mu.Lock()
	delete(r.programs, c.Id)
	r.mu.Unlock()
	r.emit(c, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT)
}

// appendLog appends lines to a CRI log file ("<RFC3339Nano> <stream> F
// <text>"), creating it and its directory.
func appendLog(path string, lines []logLine, now time.Time) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return err
	}
	var b strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&b, "%s %s F %s\n", now.UTC().Format(time.RFC3339Nano), l.stream, l.text)
	}
	if _, err := f.WriteString(b.String()); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// ListImages lists the held images.
func (r *FakeRuntime) ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	return r.Images.ListImages(ctx, filter)
}

// ImageStatus returns a held image, or a nil image when it is not held.
func (r *FakeRuntime) ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec, verbose bool) (*runtimeapi.ImageStatusResponse, error) {
	return r.Images.ImageStatus(ctx, image, verbose)
}

// PullImage adds the image; inject an error to make a pull fail.
func (r *FakeRuntime) PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, podSandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	return r.Images.PullImage(ctx, image, auth, podSandboxConfig)
}

// RemoveImage removes an image.
func (r *FakeRuntime) RemoveImage(ctx context.Context, image *runtimeapi.ImageSpec) error {
	return r.Images.RemoveImage(ctx, image)
}

// ImageFsInfo returns the fake filesystem usage.
func (r *FakeRuntime) ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	return r.Images.ImageFsInfo(ctx)
}
