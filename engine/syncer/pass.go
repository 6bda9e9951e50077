package syncer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/failpoint"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/plan"
)

// readState reads the pod's state with termination messages and pull
// failures.
func (p *pass) readState(ctx context.Context) (podState, error) {
	st, err := readPodState(ctx, p.s.rt, p.pod.UID)
	if err != nil {
		return podState{}, err
	}
	p.s.fillTerminationMessages(ctx, p.pod, &st)
	st.view.PullFailures = slices.Clone(p.pulls)
	return st, nil
}

// initialState is the pod's state the pass plans from: read, or empty
// without a read when the caller knows the runtime holds nothing of the
// pod (SyncInput.NothingInRuntime).
func (p *pass) initialState(ctx context.Context) (podState, error) {
	p.markRead()
	if !p.in.NothingInRuntime {
		return p.readState(ctx)
	}
	st := podState{view: model.NewRuntimeView(p.pod.UID, nil, nil), sandboxOf: map[string]string{}, logPath: map[string]string{}}
	st.view.PullFailures = slices.Clone(p.pulls)
	return st, nil
}

// markRead takes a read mark (SyncInput.ReadMark) for the read that
// follows.
func (p *pass) markRead() {
	if p.in.ReadMark != nil {
		p.viewMark = p.in.ReadMark()
	}
}

// recorder collects the steps of a pass, logs each once and passes it to
// emit, one at a time.
type recorder struct {
	mu    sync.Mutex
	steps []StepResult
	emit  func(StepResult)
	log   *zap.Logger
	obs   Observer
	// ctx holds the pass's span, tracer its steps' spans' tracer.
	ctx    context.Context
	tracer trace.Tracer
}

func (r *recorder) add(st StepResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.steps = append(r.steps, st)
	fields := stepFields(st)
	switch {
	case st.Err != nil:
		r.log.Warn("step failed", append(fields, zap.String("message", st.Message), zap.Error(st.Err))...)
	case st.BackedOff():
		r.log.Warn("start backed off", append(fields, zap.String("message", st.Message))...)
	default:
		lvl := zapcore.InfoLevel
		if st.Action == ActionConfigPodSandbox {
			lvl = zapcore.DebugLevel
		}
		r.log.Log(lvl, stepMessages[st.Action], fields...)
	}
	r.obs.ObserveStep(st)
	traceStep(r.ctx, r.tracer, st)
	if r.emit != nil {
		r.emit(st)
	}
}

// mutated reports whether any step may have changed the runtime.
func (r *recorder) mutated() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.steps, func(s StepResult) bool { return !s.BackedOff() })
}

// pass is one sync pass of one pod.
type pass struct {
	s   *Syncer
	pod *corev1.Pod
	in  SyncInput
	log *zap.Logger
	rec *recorder
	st  podState
	// pulls are the pod's failed image pulls: SyncInput's, as this pass
	// pulls and fails.
	pulls []model.PullFailure

	// What the pass created, so its end reads the pod's objects without
	// listing them: the sandboxes and containers created, the status of
	// each new sandbox (read after it was created, and nothing the pass
	// does later changes it), and whether a create failed (it may have
	// left an object behind whose id the pass does not know).
	created       podObjects
	newSandboxes  map[string]*runtimeapi.PodSandboxStatus
	createsFailed bool

	// stoppedSandbox is the sandbox found no longer ready when a
	// container was to be created or started in it, and replanned
	// whether the pass planned again for it (sandboxstop.go);
	// stoppedStage says when it was found.
	stoppedSandbox string
	stoppedStage   string
	replanned      bool

	// terminationRequested is set when the sandbox's create failed
	// because the pod's deletion was requested meanwhile: the pass then
	// ends without error, as the kubelet's SyncPod returns.
	terminationRequested bool

	// viewMark is the read mark of the last read (markRead).
	viewMark uint64
}

func (p *pass) run(ctx context.Context) (SyncResult, error) {
	st, err := p.initialState(ctx)
	if err != nil {
		return SyncResult{}, fmt.Errorf("read runtime state of pod %s: %w", model.PodString(p.pod), err)
	}
	p.st = st
	pending := p.admitResize()
	actions := plan.ComputePodActions(p.pod, st.view, p.in.Probes, p.s.clock.Now(), p.s.backoff)
	actions.ResizePending = pending
	if p.log.Core().Enabled(zapcore.DebugLevel) {
		p.log.Debug("pod plan", zap.Reflect("plan", actions))
	}
	if p.in.Observed != nil {
		p.in.Observed(st.view, actions)
	}
	p.execute(ctx, actions)
	if p.stoppedSandbox != "" && ctx.Err() == nil {
		if actions, err = p.replan(ctx); err != nil {
			return SyncResult{Steps: p.rec.steps}, err
		}
	}

	res := SyncResult{Plan: actions}
	// The end of a pass the deletion interrupted in the sandbox's create
	// reads the pod's state past the cancel: the pass did not fail.
	rctx := ctx
	if p.terminationRequested {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
	}
	if rctx.Err() == nil {
		final := st
		if p.rec.mutated() {
			if final, err = p.reread(rctx); err != nil {
				res.Steps = p.rec.steps
				return res, fmt.Errorf("read runtime state of pod %s after the pass: %w", model.PodString(p.pod), err)
			}
		}
		if !p.terminationRequested {
			final = p.collectGarbage(ctx, final)
		}
		res.View, res.ViewMark = final.view, p.viewMark
	}
	res.Steps = p.rec.steps
	if len(res.View.Sandboxes) > 0 && res.View.Sandboxes[0].State == model.SandboxReady {
		res.SandboxID = res.View.Sandboxes[0].ID
		res.PodIPs = res.View.Sandboxes[0].IPs
	}
	if err := ctx.Err(); err != nil && !p.terminationRequested {
		return res, fmt.Errorf("sync pod %s: %w", model.PodString(p.pod), context.Cause(ctx))
	}
	return res, nil
}

// reread reads the pod's state at the end of a pass that changed it. The
// pass knows the pod's objects: those it found and those it created (only
// podsync creates objects with the pod's labels, and only in the pod's
// passes, one at a time), so it reads their statuses without listing the
// runtime, unless a create failed. A new sandbox's status is the one read
// when it was created. Objects removed meanwhile are left out, as a list
// would; objects changed from outside after the read are the watcher's to
// report.
func (p *pass) reread(ctx context.Context) (podState, error) {
	p.markRead()
	if p.createsFailed {
		return p.readState(ctx)
	}
	objs := podObjects{sandboxOf: p.st.sandboxOf} // only read
	for _, sb := range p.st.view.Sandboxes {
		objs.sandboxes = append(objs.sandboxes, sb.ID)
	}
	for _, c := range p.st.view.Containers {
		objs.containers = append(objs.containers, c.ID)
	}
	objs.sandboxes = append(objs.sandboxes, p.created.sandboxes...)
	objs.containers = append(objs.containers, p.created.containers...)
	st, err := readObjects(ctx, p.s.rt, p.pod.UID, objs, p.newSandboxes)
	if err != nil {
		return podState{}, err
	}
	p.s.fillTerminationMessages(ctx, p.pod, &st)
	st.view.PullFailures = slices.Clone(p.pulls)
	return st, nil
}

// execute runs the plan in the kubelet's order.
func (p *pass) execute(ctx context.Context, actions plan.PodActions) {
	// Steps 2 and 3: kill the pod, or the containers not to keep.
	if actions.KillPod {
		if !p.killPod(ctx, actions) {
			return
		}
		if actions.Sandbox.Create {
			p.purgeInitContainers(ctx)
		}
	} else {
		for _, k := range actions.Kill {
			if !p.killContainer(ctx, k, p.readyIPs(), nil) {
				return
			}
		}
	}
	p.pruneInitContainers(ctx, actions.PruneInit)
	if !actions.Sandbox.Create && len(actions.StartInit) == 0 && len(actions.Start) == 0 && len(actions.StartEphemeral) == 0 {
		// Step 6 of the kubelet's SyncPod: resize running containers
		// in place (a failure is its step's; the pass goes on, as
		// upstream).
		p.resize(ctx, actions, actions.Sandbox.ID)
		p.backOffSteps(actions.BackOff, nil)
		// The volume manager's remount: files follow the pod's labels
		// and their objects (a ConfigMap applied since the last pass).
		p.refreshFileVolumes(actions)
		return
	}
	if ctx.Err() != nil {
		return
	}

	sb, ok := p.prepareSandbox(ctx, actions.Sandbox)
	if !ok {
		return
	}
	// Step 6, after the sandbox config (step 5) as in the kubelet.
	p.resize(ctx, actions, sb.id)
	p.startContainers(ctx, actions, sb)
}

// refreshFileVolumes renders and writes, in a pass that starts nothing,
// the files of the running pod's configMap, secret, downwardAPI and
// projected volumes, as the kubelet's volume manager remounts them every
// sync period: a change (the pod's labels a downwardAPI file shows, an
// object's data) is swapped in atomically, unchanged files are not
// written. A failure is a MountVolumes step; the pass goes on.
func (p *pass) refreshFileVolumes(actions plan.PodActions) {
	if p.terminationRequested || actions.KillPod || actions.Sandbox.ID == "" || p.pod.DeletionTimestamp != nil {
		return
	}
	if err := p.s.refreshFileVolumes(p.pod, p.in); err != nil {
		p.rec.add(StepResult{Action: ActionMountVolumes, Target: model.PodString(p.pod), Err: err, Reason: ReasonFailedMount,
			Message: fmt.Sprintf("Unable to attach or mount volumes: %v", err), Start: p.s.clock.Now()})
	}
}

// prepareSandbox sets up the pod's volumes (the kubelet mounts them before
// SyncPod), creates the sandbox if the plan says so (step 4) and builds the
// sandbox config the containers are created with. It reports false when a
// step failed or ctx ended.
func (p *pass) prepareSandbox(ctx context.Context, d plan.SandboxDecision) (sandboxRef, bool) {
	// Volumes (the kubelet mounts them before SyncPod).
	if err := p.s.setupVolumes(p.pod, p.in, d.Create); err != nil {
		p.rec.add(StepResult{Action: ActionMountVolumes, Target: model.PodString(p.pod), Err: err, Reason: ReasonFailedMount,
			Message: fmt.Sprintf("Unable to attach or mount volumes: %v", err), Start: p.s.clock.Now()})
		return sandboxRef{}, false
	}

	// Step 4: create the sandbox.
	sandboxID, podIPs := d.ID, p.readyIPs()
	if d.Create {
		var ok bool
		if sandboxID, podIPs, ok = p.createSandbox(ctx, d); !ok {
			return sandboxRef{}, false
		}
	}
	if p.pod.Spec.HostNetwork {
		podIPs = p.s.cfg.NodeIPs
	}

	// The sandbox config the containers are created with.
	if ctx.Err() != nil {
		return sandboxRef{}, false
	}
	start := p.s.clock.Now()
	sbConfig, err := p.s.sandboxConfig(p.pod, d.Attempt)
	step := StepResult{Action: ActionConfigPodSandbox, Target: sandboxID, SandboxID: sandboxID,
		Attempt: d.Attempt, Start: start, Duration: p.s.clock.Since(start)}
	if err != nil {
		step.Err, step.Reason = err, ReasonConfigPodSandboxError
		step.Message = fmt.Sprintf("GeneratePodSandboxConfig for pod %q failed: %v", model.PodString(p.pod), err)
		p.rec.add(step)
		return sandboxRef{}, false
	}
	p.rec.add(step)

	return sandboxRef{id: sandboxID, config: sbConfig, ips: podIPs}, true
}

// startContainers starts what the plan starts in the sandbox, in the
// kubelet's order (steps 6 and 8): init containers in order (a classic
// one failing aborts the pass), then regular containers; those waiting in
// a back-off are reported as back-off steps.
func (p *pass) startContainers(ctx context.Context, actions plan.PodActions, sb sandboxRef) {
	// Ephemeral containers first (SyncPod's step 5), so that they run
	// even when an init container fails to start.
	for i := range p.pod.Spec.EphemeralContainers {
		name := p.pod.Spec.EphemeralContainers[i].Name
		if ctx.Err() != nil {
			return
		}
		if a, ok := findAction(actions.StartEphemeral, name); ok {
			p.startContainer(ctx, sb, a)
			continue
		}
		if a, ok := findAction(actions.BackOff, name); ok {
			p.backOffSteps([]plan.ContainerAction{a}, &sb)
		}
	}
	for i := range p.pod.Spec.InitContainers {
		c := &p.pod.Spec.InitContainers[i]
		if ctx.Err() != nil {
			return
		}
		if a, ok := findAction(actions.StartInit, c.Name); ok {
			if !p.startContainer(ctx, sb, a) && !model.IsRestartableInitContainer(c) {
				return
			}
			continue
		}
		if a, ok := findAction(actions.BackOff, c.Name); ok {
			p.backOffSteps([]plan.ContainerAction{a}, &sb)
		}
	}
	for i := range p.pod.Spec.Containers {
		c := &p.pod.Spec.Containers[i]
		if ctx.Err() != nil {
			return
		}
		if a, ok := findAction(actions.Start, c.Name); ok {
			p.startContainer(ctx, sb, a)
			continue
		}
		if a, ok := findAction(actions.BackOff, c.Name); ok {
			p.backOffSteps([]plan.ContainerAction{a}, &sb)
		}
	}
}
func findAction(as []plan.ContainerAction, name string) (plan.ContainerAction, bool) {
	i := slices.IndexFunc(as, func(a plan.ContainerAction) bool { return a.Name == name })
	if i < 0 {
		return plan.ContainerAction{}, false
	}
	return as[i], true
}

// readyIPs returns the IPs of the pod's newest sandbox if it is ready.
func (p *pass) readyIPs() []string {
	if sbs := p.st.view.Sandboxes; len(sbs) > 0 && sbs[0].State == model.SandboxReady {
		return sbs[0].IPs
	}
	return nil
}

// containerType returns the type of the container named name.
func containerType(pod *corev1.Pod, name string) ContainerType {
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; c.Name == name {
			if model.IsRestartableInitContainer(c) {
				return ContainerTypeSidecar
			}
			return ContainerTypeInit
		}
	}
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return ContainerTypeRegular
		}
	}
	if model.EphemeralContainer(pod, name) != nil {
		return ContainerTypeEphemeral
	}
	return ContainerTypeUnknown
}

// backOffSteps reports starts that must wait: the kubelet's
// StartContainer results failed with CrashLoopBackOff or
// ImagePullBackOff, here without an error.
func (p *pass) backOffSteps(as []plan.ContainerAction, sb *sandboxRef) {
	for _, a := range as {
		msg := a.Message
		if a.Reason == plan.ReasonImagePullBackOff {
			image := model.SpecContainer(p.pod, a.Name).Image
			msg = model.PullBackOffMessage(image, p.pullFailure(image))
		}
		st := StepResult{Action: ActionStartContainer, Target: a.Name, ContainerType: containerType(p.pod, a.Name),
			Reason: a.Reason, Message: msg, Start: p.s.clock.Now(), NextRetry: a.NextAttempt, Attempt: a.Attempt}
		if sb != nil {
			st.SandboxID = sb.id
		}
		p.rec.add(st)
	}
}

// sandboxRef is the sandbox containers are started in.
type sandboxRef struct {
	id     string
	config *runtimeapi.PodSandboxConfig
	ips    []string
}

// createSandbox is the kubelet's createPodSandbox followed by the read of
// the new sandbox's IPs. A create that fails because the pod's deletion
// was requested meanwhile (the pass's context ended with
// errdefs.ErrTerminating) is not a failure, as in the kubelet's SyncPod:
// its step has no error and the pass ends (see terminationRequested).
func (p *pass) createSandbox(ctx context.Context, d plan.SandboxDecision) (string, []string, bool) {
	start := p.s.clock.Now()
	step := StepResult{Action: ActionCreatePodSandbox, Target: model.PodString(p.pod), Attempt: d.Attempt,
		Reason: d.Reason, Message: d.Message, Start: start}
	fail := func(msg string, cause, err error) (string, []string, bool) {
		step.Duration = p.s.clock.Since(start)
		if errors.Is(context.Cause(ctx), errdefs.ErrTerminating) {
			p.terminationRequested = true
			p.log.Info("pod deleted while its sandbox was created", zap.Error(err))
			p.rec.add(step)
			return "", nil, false
		}
		step.Err, step.Reason, step.Message, step.Cause = err, ReasonCreatePodSandboxError, msg, cause.Error()
		p.rec.add(step)
		return "", nil, false
	}
	cfg, err := p.s.sandboxConfig(p.pod, d.Attempt)
	if err != nil {
		return fail(fmt.Sprintf("Failed to generate sandbox config for pod %q: %v", model.PodString(p.pod), err), err, err)
	}
	// The pod's spec, for a node that loses its store to adopt the pod
	// (model.RebuildPod), signed by the node: adoption rebuilds only what
	// the node recorded. A pod's own annotations of these names never
	// reach the sandbox.
	delete(cfg.Annotations, model.AnnotationPodSpec)
	delete(cfg.Annotations, model.AnnotationPodSpecMAC)
	if spec, ok := model.EncodePodSpec(p.pod); ok && len(p.s.podSpecKey) > 0 {
		if cfg.Annotations == nil {
			cfg.Annotations = map[string]string{}
		}
		cfg.Annotations[model.AnnotationPodSpec] = spec
		cfg.Annotations[model.AnnotationPodSpecMAC] = model.SignPodSpec(p.s.podSpecKey,
			model.PodRef{Namespace: p.pod.Namespace, Name: p.pod.Name, UID: p.pod.UID}, spec)
	}
	if err := os.MkdirAll(cfg.LogDirectory, 0o755); err != nil {
		return fail(fmt.Sprintf("Failed to create log directory for pod %q: %v", model.PodString(p.pod), err),
			err, fmt.Errorf("create pod log directory: %w", err))
	}
	// The kubelet's pod container manager makes the pod's cgroup, with its
	// pod-level limits, before the sandbox.
	if err := ensurePodCgroup(p.pod, p.s.cfg); err != nil {
		return fail(fmt.Sprintf("Failed to create pod cgroup for pod %q: %v", model.PodString(p.pod), err), err, err)
	}
	id, err := p.s.rt.RunPodSandbox(ctx, cfg, runtimeHandler(p.pod))
	if err != nil {
		p.createsFailed = true
		return fail(fmt.Sprintf("Failed to create sandbox for pod %q: %v", model.PodString(p.pod), err), err, fmt.Errorf("run pod sandbox: %w", err))
	}
	failpoint.Inject(failpoint.AfterSandboxCreated)
	step.SandboxID = id
	p.created.sandboxes = append(p.created.sandboxes, id)
	resp, err := p.s.rt.PodSandboxStatus(ctx, id, false)
	if err == nil && resp.GetStatus() == nil {
		err = errors.New("pod sandbox status is nil")
	}
	if err == nil {
		if p.newSandboxes == nil {
			p.newSandboxes = map[string]*runtimeapi.PodSandboxStatus{}
		}
		p.newSandboxes[id] = resp.GetStatus()
	}
	if err != nil {
		return fail(fmt.Sprintf("Unable to get pod sandbox status: %v", err), err, fmt.Errorf("status of new sandbox %s: %w", id, err))
	}
	var ips []string
	if !p.pod.Spec.HostNetwork {
		ips = model.SandboxFromCRI(resp.GetStatus()).IPs
	}
	step.Duration = p.s.clock.Since(start)
	p.rec.add(step)
	return id, ips, true
}
