package podworkers

import (
	"context"
	"errors"
	"slices"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/store"
	"github.com/podsync/podsync/logx"
)

// Failure is a pod the node fails on its own, the kubelet's way: an
// eviction or a preemption.
type Failure struct {
	// Reason and Message are the status's and the warning event's.
	Reason, Message string
	// Condition, if set, is set on the status, at the time of the
	// failure.
	Condition *corev1.PodCondition
	// Wait bounds the wait for the pod's turn: a long pass (an image
	// pull) holds the pod's lock, and the caller tries again later rather
	// than hold up the others.
	Wait time.Duration
	// Record appends the status and the event; nil appends them to the
	// store (eviction.Manager.Append releases the store's reserve on a
	// full disk).
	Record func(changes ...store.Change) error
}

// FailPod fails the pod as f says, with a warning event, in its worker's
// turn, and kicks its worker, whose pass then kills its containers (a
// terminal pod is not runnable). It reports whether it did: a pod
// deleted, terminal or gone meanwhile is left alone.
func (p *Workers) FailPod(ctx context.Context, pod *corev1.Pod, f Failure) bool {
	reason, msg, cond := f.Reason, f.Message, f.Condition
	log := p.log.With(logx.Pod(pod)...)
	// A long pass (an image pull) holds the pod's lock: the caller tries
	// again later rather than hold up the others.
	lctx, cancel := context.WithTimeout(ctx, f.Wait)
	defer cancel()
	w, err := p.lockWorker(lctx, pod.UID)
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("fail pod: its pass runs on", zap.String(logx.Reason, reason))
		}
		return false
	}
	done := func() bool {
		defer w.release()
		rec, err := p.store.Get(pod.UID)
		if errors.Is(err, errdefs.ErrPodNotFound) {
			return false
		}
		if err != nil {
			log.Warn("fail pod: read the store", zap.Error(err))
			return false
		}
		if rec.Deleting || model.IsTerminal(rec.Pod.Status.Phase) {
			return false
		}
		status, c, ev := FailedStatus(rec.Pod, reason, msg)
		if cond != nil {
			cond.LastTransitionTime = metav1.NewTime(p.clock.Now())
			status.Conditions = append(slices.DeleteFunc(status.Conditions, func(c corev1.PodCondition) bool { return c.Type == cond.Type }), *cond)
			c = store.StatusChange(store.RefOf(rec.Pod), status)
		}
		c.Sandbox = storedSandbox(w.lastSandbox())
		if err := p.recordFailure(f, c, ev); err != nil {
			log.Warn("fail pod: record the status", zap.Error(err))
			return false
		}
		w.noteStatus(status)
		return true
	}()
	if done {
		w.kickSelf()
	}
	return done
}

// recordFailure appends a failure's changes through f.Record, or to the
// store.
func (p *Workers) recordFailure(f Failure, changes ...store.Change) error {
	if f.Record != nil {
		return f.Record(changes...)
	}
	_, err := p.store.Append(changes...)
	return err
}

// FailedStatus returns pod's status failed with reason and message, the
// store change that records it and a warning event saying the same: a pod
// the node rejects on restart, or evicts.
func FailedStatus(pod *corev1.Pod, reason, msg string) (*corev1.PodStatus, store.Change, store.Change) {
	status := pod.Status.DeepCopy()
	status.Phase, status.Reason, status.Message = corev1.PodFailed, reason, msg
	ref := store.RefOf(pod)
	return status, store.StatusChange(ref, status),
		store.EventChange(ref, store.Event{Type: corev1.EventTypeWarning, Reason: reason, Message: msg})
}
