package provider

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
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
