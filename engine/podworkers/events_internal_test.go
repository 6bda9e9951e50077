package podworkers

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/plan"
	"github.com/podsync/podsync/engine/store"
	"github.com/podsync/podsync/engine/syncer"
)

func eventLines(changes []store.Change) []string {
	var out []string
	for _, c := range changes {
		if c.Event != nil {
			line := c.Event.Type + " " + c.Event.Reason
			if c.Event.Container != "" {
				line += " " + c.Event.Container
			}
			out = append(out, line+": "+c.Event.Message)
		}
	}
	return out
}

func newEventWorker() *worker {
	return &worker{reasons: map[string]corev1.ContainerStateWaiting{}, backoffs: map[string]time.Time{}}
}

// TestSandboxChangedEventOnlyWhenAPreviousSandboxIsCarried: as the
// kubelet's SyncPod, SandboxChanged is recorded, before anything else,
// only when the plan creates a sandbox and carries the one it replaces; a
// network namespace change carries none, and neither does a first
// sandbox.
func TestSandboxChangedEventOnlyWhenAPreviousSandboxIsCarried(t *testing.T) {
	const changed = "Normal SandboxChanged: Pod sandbox changed, it will be killed and re-created."
	created := func(attempt uint32, reason string) syncer.StepResult {
		return syncer.StepResult{Action: syncer.ActionCreatePodSandbox, Target: "web_shop(uid-1)", Attempt: attempt, Reason: reason}
	}
	tests := []struct {
		name  string
		sb    plan.SandboxDecision
		steps []syncer.StepResult
		want  []string
	}{
		{
			name:  "a sandbox not ready is replaced",
			sb:    plan.SandboxDecision{Create: true, Attempt: 1, PreviousID: "sb1", Reason: plan.SandboxReasonNotReady},
			steps: []syncer.StepResult{created(1, plan.SandboxReasonNotReady)},
			want:  []string{changed},
		},
		{
			name:  "a network namespace change carries no sandbox",
			sb:    plan.SandboxDecision{Create: true, Attempt: 1, Reason: plan.SandboxReasonNetworkChanged},
			steps: []syncer.StepResult{created(1, plan.SandboxReasonNetworkChanged)},
		},
		{
			name:  "a first sandbox carries none",
			sb:    plan.SandboxDecision{Create: true, Reason: plan.SandboxReasonNone},
			steps: []syncer.StepResult{created(0, plan.SandboxReasonNone)},
		},
		{
			name: "the event comes before a failed create's",
			sb:   plan.SandboxDecision{Create: true, Attempt: 2, PreviousID: "sb1", Reason: plan.SandboxReasonNoIP},
			steps: []syncer.StepResult{{Action: syncer.ActionCreatePodSandbox, Target: "web_shop(uid-1)", Attempt: 2,
				Err: errors.New("run pod sandbox: boom"), Reason: syncer.ReasonCreatePodSandboxError,
				Message: `Failed to create sandbox for pod "web_shop(uid-1)": boom`, Cause: "boom"}},
			want: []string{changed, "Warning FailedCreatePodSandBox: Failed to create pod sandbox: boom"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := syncer.SyncResult{Plan: plan.PodActions{KillPod: true, Sandbox: tt.sb}, Steps: tt.steps}
			got := eventLines(newEventWorker().stepEvents(enginetest.Pod(), res))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

// TestImageEventsAsTheKubeletsImageManager: the image manager's events
// (pkg/kubelet/images): a present image is "Normal Pulled … already present
// on machine", a missing one under Never "Warning ErrImageNeverPull", and
// a pull back-off "Normal BackOff" with the image only (the pull error is
// in the step and the status), each followed by the start's own events.
func TestImageEventsAsTheKubeletsImageManager(t *testing.T) {
	pod := enginetest.Pod()
	pod.Spec.Containers[1].Image = "registry.local/other:1"
	start := syncer.StepResult{Action: syncer.ActionStartContainer, Target: "app", ContainerType: syncer.ContainerTypeRegular}
	tests := []struct {
		name string
		step func(syncer.StepResult) syncer.StepResult
		want []string
	}{
		{
			name: "a present image",
			step: func(s syncer.StepResult) syncer.StepResult { s.ImagePresent = true; return s },
			want: []string{
				`Normal Pulled app: Container image "` + enginetest.Image + `" already present on machine`,
				"Normal Created app: Created container: app", "Normal Started app: Started container app",
			},
		},
		{
			name: "a missing image under Never",
			step: func(s syncer.StepResult) syncer.StepResult {
				s.Target = "helper"
				s.Err, s.Reason = errors.New("not present"), syncer.ReasonErrImageNeverPull
				s.Message = `Container image "registry.local/other:1" is not present with pull policy of Never`
				return s
			},
			want: []string{
				`Warning ErrImageNeverPull helper: Container image "registry.local/other:1" is not present with pull policy of Never`,
				`Warning Failed helper: Error: ErrImageNeverPull: Container image "registry.local/other:1" is not present with pull policy of Never`,
			},
		},
		{
			name: "a pull back-off",
			step: func(s syncer.StepResult) syncer.StepResult {
				s.Target, s.Reason = "helper", plan.ReasonImagePullBackOff
				s.Message = `Back-off pulling image "registry.local/other:1": ErrImagePull: manifest unknown`
				s.NextRetry = time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)
				return s
			},
			want: []string{
				`Normal BackOff helper: Back-off pulling image "registry.local/other:1"`,
				"Warning Failed helper: Error: ImagePullBackOff",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newEventWorker()
			res := syncer.SyncResult{Steps: []syncer.StepResult{tt.step(start)}}
			if diff := cmp.Diff(tt.want, eventLines(w.stepEvents(pod, res))); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			// A back-off is reported once per wait.
			if again := eventLines(w.stepEvents(pod, res)); tt.step(start).BackedOff() && len(again) != 0 {
				t.Errorf("the same back-off again reported %v", again)
			}
		})
	}
}
