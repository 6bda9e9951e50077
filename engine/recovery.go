package engine

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/podworkers"
	"github.com/podsync/podsync/engine/store"
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
	inRuntime, err := n.orphans.runtimePods(ctx, nil)
	if err != nil {
		return fmt.Errorf("recover: list the runtime: %w: %w", errdefs.ErrRuntimeUnavailable, err)
	}
	if rev == 0 && len(inRuntime) > 0 {
		if err := n.orphans.lostStore(ctx, inRuntime); err != nil {
			return err
		}
		if recs, rev, err = n.store.List(store.Filter{}); err != nil {
			return fmt.Errorf("recover: load the store: %w", err)
		}
	}
	// Before a pod runs: its claim volumes are its namespace's.
	if err := n.Volumes().Migrate(); err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	n.workers.SeedMayHold(inRuntime, recs)
	stored := map[types.UID]bool{}
	for _, r := range recs {
		stored[r.Pod.UID] = true
		if err := n.readmit(ctx, r); err != nil {
			return err
		}
		n.workers.Adopt(r)
		_, adopted := inRuntime[r.Pod.UID]
		n.cfg.log.Info("pod resumed", append(logx.Pod(r.Pod), zap.Bool(logx.Adopted, adopted), zap.Bool(logx.Deleting, r.Deleting),
			zap.String(logx.Phase, string(r.Pod.Status.Phase)))...)
	}
	if err := n.orphans.recoverUnstored(ctx, n.workers, inRuntime, stored, rev); err != nil {
		return err
	}
	n.cfg.log.Info("node recovered", zap.Int(logx.Pods, len(recs)), zap.Int64(logx.Revision, rev))
	return nil
}

// readmit checks a stored pod against the node's policy again, as the
// kubelet re-admits the pods it finds when it starts: one the policy no
// longer allows (a stricter --pod-security, an exemption taken away) is
// rejected as a new one would be — phase Failed with the check's reason
// and message, and a warning event — and its worker's first pass stops its
// containers. Deleting and terminal pods are not checked.
func (n *Node) readmit(ctx context.Context, r *store.PodRecord) error {
	if r.Deleting || model.IsTerminal(r.Pod.Status.Phase) {
		return nil
	}
	var ae *AdmissionError
	if err := n.admission.check(r.Pod); !errors.As(err, &ae) {
		return nil
	}
	status, c, ev := podworkers.FailedStatus(r.Pod, ae.Reason(), "Pod was rejected: "+ae.Result.Message)
	if _, err := n.store.Append(c, ev); err != nil {
		return fmt.Errorf("recover: reject pod %s: %w", model.PodString(r.Pod), err)
	}
	r.Pod.Status = *status
	logx.From(ctx, n.cfg.log).Warn("pod rejected: the node's policy no longer admits it", append(logx.Pod(r.Pod),
		zap.String(logx.Reason, ae.Reason()), zap.String("message", ae.Result.Message))...)
	return nil
}
