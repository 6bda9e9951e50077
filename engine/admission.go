package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsync/podsync/engine/admit"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/podworkers"
	"github.com/podsync/podsync/engine/store"
	"github.com/podsync/podsync/logx"
)

// AdmitFunc decides whether a pod the node does not hold yet may run
// beside others, the pods it holds that are neither terminal nor being
// deleted. It returns an error wrapping ErrAdmission to refuse the pod.
// The others are shared with the node's store: an AdmitFunc must not
// change them.
type AdmitFunc func(pod *corev1.Pod, others []*corev1.Pod) error

// PolicyFunc checks a new spec of a pod the node holds (an update, or a
// stored pod when the node starts) beside the others, as AdmitFunc checks
// a new pod; an error refuses the apply.
type PolicyFunc func(pod *corev1.Pod, others []*corev1.Pod) error

// AdmissionConfig is what the node admits pods against (NodeOptions.Admission).
type AdmissionConfig struct {
	// Node is what admission knows of the node: its allocatable
	// resources, labels, taints and the runtime's features.
	Node admit.Node
	// Policy is the operator's policy: the Pod Security level and its
	// exemptions, host paths and ports, sysctls, priority classes.
	Policy admit.Policy
}

// AdmissionError is a pod the node refuses to run. It matches ErrAdmission
// with errors.Is, and Reason is the kubelet's admission reason (OutOfcpu,
// OutOfmemory, OutOfpods, NodePorts, SysctlForbidden) or a policy reason
// (PodSecurity, PolicyHostPath), which the API reports as its ErrorInfo
// reason.
type AdmissionError struct {
	Result admit.Result
	// Victims are the pods to preempt so that a critical pod refused for
	// resources fits (admit.Preemption); the node preempts them and
	// admits the pod again.
	Victims []*corev1.Pod
}

func (e *AdmissionError) Error() string { return e.Result.Reason + ": " + e.Result.Message }

// Unwrap makes errors.Is(err, ErrAdmission) hold.
func (e *AdmissionError) Unwrap() error { return errdefs.ErrAdmission }

// Reason is the admission reason.
func (e *AdmissionError) Reason() string { return e.Result.Reason }

// Admission returns the NodeOptions hooks for a node with the given
// allocatable resources and policy: Admit admits pods the node does not
// hold yet (policy, runtime features, pod count, resources, host ports —
// the kubelet's order), Policy makes the same checks of every apply of a
// known pod but the fit of CPU and memory, a resize's (admit.AdmitKnown).
//
// Both first set the pod's spec.priority from its priorityClassName
// (admit.ResolvePriority), as the API server does before a pod reaches a
// kubelet: the stored pod carries it, and eviction and preemption rank by
// it. A critical pod refused for resources only is refused with the
// victims whose preemption would admit it (AdmissionError.Victims).
func Admission(node admit.Node, policy admit.Policy) (AdmitFunc, PolicyFunc) {
	admitFn := func(pod *corev1.Pod, others []*corev1.Pod) error {
		if r := admit.ResolvePriority(pod, policy.PriorityClasses); !r.Admit {
			return &AdmissionError{Result: r}
		}
		if victims, r := admit.Preemption(pod, others, node, policy); !r.Admit {
			return &AdmissionError{Result: r, Victims: victims}
		}
		return nil
	}
	policyFn := func(pod *corev1.Pod, others []*corev1.Pod) error {
		if r := admit.ResolvePriority(pod, policy.PriorityClasses); !r.Admit {
			return &AdmissionError{Result: r}
		}
		if r := admit.AdmitKnown(pod, others, node, policy); !r.Admit {
			return &AdmissionError{Result: r}
		}
		return nil
	}
	return admitFn, policyFn
}

// admission is the node's admission gate: it admits new pods one at a
// time (the kubelet's), a RunPods batch at once, known pods against the
// policy, and resizes, against the active stored pods and the pods
// admitted but not stored yet; it preempts for critical pods. It is the
// one place that calls the node's AdmitFunc and PolicyFunc.
type admission struct {
	admit  AdmitFunc
	policy PolicyFunc
	store  *store.Store
	log    *zap.Logger
	// failer and evictor fail the victims of a preemption (failWith).
	failer  *podworkers.Workers
	evictor evictor

	// mu serialises the admission of new pods; admitting holds the pods
	// admitted and not stored yet.
	mu        sync.Mutex
	admitting map[types.UID]*reservation
}

func newAdmission(st *store.Store, admitFn AdmitFunc, policyFn PolicyFunc, log *zap.Logger) *admission {
	return &admission{admit: admitFn, policy: policyFn, store: st, log: log, admitting: map[types.UID]*reservation{}}
}

// failWith sets what fails the victims of a preemption: the pod workers,
// in the pod's turn, recording on a full disk through the eviction
// manager.
func (a *admission) failWith(w *podworkers.Workers, e evictor) {
	a.failer, a.evictor = w, e
}

// check checks a new spec of a known pod (Apply's update, a stored pod
// at start) beside the others a new pod would be admitted beside.
func (a *admission) check(pod *corev1.Pod) error {
	if a.policy == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	others, err := a.othersLocked(pod)
	if err != nil {
		return err
	}
	return a.policy(pod, others)
}

// newPod admits a pod the node does not hold yet, one pod at a time as
// the kubelet does: against the active stored pods and the pods admitted
// but not stored yet, so concurrent applies cannot together overrun the
// node's pods, resources or host ports. The pod is reserved until release,
// which the caller calls once it is stored (or refused by the store); the
// store writes of admitted pods still run in parallel.
//
// A critical pod refused for resources preempts the victims admission
// names (the kubelet's CriticalPodAdmissionHandler): each fails with
// reason Preempting, and the pod is admitted again once (another apply may
// have taken the room meanwhile: it is then refused).
func (a *admission) newPod(ctx context.Context, pod *corev1.Pod) (release func(), err error) {
	if a.admit == nil {
		return func() {}, nil
	}
	release, err = a.once(pod)
	var ae *AdmissionError
	if !errors.As(err, &ae) || len(ae.Victims) == 0 {
		return release, err
	}
	for _, v := range ae.Victims {
		a.preempt(ctx, v, pod)
	}
	return a.once(pod)
}

// once admits pod against the others, once; the caller retries after a
// preemption.
func (a *admission) once(pod *corev1.Pod) (release func(), err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	others, err := a.othersLocked(pod)
	if err != nil {
		return nil, err
	}
	if err := a.admit(pod, others); err != nil {
		return nil, err
	}
	return a.reserveLocked(pod), nil
}

// othersLocked are the pods pod is admitted beside: the active stored
// pods and those admitted and not stored yet, pod itself not among them
// (two applies of one new pod, a retried SyncPod, are one pod). a.mu is
// held.
func (a *admission) othersLocked(pod *corev1.Pod) ([]*corev1.Pod, error) {
	active, err := a.ActivePods()
	if err != nil {
		return nil, err
	}
	others := slices.DeleteFunc(active, func(o *corev1.Pod) bool { return o.UID == pod.UID })
	for uid, r := range a.admitting {
		if uid != pod.UID && !slices.ContainsFunc(others, func(o *corev1.Pod) bool { return o.UID == uid }) {
			others = append(others, r.pod)
		}
	}
	return others, nil
}

// reserveLocked reserves pod until the returned release: it counts among
// the others of every admission until then. a.mu is held.
func (a *admission) reserveLocked(pod *corev1.Pod) (release func()) {
	r := a.admitting[pod.UID]
	if r == nil {
		r = &reservation{}
		a.admitting[pod.UID] = r
	}
	r.pod = pod
	r.holders++
	return func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		if r.holders--; r.holders == 0 {
			delete(a.admitting, pod.UID)
		}
	}
}

// batch admits the pods of a RunPods batch, in order, each beside the
// others and the pods of the batch admitted before it, as a new pod is
// admitted (a pod the node holds already too: the batch runs it again);
// with allOrNothing, one refusal refuses them all
// (admit.ReasonNotRunAllOrNothing). Each admitted pod is reserved until
// its release, which the caller calls once the pod is stored: Apply then
// admits it no more. A batch does not preempt: a critical pod refused for
// resources is refused. An error is the store's.
func (a *admission) batch(pods []*corev1.Pod, allOrNothing bool) (results []admit.Result, releases []func(), err error) {
	releases = make([]func(), len(pods))
	a.mu.Lock()
	results = admit.Sequence(pods, allOrNothing, func(i int, pod *corev1.Pod) admit.Result {
		if err != nil {
			return admit.Result{}
		}
		var others []*corev1.Pod
		if others, err = a.othersLocked(pod); err != nil {
			return admit.Result{}
		}
		if a.admit != nil {
			var ae *AdmissionError
			switch aerr := a.admit(pod, others); {
			case errors.As(aerr, &ae):
				return ae.Result
			case aerr != nil:
				err = aerr
				return admit.Result{}
			}
		}
		releases[i] = a.reserveLocked(pod)
		return admit.Result{Admit: true}
	})
	a.mu.Unlock()
	// A pod refused in the end (all or nothing, or an error) holds no
	// reservation.
	for i, r := range results {
		if (err != nil || !r.Admit) && releases[i] != nil {
			releases[i]()
			releases[i] = nil
		}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("admit pods: %w", err)
	}
	return results, releases, nil
}

// dryRun is Apply's admission without its effects: the policy for a
// known pod, full admission for a new one (reserved only for the call).
func (a *admission) dryRun(pod *corev1.Pod, known bool) error {
	if known {
		return a.check(pod)
	}
	if a.admit == nil {
		return nil
	}
	release, err := a.once(pod)
	var ae *AdmissionError
	if errors.As(err, &ae) && len(ae.Victims) > 0 {
		// Apply would preempt the victims and admit the pod.
		return nil
	}
	if err != nil {
		return err
	}
	release()
	return nil
}

// reservation is a pod admitted and not stored yet, and how many applies
// of it hold it.
type reservation struct {
	pod     *corev1.Pod
	holders int
}

// ActivePods returns the stored pods that are neither terminal nor being
// deleted, for admission and eviction.
func (a *admission) ActivePods() ([]*corev1.Pod, error) {
	// Admission only reads the pods: shared records spare a copy of
	// every stored pod per admitted pod.
	recs, _, err := a.store.ListShared(store.Filter{})
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	var out []*corev1.Pod
	for _, r := range recs {
		if r.Deleting || model.IsTerminal(r.Pod.Status.Phase) {
			continue
		}
		out = append(out, r.Pod)
	}
	return out, nil
}

// AdmitResize is the node's admission of a known pod's resize, the
// kubelet's allocation manager's canAdmitPod for a resize: the pod with
// its new requests against the other active pods, as a new pod is
// admitted. It returns false with the kubelet's message when the pod does
// not fit ("Node didn't have enough resource: memory, requested: …").
//
// NOTE(podsync): the other pods count with their stored specs; the
// kubelet counts what it allocated, which differs only for another pod
// whose own resize waits.
func (a *admission) AdmitResize(pod *corev1.Pod) (bool, string) {
	if a.admit == nil {
		return true, ""
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	others, err := a.othersLocked(pod)
	if err != nil {
		return false, err.Error()
	}
	if err := a.admit(pod, others); err != nil {
		var ae *AdmissionError
		if errors.As(err, &ae) {
			return false, ae.Result.Message
		}
		return false, err.Error()
	}
	return true, ""
}

// preempt fails victim as the kubelet's CriticalPodAdmissionHandler does
// to admit a critical pod: phase Failed, reason Preempting, its message,
// and a DisruptionTarget condition (TerminationByKubelet); its worker
// then kills its containers.
func (a *admission) preempt(ctx context.Context, victim, critical *corev1.Pod) {
	cond := &corev1.PodCondition{
		Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason:  corev1.PodReasonTerminationByKubelet,
		Message: "Pod was preempted by Kubelet to accommodate a critical pod.",
	}
	f := podworkers.Failure{Reason: admit.ReasonPreempting, Message: admit.MessagePreempted, Condition: cond,
		Wait: a.evictor.Period(), Record: a.evictor.Append}
	if a.failer.FailPod(ctx, victim, f) {
		a.log.Info("pod preempted", append(logx.Pod(victim), zap.String("preemptor", critical.Namespace+"/"+critical.Name))...)
	}
}
