package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/store"
	"github.com/podsync/podsync/engine/syncer"
	"github.com/podsync/podsync/logx"
)

// recover loads the store and lists the runtime: podsync's objects of
// pods the store does not hold are removed if the store recorded their
// deletion, and kept as orphans otherwise unless RemoveOrphans (see
// recoverUnstored), and every stored pod gets a worker, whose
// first pass adopts what the runtime holds or finishes a deletion. A store
// with no history (revision 0: new, emptied or replaced) on a runtime that
// holds podsync's pods is a lost store, not a node whose pods are all
// orphans: recover then fails with ErrStoreLost and touches nothing,
// unless AdoptRuntime (the pods' records are rebuilt from the runtime) or
// RemoveOrphans (see lostStore).
func (n *Node) recover(ctx context.Context) error {
	recs, rev, err := n.store.List(store.Filter{})
	if err != nil {
		return fmt.Errorf("recover: load the store: %w", err)
	}
	inRuntime, err := n.runtimePods(ctx, nil)
	if err != nil {
		return fmt.Errorf("recover: list the runtime: %w: %w", errdefs.ErrRuntimeUnavailable, err)
	}
	if rev == 0 && len(inRuntime) > 0 {
		if err := n.lostStore(ctx, inRuntime); err != nil {
			return err
		}
		if recs, rev, err = n.store.List(store.Filter{}); err != nil {
			return fmt.Errorf("recover: load the store: %w", err)
		}
	}
	n.seedMayHold(inRuntime, recs)
	stored := map[types.UID]bool{}
	for _, r := range recs {
		stored[r.Pod.UID] = true
		if err := n.readmit(ctx, r); err != nil {
			return err
		}
		w := n.workerFor(r.Pod.UID)
		w.setRef(r.Ref())
		w.noteStatus(&r.Pod.Status)
		_, adopted := inRuntime[r.Pod.UID]
		n.log.Info("pod resumed", append(logx.Pod(r.Pod), zap.Bool(logx.Adopted, adopted), zap.Bool(logx.Deleting, r.Deleting),
			zap.String(logx.Phase, string(r.Pod.Status.Phase)))...)
	}
	if err := n.recoverUnstored(ctx, inRuntime, stored, rev); err != nil {
		return err
	}
	n.log.Info("node recovered", zap.Int(logx.Pods, len(recs)), zap.Int64(logx.Revision, rev))
	return nil
}

// readmit checks a stored pod against the node's policy again, as the
// kubelet re-admits the pods it finds when it starts: one the policy no
// longer allows (a stricter --pod-security, an exemption taken away) is
// rejected as a new one would be — phase Failed with the check's reason
// and message, and a warning event — and its worker's first pass stops its
// containers. Deleting and terminal pods are not checked.
func (n *Node) readmit(ctx context.Context, r *store.PodRecord) error {
	if n.policy == nil || r.Deleting || isTerminal(r.Pod.Status.Phase) {
		return nil
	}
	var ae *AdmissionError
	if err := n.policy(r.Pod); !errors.As(err, &ae) {
		return nil
	}
	status, c, ev := failPod(r.Pod, ae.Reason(), "Pod was rejected: "+ae.Result.Message)
	if _, err := n.store.Append(c, ev); err != nil {
		return fmt.Errorf("recover: reject pod %s: %w", model.PodString(r.Pod), err)
	}
	r.Pod.Status = *status
	logx.From(ctx, n.log).Warn("pod rejected: the node's policy no longer admits it", append(logx.Pod(r.Pod),
		zap.String(logx.Reason, ae.Reason()), zap.String("message", ae.Result.Message))...)
	return nil
}

// failPod returns pod's status failed with reason and message, the
// store change that records it and a warning event saying the same: a pod
// the node rejects on restart, or evicts.
func failPod(pod *corev1.Pod, reason, msg string) (*corev1.PodStatus, store.Change, store.Change) {
	status := pod.Status.DeepCopy()
	status.Phase, status.Reason, status.Message = corev1.PodFailed, reason, msg
	ref := store.RefOf(pod)
	return status, store.StatusChange(ref, status),
		store.EventChange(ref, store.Event{Type: corev1.EventTypeWarning, Reason: reason, Message: msg})
}

// podNames lists up to max of the pods, sorted, as "namespace/name".
func podNames(pods map[types.UID]model.PodRef, max int) string {
	var names []string
	for _, r := range pods {
		names = append(names, r.Namespace+"/"+r.Name)
	}
	slices.Sort(names)
	if len(names) > max {
		return strings.Join(names[:max], ", ") + fmt.Sprintf(", and %d more", len(names)-max)
	}
	return strings.Join(names, ", ")
}

// runtimePods returns the pods podsync's sandboxes and containers belong
// to (those with uid only, if uid is not nil).
func (n *Node) runtimePods(ctx context.Context, uid *types.UID) (map[types.UID]model.PodRef, error) {
	sel := map[string]string{model.LabelManaged: "true"}
	if uid != nil {
		sel = syncer.PodSelector(*uid)
	}
	sbs, err := n.rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	ctrs, err := n.rt.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	out := map[types.UID]model.PodRef{}
	add := func(labels map[string]string) {
		if !model.IsManaged(labels) {
			return
		}
		ref := model.PodFromLabels(labels)
		if ref.UID == "" {
			return
		}
		if old, ok := out[ref.UID]; !ok || old.Name == "" {
			out[ref.UID] = ref
		}
	}
	for _, sb := range sbs {
		add(sb.GetLabels())
	}
	for _, c := range ctrs {
		add(c.GetLabels())
	}
	return out, nil
}

// runtimePodRef returns the pod the runtime's objects with uid belong to.
func (n *Node) runtimePodRef(ctx context.Context, uid types.UID) (model.PodRef, bool, error) {
	pods, err := n.runtimePods(ctx, &uid)
	if err != nil {
		return model.PodRef{}, false, err
	}
	ref, ok := pods[uid]
	return ref, ok, nil
}

// collectOrphans hands the pods the runtime holds but the store does not
// to workers, which remove them if the node deleted them (see
// sweepUnstored). Run calls it every GCPolicy.Period.
func (n *Node) collectOrphans(ctx context.Context) {
	rev := n.store.Revision()
	pods, err := n.runtimePods(ctx, nil)
	if err != nil {
		if ctx.Err() == nil {
			n.log.Warn("garbage collection: list the runtime", zap.Error(err))
		}
		return
	}
	n.sweepUnstored(pods, rev)
}

// every calls fn each period until ctx ends; Run counts it in n.wg.
func (n *Node) every(ctx context.Context, period time.Duration, fn func(context.Context)) {
	defer n.wg.Done()
	t := n.clock.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		fn(ctx)
	}
}
