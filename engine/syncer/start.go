package syncer

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/failpoint"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/plan"
	"github.com/podsync/podsync/logx"
)

// startContainer is the kubelet's startContainer: ensure the image,
// create the container, start it and run its postStart hook (killing it if
// the hook fails). It reports a StartContainer step and whether the start
// succeeded.
func (p *pass) startContainer(ctx context.Context, sb sandboxRef, a plan.ContainerAction) bool {
	if p.stoppedSandbox != "" {
		// The sandbox stopped: the pass plans again.
		return false
	}
	c := model.SpecContainer(p.pod, a.Name)
	start := p.s.clock.Now()
	step := StepResult{Action: ActionStartContainer, Target: c.Name, ContainerType: containerType(p.pod, c.Name),
		Reason: a.Reason, Message: a.Message, Start: start, SandboxID: sb.id, Attempt: a.Attempt}
	fail := func(reason, msg string, err error) bool {
		step.Duration = p.s.clock.Since(start)
		step.Err, step.Reason, step.Message = err, reason, msg
		p.rec.add(step)
		return false
	}

	// Step 1: the image.
	imageRef, img, present, ifail := p.ensureImage(ctx, c, sb.config)
	step.ImagePresent = present
	if ifail != nil && ifail.reason == plan.ReasonImagePullBackOff {
		p.backOffSteps([]plan.ContainerAction{{Name: c.Name, Attempt: a.Attempt, Reason: ifail.reason,
			Message: ifail.message, NextAttempt: ifail.until}}, &sb)
		return false
	}
	if ifail != nil {
		return fail(ifail.reason, ifail.message, ifail.err)
	}
	if err := p.verifyRunAsNonRoot(ctx, c, imageRef, img); err != nil {
		return fail(ReasonCreateContainerConfigErr, err.Error(), err)
	}
	imageVolumes, ifail := p.ensureImageVolumes(ctx, c, sb.config)
	if ifail != nil && ifail.reason == plan.ReasonImagePullBackOff {
		p.backOffSteps([]plan.ContainerAction{{Name: c.Name, Attempt: a.Attempt, Reason: ifail.reason,
			Message: ifail.message, NextAttempt: ifail.until}}, &sb)
		return false
	}
	if ifail != nil {
		return fail(ifail.reason, ifail.message, ifail.err)
	}

	// Step 2: the container. A container the runtime has no instance of
	// continues the numbering of its logs.
	restartCount := int32(a.Attempt)
	if p.st.view.FindContainer(c.Name) == nil {
		restartCount = max(restartCount, p.s.restartCountFromLogDir(p.pod, c.Name))
	}
	step.Attempt = uint32(restartCount)
	cfg, err := p.containerConfig(c, restartCount, imageRef, sb.ips, imageVolumes)
	if err != nil {
		return fail(ReasonCreateContainerConfigErr, err.Error(), err)
	}
	if p.stoppedBeforeCreate(ctx, sb.id) {
		return false
	}
	id, err := p.s.rt.CreateContainer(ctx, sb.id, cfg, sb.config)
	if err != nil {
		p.createsFailed = true
		if p.stoppedAfterRefusal(ctx, sb.id, err) {
			return false
		}
		return fail(ReasonCreateContainerError, err.Error(), fmt.Errorf("create container %q: %w", c.Name, err))
	}
	failpoint.Inject(failpoint.AfterContainerCreated)
	if err := p.checkStopSignal(ctx, c, id, cfg.GetStopSignal()); err != nil {
		p.dropRefused(ctx, c.Name, id)
		return fail(ReasonCreateContainerError, err.Error(), err)
	}
	step.ContainerID = id
	p.st.sandboxOf[id] = sb.id
	p.created.containers = append(p.created.containers, id)

	// Step 3: start it. NOTE(podsync): the call is not cancelled with the
	// pass: containerd cannot take back a start cancelled midway (2.x
	// keeps a running task behind a container it reports exited and can
	// no longer remove; 1.6 holds the container "starting" for seconds),
	// so it runs to its end, within the cleanup timeout.
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	err = p.s.rt.StartContainer(sctx, id)
	scancel()
	if err != nil {
		if ctx.Err() != nil {
			// Interrupted, not refused: do not leave a created container
			// behind.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
			if rerr := p.s.rt.RemoveContainer(cctx, id); rerr != nil {
				p.log.Warn("remove unstarted container", zap.String(logx.ContainerName, c.Name), zap.String(logx.ContainerID, id), zap.Error(rerr))
			}
			cancel()
		} else if p.stoppedAfterRefusal(ctx, sb.id, err) {
			p.dropRefused(ctx, c.Name, id)
			return false
		}
		return fail(ReasonRunContainerError, err.Error(), fmt.Errorf("start container %q: %w", c.Name, err))
	}
	failpoint.Inject(failpoint.AfterContainerStarted)

	// Step 4: the postStart hook.
	if msg, err := p.postStart(ctx, c, id, sb, step); err != nil {
		return fail(ReasonPostStartHookError, msg, err)
	}
	step.Duration = p.s.clock.Since(start)
	p.rec.add(step)
	return true
}

// postStart runs c's postStart hook, if it has one, in the container with
// id that the start step step started, and records its step. A hook that
// fails kills the container with the message FailedPostStartHook, as the
// kubelet's startContainer does, and the hook's message (its output) and
// error are returned for the StartContainer step: the PostStartHook step
// carries only "PostStartHook failed", the kubelet's event, which must not
// show what the hook printed.
func (p *pass) postStart(ctx context.Context, c *corev1.Container, id string, sb sandboxRef, step StepResult) (string, error) {
	if c.Lifecycle == nil || c.Lifecycle.PostStart == nil {
		return "", nil
	}
	hstart := p.s.clock.Now()
	t := hookTarget{pod: p.pod, name: c.Name, containerID: id, ports: c.Ports, podIPs: sb.ips}
	msg, herr := p.s.runHook(ctx, t, c.Lifecycle.PostStart, 0)
	hstep := StepResult{Action: ActionPostStartHook, Target: c.Name, ContainerType: step.ContainerType,
		Start: hstart, Duration: p.s.clock.Since(hstart), ContainerID: id, SandboxID: sb.id, Attempt: step.Attempt}
	if herr != nil {
		hstep.Err, hstep.Reason, hstep.Message = fmt.Errorf("post-start hook of container %q: %w", c.Name, herr), ReasonPostStartHookError, PostStartHookFailedMessage
	}
	p.rec.add(hstep)
	if herr != nil {
		// The kubelet kills a container whose postStart hook failed,
		// even if the pass is being cancelled.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		p.killContainer(cctx, plan.ContainerAction{Name: c.Name, ContainerID: id, Attempt: step.Attempt, Reason: ReasonFailedPostStartHook,
			Message: ReasonFailedPostStartHook}, sb.ips, nil)
		cancel()
		return msg, hstep.Err
	}
	return "", nil
}

// containerConfig writes the files the container mounts (/etc/hosts, its
// termination message file) and builds its CRI config, as the kubelet's
// generateContainerConfig.
func (p *pass) containerConfig(c *corev1.Container, restartCount int32, imageRef string, podIPs []string, imageVolumes map[string]string) (*runtimeapi.ContainerConfig, error) {
	if len(podIPs) > 0 {
		if err := p.s.ensureHostsFile(p.pod, podIPs); err != nil {
			return nil, fmt.Errorf("write hosts file: %w", err)
		}
	}
	if err := os.MkdirAll(filepath.Join(criconfig.PodLogDirectory(p.pod, p.s.cfg), c.Name), 0o755); err != nil {
		return nil, fmt.Errorf("create container log directory: %w", err)
	}
	if c.TerminationMessagePath != "" {
		if err := p.s.createTerminationMessageFile(p.pod, c.Name, restartCount); err != nil {
			return nil, fmt.Errorf("create termination message file: %w", err)
		}
	}
	cfg, err := criconfig.ContainerConfig(criconfig.ContainerConfigInput{
		Pod: p.pod, Container: c, RestartCount: restartCount, ImageRef: imageRef, PodIPs: podIPs,
		ConfigMaps: p.in.ConfigMaps, Secrets: p.in.Secrets, ImageVolumes: imageVolumes,
		ResolveMount: func(m criconfig.MountSource) (criconfig.ResolvedMount, error) { return p.s.resolveMount(p.pod, m) },
	}, p.s.cfg)
	if err != nil {
		return nil, err
	}
	// A container joins its pod's user namespace.
	u, err := p.s.podUserNamespace(p.pod)
	if err != nil {
		return nil, err
	}
	setUserNamespace(cfg.GetLinux().GetSecurityContext(), u)
	if err := p.targetNamespace(c.Name, cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}

// targetNamespace puts an ephemeral container with a targetContainerName
// in the process namespace of the target's running instance (the
// kubelet's getTargetID and NamespaceMode TARGET).
func (p *pass) targetNamespace(name string, cfg *runtimeapi.ContainerConfig) error {
	ec := model.EphemeralContainer(p.pod, name)
	if ec == nil || ec.TargetContainerName == "" {
		return nil
	}
	target := p.st.view.FindContainer(ec.TargetContainerName)
	if target == nil || target.State != model.ContainerRunning {
		return fmt.Errorf("unable to find target container %v", ec.TargetContainerName)
	}
	sc := cfg.GetLinux().GetSecurityContext()
	if sc == nil {
		return fmt.Errorf("container %q has no Linux security context to set the target namespace in", name)
	}
	if sc.NamespaceOptions == nil {
		sc.NamespaceOptions = &runtimeapi.NamespaceOption{}
	}
	sc.NamespaceOptions.Pid = runtimeapi.NamespaceMode_TARGET
	sc.NamespaceOptions.TargetId = target.ID
	return nil
}
