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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/client"
	"github.com/podsync/podsync/convert"
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
	// The kubelet API's sessions and stats.
	Exec(ctx context.Context, o client.ExecOptions) (int, error)
	Attach(ctx context.Context, o client.AttachOptions) (int, error)
	PortForward(ctx context.Context, namespace, name string, port uint32, conn io.ReadWriter) error
	ListPodStats(ctx context.Context, namespace string) ([]*podsyncv1.PodStats, error)
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
	// rejected are the Failed statuses of pods podsyncd refused.
	rejected map[string]*corev1.PodStatus
	notify   func(*corev1.Pod)
	notifyCh chan struct{} // closed once notify is set
}

// New returns a provider for Kubernetes node nodeName on ps.
func New(nodeName string, ps Podsync, log *zap.Logger) *Provider {
	return &Provider{
		node: nodeName, ps: ps, log: log,
		pods:     map[string]*corev1.Pod{},
		statuses: map[string]*corev1.PodStatus{},
		uids:     map[string]string{},
		rejected: map[string]*corev1.PodStatus{},
		notifyCh: make(chan struct{}),
	}
}

func key(namespace, name string) string { return namespace + "/" + name }

// selector selects the podsync pods of this node.
func (p *Provider) selector() string { return OwnerLabel + "=" + p.node }

// podsyncPod is the pod as podsync-vk applies it: the owner label added,
// and each container's service environment variables (serviceEnv). Env
// is otherwise the pod's own, as the API server stores it: references to
// ConfigMaps, Secrets and the downward API stay references, which
// podsyncd resolves from the objects pushed to it and from the pod it
// runs, so that no Secret value is in the spec it stores.
func (p *Provider) podsyncPod(pod *corev1.Pod) (*corev1.Pod, error) {
	out := pod.DeepCopy()
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	out.Labels[OwnerLabel] = p.node
	// The API server has generated the name already: the pod is applied
	// by it, and podsyncd's own generator is for RunPods only.
	out.GenerateName = ""
	out.Status = corev1.PodStatus{}
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

func (p *Provider) apply(ctx context.Context, pod *corev1.Pod) error {
	k := key(pod.Namespace, pod.Name)
	p.mu.Lock()
	p.pods[k] = pod.DeepCopy()
	p.mu.Unlock()
	// The objects first: the pod's pass then finds them stored.
	if err := p.pushObjects(ctx, pod); err != nil {
		return err
	}
	out, err := p.podsyncPod(pod)
	if err != nil {
		return fmt.Errorf("apply pod %s on podsync: %w", k, err)
	}
	req, err := client.SyncPodRequestFromPod(out, nil, nil)
	if err == nil {
		_, err = p.ps.SyncPod(ctx, req, nil)
	}
	if reason, message, ok := refusal(err); ok {
		p.log.Info("podsyncd refused the pod", zap.String("pod", k), zap.String("reason", reason), zap.String("message", message))
		st := &corev1.PodStatus{Phase: corev1.PodFailed, Reason: reason, Message: message}
		p.mu.Lock()
		p.rejected[k] = st
		p.mu.Unlock()
		p.changed(k)
		return nil
	}
	if err != nil {
		return fmt.Errorf("apply pod %s on podsync: %w", k, err)
	}
	p.mu.Lock()
	delete(p.rejected, k)
	p.mu.Unlock()
	p.changed(k)
	return nil
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
// period, then reports it terminated.
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
	if !refused {
		_, err := p.ps.DeletePod(ctx, req)
		if err != nil && !errors.Is(err, client.ErrUIDMismatch) {
			return fmt.Errorf("delete pod %s on podsync: %w", k, err)
		}
	}
	p.releaseObjects(k)
	p.mu.Lock()
	last := p.pods[k]
	st := p.statusLocked(k)
	delete(p.pods, k)
	delete(p.statuses, k)
	delete(p.uids, k)
	delete(p.rejected, k)
	notify := p.notify
	p.mu.Unlock()
	if last == nil {
		last = pod.DeepCopy()
	}
	if st == nil {
		st = pod.Status.DeepCopy()
	}
	last.Status = *terminated(st)
	if notify != nil {
		notify(last)
	}
	return nil
}

// terminated is st with every container that was not terminated marked
// so, as a deleted pod's statuses end.
func terminated(st *corev1.PodStatus) *corev1.PodStatus {
	st = st.DeepCopy()
	now := metav1.Now()
	end := func(cs []corev1.ContainerStatus) {
		for i := range cs {
			if cs[i].State.Terminated != nil {
				continue
			}
			cs[i].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 137, Reason: "PodDeleted", Message: "the pod was deleted", FinishedAt: now,
			}}
			cs[i].Ready = false
			cs[i].Started = new(false)
		}
	}
	end(st.ContainerStatuses)
	end(st.InitContainerStatuses)
	if st.Phase != corev1.PodSucceeded {
		st.Phase = corev1.PodFailed
	}
	for i := range st.Conditions {
		if st.Conditions[i].Type == corev1.PodReady || st.Conditions[i].Type == corev1.ContainersReady {
			st.Conditions[i].Status = corev1.ConditionFalse
		}
	}
	return st
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
// one watched.
func (p *Provider) statusLocked(k string) *corev1.PodStatus {
	if st, ok := p.rejected[k]; ok {
		return st.DeepCopy()
	}
	st, ok := p.statuses[k]
	if pod := p.pods[k]; !ok || (pod != nil && string(pod.UID) != p.uids[k]) {
		return nil
	}
	return st.DeepCopy()
}

// NotifyPods registers the node library's callback; Run calls it for
// every status change.
func (p *Provider) NotifyPods(_ context.Context, fn func(*corev1.Pod)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.notify == nil {
		p.notify = fn
		close(p.notifyCh)
	}
}

// changed notifies k's current pod and status, if both are known.
func (p *Provider) changed(k string) {
	p.mu.Lock()
	pod, ok := p.pods[k]
	st := p.statusLocked(k)
	notify := p.notify
	p.mu.Unlock()
	if !ok || st == nil || notify == nil {
		return
	}
	out := pod.DeepCopy()
	out.Status = *st
	notify(out)
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
	err := p.ps.Watch(ctx, &podsyncv1.WatchPodsRequest{LabelSelector: p.selector()}, func(m *podsyncv1.WatchPodsResponse) error {
		ref := m.GetPod()
		k := key(ref.GetNamespace(), ref.GetName())
		switch {
		case m.GetStatus() != nil:
			st := convert.PodStatusFromProto(m.GetStatus())
			p.mu.Lock()
			p.statuses[k] = st
			p.uids[k] = ref.GetUid()
			p.mu.Unlock()
			p.changed(k)
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
