package engine

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/podworkers"
	"github.com/podsync/podsync/engine/store"
	"github.com/podsync/podsync/engine/syncer"
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

// orphans are what the node knows of podsync's pods on the runtime that
// the store does not hold: it lists them (runtimePods), keeps the
// orphans, lets the workers remove the rest (podworkers.Unstored), and
// adopts or refuses them when the store was lost (adopt.go).
type orphans struct {
	store *store.Store
	rt    syncer.Runtime
	log   *zap.Logger
	// removeOrphans and adoptRuntime are NodeOptions.RemoveOrphans and
	// AdoptRuntime.
	removeOrphans, adoptRuntime bool

	// mu guards kept, the pods the runtime holds that the store does not,
	// kept running, and startOrphans, the orphans found when the node
	// started (nil until then): only those are kept; an unstored pod that
	// appears later is the node's own leftover.
	mu           sync.Mutex
	kept         map[types.UID]model.PodRef
	startOrphans map[types.UID]bool
}

func newOrphans(st *store.Store, rt syncer.Runtime, log *zap.Logger, removeOrphans, adoptRuntime bool) *orphans {
	return &orphans{store: st, rt: rt, log: log, removeOrphans: removeOrphans, adoptRuntime: adoptRuntime, kept: map[types.UID]model.PodRef{}}
}

// MayRemove reports whether the node may remove what the runtime holds of
// uid, a pod the store does not hold (podworkers.Unstored).
func (o *orphans) MayRemove(uid types.UID) (bool, error) {
	if o.removeOrphans {
		return true, nil
	}
	o.mu.Lock()
	appeared := o.startOrphans != nil && !o.startOrphans[uid]
	o.mu.Unlock()
	if appeared {
		return true, nil
	}
	return o.store.Deleted(uid)
}

// Keep notes ref as an orphan the node keeps; it is logged the first time
// (podworkers.Unstored).
func (o *orphans) Keep(ref model.PodRef) {
	o.mu.Lock()
	_, known := o.kept[ref.UID]
	o.kept[ref.UID] = ref
	o.mu.Unlock()
	if !known {
		o.log.Warn("orphaned pod kept: the runtime holds it under podsync's labels but the store does not; "+
			"it keeps running unmanaged (start podsyncd with --adopt-runtime on an empty store to adopt it, or --remove-orphans to remove it)",
			zap.String(logx.PodNamespace, ref.Namespace), zap.String(logx.PodName, ref.Name), zap.String(logx.PodUID, string(ref.UID)))
	}
}

// setOrphans makes the pods of inRuntime that are orphans (neither stored
// nor the node's own leftovers) the node's orphans.
func (o *orphans) set(orphans map[types.UID]model.PodRef) {
	o.mu.Lock()
	for uid := range o.kept {
		if _, ok := orphans[uid]; !ok {
			delete(o.kept, uid)
		}
	}
	o.mu.Unlock()
	for _, uid := range slices.Sorted(maps.Keys(orphans)) {
		o.Keep(orphans[uid])
	}
}

// Count is how many orphans the node keeps.
func (o *orphans) Count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.kept)
}

// recoverUnstored handles, at recovery, the pods of inRuntime the store
// does not hold: the node's own leftovers (or all, with RemoveOrphans)
// are removed (a failure is logged and left to the sweep), orphans kept;
// the store then forgets the deletions of pods the runtime no longer
// holds.
func (o *orphans) recoverUnstored(ctx context.Context, w *podworkers.Workers, inRuntime map[types.UID]model.PodRef, stored map[types.UID]bool, rev int64) error {
	orphans := map[types.UID]model.PodRef{}
	for _, uid := range slices.Sorted(maps.Keys(inRuntime)) {
		ref := inRuntime[uid]
		if stored[uid] {
			continue
		}
		remove, err := o.MayRemove(uid)
		if err != nil {
			return err
		}
		if !remove {
			orphans[uid] = ref
			continue
		}
		if err := w.RemoveNow(ctx, ref); err != nil {
			if ctx.Err() != nil {
				return err
			}
			o.log.Warn("remove orphaned pod; the garbage collector will retry", zap.String(logx.PodUID, string(uid)), zap.Error(err))
		}
	}
	o.set(orphans)
	o.mu.Lock()
	o.startOrphans = map[types.UID]bool{}
	for uid := range orphans {
		o.startOrphans[uid] = true
	}
	o.mu.Unlock()
	o.forgetDeleted(rev, inRuntime)
	return nil
}

// forgetDeleted forgets the recorded deletions, at or before rev, of pods
// inRuntime (listed after rev was read) does not hold.
func (o *orphans) forgetDeleted(rev int64, inRuntime map[types.UID]model.PodRef) {
	if _, err := o.store.ForgetDeleted(rev, func(uid types.UID) bool { _, ok := inRuntime[uid]; return ok }); err != nil {
		o.log.Warn("forget deleted pods", zap.Error(err))
	}
}

// sweepUnstored is the periodic sweep's part for the pods of inRuntime
// the store does not hold: workers remove the node's own leftovers (all
// of them with RemoveOrphans), orphans are kept.
func (o *orphans) sweepUnstored(w *podworkers.Workers, inRuntime map[types.UID]model.PodRef, rev int64) {
	orphans := map[types.UID]model.PodRef{}
	for uid, ref := range inRuntime {
		if _, err := o.store.Get(uid); err == nil {
			continue
		}
		remove, err := o.MayRemove(uid)
		if err != nil {
			o.log.Warn("garbage collection: read the store", zap.Error(err))
			return
		}
		if remove {
			w.Kick(uid)
		} else {
			orphans[uid] = ref
		}
	}
	o.set(orphans)
	o.forgetDeleted(rev, inRuntime)
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
func (o *orphans) runtimePods(ctx context.Context, uid *types.UID) (map[types.UID]model.PodRef, error) {
	sel := map[string]string{model.LabelManaged: "true"}
	if uid != nil {
		sel = syncer.PodSelector(*uid)
	}
	sbs, err := o.rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	ctrs, err := o.rt.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: sel})
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

// RuntimePod returns the pod the runtime's objects with uid belong to
// (podworkers.Unstored).
func (o *orphans) RuntimePod(ctx context.Context, uid types.UID) (model.PodRef, bool, error) {
	pods, err := o.runtimePods(ctx, &uid)
	if err != nil {
		return model.PodRef{}, false, err
	}
	ref, ok := pods[uid]
	return ref, ok, nil
}

// collect returns the node's garbage collection, which hands the pods the
// runtime holds but the store does not to workers, which remove them if
// the node deleted them (see sweepUnstored). Run calls it every
// GCPolicy.Period.
func (o *orphans) collect(w *podworkers.Workers) func(ctx context.Context) {
	return func(ctx context.Context) {
		rev := o.store.Revision()
		pods, err := o.runtimePods(ctx, nil)
		if err != nil {
			if ctx.Err() == nil {
				o.log.Warn("garbage collection: list the runtime", zap.Error(err))
			}
			return
		}
		o.sweepUnstored(w, pods, rev)
	}
}
