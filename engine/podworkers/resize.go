package podworkers

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsync/podsync/engine/plan"
	"github.com/podsync/podsync/engine/syncer"
)

// pendingResizes are the pods whose last pass left a resize the node did
// not admit. As the kubelet's allocation manager retries pending resizes
// when pods leave, end or are resized (RetryPendingResizes), the node
// kicks their workers then; nothing else would run a pass of a settled
// pod. The zero value is empty.
type pendingResizes struct {
	mu   sync.Mutex
	uids map[types.UID]bool
}

// note records whether uid's last pass left a resize pending.
func (p *pendingResizes) note(uid types.UID, pending bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !pending {
		delete(p.uids, uid)
		return
	}
	if p.uids == nil {
		p.uids = map[types.UID]bool{}
	}
	p.uids[uid] = true
}

// others returns the pods other than uid with a resize pending.
func (p *pendingResizes) others(uid types.UID) []types.UID {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []types.UID
	for u := range p.uids {
		if u != uid {
			out = append(out, u)
		}
	}
	return out
}

// retryPendingResizes kicks a pass of every other pod with a resize
// pending: the node's pods changed in a way that may make room (pod
// uid left, ended or shrank).
func (p *Workers) retryPendingResizes(uid types.UID) {
	for _, u := range p.resizes.others(uid) {
		if w := p.existing(u); w != nil {
			w.kickSelf()
		}
	}
}

// noteResize records what a pass of pod found of a resize and retries the
// other pods' pending resizes when it made room: it ended the pod, or
// resized it in place or by a restart.
func (p *Workers) noteResize(pod *corev1.Pod, res syncer.SyncResult) {
	p.resizes.note(pod.UID, res.Plan.ResizePending != nil)
	room := len(res.Plan.Resize) > 0 || res.Plan.KillPod
	for _, k := range res.Plan.Kill {
		room = room || k.Reason == plan.ReasonResizeRestart
	}
	if room {
		p.retryPendingResizes(pod.UID)
	}
}
