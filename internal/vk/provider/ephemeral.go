package provider

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/client"
	"github.com/podsync/podsync/convert"
)

// ephemeralRetryDelay is how long after a transient error (podsyncd
// unavailable, a pass of the pod in progress) an ephemeral container is
// added again.
const ephemeralRetryDelay = 2 * time.Second

// ReasonContainerCreating is the kubelet's waiting reason of a container
// on its way to start.
const ReasonContainerCreating = "ContainerCreating"

// messageNotRunningYet is the waiting message of a debug container added
// to a pod that does not run on podsyncd yet.
const messageNotRunningYet = "podsync adds the debug container once the pod runs"

// ephemeralWait is an ephemeral container of a pod that podsyncd does not
// hold: the waiting state the pod's status shows for it, as the kubelet
// shows a container it could not create.
type ephemeralWait struct {
	reason, message string
	// final: podsyncd refused it for good (its Pod Security level, a
	// field a debug container may not have, a name clash); otherwise it
	// is added once the pod runs on podsyncd.
	final bool
}

// ephemeral is what the provider knows of the ephemeral containers
// podsyncd has not taken (yet), and the retries of those it will.
type ephemeral struct {
	mu sync.Mutex
	// waits are by pod UID, then container name.
	waits map[types.UID]map[string]ephemeralWait
	// adding serialises the adds of one pod (by namespace/name): apply
	// and the retries must not add one container twice.
	adding keyLocks
	// due are the pods whose ephemeral containers are to be added again;
	// kick wakes retryEphemeral.
	due  map[string]bool
	kick chan struct{}
	// retryDelay is ephemeralRetryDelay (shorter in tests).
	retryDelay time.Duration
}

func newEphemeral() *ephemeral {
	return &ephemeral{waits: map[types.UID]map[string]ephemeralWait{},
		due: map[string]bool{}, kick: make(chan struct{}, 1), retryDelay: ephemeralRetryDelay}
}

func (e *ephemeral) wait(uid types.UID, name string) (ephemeralWait, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	w, ok := e.waits[uid][name]
	return w, ok
}

func (e *ephemeral) setWait(uid types.UID, name string, w ephemeralWait) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.waits[uid] == nil {
		e.waits[uid] = map[string]ephemeralWait{}
	}
	e.waits[uid][name] = w
}

func (e *ephemeral) clearWait(uid types.UID, name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.waits[uid], name)
	if len(e.waits[uid]) == 0 {
		delete(e.waits, uid)
	}
}

// forget drops what is known of pod k of uid, once it is deleted.
func (e *ephemeral) forget(k string, uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.waits, uid)
	delete(e.due, k)
}

// pending reports whether pod uid has ephemeral containers to add once it
// runs.
func (e *ephemeral) pending(uid types.UID) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, w := range e.waits[uid] {
		if !w.final {
			return true
		}
	}
	return false
}

// retry marks pod k's ephemeral containers to be added again and wakes
// retryEphemeral.
func (e *ephemeral) retry(k string) {
	e.mu.Lock()
	e.due[k] = true
	e.mu.Unlock()
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// takeDue returns the pods to retry and clears them.
func (e *ephemeral) takeDue() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]string, 0, len(e.due))
	for k := range e.due {
		out = append(out, k)
	}
	clear(e.due)
	return out
}

// addEphemeral adds to podsyncd the ephemeral containers of pod it does
// not hold yet (kubectl debug, the ephemeralcontainers subresource), in
// spec order. It never fails the pod: the kubelet starts what it can, and
// a debug container it cannot start is a status and an event, never the
// pod's failure.
//
//   - One podsyncd refuses (its Pod Security level, a field a debug
//     container may not have, a name clash) is a Warning event Failed on
//     the container and, in the pod's ephemeralContainerStatuses, waiting
//     with podsyncd's reason and message, for good: kubectl debug shows the
//     message instead of waiting silently, and kubectl describe shows both.
//   - One added to a pod podsyncd does not run yet (podsyncd adds debug
//     containers to running pods only) waits, ContainerCreating, and is
//     added when podsyncd reports the pod running (Run).
//   - After a transient error (podsyncd unavailable, a pass of the pod in
//     progress) it is added again shortly (retryEphemeral).
func (p *Provider) addEphemeral(ctx context.Context, pod *corev1.Pod) {
	if len(pod.Spec.EphemeralContainers) == 0 {
		return
	}
	k := key(pod.Namespace, pod.Name)
	unlock := p.debug.adding.lock(k)
	defer unlock()
	got, err := p.ps.GetPod(ctx, pod.Namespace, pod.Name)
	if err != nil {
		p.retryEphemeralLater(k, "", err)
		return
	}
	if types.UID(got.GetPod().GetMetadata().GetUid()) != pod.UID {
		return // another incarnation of the name: this one's apply comes
	}
	have := map[string]bool{}
	for _, ec := range got.GetPod().GetSpec().GetEphemeralContainers() {
		have[ec.GetName()] = true
	}
	for _, ec := range pod.Spec.EphemeralContainers {
		if have[ec.Name] {
			p.debug.clearWait(pod.UID, ec.Name)
			continue
		}
		if w, ok := p.debug.wait(pod.UID, ec.Name); ok && w.final {
			continue
		}
		_, err := p.ps.AddEphemeralContainer(ctx, &podsyncv1.AddEphemeralContainerRequest{Namespace: pod.Namespace, Name: pod.Name,
			EphemeralContainer: convert.EphemeralContainerToProto(ec), Precondition: &podsyncv1.Precondition{Uid: string(pod.UID)}})
		if err == nil {
			p.debug.clearWait(pod.UID, ec.Name)
			continue
		}
		if client.Reason(err) == client.ReasonContainerNotRunning {
			p.debug.setWait(pod.UID, ec.Name, ephemeralWait{reason: ReasonContainerCreating, message: messageNotRunningYet})
			continue
		}
		reason, message, ok := refusal(err)
		if !ok {
			p.retryEphemeralLater(k, ec.Name, err)
			return
		}
		p.log.Info("podsyncd refused an ephemeral container", zap.String("pod", k),
			zap.String("container", ec.Name), zap.String("reason", reason), zap.String("message", message))
		p.debug.setWait(pod.UID, ec.Name, ephemeralWait{reason: reason, message: message, final: true})
		if p.events != nil {
			ref := &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name,
				UID: pod.UID, ResourceVersion: pod.ResourceVersion, FieldPath: containerFieldPath(pod, ec.Name)}
			p.events.Event(ref, corev1.EventTypeWarning, "Failed", "Error: "+message)
		}
	}
}

// retryEphemeralLater adds pod k's ephemeral containers again after
// ephemeralRetryDelay (retryEphemeral, while Run runs). A cancelled call
// is not retried: the node library's or Run's context ended.
func (p *Provider) retryEphemeralLater(k, container string, err error) {
	if errors.Is(err, context.Canceled) {
		return
	}
	d := p.debug.retryDelay
	p.log.Warn("could not add an ephemeral container on podsync; trying again", zap.String("pod", k),
		zap.String("container", container), zap.Duration("after", d), zap.Error(err))
	time.AfterFunc(d, func() { p.debug.retry(k) })
}

// retryEphemeral adds again the ephemeral containers of the pods marked
// due (a transient error, a pod podsyncd now runs), until ctx ends.
func (p *Provider) retryEphemeral(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.debug.kick:
		}
		for _, k := range p.debug.takeDue() {
			p.mu.Lock()
			pod := p.pods[k]
			_, refused := p.rejected[k]
			p.mu.Unlock()
			if pod == nil || refused {
				continue
			}
			p.addEphemeral(ctx, pod)
			p.changed(k)
		}
	}
}

// withEphemeralWaits adds to st, pod's status, the ephemeral containers
// podsyncd does not hold, waiting (ephemeralWait), in spec order.
func (p *Provider) withEphemeralWaits(pod *corev1.Pod, st *corev1.PodStatus) {
	for _, ec := range pod.Spec.EphemeralContainers {
		w, ok := p.debug.wait(pod.UID, ec.Name)
		if !ok || getStatus(st.EphemeralContainerStatuses, ec.Name) != nil {
			continue
		}
		st.EphemeralContainerStatuses = append(st.EphemeralContainerStatuses, corev1.ContainerStatus{
			Name: ec.Name, Image: ec.Image, Started: new(false),
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: w.reason, Message: w.message}},
		})
	}
}

func getStatus(list []corev1.ContainerStatus, name string) *corev1.ContainerStatus {
	for i := range list {
		if list[i].Name == name {
			return &list[i]
		}
	}
	return nil
}
