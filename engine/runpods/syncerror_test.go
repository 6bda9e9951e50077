package runpods

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/plan"
	"github.com/podsync/podsync/engine/podstatus"
	"github.com/podsync/podsync/engine/store"
	"github.com/podsync/podsync/engine/syncer"
)

// TestSyncErrorsThatWillNotClearFailAtOnce: a pod whose pass fails with an
// error that will not clear by itself gets its result at once — Failed,
// SyncError, the kubelet's `error syncing pod "NAME_NS(UID)": CAUSE` —
// from its first pass or a later one; a back-off or a failure the pod's
// worker retries keeps it waiting until its timeout. Either way the pod
// stays stored.
func TestSyncErrorsThatWillNotClearFailAtOnce(t *testing.T) {
	p := pod("a", "")
	start := func(reason, msg string, err error) syncer.StepResult {
		return syncer.StepResult{Action: syncer.ActionStartContainer, Target: "app", ContainerType: syncer.ContainerTypeRegular,
			Reason: reason, Message: msg, Err: err}
	}
	sandbox := syncer.StepResult{Action: syncer.ActionCreatePodSandbox, Target: model.PodString(p), Reason: syncer.ReasonCreatePodSandboxError,
		Message: fmt.Sprintf("Failed to create sandbox for pod %q: no runtime for \"gvisor\"", model.PodString(p)), Err: errors.New("run pod sandbox: no runtime")}
	reserved := sandbox
	reserved.Message = "Failed to create sandbox for pod: name reserved"
	reserved.Err = errors.New(`run pod sandbox: rpc error: code = FailedPrecondition desc = failed to reserve sandbox name "a_default_uid-a_0": name "a_default_uid-a_0" is reserved for "3b87"`)
	unavailable := sandbox
	unavailable.Err = fmt.Errorf("run pod sandbox: %w", errdefs.ErrRuntimeUnavailable)
	missing := start(syncer.ReasonCreateContainerConfigErr, "configmap default/cfg: not found", fmt.Errorf("configmap default/cfg: %w", errdefs.ErrNotFound))
	notFound := start(podstatus.ReasonErrImagePull, `failed to pull and unpack image "127.0.0.1:5000/nope:v1": failed to resolve reference "127.0.0.1:5000/nope:v1": 127.0.0.1:5000/nope:v1: not found`,
		errors.New("pull image: rpc error: code = NotFound"))
	unauthorized := start(podstatus.ReasonErrImagePull, `failed to pull and unpack image "127.0.0.1:5000/private/app:v1": failed to resolve reference: unexpected status from HEAD request to http://127.0.0.1:5000/v2/private/app/manifests/v1: 401 Unauthorized`,
		errors.New("pull image: rpc error: code = Unknown"))
	neverPulled := start(syncer.ReasonErrImageNeverPull, `Container image "app:v1" is not present with pull policy of Never`, fmt.Errorf("image app:v1: %w", errdefs.ErrNotFound))
	hook := start(syncer.ReasonPostStartHookError, `Exec lifecycle hook ([false]) for Container "app" in Pod "a_default(uid-a)" failed`, errors.New("exec hook: exit 1"))
	never := func(p *corev1.Pod) { p.Spec.RestartPolicy = corev1.RestartPolicyNever }
	tests := []struct {
		name   string
		mutate func(*corev1.Pod)
		apply  []syncer.StepResult
		later  []syncer.StepResult
		// failed is the step the result names; nil: the pod waits.
		failed *syncer.StepResult
	}{
		{name: "a sandbox the runtime refuses", apply: []syncer.StepResult{sandbox}, failed: &sandbox},
		// A creation still in flight (a podsyncd killed during one came
		// back) holds the name until it ends; the worker retries.
		{name: "a sandbox name still reserved keeps waiting", apply: []syncer.StepResult{reserved}},
		{name: "a sandbox the runtime could not be asked for keeps waiting", apply: []syncer.StepResult{unavailable}},
		// The kubelet waits for it: someone may apply it.
		{name: "a ConfigMap the node does not hold keeps waiting", apply: []syncer.StepResult{missing}},
		{name: "a ConfigMap missing in a later pass keeps waiting", later: []syncer.StepResult{missing}},
		{name: "an image the registry does not have", apply: []syncer.StepResult{notFound}, failed: &notFound},
		{name: "an image the registry refuses", later: []syncer.StepResult{unauthorized}, failed: &unauthorized},
		{name: "a Never-pulled image the node does not hold", apply: []syncer.StepResult{neverPulled}, failed: &neverPulled},
		{
			name: "a spec the node cannot run",
			apply: []syncer.StepResult{start(syncer.ReasonCreateContainerConfigErr, "seccomp localhostProfile",
				fmt.Errorf("seccomp: %w", errdefs.ErrInvalidSpec))},
			failed: &syncer.StepResult{},
		},
		{name: "a failed postStart hook under Never", mutate: never, apply: []syncer.StepResult{hook}, failed: &hook},
		{name: "a failed postStart hook under Always restarts", apply: []syncer.StepResult{hook}},
		{name: "a crash-loop back-off", later: []syncer.StepResult{start(plan.ReasonCrashLoopBackOff, "back-off 10s", nil)}},
		{name: "an image-pull back-off", apply: []syncer.StepResult{start(plan.ReasonImagePullBackOff, "Back-off pulling image", nil)}},
		{name: "a failed pull", apply: []syncer.StepResult{start(podstatus.ReasonErrImagePull, "dial tcp: i/o timeout", errors.New("pull: i/o timeout"))}},
		{name: "a config the node may yet write", apply: []syncer.StepResult{start(syncer.ReasonCreateContainerConfigErr, "write hosts file: disk full", errors.New("write hosts file: disk full"))}},
		{name: "a runtime's refusal to start", mutate: never, apply: []syncer.StepResult{start(syncer.ReasonRunContainerError, "oci: busy", errors.New("start: busy"))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := pod("a", "")
			if tt.mutate != nil {
				tt.mutate(p)
			}
			n := newFakeNode(t)
			n.applySteps = map[string][]syncer.StepResult{"a": tt.apply}
			if tt.later != nil {
				n.laterSteps = map[string][]syncer.StepResult{"a": tt.later}
				n.scripts["a"] = script{{Phase: corev1.PodPending}}
			}
			timeout := 300 * time.Millisecond
			if tt.failed != nil {
				timeout = 5 * time.Second
			}
			s, err := Run(ctx(t), options(n, t.TempDir()), Request{Pods: []*corev1.Pod{p}, Timeout: timeout}, nil)
			if err != nil {
				t.Fatal(err)
			}
			r := s.Results[0]
			if tt.failed == nil {
				if r.Outcome != TimedOut {
					t.Errorf("result %s %s %q, want the pod to wait until its timeout", r.Outcome, r.Reason, r.Message)
				}
			} else {
				if r.Outcome != Failed || r.Reason != ReasonSyncError {
					t.Fatalf("result %s %s %q, want Failed SyncError at once", r.Outcome, r.Reason, r.Message)
				}
				f := *tt.failed
				if f.Action == "" {
					f = tt.apply[0]
				}
				want := fmt.Sprintf("error syncing pod %q: failed to %q for %q with %s: %q", model.PodString(p), f.Action, f.Target, f.Reason, f.Message)
				if r.Message != want {
					t.Errorf("message %q, want %q", r.Message, want)
				}
			}
			recs, _, err := n.ListShared(ctx(t), store.Filter{})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(recs, func(rec *store.PodRecord) bool { return rec.Pod.UID == p.UID }) {
				t.Error("the pod was removed; want it left stored and converging")
			}
		})
	}
}
