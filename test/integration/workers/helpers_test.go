//go:build integration

package workers_test

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/convert"
	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/plan"
	"github.com/podsync/podsync/engine/store"
	"github.com/podsync/podsync/engine/syncer"
)

// namespace is the namespace of every test pod.
const namespace = "itest"

// cgroupRoot is the cgroup root of the tests' pods, the instance's (its
// teardown removes it).
func cgroupRoot() string { return inst.CgroupRoot() }

// env is one test's Node on the package's containerd, with its own store,
// root and log directories.
type env struct {
	t    *testing.T
	ctx  context.Context
	rt   *syncer.RemoteRuntime
	st   *store.Store
	cfg  criconfig.Options
	opts engine.NodeOptions
	node *engine.Node
	stop func()
}

// newEnv starts a Node with a short back-off (base 1 s, cap 4 s), a
// relist every 200 ms and GC every 2 s, unless mutate changes them. When
// the test ends, every stored pod is deleted and the Node stops.
func newEnv(t *testing.T, mutate ...func(*engine.NodeOptions)) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	rt, err := syncer.DialRuntime(ctx, inst.Endpoint(), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	st, err := store.Open(filepath.Join(t.TempDir(), "podsync.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := criconfig.Options{
		RootDir:    t.TempDir(),
		PodLogDir:  t.TempDir(),
		CgroupRoot: cgroupRoot(),
		NodeIPs:    []string{"127.0.0.1"},
	}
	opts := engine.NodeOptions{
		Runtime: rt, Images: rt, Store: st, Logger: zaptest.NewLogger(t), Config: cfg,
		Backoff:      plan.BackoffPolicy{Base: time.Second, Cap: 4 * time.Second},
		RelistPeriod: 200 * time.Millisecond,
		GC:           engine.GCPolicy{Period: 2 * time.Second},
	}
	for _, m := range mutate {
		m(&opts)
	}
	e := &env{t: t, ctx: ctx, rt: rt, st: st, cfg: cfg, opts: opts}
	e.start()
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		recs, _, err := e.node.List(cctx, store.Filter{})
		if err != nil {
			t.Errorf("list pods: %v", err)
		}
		var wg sync.WaitGroup
		for _, r := range recs {
			wg.Go(func() {
				if _, err := e.node.Delete(cctx, r.Pod.Namespace, r.Pod.Name, "", ptr.To[int64](0)); err != nil {
					t.Errorf("delete pod %s: %v", r.Pod.Name, err)
				}
			})
		}
		wg.Wait()
		e.stop()
		if err := st.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return e
}

// start builds a Node on the env's runtime and store and runs it until
// stop.
func (e *env) start() {
	e.t.Helper()
	n, err := engine.NewNode(e.opts)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	var once sync.Once
	e.node = n
	e.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				e.t.Errorf("Run: %v", err)
			}
		})
	}
}

var nonDNS = regexp.MustCompile(`[^a-z0-9]+`)

// newPod returns a defaulted pod named after the test (and suffix), with
// a fresh UID, grace period 1 s and the given containers.
func (e *env) newPod(suffix string, containers ...corev1.Container) *corev1.Pod {
	e.t.Helper()
	n := strings.Trim(nonDNS.ReplaceAllString(strings.ToLower(e.t.Name()), "-"), "-")
	if len(n) > 40 {
		n = strings.Trim(n[len(n)-40:], "-")
	}
	uid := uuid.NewString()
	if suffix != "" {
		n += "-" + suffix
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: n + "-" + uid[:6], Namespace: namespace, UID: types.UID(uid)},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers:                    containers,
		},
	}
	convert.Default(pod)
	return pod
}

// apply applies pod, failing the test on an error.
func (e *env) apply(pod *corev1.Pod) engine.ApplyResult {
	e.t.Helper()
	res, err := e.node.Apply(e.ctx, pod, nil, nil, nil)
	if err != nil {
		e.t.Fatalf("Apply %s: %v", pod.Name, err)
	}
	return res
}

// view reads what the runtime holds for pod.
func (e *env) view(pod *corev1.Pod) *model.RuntimeView {
	e.t.Helper()
	v, err := syncer.ReadView(e.ctx, e.rt, pod.UID)
	if err != nil {
		e.t.Fatal(err)
	}
	return &v
}

// status is the pod's status as the store holds it.
func (e *env) status(pod *corev1.Pod) corev1.PodStatus {
	e.t.Helper()
	rec, err := e.st.Get(pod.UID)
	if err != nil {
		e.t.Fatal(err)
	}
	return rec.Pod.Status
}

// eventually polls cond every 50 ms until it holds, failing the test at
// the env's deadline.
func (e *env) eventually(what string, cond func() bool) {
	e.t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-e.ctx.Done():
			e.t.Fatalf("%s: not reached", what)
		case <-tick.C:
		}
	}
}

// running returns the newest instance of the container if it runs.
func (e *env) running(pod *corev1.Pod, name string) *model.ContainerInstance {
	inst := e.view(pod).FindContainer(name)
	if inst == nil || inst.State != model.ContainerRunning {
		return nil
	}
	return inst
}

// containerStatus returns the named container's stored status.
func containerStatus(st corev1.PodStatus, name string) corev1.ContainerStatus {
	for _, cs := range st.ContainerStatuses {
		if cs.Name == name {
			return cs
		}
	}
	return corev1.ContainerStatus{}
}

// condition returns the status of the pod condition t.
func condition(st corev1.PodStatus, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range st.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

// events returns the reasons of the pod's events, in order.
func (e *env) events(pod *corev1.Pod) []string {
	e.t.Helper()
	entries, err := e.st.Since(e.st.CompactRevision())
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, en := range entries {
		if en.Kind == store.KindEvent && en.Pod.UID == pod.UID {
			out = append(out, en.Event.Reason)
		}
	}
	return out
}
