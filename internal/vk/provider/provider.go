package provider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"go.uber.org/zap"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/client"
	"github.com/podsync/podsync/convert"
	"github.com/podsync/podsync/validation"
	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node"
)

// OwnerLabel is the label every podsync pod podsync-vk creates carries;
// its value is the Kubernetes node's name.
const OwnerLabel = "vk.podsync.io/node"

// Podsync is what the provider calls on a podsyncd; *client.Client
// satisfies it.
type Podsync interface {
	SyncPod(ctx context.Context, req *podsyncv1.SyncPodRequest, onStep func(*podsyncv1.SyncStep)) (*podsyncv1.SyncPodResult, error)
	DeletePod(ctx context.Context, req *podsyncv1.DeletePodRequest) (*podsyncv1.DeletePodResponse, error)
	ListPods(ctx context.Context, req *podsyncv1.ListPodsRequest) (*podsyncv1.ListPodsResponse, error)
	Watch(ctx context.Context, req *podsyncv1.WatchPodsRequest, fn func(*podsyncv1.WatchPodsResponse) error) error
	Logs(ctx context.Context, req *podsyncv1.GetContainerLogsRequest, fn func(*podsyncv1.LogLine) error) error
	GetNode(ctx context.Context) (*podsyncv1.Node, error)
	Health(ctx context.Context) (healthpb.HealthCheckResponse_ServingStatus, error)
	ApplyObjects(ctx context.Context, req *podsyncv1.ApplyObjectsRequest) (*podsyncv1.ApplyObjectsResponse, error)
	DeleteObject(ctx context.Context, req *podsyncv1.DeleteObjectRequest) (*podsyncv1.DeleteObjectResponse, error)
	GetPod(ctx context.Context, namespace, name string) (*podsyncv1.GetPodResponse, error)
	AddEphemeralContainer(ctx context.Context, req *podsyncv1.AddEphemeralContainerRequest) (*podsyncv1.AddEphemeralContainerResponse, error)
	// The kubelet API's sessions and stats.
	Exec(ctx context.Context, o client.ExecOptions) (int, error)
	Attach(ctx context.Context, o client.AttachOptions) (int, error)
	PortForward(ctx context.Context, namespace, name string, port uint32, conn io.ReadWriter) error
	StatsSummary(ctx context.Context, namespace string) (*podsyncv1.ListPodStatsResponse, error)
}

var _ Podsync = (*client.Client)(nil)

var (
	_ node.PodLifecycleHandler = (*Provider)(nil)
	_ node.PodNotifier         = (*Provider)(nil)
)

// Provider serves the pods of one Kubernetes node on one podsyncd.
type Provider struct {
	node string
	ps   Podsync
	log  *zap.Logger
	// objects, if set, are where the ConfigMaps and Secrets a pod uses
	// are read (UseObjects).
	objects Objects
	// services, if set, are the Services the service environment
	// variables of the pods' containers name (UseServices).
	services Services
	// runtimeClasses, if set, resolve runtimeClassName to its handler
	// (UseRuntimeClasses).
	runtimeClasses RuntimeClasses

	mu sync.Mutex
	// pods are the Kubernetes pods given to CreatePod/UpdatePod, by
	// namespace/name, with the status last reported.
	pods map[string]*corev1.Pod
	// statuses are the last statuses WatchPods sent, by namespace/name,
	// also for pods Kubernetes has not given this process yet (after a
	// restart of podsync-vk).
	statuses map[string]*corev1.PodStatus
	// uids are the podsync uids of statuses: a status of an earlier
	// incarnation of a name is not reported for the new one.
	uids map[string]string
	// rejected are the statuses of pods not applied on podsyncd: Failed
	// for those it refused, Pending for those waiting for their
	// RuntimeClass (waitingClass: the name of the RuntimeClass).
	rejected     map[string]*corev1.PodStatus
	waitingClass map[string]string
	// applied are the metadata.generation of the pods as podsyncd last
	// took them (applied or refused): their statuses' observedGeneration.
	applied map[string]int64
	// notified are the pods' last notifications (notify.go).
	notified map[string]notice
	notify   func(*corev1.Pod)
	notifyCh chan struct{} // closed once notify is set
	// notifying serialises the notifications of a pod (notify.go).
	notifying keyLocks
	// nsLevel, if set, is the Pod Security level of a namespace
	// (UseNamespaceLevels); levels are the levels the pods were first
	// applied with, by UID.
	nsLevel func(namespace string) string
	levels  map[types.UID]string
	// deletions are the DeletePod calls in flight, by namespace/name
	// (deletions.go).
	deletions map[string]*deletion
	// tokens, if set, serve the pods' service-account tokens (UseTokens).
	tokens *tokens
	// kube, if set, finishes deleted pods on the API server (UseKube).
	kube Kube
	// events, if set, receives podsyncd's events about the pods
	// (UseEvents).
	events EventRecorder
	// kubeConditions, if set, reads a pod's conditions as the API server
	// holds them (UseKubeConditions).
	kubeConditions func(namespace, name string) []corev1.PodCondition
	// debug are the ephemeral containers podsyncd has not taken
	// (ephemeral.go).
	debug *ephemeral
}

// UseKubeConditions gives the provider the conditions of the pods as the
// API server holds them (an informer's), for their readiness gates; call
// it before the first pod. GateChanged reports a change of them.
func (p *Provider) UseKubeConditions(fn func(namespace, name string) []corev1.PodCondition) {
	p.kubeConditions = fn
}

// GateChanged reports that the conditions of pod's readiness gates may
// have changed on the API server: its status is reported again.
func (p *Provider) GateChanged(namespace, name string) { p.changed(key(namespace, name)) }

// EventRecorder records Kubernetes events (client-go's
// record.EventRecorder, with the kubelet's source).
type EventRecorder interface {
	Event(object runtime.Object, eventtype, reason, message string)
}

// UseEvents makes the provider record podsyncd's events about its pods
// (Pulling, Pulled, Created, Started, Killing, BackOff, Unhealthy,
// FailedMount, …) as Kubernetes events on the pods, through rec; call it
// before Run. podsync-vk gives it a recorder whose source is the
// kubelet's (component "kubelet", host the node), so that kubectl
// describe and the tools that select events by source show them as a
// kubelet's.
func (p *Provider) UseEvents(rec EventRecorder) { p.events = rec }

// Kube is what the provider does on the API server itself, beyond the
// node library: the kubelet's status manager's last word on a deleted
// pod.
type Kube interface {
	// FinishDeleted reports pod's last status (its containers
	// terminated) and deletes its object at once (grace period 0, with
	// pod's UID as precondition), as the kubelet does once a deleted pod's
	// containers have stopped; a pod already gone is not an error.
	FinishDeleted(ctx context.Context, pod *corev1.Pod, status *corev1.PodStatus) error
}

// UseKube makes the provider finish deleted pods on the API server as soon
// as podsyncd has stopped them, rather than leave the node library to
// remove the object at the end of the grace period; call it before the
// first pod.
func (p *Provider) UseKube(k Kube) { p.kube = k }

// New returns a provider for Kubernetes node nodeName on ps.
func New(nodeName string, ps Podsync, log *zap.Logger) *Provider {
	return &Provider{
		node: nodeName, ps: ps, log: log,
		pods:         map[string]*corev1.Pod{},
		statuses:     map[string]*corev1.PodStatus{},
		uids:         map[string]string{},
		rejected:     map[string]*corev1.PodStatus{},
		waitingClass: map[string]string{},
		applied:      map[string]int64{},
		notified:     map[string]notice{},
		levels:       map[types.UID]string{},
		deletions:    map[string]*deletion{},
		notifyCh:     make(chan struct{}),
		debug:        newEphemeral(),
	}
}

func key(namespace, name string) string { return namespace + "/" + name }

// selector selects the podsync pods of this node.
func (p *Provider) selector() string { return OwnerLabel + "=" + p.node }

// podsyncPod is the pod as podsync-vk applies it: the owner label added,
// what belongs to the API server and its controllers left out — a
// kubelet never acts on it either: the generated name's prefix, the
// finalizers (the Job controller's tracking finalizer), the readiness
// gates (reportStatus applies them to the Ready condition, as the kubelet
// does), and the ephemeral containers, which podsyncd adds one by one
// (AddEphemeralContainer), as the ephemeralcontainers subresource does —
// service-account token volumes rewritten to the Secrets podsync-vk
// pushes (tokens.go), and each container's service environment variables
// added (serviceEnv). Env is otherwise the pod's own, as the API server
// stores it: references to ConfigMaps, Secrets and the downward API stay
// references, which podsyncd resolves from the objects pushed to it and
// from the pod it runs, so that no Secret value is in the spec it stores.
// runtimeClassName becomes its RuntimeClass's handler (runtimeHandler).
func (p *Provider) podsyncPod(pod *corev1.Pod) (*corev1.Pod, error) {
	handler, err := p.runtimeHandler(pod)
	if err != nil {
		return nil, err
	}
	out := pod.DeepCopy()
	out.Spec.RuntimeClassName = handler
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	out.Labels[OwnerLabel] = p.node
	// The API server has generated the name already: the pod is applied
	// by it, and podsyncd's own generator is for RunPods only.
	out.GenerateName = ""
	out.Finalizers = nil
	out.Spec.ReadinessGates = nil
	out.Spec.EphemeralContainers = nil
	out.Status = corev1.PodStatus{}
	if p.tokens != nil {
		rewriteTokens(out)
	}
	if err := p.addServiceEnv(out); err != nil {
		return nil, err
	}
	return out, nil
}

// CreatePod applies the pod on podsyncd.
func (p *Provider) CreatePod(ctx context.Context, pod *corev1.Pod) error {
	return p.apply(ctx, pod)
}

// UpdatePod applies the changed pod on podsyncd, which changes a running
// pod as the kubelet does.
func (p *Provider) UpdatePod(ctx context.Context, pod *corev1.Pod) error {
	return p.apply(ctx, pod)
}

func (p *Provider) apply(ctx context.Context, pod *corev1.Pod) (err error) {
	k := key(pod.Namespace, pod.Name)
	p.mu.Lock()
	prev, had := p.pods[k]
	p.pods[k] = pod.DeepCopy()
	if !had {
		// A pod new to this process: what podsyncd reports of it from
		// here on is of this generation, as the kubelet reports the
		// generation of the pod it syncs. Its first status is then
		// notified once, whether the watch or this apply sees it first.
		p.applied[k] = pod.Generation
	}
	p.mu.Unlock()
	defer func() {
		if err != nil {
			p.forgetFailedApply(k, pod, prev, had)
		}
	}()
	// The objects and tokens go with the pod: the pod's pass then finds
	// them stored.
	objs, err := p.referencedObjects(pod)
	if err != nil {
		return err
	}
	tokens, err := p.tokenSecrets(ctx, pod)
	if err != nil {
		return err
	}
	objs.Secrets = append(objs.Secrets, tokens...)
	level, err := p.podLevel(ctx, pod)
	if err != nil {
		return err
	}
	pp, err := p.podsyncPod(pod)
	if missing := (*missingRuntimeClass)(nil); errors.As(err, &missing) {
		p.waitForRuntimeClass(k, pod, missing)
		return nil
	}
	if err != nil {
		return fmt.Errorf("apply pod %s on podsync: %w", k, err)
	}
	if level != "" {
		if pp.Annotations == nil {
			pp.Annotations = map[string]string{}
		}
		pp.Annotations[validation.AnnotationPodSecurity] = level
	}
	req, err := client.SyncPodRequestFromPod(pp, nil, nil)
	if err == nil {
		err = p.syncPod(ctx, req, objs)
	}
	if refused := (*objectsError)(nil); errors.As(err, &refused) {
		return err
	}
	if reason, message, ok := refusal(err); ok {
		p.log.Info("podsyncd refused the pod", zap.String("pod", k), zap.String("reason", reason), zap.String("message", message))
		st := &corev1.PodStatus{Phase: corev1.PodFailed, Reason: reason, Message: message}
		p.mu.Lock()
		p.rejected[k] = st
		delete(p.waitingClass, k)
		p.applied[k] = pod.Generation
		p.mu.Unlock()
		p.changed(k)
		return nil
	}
	if err != nil {
		return fmt.Errorf("apply pod %s on podsync: %w", k, err)
	}
	p.mu.Lock()
	delete(p.rejected, k)
	delete(p.waitingClass, k)
	p.applied[k] = pod.Generation
	p.mu.Unlock()
	p.addEphemeral(ctx, pod)
	p.changed(k)
	return nil
}

// syncPod sends the pod of req to podsyncd with its objects (objs): in one
// SyncPod, one call and one store transaction, so that a Deployment's
// pods landing together stay within podsyncd's rate limit. A request
// podsyncd refuses as invalid or whose objects another source owns is
// sent again as two calls, ApplyObjects then SyncPod without objects: a
// pod is then judged without its objects, as a kubelet judges it (a
// ConfigMap key the pod names but the ConfigMap lacks fails its mount or
// its container, not the pod), and objects podsyncd refuses are an
// *objectsError, to retry, not a verdict on the pod.
func (p *Provider) syncPod(ctx context.Context, req *podsyncv1.SyncPodRequest, objs *podsyncv1.ApplyObjectsRequest) error {
	if len(objs.GetConfigMaps())+len(objs.GetSecrets()) > 0 {
		req.ConfigMaps, req.Secrets = objs.GetConfigMaps(), objs.GetSecrets()
		_, err := p.ps.SyncPod(ctx, req, nil)
		if !errors.Is(err, client.ErrInvalidArgument) && !errors.Is(err, client.ErrOwnedByFile) {
			return err
		}
		req.ConfigMaps, req.Secrets = nil, nil
		if _, err := p.ps.ApplyObjects(ctx, objs); err != nil {
			m := req.GetPod().GetMetadata()
			return &objectsError{fmt.Errorf("apply the objects of pod %s on podsync: %w", key(m.GetNamespace(), m.GetName()), err)}
		}
	}
	_, err := p.ps.SyncPod(ctx, req, nil)
	return err
}

// objectsError is podsyncd refusing a pod's ConfigMaps or Secrets on
// their own.
type objectsError struct{ err error }

func (e *objectsError) Error() string { return e.err.Error() }
func (e *objectsError) Unwrap() error { return e.err }

// forgetFailedApply puts back what GetPod answered for k before an apply
// of pod that failed (podsyncd unavailable, rate-limited, a deadline): the
// node library retries a create or an update only when GetPod shows a pod
// other than the one it asks for, so a pod kept as if applied would never
// be retried. A newer apply of the same key is left alone.
func (p *Provider) forgetFailedApply(k string, pod, prev *corev1.Pod, had bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cur := p.pods[k]
	if cur == nil || cur.UID != pod.UID || cur.ResourceVersion != pod.ResourceVersion {
		return
	}
	if had {
		p.pods[k] = prev
	} else {
		delete(p.pods, k)
	}
}

// refusal says whether err is podsyncd refusing the pod for good, with
// the reason and message the pod's status shows: admission (capacity,
// node ports, policy such as PodSecurity), or a spec podsync cannot run.
// A conversion error (a field podsync does not support, found before
// anything is sent) counts as a refusal too.
func refusal(err error) (reason, message string, ok bool) {
	if err == nil {
		return "", "", false
	}
	var e *client.Error
	if errors.As(err, &e) {
		switch {
		case errors.Is(err, client.ErrRejected):
			return e.Reason, e.Message, true
		case errors.Is(err, client.ErrInvalidArgument):
			reason := e.Reason
			if reason == "" {
				reason = "InvalidSpec"
			}
			return reason, e.Message, true
		}
		return "", "", false
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return "", "", false
	}
	// SyncPodRequestFromPod's own checks.
	return "InvalidSpec", err.Error(), true
}

// DeletePod stops and removes the pod on podsyncd with the pod's grace
// period, then reports it terminated. With UseKube, its object goes once
// podsyncd has killed it (deletions.go).
func (p *Provider) DeletePod(ctx context.Context, pod *corev1.Pod) error {
	k := key(pod.Namespace, pod.Name)
	req := &podsyncv1.DeletePodRequest{Namespace: pod.Namespace, Name: pod.Name, Uid: string(pod.UID)}
	switch {
	case pod.DeletionGracePeriodSeconds != nil:
		req.GracePeriodSeconds = pod.DeletionGracePeriodSeconds
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		req.GracePeriodSeconds = pod.Spec.TerminationGracePeriodSeconds
	}
	p.mu.Lock()
	_, refused := p.rejected[k]
	p.mu.Unlock()
	var final *corev1.PodStatus
	var finished bool
	if !refused {
		resp, early, err := p.deleteOnPodsync(ctx, pod, req)
		if err != nil && !errors.Is(err, client.ErrUIDMismatch) {
			return fmt.Errorf("delete pod %s on podsync: %w", k, err)
		}
		finished = early
		if resp.GetStatus() != nil {
			final = convert.PodStatusFromProto(resp.GetStatus())
		}
	}
	p.releaseObjects(k)
	p.mu.Lock()
	st := final
	if st == nil {
		st = p.statusLocked(k)
	}
	notify := p.notify
	p.mu.Unlock()
	last := p.lastPod(pod, st)
	p.mu.Lock()
	delete(p.pods, k)
	delete(p.statuses, k)
	delete(p.uids, k)
	delete(p.applied, k)
	delete(p.notified, k)
	delete(p.rejected, k)
	delete(p.waitingClass, k)
	p.mu.Unlock()
	p.dropTokens(ctx, pod.Namespace, pod.UID)
	p.mu.Lock()
	delete(p.levels, pod.UID)
	p.mu.Unlock()
	p.debug.forget(k, pod.UID)
	if !finished {
		p.finishDeleted(ctx, last)
	}
	if notify != nil {
		unlock := p.notifying.lock(k)
		notify(last)
		unlock()
	}
	return nil
}

// GetPod returns the pod as given, with its last status; NotFound for a
// pod this process has not been given (so the node library creates it,
// which on a pod podsyncd already runs changes nothing).
func (p *Provider) GetPod(_ context.Context, namespace, name string) (*corev1.Pod, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := key(namespace, name)
	pod, ok := p.pods[k]
	if !ok {
		return nil, errdefs.NotFoundf("pod %s is not on podsync node %s", k, p.node)
	}
	out := pod.DeepCopy()
	if st := p.statusLocked(k); st != nil {
		out.Status = *st
	}
	return out, nil
}

// GetPodStatus returns the pod's last status.
func (p *Provider) GetPodStatus(ctx context.Context, namespace, name string) (*corev1.PodStatus, error) {
	pod, err := p.GetPod(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	return &pod.Status, nil
}

// GetPods lists the podsync pods of this node, as podsyncd stores them
// (the node library deletes those Kubernetes no longer has).
func (p *Provider) GetPods(ctx context.Context) ([]*corev1.Pod, error) {
	res, err := p.ps.ListPods(ctx, &podsyncv1.ListPodsRequest{LabelSelector: p.selector()})
	if err != nil {
		return nil, fmt.Errorf("list pods on podsync: %w", err)
	}
	out := make([]*corev1.Pod, 0, len(res.GetPods()))
	for _, pp := range res.GetPods() {
		pod, err := convert.PodFromProto(pp)
		if err != nil {
			return nil, fmt.Errorf("convert pod %s/%s from podsync: %w", pp.GetMetadata().GetNamespace(), pp.GetMetadata().GetName(), err)
		}
		out = append(out, pod)
	}
	return out, nil
}

// statusLocked is the status to report for k: a refusal's, else the last
// one watched, with the ephemeral containers podsyncd has not taken
// waiting.
func (p *Provider) statusLocked(k string) *corev1.PodStatus {
	if st, ok := p.rejected[k]; ok {
		return st.DeepCopy()
	}
	st, ok := p.statuses[k]
	pod := p.pods[k]
	if !ok || (pod != nil && string(pod.UID) != p.uids[k]) {
		return nil
	}
	st = st.DeepCopy()
	if pod != nil {
		p.withEphemeralWaits(pod, st)
	}
	return st
}

// Run follows the node's pods on podsyncd until ctx ends, notifying every
// status change. client.Watch resumes after a break from the last
// revision delivered, and lists again when that is compacted.
func (p *Provider) Run(ctx context.Context) error {
	select {
	case <-p.notifyCh:
	case <-ctx.Done():
		return nil
	}
	var loops sync.WaitGroup
	defer loops.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	loops.Go(func() { p.rotateTokens(ctx) })
	loops.Go(func() { p.retryEphemeral(ctx) })
	err := p.ps.Watch(ctx, &podsyncv1.WatchPodsRequest{LabelSelector: p.selector()}, func(m *podsyncv1.WatchPodsResponse) error {
		ref := m.GetPod()
		k := key(ref.GetNamespace(), ref.GetName())
		switch {
		case m.GetStatus() != nil:
			st := convert.PodStatusFromProto(m.GetStatus())
			p.mu.Lock()
			p.statuses[k] = st
			p.uids[k] = ref.GetUid()
			p.noteKilledLocked(k, ref.GetUid(), st)
			p.mu.Unlock()
			p.changed(k)
			if st.Phase == corev1.PodRunning && p.debug.pending(types.UID(ref.GetUid())) {
				p.debug.retry(k)
			}
		case m.GetEvent() != nil:
			p.recordEvent(k, ref.GetUid(), m.GetEvent())
		case m.GetDeleted() != nil:
			p.mu.Lock()
			delete(p.statuses, k)
			delete(p.uids, k)
			p.mu.Unlock()
		}
		return nil
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("watch pods on podsync: %w", err)
	}
	return nil
}
