package provider

import (
	"context"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
)

// A pod's deletion on podsyncd is two things in turn: the kill (its
// containers stopped within the grace period, then its sandbox), whose
// end podsyncd records as the pod's last status, and the removal of the
// pod's objects from the runtime and of its files from the node. The
// kubelet deletes a pod's API object after the first (the status
// manager's canBeDeleted: the phase terminal and SyncTerminatedPod done)
// and leaves the runtime's objects to its garbage collection. podsync-vk
// does the same: the kill's last status, seen on the watch while
// DeletePod waits for podsyncd, finishes the object at once, and
// DeletePod returns when podsyncd has removed the rest.

// deletion is a DeletePod in flight, for the watch to tell it the pod is
// killed.
type deletion struct {
	uid string
	// killed receives the kill's last status, once (buffered).
	killed chan *corev1.PodStatus
	sent   bool
}

// killedStatus reports whether st is the status of a killed pod: a
// terminal phase, which podsyncd gives a deleted pod once none of its
// containers runs (as the kubelet's generateAPIPodStatus), and no
// container running.
func killedStatus(st *corev1.PodStatus) bool {
	if st.Phase != corev1.PodSucceeded && st.Phase != corev1.PodFailed {
		return false
	}
	for _, cs := range [][]corev1.ContainerStatus{st.InitContainerStatuses, st.ContainerStatuses, st.EphemeralContainerStatuses} {
		for i := range cs {
			if cs[i].State.Running != nil {
				return false
			}
		}
	}
	return true
}

// noteKilledLocked hands st, a watched status of incarnation uid of k,
// to k's deletion in flight if it is the status of the pod killed.
// p.mu is held.
func (p *Provider) noteKilledLocked(k, uid string, st *corev1.PodStatus) {
	d := p.deletions[k]
	if d == nil || d.sent || d.uid != uid || !killedStatus(st) {
		return
	}
	d.sent = true
	d.killed <- st.DeepCopy()
}

// deleteOnPodsync deletes pod on podsyncd with req. With UseKube, a
// killed status of the pod on the watch before podsyncd answers
// finishes the pod's object on the API server then (finished true), and
// the call still waits for podsyncd's answer.
func (p *Provider) deleteOnPodsync(ctx context.Context, pod *corev1.Pod, req *podsyncv1.DeletePodRequest) (resp *podsyncv1.DeletePodResponse, finished bool, err error) {
	if p.kube == nil {
		resp, err = p.ps.DeletePod(ctx, req)
		return resp, false, err
	}
	k := key(pod.Namespace, pod.Name)
	d := &deletion{uid: string(pod.UID), killed: make(chan *corev1.PodStatus, 1)}
	p.mu.Lock()
	p.deletions[k] = d
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		if p.deletions[k] == d {
			delete(p.deletions, k)
		}
		p.mu.Unlock()
	}()
	type answer struct {
		resp *podsyncv1.DeletePodResponse
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		resp, err := p.ps.DeletePod(ctx, req)
		done <- answer{resp, err}
	}()
	select {
	case a := <-done:
		return a.resp, false, a.err
	case st := <-d.killed:
		p.log.Debug("pod killed on podsync: its object goes while podsyncd removes it", zap.String("pod", k))
		p.finishDeleted(ctx, p.lastPod(pod, st))
		a := <-done
		return a.resp, true, a.err
	}
}

// lastPod is pod as last given, else as the deletion gives it, with st
// as its last status: every container terminated, the phase terminal.
func (p *Provider) lastPod(pod *corev1.Pod, st *corev1.PodStatus) *corev1.Pod {
	p.mu.Lock()
	last := p.pods[key(pod.Namespace, pod.Name)]
	p.mu.Unlock()
	if last == nil || last.UID != pod.UID {
		last = pod
	}
	last = last.DeepCopy()
	if st == nil {
		st = &pod.Status
	}
	last.Status = *terminated(st)
	observe(&last.Status, pod.Generation)
	return last
}

// finishDeleted reports last's status and deletes its object on the API
// server (UseKube), as the kubelet does once a deleted pod's containers
// have stopped, not at the end of the grace period.
func (p *Provider) finishDeleted(ctx context.Context, last *corev1.Pod) {
	if p.kube == nil {
		return
	}
	if err := p.kube.FinishDeleted(ctx, last, &last.Status); err != nil {
		p.log.Warn("finish a deleted pod on the API server; the node library removes it after its grace period",
			zap.String("pod", key(last.Namespace, last.Name)), zap.Error(err))
	}
}
