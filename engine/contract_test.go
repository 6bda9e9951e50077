package engine_test

import (
	"errors"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/errdefs"
)

// TestNodeApplyIfChangesNothingOnAFailedPrecondition: a stale revision
// stores neither the spec nor the request's ConfigMap, runs no pass and
// reports the current revision; the current revision applies.
func TestNodeApplyIfChangesNothingOnAFailedPrecondition(t *testing.T) {
	t.Parallel()
	h := newNodeHarness(t)
	pod := enginetest.Pod()
	h.apply(pod)
	rec, err := h.node.Get(h.ctx, pod.Namespace, pod.Name)
	if err != nil {
		t.Fatal(err)
	}
	stale := rec.ModRevision - 1
	next := pod.DeepCopy()
	next.Labels = map[string]string{"v": "2"}
	cm := &corev1.ConfigMap{}
	cm.Namespace, cm.Name, cm.Data = pod.Namespace, "cfg", map[string]string{"k": "v"}
	writes := h.writes()
	_, err = h.node.ApplyIf(h.ctx, next, []*corev1.ConfigMap{cm}, nil, engine.Precondition{Revision: &stale}, nil)
	var pe *errdefs.PreconditionError
	if !errors.As(err, &pe) || pe.Kind != errdefs.RevisionMismatch || pe.Revision != rec.ModRevision || pe.UID != string(pod.UID) {
		t.Fatalf("ApplyIf at a stale revision: %v, want REVISION_MISMATCH at %d", err, rec.ModRevision)
	}
	if got := h.writes(); got != writes {
		t.Errorf("the refused apply made %d runtime writes", got-writes)
	}
	if _, err := h.node.GetObject(h.ctx, engine.ObjectRef{Kind: engine.KindConfigMap, Namespace: cm.Namespace, Name: cm.Name}); !errors.Is(err, errdefs.ErrObjectNotFound) {
		t.Errorf("the refused apply stored its ConfigMap: %v", err)
	}
	if got, _ := h.node.Get(h.ctx, pod.Namespace, pod.Name); got.Pod.Labels["v"] != "" || got.ModRevision != rec.ModRevision {
		t.Errorf("the refused apply changed the pod: labels %v, revision %d", got.Pod.Labels, got.ModRevision)
	}
	// "Does not exist" refuses a known pod; the current revision applies.
	if _, err := h.node.ApplyIf(h.ctx, next, nil, nil, engine.Precondition{Revision: ptr.To[int64](0)}, nil); !errors.Is(err, errdefs.ErrPreconditionFailed) {
		t.Fatalf("create-only apply of a known pod: %v", err)
	}
	if _, err := h.node.ApplyIf(h.ctx, next, nil, nil, engine.Precondition{Revision: &rec.ModRevision, UID: pod.UID}, nil); err != nil {
		t.Fatalf("ApplyIf at the current revision: %v", err)
	}
}

// TestNodeDeleteIfKeepsANewerIncarnation: a deletion by the old
// incarnation's uid leaves the new one running; by its revision, a stale
// one is refused.
func TestNodeDeleteIfKeepsANewerIncarnation(t *testing.T) {
	t.Parallel()
	h := newNodeHarness(t)
	pod := enginetest.Pod()
	h.apply(pod)
	if res, err := h.node.Delete(h.ctx, pod.Namespace, pod.Name, "", ptr.To[int64](0)); err != nil || !res.Found {
		t.Fatalf("delete: %v, %v", res.Found, err)
	}
	newer := pod.DeepCopy()
	newer.UID = "uid-2"
	h.apply(newer)
	_, err := h.node.DeleteIf(h.ctx, pod.Namespace, pod.Name, engine.Precondition{UID: pod.UID}, ptr.To[int64](0))
	var pe *errdefs.PreconditionError
	if !errors.As(err, &pe) || pe.Kind != errdefs.UIDMismatch || pe.UID != "uid-2" {
		t.Fatalf("delete by the old uid: %v, want UID_MISMATCH naming uid-2", err)
	}
	rec, err := h.node.Get(h.ctx, pod.Namespace, pod.Name)
	if err != nil || rec.Deleting || !running(rec.Pod.Status, "app") {
		t.Fatalf("the new incarnation after a refused delete: %v, deleting %v", err, rec != nil && rec.Deleting)
	}
	stale := rec.ModRevision - 1
	if _, err := h.node.DeleteIf(h.ctx, pod.Namespace, pod.Name, engine.Precondition{Revision: &stale}, nil); !errors.Is(err, errdefs.ErrPreconditionFailed) {
		t.Fatalf("delete at a stale revision: %v", err)
	}
	if res, err := h.node.DeleteIf(h.ctx, pod.Namespace, pod.Name, engine.Precondition{UID: "uid-2", Revision: &rec.ModRevision}, ptr.To[int64](0)); err != nil || !res.Found {
		t.Fatalf("delete at the current uid and revision: %v, %v", res.Found, err)
	}
	if res, err := h.node.DeleteIf(h.ctx, pod.Namespace, pod.Name, engine.Precondition{UID: "uid-2"}, nil); err != nil || res.Found {
		t.Fatalf("a retried delete: %v, %v; want not found", res.Found, err)
	}
}

// TestNodeFencesEveryWrite: writes under a superseded epoch are refused by
// every mutating method, the volumes' included; the node's own writes (no
// fence in the context) are not fenced.
func TestNodeFencesEveryWrite(t *testing.T) {
	t.Parallel()
	h := newNodeHarness(t)
	leases := h.node.Leases()
	old, err := leases.Acquire(h.ctx, "cn:a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leases.Acquire(h.ctx, "cn:a", time.Minute); err != nil { // the standby of a, same identity
		t.Fatal(err)
	}
	stale := engine.WithFence(h.ctx, engine.Fence{Epoch: old.Epoch})
	pod := enginetest.Pod()
	if _, err := h.node.ApplyIf(stale, pod, nil, nil, engine.Precondition{}, nil); !errors.Is(err, errdefs.ErrLeaseSuperseded) {
		t.Errorf("ApplyIf under a stale epoch: %v", err)
	}
	if _, err := h.node.RunPods(stale, engine.RunPodsRequest{Pods: []*corev1.Pod{pod}}, nil); !errors.Is(err, errdefs.ErrLeaseSuperseded) {
		t.Errorf("RunPods under a stale epoch: %v", err)
	}
	cm := &corev1.ConfigMap{}
	cm.Namespace, cm.Name = "default", "cfg"
	if _, err := h.node.ApplyObjects(stale, engine.ObjectPuts([]*corev1.ConfigMap{cm}, nil), ""); !errors.Is(err, errdefs.ErrLeaseSuperseded) {
		t.Errorf("ApplyObjects under a stale epoch: %v", err)
	}
	if _, err := h.node.Volumes().Create(stale, "default", "data", false); !errors.Is(err, errdefs.ErrLeaseSuperseded) {
		t.Errorf("volume create under a stale epoch: %v", err)
	}
	if _, err := os.Stat(criconfig.ClaimVolumeDir("default", "data", h.cfg)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused create made the volume: %v", err)
	}
	// Unfenced, the node's own writes land.
	h.apply(pod)
	if _, err := h.node.ApplyObjects(h.ctx, engine.ObjectPuts([]*corev1.ConfigMap{cm}, nil), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := h.node.Volumes().Create(h.ctx, "default", "data", false); err != nil {
		t.Fatal(err)
	}
	if _, err := h.node.DeleteIf(stale, pod.Namespace, pod.Name, engine.Precondition{}, nil); !errors.Is(err, errdefs.ErrLeaseSuperseded) {
		t.Errorf("DeleteIf under a stale epoch: %v", err)
	}
	if _, _, err := h.node.DeleteObject(stale, engine.ObjectRef{Kind: engine.KindConfigMap, Namespace: "default", Name: "cfg"}, "", ""); !errors.Is(err, errdefs.ErrLeaseSuperseded) {
		t.Errorf("DeleteObject under a stale epoch: %v", err)
	}
	if _, err := h.node.Volumes().Delete(stale, "default", "data"); !errors.Is(err, errdefs.ErrLeaseSuperseded) {
		t.Errorf("volume delete under a stale epoch: %v", err)
	}
	if _, err := h.node.Volumes().Create(h.ctx, "default", "data", true); !errors.Is(err, errdefs.ErrPreconditionFailed) {
		t.Errorf("create-only of an existing volume: %v", err)
	}
}
