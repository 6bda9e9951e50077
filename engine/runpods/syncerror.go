package runpods

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/podstatus"
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
//     refused, runAsNonRoot against the image's user), or an image under
//     pull policy Never the node does not hold (errdefs.ErrNotFound) —
//     only a change by someone else clears them;
//   - a failed pull (ErrImagePull) the registry answered with a refusal
//     that a retry will not change: the image or repository is not there
//     (not found, manifest unknown, name unknown) or may not be read
//     (401 Unauthorized, 403 Forbidden, denied, insufficient_scope) —
//     the registry's reason is the message; the pod's worker goes on
//     retrying with back-off, as the kubelet does;
//   - a failed postStart hook of a container that is not restarted (a
//     regular or classic init container under restartPolicy Never).
//
// Back-offs (CrashLoopBackOff, ImagePullBackOff) are not failures, and
// other failed pulls (a registry that does not answer), a ConfigMap,
// Secret or key the node does not hold yet (the kubelet waits for it; the
// run's timeout message names it), a runtime's refusal to create or start
// a container, a failed kill and a write of the pod's files the node may
// yet manage are retried by the pod's worker: those keep the run waiting.
func terminalFailure(pod *corev1.Pod, s syncer.StepResult) bool {
	if s.Err == nil || s.BackedOff() {
		return false
	}
	spec := errors.Is(s.Err, errdefs.ErrInvalidSpec)
	switch s.Action {
	case syncer.ActionCreatePodSandbox:
		return !transientSandboxFailure(s.Err)
	case syncer.ActionMountVolumes:
		return spec
	case syncer.ActionStartContainer:
		switch s.Reason {
		case syncer.ReasonErrImageNeverPull:
			return spec || errors.Is(s.Err, errdefs.ErrNotFound)
		case syncer.ReasonCreateContainerConfigErr, syncer.ReasonInvalidImageName:
			return spec
		case podstatus.ReasonErrImagePull:
			return registryRefused(s.Message + " " + s.Err.Error())
		case syncer.ReasonPostStartHookError:
			c := model.SpecContainer(pod, s.Target)
			return c != nil && pod.Spec.RestartPolicy == corev1.RestartPolicyNever && !model.IsRestartableInitContainer(c)
		}
	}
	return false
}

// registryRefusals are how containerd (1.6 and 2.x) words a registry's
// answer that the image is not there or may not be read: its resolver's
// "not found", the distribution spec's error codes, HTTP 401 and 403.
var registryRefusals = []string{
	": not found", "manifest unknown", "name unknown", "repository does not exist",
	"401 unauthorized", "403 forbidden", "pull access denied", "insufficient_scope", "authorization failed", "denied: ",
}

// registryRefused reports whether a failed pull's error is a registry's
// refusal (registryRefusals) rather than a failure to reach it.
func registryRefused(msg string) bool {
	msg = strings.ToLower(msg)
	for _, r := range registryRefusals {
		if strings.Contains(msg, r) {
			return true
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
