package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/keymutex"

	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/failpoint"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/plan"
	"github.com/podsync/podsync/engine/podstatus"
	"github.com/podsync/podsync/engine/podworkers"
	"github.com/podsync/podsync/engine/store"
	"github.com/podsync/podsync/logx"
	"github.com/podsync/podsync/validation"
)

// ApplyResult is what Apply did.
type ApplyResult struct {
	// Created is true when the node did not hold the pod before.
	Created bool
	// Status is the pod's status after the pass.
	Status corev1.PodStatus
	// Steps are the steps of the pass, in the order they finished.
	Steps []StepResult
	// NextSync is when the pod's worker will sync the pod again on its
	// own (a back-off ending, a retry); zero if only a change will.
	NextSync time.Time
}

// Apply stores pod (defaulted, with a UID: convert.Default derives one
// from namespace/name when empty) as the pod's desired state and the
// ConfigMaps and Secrets given with it as stored objects (ApplyObjects,
// on behalf of the pod's SourceAnnotation), then runs one sync pass of it now, in
// the pod's turn: a pass of the pod already running (its worker's, another
// caller's) is waited for while ctx allows. Each step of the pass is
// passed to emit (if not nil) as it finishes. The pod's worker keeps it
// converged afterwards.
//
// A pod the node does not hold yet is first given to NodeOptions.Admit, a
// known one to NodeOptions.Policy. An update keeps the stored pod's
// ephemeral containers (AddEphemeralContainer).
// Apply returns an error wrapping ErrInvalidSpec for a pod without name,
// namespace or UID or with a name that cannot be a path
// (validation.CheckPodPaths), ErrAlreadyExists if namespace/name is held by a pod
// with another UID, ErrOwnedByFile if the stored pod is owned by another
// source (a file of the manifest directory), ErrTerminating if the pod is being deleted, Admit's error,
// the context's error if ctx ends before or during the pass (the worker
// then finishes the work), ErrNotFound if the pod was deleted meanwhile,
// and the runtime's error if the pod's state cannot be read. Failed steps
// are in the result, not the error.
func (n *Node) Apply(ctx context.Context, pod *corev1.Pod, configMaps []*corev1.ConfigMap, secrets []*corev1.Secret, emit func(StepResult)) (ApplyResult, error) {
	return n.apply(ctx, pod, configMaps, secrets, Precondition{}, emit, false)
}

// ApplyIf is Apply under the precondition pre and ctx's fence (WithFence),
// checked in the transaction that stores the pod and the request's
// objects: it returns an error wrapping a *errdefs.PreconditionError or a
// *errdefs.LeaseError, and stores nothing, when they do not hold.
func (n *Node) ApplyIf(ctx context.Context, pod *corev1.Pod, configMaps []*corev1.ConfigMap, secrets []*corev1.Secret, pre Precondition, emit func(StepResult)) (ApplyResult, error) {
	return n.apply(ctx, pod, configMaps, secrets, pre, emit, false)
}

// apply is ApplyIf; admitted says that the node admitted pod already (a pod
// of a RunPods batch, reserved until the batch ends), so that it is not
// admitted a second time.
func (n *Node) apply(ctx context.Context, pod *corev1.Pod, configMaps []*corev1.ConfigMap, secrets []*corev1.Secret, pre Precondition, emit func(StepResult), admitted bool) (ApplyResult, error) {
	if pod == nil || pod.UID == "" || pod.Name == "" || pod.Namespace == "" {
		return ApplyResult{}, fmt.Errorf("apply pod: pod needs a namespace, name and uid: %w", errdefs.ErrInvalidSpec)
	}
	if err := errdefs.InvalidSpec(validation.CheckPodPaths(pod)...); err != nil {
		return ApplyResult{}, fmt.Errorf("apply pod %s: %w", model.PodString(pod), err)
	}
	if err := n.waitReady(ctx); err != nil {
		return ApplyResult{}, err
	}
	unlock := n.specs.lock(pod.Namespace, pod.Name)
	res, err := n.storePodLocked(ctx, pod, configMaps, secrets, pre, admitted)
	unlock()
	if err != nil {
		return res, err
	}
	return n.applyPass(ctx, pod, emit, res)
}

// specLockCount is the number of spec locks pods hash to: pods of
// different names rarely wait for each other (two that share a lock wait
// as all did under one lock).
const specLockCount = 256

// specLocks serialise the read, change and store of a pod's spec by
// namespace/name (see Node.specs).
type specLocks struct{ keys keymutex.KeyMutex }

func newSpecLocks() specLocks { return specLocks{keys: keymutex.NewHashed(specLockCount)} }

// lock takes the spec lock of pod namespace/name and returns its unlock.
func (l specLocks) lock(namespace, name string) (unlock func()) {
	key := namespace + "/" + name
	l.keys.LockKey(key)
	return func() { _ = l.keys.UnlockKey(key) }
}

// storePodLocked admits (unless admitted) and stores pod and the
// request's objects under pre: the first half of Apply, with the pod's
// spec lock held (specLocks).
func (n *Node) storePodLocked(ctx context.Context, pod *corev1.Pod, configMaps []*corev1.ConfigMap, secrets []*corev1.Secret, pre Precondition, admitted bool) (ApplyResult, error) {
	var res ApplyResult
	cond := pre.With(FenceOf(ctx))
	existing, err := n.store.GetByName(pod.Namespace, pod.Name)
	if err := n.store.CheckPod(pod.Namespace, pod.Name, cond); err != nil {
		// Checked before admission and the objects, so that a refused
		// write changes nothing; checked again in the write's transaction.
		return res, fmt.Errorf("apply pod %s: %w", model.PodString(pod), err)
	}
	switch {
	case errors.Is(err, errdefs.ErrPodNotFound):
		res.Created = true
	case err != nil:
		return res, fmt.Errorf("apply pod %s: %w", model.PodString(pod), err)
	case existing.Pod.UID != pod.UID:
		return res, fmt.Errorf("apply pod %s: %s/%s has uid %s: %w", model.PodString(pod), pod.Namespace, pod.Name, existing.Pod.UID, errdefs.ErrAlreadyExists)
	case existing.Deleting:
		return res, fmt.Errorf("apply pod %s: %w", model.PodString(pod), errdefs.ErrTerminating)
	default:
		if err := ownedBy("pod "+model.PodString(pod), existing.Pod.Annotations, SourceOf(pod.Annotations)); err != nil {
			return res, err
		}
		if old := existing.Pod.Spec.EphemeralContainers; len(old) > len(pod.Spec.EphemeralContainers) {
			// A spec update keeps the debug containers
			// AddEphemeralContainer added: a spec may not carry them
			// (the API server's rule), nor remove them.
			pod = pod.DeepCopy()
			pod.Spec.EphemeralContainers = old
		}
	}
	switch {
	case admitted:
	case !res.Created:
		if err := n.admission.check(pod); err != nil {
			return res, fmt.Errorf("apply pod %s: %w", model.PodString(pod), err)
		}
	default:
		release, err := n.admission.newPod(ctx, pod)
		if err != nil {
			return res, fmt.Errorf("admit pod %s: %w", model.PodString(pod), err)
		}
		// Until the pod is stored, its reservation counts it.
		defer release()
	}
	// The request's objects are stored objects of the node, which the
	// pod's passes read (they win for this request: they are stored
	// first, in the pod's transaction); the record holds none.
	failpoint.Inject(failpoint.BeforeStorePut)
	rec, objs, err := n.store.PutWithObjects(store.PodRecord{Pod: pod}, cond, ObjectPuts(configMaps, secrets), ownerCheck(SourceOf(pod.Annotations)))
	if err != nil {
		return res, fmt.Errorf("store pod %s: %w", model.PodString(pod), err)
	}
	n.objectsStored(ctx, objs)
	failpoint.Inject(failpoint.AfterStorePut)
	if res.Created {
		logx.From(ctx, n.cfg.log).Info("pod stored", logx.Pod(pod)...)
	} else if rec.ModRevision != existing.ModRevision {
		logx.From(ctx, n.cfg.log).Info("pod updated", append(logx.Pod(pod), zap.Int64(logx.Generation, rec.Generation))...)
	}
	return res, nil
}

// applyPass runs the pass of a pod Apply stored: the second half of
// Apply, without the spec lock.
func (n *Node) applyPass(ctx context.Context, pod *corev1.Pod, emit func(StepResult), res ApplyResult) (ApplyResult, error) {
	out, err := n.workers.Apply(ctx, pod.UID, emit)
	if errors.Is(err, podworkers.ErrNoTurn) {
		return res, fmt.Errorf("apply pod %s: %w", model.PodString(pod), err)
	}
	res.Status, res.Steps, res.NextSync = out.Status, out.Steps, out.NextSync
	if err == nil && out.Gone {
		err = fmt.Errorf("apply pod %s: pod was deleted: %w", model.PodString(pod), errdefs.ErrNotFound)
	}
	return res, n.runtimeError(err)
}

// Plan returns what a pass of pod would do now and the status the pod has
// now, without side effects: known says whether the node holds the pod
// (then its stored status is the previous status). pod must be defaulted.
// The ConfigMaps and Secrets do not change a plan (a missing one fails a
// start, not the plan); they are accepted so Plan mirrors Apply.
// Plan returns the admission error Apply would return (NodeOptions.Admit
// for a new pod, Policy for a known one), and the runtime's error if the
// pod's state cannot be read.
func (n *Node) Plan(ctx context.Context, pod *corev1.Pod, _ []*corev1.ConfigMap, _ []*corev1.Secret) (plan.PodActions, corev1.PodStatus, bool, error) {
	if pod == nil || pod.UID == "" {
		return plan.PodActions{}, corev1.PodStatus{}, false, fmt.Errorf("plan pod: pod has no uid: %w", errdefs.ErrInvalidSpec)
	}
	pod = pod.DeepCopy()
	known := false
	rec, err := n.store.Get(pod.UID)
	switch {
	case err == nil:
		known = true
		pod.Status = rec.Pod.Status
		if old := rec.Pod.Spec.EphemeralContainers; len(old) > len(pod.Spec.EphemeralContainers) {
			// As Apply: the update keeps the debug containers.
			pod.Spec.EphemeralContainers = old
		}
	case !errors.Is(err, errdefs.ErrPodNotFound):
		return plan.PodActions{}, corev1.PodStatus{}, false, fmt.Errorf("plan pod %s: %w", model.PodString(pod), err)
	default:
		pod.Status = corev1.PodStatus{}
	}
	// A dry run answers as Apply would: a pod the node would refuse is
	// refused here too.
	if err := n.admission.dryRun(pod, known); err != nil {
		return plan.PodActions{}, corev1.PodStatus{}, known, fmt.Errorf("plan pod %s: %w", model.PodString(pod), err)
	}
	view, err := n.syncer.ReadView(ctx, pod.UID)
	if err != nil {
		return plan.PodActions{}, corev1.PodStatus{}, known, fmt.Errorf("plan pod %s: %w", model.PodString(pod), n.runtimeError(err))
	}
	if fs := n.workers.PullFailures(pod.UID); fs != nil {
		view.PullFailures = model.CurrentPullFailures(pod, fs)
	}
	probes := n.workers.ProbeResults(pod.UID)
	now := n.cfg.clock.Now()
	// A resize the node would not admit is planned as a pass plans it:
	// with the allocated pod, pending.
	var pending *plan.ResizePending
	if known && plan.ResizeRequested(pod, &view) {
		if ok, msg := n.admission.AdmitResize(pod); !ok {
			pod = plan.AllocatedPod(pod, &view)
			pending = &plan.ResizePending{Reason: corev1.PodReasonDeferred, Message: msg}
		}
	}
	plan := plan.ComputePodActions(pod, view, probes, now, n.cfg.backoff)
	plan.ResizePending = pending
	var st corev1.PodStatus
	if known {
		st = pod.Status
	} else {
		st = podstatus.ComputePodStatus(pod, view, probes, now, n.workers.StatusOptions())
	}
	return plan, st, known, nil
}

// Get returns the stored pod namespace/name with its current status (in
// Pod.Status) and revision (ModRevision), its secrets redacted, or an
// error wrapping ErrNotFound.
func (n *Node) Get(_ context.Context, namespace, name string) (*store.PodRecord, error) {
	rec, err := n.store.GetByName(namespace, name)
	if err != nil {
		return nil, err // the store's error names the pod
	}
	return rec, nil
}

// GetShared is Get for callers that only read the record (GetPod): it is
// shared with the store's cache and other callers and must not be changed,
// which spares a copy of the pod. While the pod's stored bytes are
// unchanged every call returns the same record; any write (a status, a
// spec, a deletion mark) makes a new one.
func (n *Node) GetShared(_ context.Context, namespace, name string) (*store.PodRecord, error) {
	rec, err := n.store.GetByNameShared(namespace, name)
	if err != nil {
		return nil, err // the store's error names the pod
	}
	return rec, nil
}

// List returns the stored pods f selects, ordered by namespace and name,
// with their current status and their secrets redacted, and the revision
// of the snapshot: Watch from it misses nothing.
func (n *Node) List(_ context.Context, f store.Filter) ([]*store.PodRecord, int64, error) {
	recs, rev, err := n.store.List(f)
	if err != nil {
		return nil, 0, fmt.Errorf("list pods: %w", err)
	}
	return recs, rev, nil
}

// ListShared is List for callers that only read the records (ListPods,
// WatchPods): they are shared with the store's cache and must not be
// changed, which spares a copy of every pod.
func (n *Node) ListShared(_ context.Context, f store.Filter) ([]*store.PodRecord, int64, error) {
	recs, rev, err := n.store.ListShared(f)
	if err != nil {
		return nil, 0, fmt.Errorf("list pods: %w", err)
	}
	return recs, rev, nil
}

// Watch follows the revision log from after revision since: status
// changes, events and deletions, each once and in order. It returns an
// error wrapping errdefs.ErrCompacted (a *errdefs.CompactedError) if since is
// older than the compaction point; see store.Watch.
func (n *Node) Watch(ctx context.Context, since int64) (*store.Watcher, error) {
	return n.store.Watch(ctx, since)
}

// Events returns the pods' events the revision log still holds that f
// selects, the newest occurrence of each series, oldest first, and the
// revision read (store.Events).
func (n *Node) Events(_ context.Context, f EventFilter) ([]Entry, int64, error) {
	return n.store.Events(f)
}

// DeleteResult is what Delete did.
type DeleteResult struct {
	// Found is false when no such pod was stored.
	Found bool
	// Steps are the steps of the deletion's pass, in the order they
	// finished.
	Steps []StepResult
	// Status is the pod's last status, recorded once its containers had
	// stopped, before its record went: how each container ended (exit
	// code, reason, finish time), as the kubelet reports a deleted pod's.
	// Zero when the pass did not get that far.
	Status corev1.PodStatus
}

// Delete deletes the pod namespace/name (and uid, if not empty): it marks
// the pod deleting in the store, kills it (preStop hooks, then stop, within
// grace seconds, or the pod's terminationGracePeriodSeconds when nil),
// removes its containers, sandboxes, pod directory and log directory, and
// removes it from the store, which records the deletion in the revision
// log. A sync pass of the pod that is running is cancelled (an Apply
// waiting for it fails with ErrConflict). The result's Found is false,
// with no error, if no such pod is stored. If ctx
// ends first, Delete returns the context's error and the pod's worker
// finishes the deletion; a deleted pod stays deleted.
func (n *Node) Delete(ctx context.Context, namespace, name, uid string, grace *int64) (DeleteResult, error) {
	return n.DeleteAs(ctx, "", namespace, name, uid, grace)
}

// DeleteIf is Delete under the precondition pre and ctx's fence, checked
// in the transaction that marks the pod deleting: it returns an error
// wrapping a *errdefs.PreconditionError or a *errdefs.LeaseError, and
// deletes nothing, when they do not hold. A pod that does not exist is
// found = false whatever pre says.
func (n *Node) DeleteIf(ctx context.Context, namespace, name string, pre Precondition, grace *int64) (DeleteResult, error) {
	return n.deleteAs(ctx, "", namespace, name, pre, grace)
}

// DeleteAs is Delete on behalf of source ("" for the API, "file:NAME"
// for the manifest directory): it returns an error wrapping
// ErrOwnedByFile, and deletes nothing, when the pod is owned by another
// source.
func (n *Node) DeleteAs(ctx context.Context, source, namespace, name, uid string, grace *int64) (DeleteResult, error) {
	rec, err := n.store.GetByName(namespace, name)
	if err == nil && uid != "" && string(rec.Pod.UID) != uid {
		return DeleteResult{}, nil // the file's pod is gone: not another's
	}
	return n.deleteAs(ctx, source, namespace, name, Precondition{UID: types.UID(uid)}, grace)
}

func (n *Node) deleteAs(ctx context.Context, source, namespace, name string, pre Precondition, grace *int64) (DeleteResult, error) {
	if err := n.waitReady(ctx); err != nil {
		return DeleteResult{}, err
	}
	rec, err := n.store.GetByName(namespace, name)
	if errors.Is(err, errdefs.ErrPodNotFound) {
		return DeleteResult{}, nil
	}
	cond := pre.With(FenceOf(ctx))
	if err == nil {
		if err := n.store.CheckPod(namespace, name, cond); err != nil {
			return DeleteResult{}, fmt.Errorf("delete pod %s/%s: %w", namespace, name, err)
		}
	}
	if err != nil {
		return DeleteResult{}, fmt.Errorf("delete pod %s/%s: %w", namespace, name, err)
	}
	if have := SourceOf(rec.Pod.Annotations); have != source {
		if err := ownedBy("pod "+model.PodString(rec.Pod), rec.Pod.Annotations, source); err != nil {
			return DeleteResult{}, err
		}
	}
	pod := rec.Pod
	var markErr error
	mark := func() error {
		_, markErr = n.store.MarkDeletingIf(pod.UID, grace, cond)
		return markErr
	}
	out, err := n.workers.Terminate(ctx, pod, mark, fmt.Errorf("pod %s: %w", model.PodString(pod), errdefs.ErrTerminating))
	res := DeleteResult{Found: true, Steps: out.Steps, Status: out.Status}
	switch {
	case markErr != nil && errors.Is(markErr, errdefs.ErrPodNotFound):
		return DeleteResult{}, nil
	case markErr != nil:
		return DeleteResult{}, fmt.Errorf("delete pod %s: %w", model.PodString(pod), markErr)
	case err != nil:
		return res, fmt.Errorf("delete pod %s: %w", model.PodString(pod), n.runtimeError(err))
	}
	return res, nil
}
