package plan

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsync/podsync/engine/model"
)

// isInitContainerFailed is the kubelet's (pkg/kubelet/kuberuntime/
// helpers.go): an OOM-killed init container failed, whatever its exit code.
func isInitContainerFailed(inst *model.ContainerInstance) bool {
	if inst.Reason == ReasonOOMKilled {
		return true
	}
	if inst.State == model.ContainerExited && inst.ExitCode != 0 {
		return true
	}
	// An unknown state is a failure: the container did not run to
	// completion.
	return inst.State == model.ContainerUnknown
}

// computeInitContainerActions is the kubelet's function of that name: it
// starts the first init container not yet started, one at a time, keeps
// restartable init containers (sidecars) running, and reports whether the
// pod has been initialized.
//
// NOTE(podsync): a port of computeInitContainerActions
// (pkg/kubelet/kuberuntime/kuberuntime_container.go); it keeps upstream's
// shape, one walk over the init containers with its cases in upstream's
// order, so the two can be read side by side, and is longer than this
// repository's 80-line bound for that reason.
func (p *planner) computeInitContainerActions(a *PodActions) bool {
	pod := p.pod
	inits := pod.Spec.InitContainers
	if len(inits) == 0 {
		return true
	}
	// A regular container that has run in the current sandbox means every
	// init container completed, even if they were removed since.
	podHasInitialized := p.view.HasAnyActiveRegularContainerStarted(pod)
	prevInitialized := podHasInitialized
	restartOnFailure := shouldRestartOnFailure(pod)
	var starts []ContainerAction
	start := func(c *corev1.Container, reason, msg string) {
		starts = append(starts, p.startAction(c, reason, msg))
	}

	for i := len(inits) - 1; i >= 0; i-- {
		c := &inits[i]
		sidecar := model.IsRestartableInitContainer(c)
		inst := p.view.FindContainer(c.Name)
		if inst == nil {
			if prevInitialized && sidecar {
				start(c, ReasonSidecarMissing, "Sidecar container was initialized but is missing; restarting it")
			}
			continue
		}
		if prevInitialized && !sidecar {
			continue
		}
		switch inst.State {
		case model.ContainerCreated:
			start(c, ReasonCreated, "Init container is stuck in the created state; restarting it")
		case model.ContainerRunning:
			if !sidecar {
				break
			}
			if c.StartupProbe != nil {
				r := p.probes.Startup[inst.ID]
				if r == model.ProbeUnknown {
					break
				}
				if r == model.ProbeFailure {
					msg := fmt.Sprintf("Init container %s failed startup probe", c.Name)
					p.kill(c, inst, ReasonStartupProbe, msg, nil)
					start(c, ReasonStartupProbe, msg)
					break
				}
			}
			if i == len(inits)-1 {
				podHasInitialized = true
			} else if !prevInitialized {
				next := &inits[i+1]
				start(next, ReasonNextInitContainer, fmt.Sprintf("Init container %s has started; starting %s", c.Name, next.Name))
			}
			resize, r := resizeDone, ResizeAction{}
			if hash := model.ContainerHash(pod, c); hash != inst.Hash {
				// A sidecar is resized as a regular container is.
				resize, r = p.computeResize(c, inst)
			}
			if resize == resizeNotPossible {
				msg := fmt.Sprintf("Init container %s definition changed", c.Name)
				p.kill(c, inst, ReasonDefinitionChanged, msg, model.ChangedFields(inst.Spec, model.NewContainerSpec(pod, c)))
				start(c, ReasonDefinitionChanged, msg)
				break
			}
			if c.LivenessProbe != nil && p.probes.Liveness[inst.ID] == model.ProbeFailure {
				msg := fmt.Sprintf("Init container %s failed liveness probe", c.Name)
				p.kill(c, inst, ReasonLivenessProbe, msg, nil)
				start(c, ReasonLivenessProbe, msg)
				break
			}
			switch resize {
			case resizeRestart:
				msg := resizeRestartMessage(c.Name)
				p.kill(c, inst, ReasonResizeRestart, msg, nil)
				start(c, ReasonResizeRestart, msg)
			case resizeInPlace:
				a.Resize = append(a.Resize, r)
			}
		case model.ContainerExited:
			if sidecar {
				start(c, ReasonSidecarExited, "Sidecar container exited; restarting it")
				break
			}
			if isInitContainerFailed(inst) {
				// Its restart rules and policy decide, when it has its own
				// (ContainerRestartRules); else the pod's policy. NOTE(podsync):
				// the kubelet asks ShouldContainerBeRestarted for every init
				// container, which under OnFailure would fail the pod of an
				// OOM-killed one that exited 0; the pod's restartPolicy keeps
				// retrying it, as before the feature.
				restart := restartOnFailure
				if c.RestartPolicy != nil {
					_, restart = ShouldContainerBeRestarted(c, pod, p.view)
				}
				if !restart {
					p.killPod(a, KillReasonInitContainerFailed,
						fmt.Sprintf("Init container %s failed with exit code %d and %s", c.Name, inst.ExitCode, noRestartWhy(c)))
					return false
				}
				start(c, ReasonInitFailed, fmt.Sprintf("Init container %s failed with exit code %d; retrying", c.Name, inst.ExitCode))
				break
			}
			if i == len(inits)-1 {
				podHasInitialized = true
			} else {
				next := &inits[i+1]
				start(next, ReasonNextInitContainer, fmt.Sprintf("Init container %s completed; starting %s", c.Name, next.Name))
			}
		default:
			msg := fmt.Sprintf("Init container is in %q state, try killing it before restart", inst.State)
			restart := restartOnFailure
			if c.RestartPolicy != nil {
				// No exit code for the rules: the container's own policy.
				restart = *c.RestartPolicy != corev1.ContainerRestartPolicyNever
			}
			if !sidecar && !restart {
				p.killPod(a, KillReasonInitContainerFailed,
					fmt.Sprintf("Init container %s is in an unknown state and its restartPolicy is Never", c.Name))
				return false
			}
			p.kill(c, inst, ReasonUnknownState, msg, nil)
			start(c, ReasonUnknownState, msg)
		}
		if !prevInitialized {
			prevInitialized = true
		}
	}
	if !prevInitialized {
		start(&inits[0], ReasonNotStarted, "No init container has started; starting the first")
	}
	// Spec order, once each (the kubelet reverses its list).
	slices.Reverse(starts)
	for _, s := range starts {
		if !slices.ContainsFunc(a.StartInit, func(x ContainerAction) bool { return x.Name == s.Name }) {
			a.StartInit = append(a.StartInit, s)
		}
	}
	slices.SortStableFunc(a.StartInit, func(x, y ContainerAction) int {
		return initIndex(pod, x.Name) - initIndex(pod, y.Name)
	})
	return podHasInitialized
}

// noRestartWhy says why a failed init container is not restarted.
func noRestartWhy(c *corev1.Container) string {
	switch {
	case len(c.RestartPolicyRules) > 0:
		return fmt.Sprintf("neither its restartPolicyRules nor its restartPolicy %s restart it", *c.RestartPolicy)
	case c.RestartPolicy != nil:
		return fmt.Sprintf("its restartPolicy is %s", *c.RestartPolicy)
	}
	return "restartPolicy is Never"
}

func initIndex(pod *corev1.Pod, name string) int {
	return slices.IndexFunc(pod.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == name })
}

// pruneInitContainers is the kubelet's pruneInitContainersBeforeStart:
// of each init container only the newest exited or unknown instance is
// kept, the older exited and unknown ones are removed before init
// containers are (re)started. Running and created instances are never
// removed.
//
// NOTE(podsync): the newest and the first instance of the container's
// current crash-loop run are kept as well (see crashLoopRun), as the
// garbage collection keeps them: podsync's back-off is counted from the
// restart counts and exit times of what the runtime holds, and without
// them a crash-looping init container would restart at once every time.
// The newest is the instance upstream keeps unless an unknown one is
// newer.
func (p *planner) pruneInitContainers(bo BackoffPolicy) []ContainerAction {
	var out []ContainerAction
	for i := range p.pod.Spec.InitContainers {
		c := &p.pod.Spec.InitContainers[i]
		var insts []*model.ContainerInstance
		for j := range p.view.Containers {
			if p.view.Containers[j].Name == c.Name {
				insts = append(insts, &p.view.Containers[j])
			}
		}
		newest, first := crashLoopRun(insts, sameDefinition(p.pod, c), bo)
		kept := false
		for _, inst := range insts {
			if inst.State != model.ContainerExited && inst.State != model.ContainerUnknown {
				continue
			}
			if !kept {
				kept = true
				continue
			}
			if inst == newest || inst == first {
				continue
			}
			out = append(out, ContainerAction{Name: c.Name, ContainerID: inst.ID, Attempt: uint32(max(inst.RestartCount, 0)),
				Reason: ReasonInitContainerPruned, Message: "Only the newest exited instance of an init container is kept"})
		}
	}
	return out
}
