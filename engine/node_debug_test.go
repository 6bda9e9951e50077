package engine_test

import (
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsync/podsync/convert"
	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/validation"
)

func debugContainer(name, target string) corev1.EphemeralContainer {
	ec := corev1.EphemeralContainer{
		EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: name, Image: enginetest.Image, Command: []string{"sleep", "3600"}},
		TargetContainerName:      target,
	}
	convert.DefaultEphemeralContainer(&ec)
	return ec
}

// TestNodeAddEphemeralContainer: AddEphemeralContainer stores the debug
// container as a new generation and its pass starts it; a duplicate name
// or an unknown target is ErrInvalidSpec, a pod not running ErrNotRunning,
// an unknown pod ErrNotFound; and a spec update (Apply of the pod as a
// request gives it, without ephemeral containers) keeps it running.
func TestNodeAddEphemeralContainer(t *testing.T) {
	t.Parallel()
	h := newNodeHarness(t)
	pod := enginetest.Pod()
	h.apply(pod)
	before, err := h.node.Get(h.ctx, pod.Namespace, pod.Name)
	if err != nil {
		t.Fatal(err)
	}
	opts := validation.Options{}
	res, err := h.node.AddEphemeralContainer(h.ctx, pod.Namespace, pod.Name, debugContainer("debug", "app"), engine.Precondition{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(res.Status.EphemeralContainerStatuses); n != 1 || res.Status.EphemeralContainerStatuses[0].State.Running == nil {
		t.Fatalf("EphemeralContainerStatuses = %+v, want debug running", res.Status.EphemeralContainerStatuses)
	}
	after, err := h.node.Get(h.ctx, pod.Namespace, pod.Name)
	if err != nil {
		t.Fatal(err)
	}
	if after.Generation != before.Generation+1 || len(after.Pod.Spec.EphemeralContainers) != 1 {
		t.Errorf("stored generation %d (was %d), %d ephemeral containers; want a new generation with debug",
			after.Generation, before.Generation, len(after.Pod.Spec.EphemeralContainers))
	}

	for _, tc := range []struct {
		name string
		ec   corev1.EphemeralContainer
	}{
		{"duplicate of the debug container", debugContainer("debug", "")},
		{"duplicate of a regular container", debugContainer("app", "")},
		{"unknown target", debugContainer("debug2", "db")},
	} {
		if _, err := h.node.AddEphemeralContainer(h.ctx, pod.Namespace, pod.Name, tc.ec, engine.Precondition{}, opts); !errors.Is(err, errdefs.ErrInvalidSpec) {
			t.Errorf("%s: err = %v, want ErrInvalidSpec", tc.name, err)
		}
	}
	if _, err := h.node.AddEphemeralContainer(h.ctx, pod.Namespace, "nope", debugContainer("debug2", ""), engine.Precondition{}, opts); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("unknown pod: err = %v, want ErrNotFound", err)
	}

	// A spec update keeps the debug container, and its plan says so.
	actions, _, _, err := h.node.Plan(h.ctx, enginetest.Pod(), nil, nil)
	if err != nil || len(actions.Kill) != 0 || actions.KillPod {
		t.Errorf("Plan of a spec update = %+v, %v; want nothing killed", actions, err)
	}
	again := h.apply(enginetest.Pod())
	if n := len(again.Status.EphemeralContainerStatuses); n != 1 || again.Status.EphemeralContainerStatuses[0].State.Running == nil {
		t.Errorf("after a spec update: EphemeralContainerStatuses = %+v, want debug still running", again.Status.EphemeralContainerStatuses)
	}

	// A pod that is no longer running takes none.
	done := enginetest.Pod()
	done.Name, done.UID = "job", "uid-job"
	done.Spec.RestartPolicy = corev1.RestartPolicyNever
	done.Spec.Containers = []corev1.Container{{Name: "app", Image: enginetest.Image, Command: []string{"true"},
		TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile, ImagePullPolicy: corev1.PullIfNotPresent}}
	if st := h.apply(done); st.Status.Phase == corev1.PodRunning {
		t.Fatalf("pod job phase = %s after its pass, want it done", st.Status.Phase)
	}
	if _, err := h.node.AddEphemeralContainer(h.ctx, done.Namespace, done.Name, debugContainer("debug", ""), engine.Precondition{}, opts); !errors.Is(err, errdefs.ErrNotRunning) {
		t.Errorf("pod not running: err = %v, want ErrNotRunning", err)
	}
}

// TestNodeAddEphemeralContainerBesideAnUpdate: spec updates of the pod
// racing AddEphemeralContainer never store a spec without a debug
// container added meanwhile (the read, change and store of a spec are
// serialised).
func TestNodeAddEphemeralContainerBesideAnUpdate(t *testing.T) {
	t.Parallel()
	h := newNodeHarness(t)
	pod := enginetest.Pod()
	h.apply(pod)
	stop := make(chan struct{})
	updates := make(chan error, 1)
	go func() {
		defer close(updates)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := h.node.Apply(h.ctx, enginetest.Pod(), nil, nil, nil); err != nil {
				updates <- err
				return
			}
		}
	}()
	const n = 20
	for i := range n {
		if _, err := h.node.AddEphemeralContainer(h.ctx, pod.Namespace, pod.Name, debugContainer(fmt.Sprintf("debug-%d", i), ""), engine.Precondition{}, validation.Options{}); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	if err := <-updates; err != nil {
		t.Fatal(err)
	}
	rec, err := h.node.Get(h.ctx, pod.Namespace, pod.Name)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(rec.Pod.Spec.EphemeralContainers); got != n {
		t.Errorf("%d debug containers stored, want %d: an update dropped some", got, n)
	}
}
