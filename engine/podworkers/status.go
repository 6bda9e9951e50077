package podworkers

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/plan"
	"github.com/podsync/podsync/engine/podstatus"
	"github.com/podsync/podsync/engine/store"
	"github.com/podsync/podsync/engine/syncer"
)

// admitResize is the node's admission of a known pod's resize; without
// Admission every resize is admitted.
func (p *Workers) admitResize(pod *corev1.Pod) (bool, string) {
	if p.admitter == nil {
		return true, ""
	}
	return p.admitter.AdmitResize(pod)
}

// passStatusOptions are statusOptions for w's pass: the generation of its
// pod record, and what it found of a resize: pending (not admitted), or
// failed (its ResizePodInPlaceError step). The caller holds w's lock.
func (p *Workers) passStatusOptions(w *worker, res syncer.SyncResult) podstatus.StatusOptions {
	o := p.statusOptions(w.reasons)
	o.Generation = w.generation
	o.ResizePending = res.Plan.ResizePending
	for _, s := range res.Steps {
		if s.Reason == syncer.ReasonResizePodInPlaceError {
			o.ResizeError = s.Message
		}
	}
	return o
}

// podObjects returns the ConfigMaps and Secrets a pass of rec's pod
// builds with: the stored objects it refers to, then the copies an older
// record holds (a store written before objects were stored), which only
// count when no stored object has their name.
func (p *Workers) podObjects(rec *store.PodRecord) ([]*corev1.ConfigMap, []*corev1.Secret, error) {
	pod := rec.Pod
	cmNames, secretNames := criconfig.ReferencedNames(pod)
	refs := make([]store.ObjectRef, 0, len(cmNames)+len(secretNames))
	for name := range cmNames {
		refs = append(refs, store.ObjectRef{Kind: store.KindConfigMap, Namespace: pod.Namespace, Name: name})
	}
	for name := range secretNames {
		refs = append(refs, store.ObjectRef{Kind: store.KindSecret, Namespace: pod.Namespace, Name: name})
	}
	cms, secrets, err := p.store.ObjectsWithSecrets(refs)
	if err != nil {
		return nil, nil, fmt.Errorf("read the objects of pod %s: %w", rec.Ref(), err)
	}
	return append(cms, rec.ConfigMaps...), append(secrets, rec.Secrets...), nil
}

// podSummary is what the metrics need of a pod's last status.
type podSummary struct {
	known    bool
	phase    corev1.PodPhase
	backoffs int
}

// podSummaryOf returns the phase of status (Pending before the first status,
// Unknown for a phase podsync does not know) and how many of its
// containers wait in a back-off.
func podSummaryOf(status *corev1.PodStatus) podSummary {
	s := podSummary{known: true, phase: status.Phase}
	switch s.phase {
	case "":
		s.phase = corev1.PodPending
	case corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed:
	default:
		s.phase = corev1.PodUnknown
	}
	for _, list := range [][]corev1.ContainerStatus{status.InitContainerStatuses, status.ContainerStatuses} {
		for _, cs := range list {
			if w := cs.State.Waiting; w != nil && (w.Reason == plan.ReasonCrashLoopBackOff || w.Reason == plan.ReasonImagePullBackOff) {
				s.backoffs++
			}
		}
	}
	return s
}

// PodCounts counts the pods of the workers by the phase of their last
// status (Pending before the first) and the containers waiting in a
// back-off (metrics.NodeState).
func (p *Workers) PodCounts() (map[corev1.PodPhase]int, int) {
	phases := map[corev1.PodPhase]int{}
	backoffs := 0
	for _, w := range p.snapshot() {
		w.mu.Lock()
		s := w.summary
		w.mu.Unlock()
		if !s.known {
			continue
		}
		phases[s.phase]++
		backoffs += s.backoffs
	}
	return phases, backoffs
}
