package provider

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
)

// The node library reports the last pod it was notified: a status taken
// before a newer one must never be notified after it. Here a pass's end
// takes the pod's status, and before it is notified the watch delivers
// the newer status of a container the pass started; what the node
// library is left with must be the newer one.
func TestAStatusTakenEarlierIsNeverNotifiedLater(t *testing.T) {
	pod := testPod("1")
	k := key(pod.Namespace, pod.Name)
	p := New("vk-1", newFake(), zap.NewNop())

	entered, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var got []corev1.PodPhase
	first := true
	p.NotifyPods(context.Background(), func(n *corev1.Pod) {
		mu.Lock()
		block := first
		first = false
		mu.Unlock()
		if block {
			// The first notification is held between being taken and
			// being recorded, as a busy node library can hold it.
			close(entered)
			<-release
		}
		mu.Lock()
		got = append(got, n.Status.Phase)
		mu.Unlock()
	})
	setStatus := func(phase corev1.PodPhase) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.pods[k] = pod.DeepCopy()
		p.statuses[k] = &corev1.PodStatus{Phase: phase}
		p.uids[k] = string(pod.UID)
	}

	setStatus(corev1.PodPending)
	older := make(chan struct{})
	go func() { defer close(older); p.changed(k) }()
	<-entered
	setStatus(corev1.PodRunning)
	newer := make(chan struct{})
	go func() { defer close(newer); p.changed(k) }()
	select {
	case <-newer: // the newer status went first: the older must not follow it
	case <-time.After(200 * time.Millisecond): // it waits for the older
	}
	close(release)
	<-older
	<-newer

	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || got[1] != corev1.PodRunning {
		t.Errorf("notified phases %v: the node library must be left with the newer, Running", got)
	}
	if n := len(p.notifying.m); n != 0 {
		t.Errorf("%d key locks kept after the notifications, want none", n)
	}
}

// A new pod's status that podsyncd reports while the pod's SyncPod is in
// flight is notified once, with the pod's generation: the apply's end
// adds no second notification (the node library would compare it with
// the first and could write the status twice). A status podsyncd sends
// again unchanged is not notified again; a changed one is.
func TestANewPodsStatusIsNotifiedOnce(t *testing.T) {
	f := newFake()
	p := New("vk-1", f, zap.NewNop())
	n := runProvider(t, p, f)
	pod := testPod("1")
	pod.Generation = 3
	running := &podsyncv1.PodStatus{Phase: "Running"}
	f.onSync = func() {
		statusOf(f, pod, running)
		got := n.next(t)
		if got.Status.Phase != corev1.PodRunning || got.Status.ObservedGeneration != 3 {
			t.Errorf("status during the SyncPod: %s, observed generation %d; want Running of generation 3",
				got.Status.Phase, got.Status.ObservedGeneration)
		}
	}
	if err := p.CreatePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if len(n.ch) != 0 {
		t.Errorf("the apply's end notified again: %+v", (<-n.ch).Status)
	}
	statusOf(f, pod, running)
	later := &podsyncv1.PodStatus{Phase: "Running", PodIp: "10.88.0.9"}
	statusOf(f, pod, later)
	if got := n.next(t); got.Status.PodIP != "10.88.0.9" {
		t.Errorf("notified %+v after a repeated status, want only the changed one (its IP)", got.Status)
	}
}
