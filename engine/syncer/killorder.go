package syncer

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/podsync/podsync/engine/model"
)

// terminationOrdering is the kubelet's (kuberuntime_termination_order.go):
// during a whole-pod kill every container is killed at once, but a sidecar
// stops only after every regular container being killed has stopped and
// after the sidecar that follows it in the spec, waiting at most for what
// remains of its grace period.
type terminationOrdering struct {
	clock clock.Clock
	mu    sync.Mutex
	// terminated closes a container's channel when it has stopped;
	// containers not being killed start closed.
	terminated map[string]chan struct{}
	// prereqs are the channels a container waits on before it stops.
	prereqs map[string][]chan struct{}
}

// newTerminationOrdering orders the kill of the running containers named
// in running.
func newTerminationOrdering(pod *corev1.Pod, running []string, clk clock.Clock) *terminationOrdering {
	o := &terminationOrdering{clock: clk, terminated: map[string]chan struct{}{}, prereqs: map[string][]chan struct{}{}}
	isRunning := map[string]bool{}
	for _, n := range running {
		isRunning[n] = true
	}
	channel := func(name string) chan struct{} {
		ch := make(chan struct{})
		if !isRunning[name] {
			close(ch)
		}
		o.terminated[name] = ch
		return ch
	}
	var regular []chan struct{}
	for _, c := range pod.Spec.Containers {
		regular = append(regular, channel(c.Name))
	}
	var later chan struct{}
	for i := len(pod.Spec.InitContainers) - 1; i >= 0; i-- {
		c := &pod.Spec.InitContainers[i]
		ch := channel(c.Name)
		if !model.IsRestartableInitContainer(c) {
			continue
		}
		o.prereqs[c.Name] = append(o.prereqs[c.Name], regular...)
		if later != nil {
			o.prereqs[c.Name] = append(o.prereqs[c.Name], later)
		}
		later = ch
	}
	return o
}

// waitForTurn waits until the container named name may stop, for at most
// grace seconds (not at all if grace is not positive) or until ctx ends,
// and returns how long it waited.
func (o *terminationOrdering) waitForTurn(ctx context.Context, name string, grace int64) time.Duration {
	if grace <= 0 || len(o.prereqs[name]) == 0 {
		return 0
	}
	start := o.clock.Now()
	t := o.clock.NewTimer(time.Duration(grace) * time.Second)
	defer t.Stop()
	for _, ch := range o.prereqs[name] {
		select {
		case <-ch:
		case <-t.C():
			return o.clock.Since(start)
		case <-ctx.Done():
			return o.clock.Since(start)
		}
	}
	return o.clock.Since(start)
}

// containerTerminated records that the container named name has stopped.
func (o *terminationOrdering) containerTerminated(name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if ch, ok := o.terminated[name]; ok {
		close(ch)
		delete(o.terminated, name)
	}
}
