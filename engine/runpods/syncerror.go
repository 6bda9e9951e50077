package runpods

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/syncer"
)

// terminalFailure reports whether a failed step of one of pod's passes is
// a sync error the pod will not get past by itself, so its run fails at
// once rather than at its timeout (the kubelet's run-once returned on the
// first sync error that was not a back-off):
//
//   - a failed CreatePodSandbox (the runtime refused the sandbox: an
//     unknown runtime handler, a CNI failure, a sandbox config that cannot
//     be built), unless the failure clears by itself (transientSandboxFailure);
//   - a failed MountVolumes or a start failed before the container was
//     created (CreateContainerConfigError, ErrImageNeverPull,
//     InvalidImageName) whose error says the spec cannot run
//     (errdefs.ErrInvalidSpec: an invalid reference, a hostPath or subPath
//     refused, runAsNonRoot against the image's user) or names what the
//     node does not hold (errdefs.ErrNotFound: a ConfigMap, Secret or key,
//     an image under pull policy Never) — only a change by someone else
//     clears them;
//   - a failed postStart hook of a container that is not restarted (a
//     regular or classic init container under restartPolicy Never).
//
// Back-offs (CrashLoopBackOff, ImagePullBackOff) are not failures, and a
// failed pull (ErrImagePull), a runtime's refusal to create or start a
// container, a failed kill and a write of the pod's files the node may
// yet manage are retried by the pod's worker: those keep the run waiting.
func terminalFailure(pod *corev1.Pod, s syncer.StepResult) bool {
	if s.Err == nil || s.BackedOff() {
		return false
	}
	spec := errors.Is(s.Err, errdefs.ErrInvalidSpec) || errors.Is(s.Err, errdefs.ErrNotFound)
	switch s.Action {
	case syncer.ActionCreatePodSandbox:
		return !transientSandboxFailure(s.Err)
	case syncer.ActionMountVolumes:
		return spec
	case syncer.ActionStartContainer:
		switch s.Reason {
		case syncer.ReasonCreateContainerConfigErr, syncer.ReasonErrImageNeverPull, syncer.ReasonInvalidImageName:
			return spec
		case syncer.ReasonPostStartHookError:
			c := model.SpecContainer(pod, s.Target)
			return c != nil && pod.Spec.RestartPolicy == corev1.RestartPolicyNever && !model.IsRestartableInitContainer(c)
		}
	}
	return false
}

// syncErrorMessage is the kubelet's run-once error for a pass that failed
// with step s: `error syncing pod "NAME_NS(UID)": CAUSE`, the cause
// worded as the kubelet's PodSyncResult.Error words a failed result.
func syncErrorMessage(pod *corev1.Pod, s syncer.StepResult) string {
	msg := s.Message
	if msg == "" {
		msg = s.Err.Error()
	}
	return fmt.Sprintf("error syncing pod %q: failed to %q for %q with %s: %q", model.PodString(pod), s.Action, s.Target, s.Reason, msg)
}

// transientSandboxFailure reports whether a sandbox creation failed for a
// reason that clears without anyone changing anything, which the pod's
// worker retries: the runtime was unreachable or timed out, or its name
// was still reserved by a creation in flight — containerd reserves
// "NAME_NAMESPACE_UID_ATTEMPT" while a RunPodSandbox runs ("failed to
// reserve sandbox name …: name … is reserved for ID", containerd's CRI
// plugin, 1.6 and 2.x alike), as after a podsyncd that was killed during
// one comes back.
func transientSandboxFailure(err error) bool {
	if errors.Is(err, errdefs.ErrRuntimeUnavailable) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return true
	}
	return strings.Contains(err.Error(), "failed to reserve sandbox name")
}
