package engine_test

import (
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/engine/admit"
	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/store"
)

// TestRunPodsAdmitsEachPodOnce: RunPods admits its batch through the
// node's one admission gate, once: each pod of the batch is asked about
// once — a pod the node holds already too — and neither admitted nor
// checked against the policy again when it is applied. A refused pod is
// not stored; with ALL_OR_NOTHING the others are refused with it, and
// asked about once each as well.
func TestRunPodsAdmitsEachPodOnce(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	asked := map[string]int{}
	count := func(what string) {
		mu.Lock()
		asked[what]++
		mu.Unlock()
	}
	counted := func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		out := maps.Clone(asked)
		clear(asked)
		return out
	}
	h := newNodeHarness(t, func(o *engine.NodeOptions) {
		o.Admit = func(pod *corev1.Pod, _ []*corev1.Pod) error {
			count("admit " + pod.Name)
			if pod.Name == "refused" {
				return &engine.AdmissionError{Result: admit.Result{Reason: "Test", Message: "refused by the test"}}
			}
			return nil
		}
		o.Policy = func(pod *corev1.Pod, _ []*corev1.Pod) error {
			count("policy " + pod.Name)
			return nil
		}
	})
	pod := func(name string) *corev1.Pod {
		p := enginetest.Pod()
		p.Name, p.UID = name, types.UID("uid-"+name)
		p.Spec.Containers = p.Spec.Containers[:1]
		return p
	}
	h.apply(pod("known"))
	if diff := cmp.Diff(map[string]int{"admit known": 1}, counted()); diff != "" {
		t.Fatalf("admission of the first apply (-want +got):\n%s", diff)
	}

	sum, err := h.node.RunPods(h.ctx, engine.RunPodsRequest{Pods: []*corev1.Pod{pod("a"), pod("b"), pod("known"), pod("refused")},
		WaitFor: engine.WaitForRunning, Timeout: 5 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"admit a": 1, "admit b": 1, "admit known": 1, "admit refused": 1}
	if diff := cmp.Diff(want, counted()); diff != "" {
		t.Errorf("admission of the batch (-want +got):\n%s", diff)
	}
	if sum.ReachedTarget != 3 || sum.Rejected != 1 || sum.Results[3].Reason != "Test" {
		t.Errorf("summary: %+v", sum)
	}
	if _, err := h.st.Get("uid-refused"); err == nil {
		t.Error("the refused pod was stored")
	}

	sum, err = h.node.RunPods(h.ctx, engine.RunPodsRequest{Pods: []*corev1.Pod{pod("c"), pod("refused")},
		WaitFor: engine.WaitForRunning, Timeout: 5 * time.Second, AllOrNothing: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]int{"admit c": 1, "admit refused": 1}, counted()); diff != "" {
		t.Errorf("admission of the all-or-nothing batch (-want +got):\n%s", diff)
	}
	if sum.Rejected != 2 || sum.Results[0].Reason != admit.ReasonNotRunAllOrNothing {
		t.Errorf("all-or-nothing summary: %+v", sum)
	}
	recs, _, err := h.st.List(store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 {
		t.Errorf("%d pods stored, want 3 (known, a, b)", len(recs))
	}
}
