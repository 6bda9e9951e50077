package provider

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

// NotifyPods registers the node library's callback; Run calls it for
// every status change.
func (p *Provider) NotifyPods(_ context.Context, fn func(*corev1.Pod)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.notify == nil {
		p.notify = fn
		close(p.notifyCh)
	}
}

// changed notifies k's current pod and status, if both are known.
//
// A pod's notifications are taken and sent one at a time, in order
// (p.notifying): the node library keeps the last pod it is notified and
// reports that one to the API server, so a status taken before a newer
// one must not be sent after it. Without this, a pass's end (apply) and
// the watch's status of the container it started could cross, and the
// API server keep the older status until the pod next changed: a debug
// container shown waiting while it ran, and kubectl debug waiting for it.
func (p *Provider) changed(k string) {
	unlock := p.notifying.lock(k)
	defer unlock()
	p.mu.Lock()
	pod, ok := p.pods[k]
	st := p.statusLocked(k)
	gen := p.applied[k]
	notify := p.notify
	p.mu.Unlock()
	if !ok || st == nil || notify == nil {
		return
	}
	out := pod.DeepCopy()
	out.Status = *st
	observe(&out.Status, gen)
	applyReadinessGates(out, p.gateConditions(out))
	p.mu.Lock()
	last := p.notified[k]
	same := last.pod == pod && equality.Semantic.DeepEqual(last.status, &out.Status)
	if !same {
		// out is the node library's from here on; it copies before it
		// changes what it was given.
		p.notified[k] = notice{pod: pod, status: &out.Status}
	}
	p.mu.Unlock()
	if !same {
		notify(out)
	}
}

// notice is what a pod's last notification was made of: the pod as
// stored (p.pods) and the status sent with it.
type notice struct {
	pod    *corev1.Pod
	status *corev1.PodStatus
}
