//go:build integration

package workers_test

import (
	"slices"
	"testing"
	"time"

	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/plan"
	"github.com/podsync/podsync/engine/store"
	"github.com/podsync/podsync/internal/testing/localcri/localcritest"
)

// TestStoppedSandboxIsASandboxChange: `crictl stopp` of a running pod's
// sandbox is the kubelet's sandbox change: the pod is killed, sandbox
// attempt 1 is created and the container runs again in it at once, as
// its restart 1 (2 when a restart in place beat the stop to the sandbox's
// process, see below) — never started into the dead sandbox (no
// RunContainerError) and not held in a crash-loop back-off (the back-off
// base here is 30 s, longer than the test waits).
func TestStoppedSandboxIsASandboxChange(t *testing.T) {
	e := newEnv(t, func(o *engine.NodeOptions) {
		o.Backoff = plan.BackoffPolicy{Base: 30 * time.Second, Cap: time.Minute}
	})
	pod := e.newPod("", localcritest.Shell("app", "sleep 3600 & wait"))
	e.apply(pod)
	e.eventually("running", func() bool { return e.running(pod, "app") != nil })
	first := e.running(pod, "app")

	localcritest.StopSandbox(t, inst, first.SandboxID)
	deadline := time.Now().Add(15 * time.Second)
	var again *model.ContainerInstance
	var v *model.RuntimeView
	for again == nil {
		if time.Now().After(deadline) {
			t.Fatalf("the container does not run again in a new sandbox; view: %+v", e.view(pod))
		}
		time.Sleep(50 * time.Millisecond)
		v = e.view(pod)
		if inst := v.FindContainer("app"); inst != nil && inst.State == model.ContainerRunning && inst.SandboxID != first.SandboxID {
			again = inst
		}
	}
	sb := sandboxIn(v, again.SandboxID)
	if sb.Attempt != 1 || sb.State != model.SandboxReady {
		t.Errorf("the container runs in sandbox %+v, want attempt 1, ready", sb)
	}
	// Only the killed instance and the new one: nothing was created into
	// the dead sandbox. One race is the runtime's, not the node's:
	// containerd's StopPodSandbox kills the containers it lists, then
	// tears the network down and stops the sandbox's process, and a pass
	// woken by the kill may start the container again in between (as the
	// kubelet's PLEG would); that start succeeds, the instance runs until
	// the pod is killed for the sandbox change, and the container in the
	// new sandbox is its restart 2. On a loaded 2-core machine the window
	// was over a second wide. A start the runtime refused (StartError) is
	// never allowed.
	wantRestarts := int32(1)
	for _, c := range v.Containers {
		switch {
		case c.ID == first.ID || c.ID == again.ID:
		case wantRestarts == 1 && c.SandboxID == first.SandboxID && !c.StartedAt.IsZero() && c.RestartCount == 1 &&
			c.Reason != enginetest.StartErrorReason && c.ExitCode != enginetest.StartErrorExitCode:
			t.Logf("the restart in place (%s, %s, exit %d) started before the stop reached the sandbox", c.ID, c.Reason, c.ExitCode)
			wantRestarts = 2
		default:
			t.Errorf("an instance %s (%s, exit %d, %q, restart %d) besides the killed and the new one", c.ID, c.Reason, c.ExitCode, c.Message, c.RestartCount)
		}
	}
	if again.RestartCount != wantRestarts {
		t.Errorf("restart count %d in the new sandbox, want %d", again.RestartCount, wantRestarts)
	}
	// The pass that started it records its status and events after.
	e.eventually("the restart running in the status", func() bool {
		cs := containerStatus(e.status(pod), "app")
		return cs.RestartCount == wantRestarts && cs.State.Running != nil
	})
	entries, err := e.st.Since(e.st.CompactRevision())
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, en := range entries {
		if en.Kind == store.KindEvent && en.Pod.UID == pod.UID {
			reasons = append(reasons, en.Event.Reason)
			if en.Event.Reason == engine.EventFailed || en.Event.Reason == engine.EventBackOff {
				t.Errorf("event %s: %s", en.Event.Reason, en.Event.Message)
			}
		}
	}
	if !slices.Contains(reasons, engine.EventSandboxChanged) {
		t.Errorf("no SandboxChanged event in %v", reasons)
	}
}

// sandboxIn returns the sandbox of v with id.
func sandboxIn(v *model.RuntimeView, id string) model.Sandbox {
	for _, s := range v.Sandboxes {
		if s.ID == id {
			return s
		}
	}
	return model.Sandbox{}
}
