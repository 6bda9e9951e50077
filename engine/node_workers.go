package engine

import (
	"context"
	"slices"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/logx"
)

// PodSandbox returns the sandbox the pod with uid ran its containers in
// after its last pass: its CRI id and attempt. ok is false if no pass has
// given the pod a sandbox since podsyncd started (or since it lost it).
func (n *Node) PodSandbox(uid types.UID) (id string, attempt uint32, ok bool) {
	n.mu.Lock()
	w := n.workers[uid]
	n.mu.Unlock()
	if w == nil {
		return "", 0, false
	}
	sb := w.lastSandbox()
	return sb.ID, sb.Attempt, sb.ID != ""
}

// workerFor returns the worker of uid, creating it (and starting its loop
// once Run has recovered) if there is none.
func (n *Node) workerFor(uid types.UID) *worker {
	n.mu.Lock()
	defer n.mu.Unlock()
	if w := n.workers[uid]; w != nil {
		return w
	}
	parent := n.runCtx
	if parent == nil {
		parent = context.Background()
	}
	w := newWorker(n, parent, uid)
	n.workers[uid] = w
	if n.loopsOn {
		n.startLoopLocked(w)
	}
	return w
}

// lockWorker returns the worker of uid with its lock held, waiting while
// ctx allows.
func (n *Node) lockWorker(ctx context.Context, uid types.UID) (*worker, error) {
	for {
		w := n.workerFor(uid)
		if err := w.acquire(ctx); err != nil {
			return nil, err
		}
		if !w.retired {
			return w, nil
		}
		w.release()
	}
}

// startLoopLocked starts w's loop unless Run is ending; n.mu is held.
func (n *Node) startLoopLocked(w *worker) {
	if n.stopping {
		return
	}
	n.wg.Add(1)
	go w.run()
}

// terminalSettled reports whether nothing of the pod runs any more: no
// running container and no ready sandbox.
func (n *Node) terminalSettled(ctx context.Context, uid types.UID) (bool, error) {
	view, err := n.syncer.ReadView(ctx, uid)
	if err != nil {
		return false, err
	}
	if slices.ContainsFunc(view.Containers, func(c model.ContainerInstance) bool { return c.State == model.ContainerRunning }) {
		return false, nil
	}
	return !slices.ContainsFunc(view.Sandboxes, func(s model.Sandbox) bool { return s.State == model.SandboxReady }), nil
}

func (n *Node) removeOrphan(ctx context.Context, ref model.PodRef) error {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ref.Namespace, Name: ref.Name, UID: ref.UID}}
	if err := n.removePod(ctx, pod); err != nil {
		return err
	}
	logx.From(ctx, n.log).Info("orphaned pod removed", logx.Pod(pod)...)
	return nil
}

// removeAttempts bounds the attempts of removePod.
const removeAttempts = 8

// removePod removes everything of pod, retrying for a while: a runtime
// refuses to remove a container a cancelled start has not let go of yet
// (containerd 1.6 keeps it "starting" for seconds).
func (n *Node) removePod(ctx context.Context, pod *corev1.Pod) error {
	delay := 100 * time.Millisecond
	for i := 1; ; i++ {
		err := n.syncer.RemovePod(ctx, pod)
		if err == nil || i == removeAttempts || ctx.Err() != nil {
			return err
		}
		logx.From(ctx, n.log).Warn("remove pod; retrying", append(logx.Pod(pod), zap.Error(err), zap.Duration(logx.Duration, delay))...)
		select {
		case <-ctx.Done():
			return err
		case <-n.clock.After(delay):
		}
		delay = min(2*delay, 2*time.Second)
	}
}
