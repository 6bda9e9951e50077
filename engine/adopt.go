package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
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

// EventReasonAdopted is the reason of the event recorded for a pod the
// node adopted from the runtime (AdoptRuntime): Normal when the pod was
// rebuilt from its sandbox's record of its spec, Warning, naming what was
// lost, when it was rebuilt in part from its containers.
const EventReasonAdopted = "Adopted"

// lostStore handles a store with no history on a runtime that holds
// podsync's pods (inRuntime, not empty): with AdoptRuntime it stores a
// record for each of them (adoptRuntime), with RemoveOrphans it lets
// recovery remove them, and otherwise it fails with ErrStoreLost and
// touches nothing.
func (o *orphans) lostStore(ctx context.Context, inRuntime map[types.UID]model.PodRef) error {
	switch {
	case o.adoptRuntime:
		return o.adoptRuntimePods(ctx, inRuntime)
	case o.removeOrphans:
		return nil
	}
	return fmt.Errorf("recover: %w: the store at %s is new or empty, but the runtime holds %d of podsync's pods (%s); "+
		"they keep running and nothing was changed: restore the store file, or start with --adopt-runtime to rebuild "+
		"their records from the runtime, or with --remove-orphans to remove them",
		errdefs.ErrStoreLost, o.store.Path(), len(inRuntime), podNames(inRuntime, 5))
}

// adoptRuntimePods stores a record, rebuilt from the runtime's labels and
// annotations (plan.RebuildPod), of each pod of inRuntime, without
// touching the runtime: the workers then find every sandbox and container
// as the pod's and change nothing. Pods are adopted newest sandbox first:
// of two pods with one name (a pod re-created under a new UID), the older
// stays an orphan. The records hold no ConfigMaps or Secrets: a pod that
// needs them runs on, and a start that needs them fails as for a missing
// object until the pod is applied again.
func (o *orphans) adoptRuntimePods(ctx context.Context, inRuntime map[types.UID]model.PodRef) error {
	type candidate struct {
		rp     model.RuntimePod
		newest time.Time
	}
	var cands []candidate
	for uid := range inRuntime {
		rp, err := o.readRuntimePod(ctx, uid)
		if err != nil {
			return fmt.Errorf("adopt the runtime's pods: %w: %w", errdefs.ErrRuntimeUnavailable, err)
		}
		var newest time.Time
		for _, sb := range rp.Sandboxes {
			if sb.CreatedAt.After(newest) {
				newest = sb.CreatedAt
			}
		}
		cands = append(cands, candidate{rp, newest})
	}
	slices.SortFunc(cands, func(a, b candidate) int { return b.newest.Compare(a.newest) })
	adopted := 0
	for _, c := range cands {
		pod, lost, err := model.RebuildPod(c.rp, o.store.NodeKey())
		if err != nil {
			o.log.Warn("pod not adopted: the runtime's labels do not rebuild it; it is kept as an orphan", zap.Error(err))
			continue
		}
		if _, err := o.store.Put(store.PodRecord{Pod: pod}); err != nil {
			if errors.Is(err, errdefs.ErrPodExists) || errors.Is(err, errdefs.ErrInvalidSpec) {
				o.log.Warn("pod not adopted; it is kept as an orphan", append(logx.Pod(pod), zap.Error(err))...)
				continue
			}
			return fmt.Errorf("adopt pod %s: %w", model.PodString(pod), err)
		}
		ev := store.Event{Type: corev1.EventTypeNormal, Reason: EventReasonAdopted,
			Message: "Adopted from the container runtime after the store was lost; the spec is the one the sandbox was created with. " +
				"ConfigMaps and Secrets were not recovered: apply the pod again before anything needs them"}
		log := o.log.Info
		if lost != "" {
			ev.Type = corev1.EventTypeWarning
			ev.Message = "Adopted from the container runtime after the store was lost, rebuilt in part from its containers " +
				"(the sandbox predates podsync's record of the spec); not recovered: " + lost +
				"; nor ConfigMaps and Secrets: apply the pod again to restore its spec"
			log = o.log.Warn
		}
		if _, err := o.store.Append(store.EventChange(store.RefOf(pod), ev)); err != nil {
			return fmt.Errorf("adopt pod %s: %w", model.PodString(pod), err)
		}
		log("pod adopted from the runtime", append(logx.Pod(pod), zap.String(logx.Lost, lost))...)
		adopted++
	}
	o.log.Warn("store rebuilt from the runtime", zap.String(logx.Path, o.store.Path()), zap.Int(logx.Pods, adopted),
		zap.Int("orphans", len(inRuntime)-adopted))
	return nil
}

// readRuntimePod reads what the runtime holds of the pod with uid.
func (o *orphans) readRuntimePod(ctx context.Context, uid types.UID) (model.RuntimePod, error) {
	sel := syncer.PodSelector(uid)
	sbs, err := o.rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel})
	if err != nil {
		return model.RuntimePod{}, fmt.Errorf("list sandboxes of pod uid %s: %w", uid, err)
	}
	ctrs, err := o.rt.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: sel})
	if err != nil {
		return model.RuntimePod{}, fmt.Errorf("list containers of pod uid %s: %w", uid, err)
	}
	var rp model.RuntimePod
	for _, sb := range sbs {
		if !model.IsManaged(sb.GetLabels()) {
			continue
		}
		rs := model.RuntimeSandbox{Labels: sb.GetLabels(), Annotations: sb.GetAnnotations(),
			Attempt: sb.GetMetadata().GetAttempt(), CreatedAt: time.Unix(0, sb.GetCreatedAt())}
		if st, err := o.rt.PodSandboxStatus(ctx, sb.GetId(), false); err == nil {
			rs.Namespaces = st.GetStatus().GetLinux().GetNamespaces().GetOptions()
		}
		rp.Sandboxes = append(rp.Sandboxes, rs)
	}
	for _, c := range ctrs {
		if !model.IsManaged(c.GetLabels()) {
			continue
		}
		rc := model.RuntimeContainer{Labels: c.GetLabels(), Annotations: c.GetAnnotations(), Image: c.GetImage().GetImage(),
			CreatedAt: time.Unix(0, c.GetCreatedAt()), State: model.ContainerStateFromCRI(c.GetState())}
		if rc.State == model.ContainerExited {
			if st, err := o.rt.ContainerStatus(ctx, c.GetId(), false); err == nil {
				rc.ExitCode = st.GetStatus().GetExitCode()
			}
		}
		rp.Containers = append(rp.Containers, rc)
	}
	slices.SortFunc(rp.Containers, func(a, b model.RuntimeContainer) int {
		return cmp.Compare(a.CreatedAt.UnixNano(), b.CreatedAt.UnixNano())
	})
	return rp, nil
}
