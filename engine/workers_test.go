package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/syncer"
	"github.com/podsync/podsync/logx"
)

// scriptedSyncer is a PodSyncer for the pod workers' tests: each call
// runs the test's script (or, without one, the wrapped Syncer), and it
// counts the calls that returned and any two calls for one pod that
// overlap.
type scriptedSyncer struct {
	next engine.PodSyncer
	// pass, if set, replaces SyncPod's pass.
	pass func(ctx context.Context, pod *corev1.Pod, in syncer.SyncInput) (syncer.SyncResult, error)

	mu       sync.Mutex
	inFlight map[types.UID]int
	overlaps []string
	calls    map[string]int
}

var _ engine.PodSyncer = (*scriptedSyncer)(nil)

func (s *scriptedSyncer) enter(uid types.UID, call string) func() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inFlight == nil {
		s.inFlight, s.calls = map[types.UID]int{}, map[string]int{}
	}
	s.inFlight[uid]++
	if s.inFlight[uid] > 1 {
		s.overlaps = append(s.overlaps, fmt.Sprintf("%s of %s while another call ran", call, uid))
	}
	// A call counts once it returns, so that a test waiting for it sees
	// its outcome.
	return func() {
		s.mu.Lock()
		s.inFlight[uid]--
		s.calls[call]++
		s.mu.Unlock()
	}
}

func (s *scriptedSyncer) count(call string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[call]
}

func (s *scriptedSyncer) SyncPod(ctx context.Context, pod *corev1.Pod, in syncer.SyncInput, emit func(syncer.StepResult)) (syncer.SyncResult, error) {
	defer s.enter(pod.UID, "SyncPod")()
	// Widen the window in which an overlapping call would be seen.
	time.Sleep(time.Millisecond)
	if s.pass != nil {
		return s.pass(ctx, pod, in)
	}
	return s.next.SyncPod(ctx, pod, in, emit)
}

func (s *scriptedSyncer) RemovePod(ctx context.Context, pod *corev1.Pod) error {
	defer s.enter(pod.UID, "RemovePod")()
	time.Sleep(time.Millisecond)
	return s.next.RemovePod(ctx, pod)
}

func (s *scriptedSyncer) ReadView(ctx context.Context, uid types.UID) (model.RuntimeView, error) {
	return s.next.ReadView(ctx, uid)
}

// realSyncer builds the Syncer NewNode would build from opts.
func realSyncer(t *testing.T, opts *engine.NodeOptions) *syncer.Syncer {
	t.Helper()
	s, err := syncer.NewSyncer(syncer.SyncerOptions{Runtime: opts.Runtime, Images: opts.Images, Clock: opts.Clock,
		Logger: opts.Logger, Config: opts.Config})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestWorkersNeverOverlapPassesOfAPod: applies, runtime changes and a
// deletion of one pod from many goroutines at once run its passes and its
// removal one at a time — the worker's lock is the only per-pod lock —
// while passes of different pods may run together.
func TestWorkersNeverOverlapPassesOfAPod(t *testing.T) {
	ss := &scriptedSyncer{}
	h := newNodeHarness(t, func(o *engine.NodeOptions) {
		ss.next = realSyncer(t, o)
		o.Syncer = ss
	})
	pods := []*corev1.Pod{enginetest.Pod(), enginetest.Pod()}
	pods[1].Name, pods[1].UID = "db", "uid-2"
	var wg sync.WaitGroup
	for i := range 8 {
		for _, p := range pods {
			wg.Go(func() {
				pod := p.DeepCopy()
				pod.Spec.ActiveDeadlineSeconds = ptr.To(int64(3600 + i%2))
				if _, err := h.node.Apply(h.ctx, pod, nil, nil, nil); err != nil && !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("Apply %s #%d: %v", pod.Name, i, err)
				}
			})
		}
	}
	wg.Wait()
	h.eventually("both pods running", func() bool {
		return h.storedStatus(pods[0]).Phase == corev1.PodRunning && h.storedStatus(pods[1]).Phase == corev1.PodRunning
	})
	for range 4 {
		wg.Go(func() {
			if _, err := h.node.Delete(h.ctx, pods[0].Namespace, pods[0].Name, "", ptr.To(int64(0))); err != nil {
				t.Errorf("Delete: %v", err)
			}
		})
	}
	wg.Wait()
	if ss.count("SyncPod") < 2*8 || ss.count("RemovePod") < 1 {
		t.Errorf("calls %v: want a pass per apply and a removal", ss.calls)
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if len(ss.overlaps) > 0 {
		t.Errorf("calls for one pod overlapped:\n%v", ss.overlaps)
	}
}

// TestWorkerRetriesAFailedPass: a pass that fails is retried by the pod's
// worker after a delay that doubles with each failure in a row (1 s, 2 s,
// 4 s), and a pass that succeeds ends the retries — driven by a scripted
// syncer, with no runtime behind the passes.
func TestWorkerRetriesAFailedPass(t *testing.T) {
	ss := &scriptedSyncer{}
	var failing sync.Mutex
	fail := true
	ss.pass = func(context.Context, *corev1.Pod, syncer.SyncInput) (syncer.SyncResult, error) {
		failing.Lock()
		defer failing.Unlock()
		if fail {
			return syncer.SyncResult{}, errors.New("scripted failure")
		}
		return syncer.SyncResult{}, nil
	}
	core, logs := observer.New(zap.WarnLevel)
	h := newNodeHarness(t, func(o *engine.NodeOptions) {
		ss.next = realSyncer(t, o)
		o.Syncer = ss
		o.Logger = zap.New(core)
	})
	// retried waits until the worker has set its next retry after n of
	// its own failed passes (it logs each after setting the retry).
	retried := func(n int) {
		h.eventually(fmt.Sprintf("%d failed retries", n), func() bool {
			return logs.FilterMessage("pod sync failed; retrying").Len() == n
		})
	}
	// The worker logs a failure before it arms the retry's timer: the
	// clock is stepped once the timer waits on it, so that a step checks
	// the delay. Another of the node's timers, armed while the test runs,
	// may be what armed sees; a retry whose time the clock passed before
	// its timer was armed runs at once (TestWorkerRetryDueBeforeItsTimer).
	idle := h.clock.Waiters()
	armed := func() {
		h.eventually("the retry's timer armed", func() bool { return h.clock.Waiters() > idle })
	}
	pod := enginetest.Pod()
	if _, err := h.node.Apply(h.ctx, pod, nil, nil, nil); err == nil {
		t.Fatal("Apply of a pod whose pass fails: no error")
	}
	for i, d := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		armed()
		before := ss.count("SyncPod")
		h.clock.Step(d - time.Millisecond)
		time.Sleep(20 * time.Millisecond)
		if got := ss.count("SyncPod"); got != before {
			t.Fatalf("retry %d ran %d passes before its %s delay", i+1, got-before, d)
		}
		h.clock.Step(time.Millisecond)
		retried(i + 1)
	}
	failing.Lock()
	fail = false
	failing.Unlock()
	armed()
	before := ss.count("SyncPod")
	h.clock.Step(8 * time.Second)
	h.eventually("the pass that succeeds", func() bool { return ss.count("SyncPod") == before+1 })
	h.clock.Step(30 * time.Minute) // short of the harness's hourly relist, GC and rotation
	time.Sleep(20 * time.Millisecond)
	if got := ss.count("SyncPod"); got != before+1 {
		t.Errorf("%d passes after a successful one with nothing to wait for, want none", got-before-1)
	}
}

// TestWorkerRetryDueBeforeItsTimer: a retry whose time the clock passed
// before the worker armed its timer runs at once. The clock is stepped
// past the next retry while the failed pass logs, that is after the retry
// was set and before its timer: on a clock that moves only when stepped,
// a timer armed for no time at all would wait for a step that never comes.
func TestWorkerRetryDueBeforeItsTimer(t *testing.T) {
	ss := &scriptedSyncer{}
	ss.pass = func(context.Context, *corev1.Pod, syncer.SyncInput) (syncer.SyncResult, error) {
		return syncer.SyncResult{}, errors.New("scripted failure")
	}
	var (
		clk    *clocktesting.FakeClock
		logged atomic.Int32
	)
	core, logs := observer.New(zap.WarnLevel)
	h := newNodeHarness(t, func(o *engine.NodeOptions) {
		ss.next = realSyncer(t, o)
		o.Syncer = ss
		clk = o.Clock.(*clocktesting.FakeClock)
		o.Logger = zap.New(zapcore.RegisterHooks(core, func(e zapcore.Entry) error {
			if e.Message == "pod sync failed; retrying" && logged.Add(1) == 1 {
				clk.Step(2 * time.Second) // the second retry's delay
			}
			return nil
		}))
	})
	if _, err := h.node.Apply(h.ctx, enginetest.Pod(), nil, nil, nil); err == nil {
		t.Fatal("Apply of a pod whose pass fails: no error")
	}
	h.clock.Step(time.Second) // the first retry's delay, before or after its timer is armed
	h.eventually("the second retry, due before its timer", func() bool {
		return logs.FilterMessage("pod sync failed; retrying").Len() >= 2
	})
}

// TestEngineLinesCarryTheRequest: the lines the node and the syncer write
// on behalf of a request (an Apply's pass, a Delete) carry the request's
// fields from the context as well as the pod's, and the lines of the
// worker's own passes do not.
func TestEngineLinesCarryTheRequest(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	h := newNodeHarness(t, func(o *engine.NodeOptions) { o.Logger = zap.New(core) })
	pod := enginetest.Pod()
	ctx := logx.WithFields(h.ctx, zap.String(logx.RequestID, "req-1"), zap.String(logx.RPCMethod, "/podsync.v1.PodSyncService/SyncPod"))
	if _, err := h.node.Apply(ctx, pod, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	dctx := logx.WithFields(h.ctx, zap.String(logx.RequestID, "req-2"))
	if _, err := h.node.Delete(dctx, pod.Namespace, pod.Name, "", ptr.To(int64(0))); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"pod stored": "req-1", "sandbox created": "req-1", "container started": "req-1",
		"pod deletion requested": "req-2", "pod removed": "req-2", "pod deleted": "req-2"}
	seen := map[string]bool{}
	for _, e := range logs.AllUntimed() {
		id, ok := want[e.Message]
		if !ok {
			continue
		}
		seen[e.Message] = true
		f := e.ContextMap()
		if f[logx.RequestID] != id || f[logx.PodUID] != string(pod.UID) {
			t.Errorf("%q: request_id %v, pod_uid %v; want %s and %s", e.Message, f[logx.RequestID], f[logx.PodUID], id, pod.UID)
		}
	}
	for msg := range want {
		if !seen[msg] {
			t.Errorf("no %q line", msg)
		}
	}
}
