package podworkers

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/syncer"
)

// TestHookEventsNeverShowTheHooksOutput: events are every reader's, so a
// failed hook's events carry the kubelet's fixed words — Warning
// FailedPostStartHook "PostStartHook failed", Normal Killing
// "FailedPostStartHook", Warning FailedPreStopHook "PreStopHook failed" —
// and a start failed by its postStart hook records no Failed event with
// the hook's message (kuberuntime_container.go startContainer,
// executePreStopHook).
func TestHookEventsNeverShowTheHooksOutput(t *testing.T) {
	const output = `Exec lifecycle hook ([/bin/sh -c echo token]) for Container "app" in Pod "web_shop(uid-1)" failed - error: exit 3, message: "token=s3cr3t\n"`
	ctr := func(a syncer.StepAction) syncer.StepResult {
		return syncer.StepResult{Action: a, Target: "app", ContainerType: syncer.ContainerTypeRegular}
	}
	hookErr := errors.New("exec hook: command exited with 3: token=s3cr3t")
	tests := []struct {
		name  string
		steps func() []syncer.StepResult
		want  []string
	}{
		{
			name: "a failed postStart hook",
			steps: func() []syncer.StepResult {
				hook := ctr(syncer.ActionPostStartHook)
				hook.Err, hook.Reason, hook.Message = hookErr, syncer.ReasonPostStartHookError, syncer.PostStartHookFailedMessage
				kill := ctr(syncer.ActionKillContainer)
				kill.Reason, kill.Message = syncer.ReasonFailedPostStartHook, syncer.ReasonFailedPostStartHook
				start := ctr(syncer.ActionStartContainer)
				start.Err, start.Reason, start.Message = hookErr, syncer.ReasonPostStartHookError, output
				return []syncer.StepResult{hook, kill, start}
			},
			want: []string{
				"Warning FailedPostStartHook app: PostStartHook failed",
				"Normal Killing app: FailedPostStartHook",
			},
		},
		{
			name: "a failed preStop hook",
			steps: func() []syncer.StepResult {
				hook := ctr(syncer.ActionPreStopHook)
				hook.Err, hook.Reason, hook.Message = hookErr, syncer.ReasonPreStopHookError, output
				return []syncer.StepResult{hook}
			},
			want: []string{"Warning FailedPreStopHook app: PreStopHook failed"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := eventLines(newEventWorker().stepEvents(enginetest.Pod(), syncer.SyncResult{Steps: tt.steps()}))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			for _, line := range got {
				if strings.Contains(line, "s3cr3t") {
					t.Errorf("event %q shows the hook's output", line)
				}
			}
		})
	}
}
