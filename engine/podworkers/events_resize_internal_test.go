package podworkers

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/plan"
	"github.com/podsync/podsync/engine/syncer"
)

// TestResizeRestartKillingEvent: a kill for a RestartContainer resize is
// recorded with the kubelet's message; an in-place resize records no
// event (the kubelet's ResizeStarted is not recorded, see README).
func TestResizeRestartKillingEvent(t *testing.T) {
	res := syncer.SyncResult{Steps: []syncer.StepResult{
		{Action: syncer.ActionKillContainer, Target: "app", ContainerType: syncer.ContainerTypeRegular, Reason: plan.ReasonResizeRestart, Message: "Container app resize requires restart"},
		{Action: syncer.ActionUpdateContainerResources, Target: "helper", ContainerType: syncer.ContainerTypeRegular, Reason: syncer.ReasonResize},
	}}
	got := eventLines(newEventWorker().stepEvents(enginetest.Pod(), res))
	if diff := cmp.Diff([]string{"Normal Killing app: Container app resize requires restart"}, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}
