package engine_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/model"
)

// TestLastAppliedSpecWins: specs applied while a pass of the pod runs
// (held in StartContainer) wait for their turn, and once every Apply has
// returned the pod runs the spec stored last — the newest instance of
// each container carries that spec's hash, with one running instance per
// container — whatever order the waiting Applies ran in.
func TestLastAppliedSpecWins(t *testing.T) {
	t.Parallel()
	h := newNodeHarness(t)
	gate := make(chan struct{})
	h.rt.mu.Lock()
	h.rt.gate = gate
	h.rt.mu.Unlock()

	spec := func(version int) *corev1.Pod {
		p := enginetest.Pod()
		p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "VERSION", Value: fmt.Sprint(version)}}
		return p
	}
	var wg sync.WaitGroup
	errs := make(chan error, 11)
	apply := func(p *corev1.Pod) {
		defer wg.Done()
		if _, err := h.node.Apply(h.ctx, p, nil, nil, nil); err != nil {
			errs <- err
		}
	}
	wg.Add(1)
	go apply(spec(0))
	h.eventually("the first pass held in StartContainer", func() bool {
		return slices.Contains(h.rt.GetCalls(), "CreateContainer")
	})
	for v := 1; v <= 10; v++ {
		wg.Add(1)
		go apply(spec(v))
	}
	close(gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("Apply: %v", err)
	}

	rec, err := h.st.Get(enginetest.Pod().UID)
	if err != nil {
		t.Fatal(err)
	}
	last := rec.Pod
	view := h.view(last)
	for i := range last.Spec.Containers {
		c := &last.Spec.Containers[i]
		running := 0
		for _, inst := range view.Containers {
			if inst.Name == c.Name && inst.State == model.ContainerRunning {
				running++
			}
		}
		newest := view.FindContainer(c.Name)
		if running != 1 || newest == nil || newest.State != model.ContainerRunning {
			t.Errorf("%s: %d running instances, newest %+v; want one, running", c.Name, running, newest)
			continue
		}
		if want := model.ContainerHash(last, c); newest.Hash != want {
			t.Errorf("%s runs hash %s, want the stored spec's %s (env %v)", c.Name, newest.Hash, want, c.Env)
		}
	}
	ready := 0
	for _, sb := range view.Sandboxes {
		if sb.State == model.SandboxReady {
			ready++
		}
	}
	if ready != 1 {
		t.Errorf("%d ready sandboxes, want 1", ready)
	}
}

// TestApplyAndDeleteRace: an Apply and a Delete of the same pod started
// together end in one of the two states the rule allows (docs/
// reliability.md): the Delete found the pod and it stays deleted (not
// stored, nothing in the runtime; the Apply failed with ErrConflict or
// ErrNotFound, or succeeded before the Delete), or the Apply came after
// the deletion and the pod runs once. No other error occurs.
func TestApplyAndDeleteRace(t *testing.T) {
	t.Parallel()
	h := newNodeHarness(t)
	for i := range 20 {
		pod := enginetest.Pod()
		pod.Name, pod.UID = fmt.Sprintf("web-%d", i), types.UID(fmt.Sprintf("uid-race-%d", i))
		if i%2 == 1 {
			h.apply(pod) // the pod exists before the race
		}
		var (
			wg       sync.WaitGroup
			applyErr error
			found    bool
			delErr   error
		)
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, applyErr = h.node.Apply(h.ctx, pod, nil, nil, nil)
		}()
		go func() {
			defer wg.Done()
			var res engine.DeleteResult
			res, delErr = h.node.Delete(h.ctx, pod.Namespace, pod.Name, "", new(int64))
			found = res.Found
		}()
		wg.Wait()
		if delErr != nil {
			t.Fatalf("%s: Delete: %v", pod.Name, delErr)
		}
		if applyErr != nil && !errors.Is(applyErr, errdefs.ErrConflict) && !errors.Is(applyErr, errdefs.ErrNotFound) {
			t.Fatalf("%s: Apply: %v, want nil, ErrConflict or ErrNotFound", pod.Name, applyErr)
		}
		_, getErr := h.node.Get(h.ctx, pod.Namespace, pod.Name)
		stored := getErr == nil
		h.eventually(pod.Name+" settled", func() bool {
			v := h.view(pod)
			if !stored {
				return len(v.Sandboxes) == 0 && len(v.Containers) == 0
			}
			return len(v.Sandboxes) == 1 && v.Sandboxes[0].State == model.SandboxReady
		})
		switch {
		case stored && applyErr != nil:
			t.Errorf("%s: stored, but Apply failed: %v", pod.Name, applyErr)
		case !stored && !found:
			t.Errorf("%s: gone, but Delete did not find it", pod.Name)
		}
	}
}
