package server_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
)

// podCRIState counts, for the pod namespace/name, the ready sandboxes and
// the running instances of each container in the fake runtime.
func (h *svcHarness) podCRIState(namespace, name string) (sandboxes, ready int, running map[string]int) {
	h.t.Helper()
	sbs, err := h.rt.ListPodSandbox(h.ctx, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	running = map[string]int{}
	ids := map[string]bool{}
	for _, sb := range sbs {
		if sb.GetMetadata().GetNamespace() != namespace || sb.GetMetadata().GetName() != name {
			continue
		}
		sandboxes++
		ids[sb.GetId()] = true
		if sb.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
			ready++
		}
	}
	cs, err := h.rt.ListContainers(h.ctx, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	for _, c := range cs {
		if ids[c.GetPodSandboxId()] && c.GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING {
			running[c.GetMetadata().GetName()]++
		}
	}
	return sandboxes, ready, running
}

// waitUntil polls cond until it holds or the harness's context ends.
func (h *svcHarness) waitUntil(what string, cond func() bool) {
	h.t.Helper()
	for !cond() {
		select {
		case <-h.ctx.Done():
			h.t.Fatalf("%s: not reached", what)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestConcurrentSyncPod: 100 SyncPod calls of one pod and 50 of 50 other
// pods at once all succeed; each pod ends with exactly one ready sandbox
// and one running instance of its container — no duplicate from calls
// that raced.
func TestConcurrentSyncPod(t *testing.T) {
	h := newSvcHarness(t)
	var wg sync.WaitGroup
	errs := make(chan error, 150)
	call := func(name string) {
		defer wg.Done()
		if _, err := callSync(h.ctx, h.c, &podsyncv1.SyncPodRequest{Pod: testPod(t, "default", name, nil)}); err != nil {
			errs <- fmt.Errorf("SyncPod %s: %w", name, err)
		}
	}
	for i := range 150 {
		wg.Add(1)
		name := "web"
		if i%3 == 2 {
			name = fmt.Sprintf("other-%d", i/3)
		}
		go call(name)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	names := []string{"web"}
	for i := range 50 {
		names = append(names, fmt.Sprintf("other-%d", i))
	}
	for _, name := range names {
		sandboxes, ready, running := h.podCRIState("default", name)
		if sandboxes != 1 || ready != 1 || running["app"] != 1 {
			t.Errorf("%s: %d sandboxes (%d ready), %d running app; want one of each", name, sandboxes, ready, running["app"])
		}
	}
	resp, err := h.c.ListPods(h.ctx, &podsyncv1.ListPodsRequest{})
	if err != nil || len(resp.GetPods()) != len(names) {
		t.Errorf("ListPods: %d pods, %v; want %d", len(resp.GetPods()), err, len(names))
	}
}

// TestRunPodsOverlappingDeletePod: a RunPods and a DeletePod of the same
// pod sent together end as the rule of docs/reliability.md says. Either
// the DeletePod found the pod and it stays deleted — GetPod NOT_FOUND, no
// sandbox left — or the RunPods applied it after the deletion and it runs
// once, reported as having reached its target. A RunPods that lost the
// race reports the pod failed (ABORTED conflict or not found), never an
// RPC error.
func TestRunPodsOverlappingDeletePod(t *testing.T) {
	h := newSvcHarness(t)
	grace := int64(0)
	for i := range 20 {
		name := fmt.Sprintf("web-%d", i)
		if i%2 == 1 {
			h.sync(testPod(t, "default", name, nil)) // the pod exists before the race
		}
		var (
			wg      sync.WaitGroup
			run     []*podsyncv1.RunPodsResponse
			runErr  error
			del     *podsyncv1.DeletePodResponse
			delErr  error
			ctx, cl = context.WithTimeout(h.ctx, 5*time.Second)
		)
		wg.Add(2)
		go func() {
			defer wg.Done()
			run, runErr = callRunPods(ctx, h.c, &podsyncv1.RunPodsRequest{Pods: []*podsyncv1.Pod{testPod(t, "default", name, nil)}})
		}()
		go func() {
			defer wg.Done()
			del, delErr = h.c.DeletePod(ctx, &podsyncv1.DeletePodRequest{Name: name, GracePeriodSeconds: &grace})
		}()
		wg.Wait()
		cl()
		if runErr != nil || delErr != nil {
			t.Fatalf("%s: RunPods %v, DeletePod %v", name, runErr, delErr)
		}
		var result *podsyncv1.PodResult
		if sum := run[len(run)-1].GetSummary(); sum != nil && len(sum.GetResults()) == 1 {
			result = sum.GetResults()[0]
		} else {
			t.Fatalf("%s: RunPods ended without a summary: %v", name, run)
		}
		_, getErr := h.c.GetPod(h.ctx, &podsyncv1.GetPodRequest{Name: name})
		switch code := status.Code(getErr); code {
		case codes.NotFound:
			if !del.GetFound() {
				t.Errorf("%s: gone, but DeletePod did not find it", name)
			}
			h.waitUntil(name+" removed from the runtime", func() bool {
				sandboxes, _, _ := h.podCRIState("default", name)
				return sandboxes == 0
			})
		case codes.OK:
			if result.GetOutcome() != podsyncv1.PodOutcome_POD_OUTCOME_REACHED_TARGET {
				t.Errorf("%s: present, but RunPods reported %v", name, result)
			}
			h.waitUntil(name+" running once", func() bool {
				sandboxes, ready, running := h.podCRIState("default", name)
				return sandboxes == 1 && ready == 1 && running["app"] == 1
			})
		default:
			t.Fatalf("%s: GetPod: %v", name, getErr)
		}
		if o := result.GetOutcome(); o != podsyncv1.PodOutcome_POD_OUTCOME_REACHED_TARGET && o != podsyncv1.PodOutcome_POD_OUTCOME_FAILED {
			t.Errorf("%s: RunPods outcome %v", name, result)
		}
	}
}
