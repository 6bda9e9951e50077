package enginetest

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
	utilexec "k8s.io/utils/exec"
)

// CreateContainer creates a container in a known, ready sandbox from a
// held image. containerd refuses a sandbox that is not ready ("sandbox
// container %q is not running").
func (r *FakeRuntime) CreateContainer(_ context.Context, podSandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	r.Lock()
	defer r.Unlock()
	if err := r.enter("CreateContainer"); err != nil {
		return "", err
	}
	if config.GetMetadata() == nil {
		return "", status.Error(codes.InvalidArgument, "container config must include metadata")
	}
	if s, ok := r.Sandboxes[podSandboxID]; !ok {
		return "", notFound("sandbox", podSandboxID)
	} else if s.State != runtimeapi.PodSandboxState_SANDBOX_READY {
		return "", fmt.Errorf("sandbox container %q is not running", podSandboxID)
	}
	ref, ok := r.imageRef(config.GetImage().GetImage())
	if !ok {
		return "", notFound("image", config.GetImage().GetImage())
	}
	ns := config.GetLinux().GetSecurityContext().GetNamespaceOptions()
	if ns.GetPid() == runtimeapi.NamespaceMode_TARGET {
		// containerd joins the target's PID namespace: it must run.
		if t, ok := r.Containers[ns.GetTargetId()]; !ok || t.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			return "", status.Errorf(codes.NotFound, "target container %q of the PID namespace is not running", ns.GetTargetId())
		}
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
	if !r.ignoreStopSignal {
		// containerd 2.x reports the stop signal it was created with
		// (the image's, or SIGTERM, when the config has none; the fake
		// knows no image's).
		c.StopSignal = config.GetStopSignal()
	}
	if lr := config.GetLinux().GetResources(); lr != nil {
		// containerd reports the resources a container runs with.
		c.Resources = &runtimeapi.ContainerResources{Linux: proto.Clone(lr).(*runtimeapi.LinuxContainerResources)}
	}
	r.Containers[id] = c
	r.mu.Lock()
	prog := interpret(append(slices.Clone(config.Command), config.Args...), r.sleeps != nil)
	prog.pid1 = config.GetLinux().GetSecurityContext().GetNamespaceOptions().GetPid() == runtimeapi.NamespaceMode_CONTAINER
	r.programs[id] = prog
	if ns != nil {
		r.namespaces[id] = proto.Clone(ns).(*runtimeapi.NamespaceOption)
	}
	r.mu.Unlock()
	r.emit(c, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT)
	return id, nil
}

// StartContainer starts a created container in a ready sandbox, writes its
// output to its log and, when its command ends by itself, makes it exit.
// In a sandbox that is not ready the start fails and leaves the container
// exited with StartErrorExitCode and reason StartError, as containerd's
// does.
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
		err := fmt.Errorf("sandbox container %q is not running", c.SandboxID)
		c.State, c.ExitCode, c.FinishedAt = runtimeapi.ContainerState_CONTAINER_EXITED, StartErrorExitCode, r.now()
		c.Reason, c.Message = StartErrorReason, err.Error()
		return err
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
	switch {
	case p.after > 0:
		r.sleep(c, p)
	case p.exits:
		r.exit(c, p.exitCode)
	}
	return nil
}

// sleep ends the timed sleeps of a started container's program p after
// p.after: its later lines are written and, if it exits, it exits, unless
// it was stopped or removed meanwhile. The caller holds the embedded
// service's lock.
func (r *FakeRuntime) sleep(c *critest.FakeContainer, p program) {
	id, started := c.Id, c.StartedAt
	r.mu.Lock()
	defer r.mu.Unlock()
	// The timer's function runs the end on a goroutine of its own: a
	// fake clock calls it with its lock held, which r.now needs.
	r.timers[id] = r.sleeps.AfterFunc(p.after, func() { go r.endSleep(id, started, p) })
}

// endSleep ends the timed sleeps of the container id started at
// started, if it still runs that start.
func (r *FakeRuntime) endSleep(id string, started int64, p program) {
	r.Lock()
	defer r.Unlock()
	c, ok := r.Containers[id]
	if !ok || c.State != runtimeapi.ContainerState_CONTAINER_RUNNING || c.StartedAt != started {
		return
	}
	r.mu.Lock()
	delete(r.timers, id)
	r.mu.Unlock()
	if c.LogPath != "" && len(p.later) > 0 {
		// NOTE(podsync): a failed write loses the lines, as a process's
		// output is lost when its log cannot be written.
		_ = appendLog(c.LogPath, p.later, r.clock.Now())
	}
	if p.exits {
		r.exit(c, p.exitCode)
	}
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

// UpdateContainerResources changes the Linux resources a created or
// running container reports, as containerd does; an exited one answers
// an error, as runc does.
func (r *FakeRuntime) UpdateContainerResources(_ context.Context, containerID string, resources *runtimeapi.ContainerResources) error {
	r.Lock()
	defer r.Unlock()
	if err := r.enter("UpdateContainerResources"); err != nil {
		return err
	}
	c, ok := r.Containers[containerID]
	if !ok {
		return notFound("container", containerID)
	}
	if c.State == runtimeapi.ContainerState_CONTAINER_EXITED {
		return status.Errorf(codes.FailedPrecondition, "container %q is not running or created", containerID)
	}
	if lr := resources.GetLinux(); lr != nil {
		c.LinuxResources = proto.Clone(lr).(*runtimeapi.LinuxContainerResources)
		c.Resources = &runtimeapi.ContainerResources{Linux: proto.Clone(lr).(*runtimeapi.LinuxContainerResources)}
	}
	return nil
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
	p := interpret(cmd, false)
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

// exit ends a container with code; the caller holds the lock.
func (r *FakeRuntime) exit(c *critest.FakeContainer, code int32) {
	r.mu.Lock()
	if t, ok := r.timers[c.Id]; ok {
		t.Stop()
		delete(r.timers, c.Id)
	}
	r.mu.Unlock()
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

// NamespaceOptions returns the namespace options the container was
// created with, or nil.
func (r *FakeRuntime) NamespaceOptions(containerID string) *runtimeapi.NamespaceOption {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.namespaces[containerID]
}
