package engine

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/validation"
)

// AddEphemeralContainer adds ec (defaulted) to the spec of the stored pod
// namespace/name, as the API server's ephemeralcontainers subresource
// does, stores the pod as a new revision and runs a pass of it, which
// starts the debug container (Apply). It returns ErrNotFound for an
// unknown pod, ErrTerminating for one being deleted, ErrNotRunning for a
// pod whose phase is not Running, and ErrInvalidSpec for a name another
// container of the pod has, an unknown target or a field a debug container
// may not have (validation.ValidatePodSpec with opts). The precondition
// pre and ctx's fence are checked as ApplyIf checks them.
func (n *Node) AddEphemeralContainer(ctx context.Context, namespace, name string, ec corev1.EphemeralContainer, pre Precondition, opts validation.Options) (ApplyResult, error) {
	if err := n.waitReady(ctx); err != nil {
		return ApplyResult{}, err
	}
	// The spec is read, changed and stored under the pod's spec lock,
	// so that a concurrent Apply of the pod keeps the new container.
	unlock := n.specs.lock(namespace, name)
	locked := true
	defer func() {
		if locked {
			unlock()
		}
	}()
	if err := n.store.CheckPod(namespace, name, pre.With(FenceOf(ctx))); err != nil {
		return ApplyResult{}, fmt.Errorf("add ephemeral container to pod %s/%s: %w", namespace, name, err)
	}
	rec, err := n.store.GetByName(namespace, name)
	if err != nil {
		return ApplyResult{}, fmt.Errorf("add ephemeral container to pod %s/%s: %w", namespace, name, err)
	}
	pod := rec.Pod
	switch {
	case rec.Deleting || pod.DeletionTimestamp != nil:
		return ApplyResult{}, fmt.Errorf("add ephemeral container to pod %s: %w", model.PodString(pod), errdefs.ErrTerminating)
	case pod.Status.Phase != corev1.PodRunning:
		return ApplyResult{}, fmt.Errorf("add ephemeral container to pod %s: pod phase is %q: %w", model.PodString(pod), pod.Status.Phase, errdefs.ErrNotRunning)
	}
	next := pod.DeepCopy()
	next.Spec.EphemeralContainers = append(next.Spec.EphemeralContainers, ec)
	var errs []error
	p := field.NewPath("spec", "ephemeralContainers").Index(len(next.Spec.EphemeralContainers) - 1).String()
	for _, fe := range validation.ValidatePodSpec(&next.Spec, &next.ObjectMeta, field.NewPath("spec"), opts) {
		// Only the new container's violations: the stored spec was valid
		// when it was stored, under the options of that time.
		if fe.Field == p || strings.HasPrefix(fe.Field, p+".") || strings.HasPrefix(fe.Field, p+"[") {
			errs = append(errs, fe)
		}
	}
	if err := errdefs.InvalidSpec(errs...); err != nil {
		return ApplyResult{}, fmt.Errorf("add ephemeral container %q to pod %s: %w", ec.Name, model.PodString(pod), err)
	}
	res, err := n.storePodLocked(ctx, next, nil, nil, pre, false)
	unlock()
	locked = false
	if err == nil {
		res, err = n.applyPass(ctx, next, nil, res)
	}
	if err != nil {
		return res, fmt.Errorf("add ephemeral container %q: %w", ec.Name, err)
	}
	return res, nil
}
