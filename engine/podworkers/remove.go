package podworkers

import (
	"context"
	"slices"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/plan"
	"github.com/podsync/podsync/logx"
)

// runtimePod returns the pod the runtime's objects with uid belong to;
// without Unstored, none is found.
func (p *Workers) runtimePod(ctx context.Context, uid types.UID) (model.PodRef, bool, error) {
	if p.unstored == nil {
		return model.PodRef{}, false, nil
	}
	return p.unstored.RuntimePod(ctx, uid)
}

// mayRemove reports whether what the runtime holds of uid, a pod the
// store does not hold, may be removed; without Unstored, it may.
func (p *Workers) mayRemove(uid types.UID) (bool, error) {
	if p.unstored == nil {
		return true, nil
	}
	return p.unstored.MayRemove(uid)
}

// terminalSettled reports whether nothing of the pod runs any more: no
// running container and no ready sandbox.
func (p *Workers) terminalSettled(ctx context.Context, uid types.UID) (bool, error) {
	view, err := p.syncer.ReadView(ctx, uid)
	if err != nil {
		return false, err
	}
	if slices.ContainsFunc(view.Containers, func(c model.ContainerInstance) bool { return c.State == model.ContainerRunning }) {
		return false, nil
	}
	return !slices.ContainsFunc(view.Sandboxes, func(s model.Sandbox) bool { return s.State == model.SandboxReady }), nil
}

func (p *Workers) removeOrphan(ctx context.Context, ref model.PodRef) error {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ref.Namespace, Name: ref.Name, UID: ref.UID}}
	if err := p.removePod(ctx, pod); err != nil {
		return err
	}
	logx.From(ctx, p.log).Info("orphaned pod removed", logx.Pod(pod)...)
	return nil
}

// removeAttempts bounds the attempts of removePod.
const removeAttempts = 8

// removePod removes everything of pod, retrying for a while: a runtime
// refuses to remove a container a cancelled start has not let go of yet
// (containerd 1.6 keeps it "starting" for seconds).
func (p *Workers) removePod(ctx context.Context, pod *corev1.Pod) error {
	delay := 100 * time.Millisecond
	for i := 1; ; i++ {
		err := p.syncer.RemovePod(ctx, pod)
		if err == nil || i == removeAttempts || ctx.Err() != nil {
			return err
		}
		logx.From(ctx, p.log).Warn("remove pod; retrying", append(logx.Pod(pod), zap.Error(err), zap.Duration(logx.Duration, delay))...)
		select {
		case <-ctx.Done():
			return err
		case <-p.clock.After(delay):
		}
		delay = min(2*delay, 2*time.Second)
	}
}

// volumeTearer is the optional capability of a PodSyncer to tear down the
// volumes of a pod that no longer runs (syncer.Syncer has it).
type volumeTearer interface {
	TearDownVolumes(pod *corev1.Pod) error
}

// tearDownEvicted removes the volumes of an evicted pod once nothing of it
// runs, as the kubelet tears down the volumes of a terminated pod: the
// space its emptyDir volumes held is freed, its tmpfs volumes unmounted.
// Its record, status and logs stay until it is deleted. The caller holds
// the pod's worker lock.
func (p *Workers) tearDownEvicted(ctx context.Context, pod *corev1.Pod) {
	t, ok := p.syncer.(volumeTearer)
	if !ok || !plan.IsEvicted(pod) {
		return
	}
	if err := t.TearDownVolumes(pod); err != nil {
		logx.From(ctx, p.log).Warn("tear down the volumes of an evicted pod", append(logx.Pod(pod), zap.Error(err))...)
	}
}
