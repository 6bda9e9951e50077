package engine

import (
	"context"
	"maps"
	"slices"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/logx"
)

// A pod the runtime holds under podsync's labels that the store does not
// hold is one of two things:
//
//   - the leftovers of a deletion the node recorded (the store's
//     Deleted): the node removes them, at recovery and in the periodic
//     sweep;
//   - an orphan: a pod of a store that was lost, replaced or restored
//     from an older copy, found when the node starts. The node keeps it
//     running, logs it and counts it (podsync_orphaned_pods), and removes
//     it only with RemoveOrphans;
//   - a pod that appears in the runtime after the node started without
//     the store holding it: the leftover of a sandbox or container whose
//     creation was still in flight when the node (or the podsyncd before
//     it) deleted the pod — only podsync makes podsync-labelled objects,
//     and one podsyncd runs per runtime. The node removes it, as the
//     kubelet's garbage collector removes what no pod owns.

// mayRemoveUnstored reports whether the node may remove what the runtime
// holds of uid, a pod the store does not hold.
func (n *Node) mayRemoveUnstored(uid types.UID) (bool, error) {
	if n.removeOrphans {
		return true, nil
	}
	n.orphanMu.Lock()
	appeared := n.startOrphans != nil && !n.startOrphans[uid]
	n.orphanMu.Unlock()
	if appeared {
		return true, nil
	}
	return n.store.Deleted(uid)
}

// keepOrphan notes ref as an orphan the node keeps; it is logged the first
// time.
func (n *Node) keepOrphan(ref model.PodRef) {
	n.orphanMu.Lock()
	_, known := n.orphans[ref.UID]
	n.orphans[ref.UID] = ref
	n.orphanMu.Unlock()
	if !known {
		n.log.Warn("orphaned pod kept: the runtime holds it under podsync's labels but the store does not; "+
			"it keeps running unmanaged (start podsyncd with --adopt-runtime on an empty store to adopt it, or --remove-orphans to remove it)",
			zap.String(logx.PodNamespace, ref.Namespace), zap.String(logx.PodName, ref.Name), zap.String(logx.PodUID, string(ref.UID)))
	}
}

// setOrphans makes the pods of inRuntime that are orphans (neither stored
// nor the node's own leftovers) the node's orphans.
func (n *Node) setOrphans(orphans map[types.UID]model.PodRef) {
	n.orphanMu.Lock()
	for uid := range n.orphans {
		if _, ok := orphans[uid]; !ok {
			delete(n.orphans, uid)
		}
	}
	n.orphanMu.Unlock()
	for _, uid := range slices.Sorted(maps.Keys(orphans)) {
		n.keepOrphan(orphans[uid])
	}
}

// orphanCount is how many orphans the node keeps.
func (n *Node) orphanCount() int {
	n.orphanMu.Lock()
	defer n.orphanMu.Unlock()
	return len(n.orphans)
}

// recoverUnstored handles, at recovery, the pods of inRuntime the store
// does not hold: the node's own leftovers (or all, with RemoveOrphans)
// are removed (a failure is logged and left to the sweep), orphans kept;
// the store then forgets the deletions of pods the runtime no longer
// holds.
func (n *Node) recoverUnstored(ctx context.Context, inRuntime map[types.UID]model.PodRef, stored map[types.UID]bool, rev int64) error {
	orphans := map[types.UID]model.PodRef{}
	for _, uid := range slices.Sorted(maps.Keys(inRuntime)) {
		ref := inRuntime[uid]
		if stored[uid] {
			continue
		}
		remove, err := n.mayRemoveUnstored(uid)
		if err != nil {
			return err
		}
		if !remove {
			orphans[uid] = ref
			continue
		}
		w := n.workerFor(uid)
		if err := w.acquire(ctx); err != nil {
			return err
		}
		if err := n.removeOrphan(ctx, ref); err != nil {
			n.log.Warn("remove orphaned pod; the garbage collector will retry", zap.String(logx.PodUID, string(uid)), zap.Error(err))
		} else {
			w.retire()
		}
		w.release()
	}
	n.setOrphans(orphans)
	n.orphanMu.Lock()
	n.startOrphans = map[types.UID]bool{}
	for uid := range orphans {
		n.startOrphans[uid] = true
	}
	n.orphanMu.Unlock()
	n.forgetDeleted(rev, inRuntime)
	return nil
}

// forgetDeleted forgets the recorded deletions, at or before rev, of pods
// inRuntime (listed after rev was read) does not hold.
func (n *Node) forgetDeleted(rev int64, inRuntime map[types.UID]model.PodRef) {
	if _, err := n.store.ForgetDeleted(rev, func(uid types.UID) bool { _, ok := inRuntime[uid]; return ok }); err != nil {
		n.log.Warn("forget deleted pods", zap.Error(err))
	}
}

// sweepUnstored is the periodic sweep's part for the pods of inRuntime
// the store does not hold: workers remove the node's own leftovers (all
// of them with RemoveOrphans), orphans are kept.
func (n *Node) sweepUnstored(inRuntime map[types.UID]model.PodRef, rev int64) {
	orphans := map[types.UID]model.PodRef{}
	for uid, ref := range inRuntime {
		if _, err := n.store.Get(uid); err == nil {
			continue
		}
		remove, err := n.mayRemoveUnstored(uid)
		if err != nil {
			n.log.Warn("garbage collection: read the store", zap.Error(err))
			return
		}
		if remove {
			n.workerFor(uid).kickSelf()
		} else {
			orphans[uid] = ref
		}
	}
	n.setOrphans(orphans)
	n.forgetDeleted(rev, inRuntime)
}
