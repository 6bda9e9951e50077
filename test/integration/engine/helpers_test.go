//go:build integration

package engine_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/convert"
	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/syncer"
	"github.com/podsync/podsync/internal/testing/localcri/localcritest"
)

// namespace is the namespace of every test pod.
const namespace = "itest"

// cgroupRoot is the cgroup root of the tests' pods, the instance's (its
// teardown removes it).
func cgroupRoot() string { return inst.CgroupRoot() }

// env is one test's engine: a Syncer on the package's containerd, with
// its own root and log directories.
type env struct {
	t   *testing.T
	ctx context.Context
	rt  *syncer.RemoteRuntime
	s   *syncer.Syncer
	cfg criconfig.Options
	in  syncer.SyncInput
}

// newEnv connects a Syncer to the package's containerd. Back-off is the
// kubelet's unless mutate changes it.
func newEnv(t *testing.T, mutate ...func(*syncer.SyncerOptions)) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	rt, err := syncer.DialRuntime(ctx, inst.Endpoint(), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	cfg := criconfig.Options{
		RootDir:    t.TempDir(),
		PodLogDir:  t.TempDir(),
		CgroupRoot: cgroupRoot(),
		NodeIPs:    []string{"127.0.0.1"},
	}
	opts := syncer.SyncerOptions{Runtime: rt, Images: rt, Logger: zaptest.NewLogger(t), Config: cfg}
	for _, m := range mutate {
		m(&opts)
	}
	s, err := syncer.NewSyncer(opts)
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, ctx: ctx, rt: rt, s: s, cfg: opts.Config}
}

var nonDNS = regexp.MustCompile(`[^a-z0-9]+`)

// newPod returns a pod named after the test, with a fresh UID, short grace
// periods and one container per name running the busybox image's default
// command (which exits 0 promptly on SIGTERM). The pod is removed when the
// test ends.
func (e *env) newPod(names ...string) *corev1.Pod {
	e.t.Helper()
	n := strings.Trim(nonDNS.ReplaceAllString(strings.ToLower(e.t.Name()), "-"), "-")
	if len(n) > 50 {
		n = strings.Trim(n[len(n)-50:], "-")
	}
	uid := uuid.NewString()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: n + "-" + uid[:6], Namespace: namespace, UID: types.UID(uid)},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: ptr.To[int64](2),
		},
	}
	for _, name := range names {
		pod.Spec.Containers = append(pod.Spec.Containers, localcritest.Busybox(name))
	}
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := e.s.RemovePod(ctx, pod); err != nil {
			e.t.Errorf("remove pod: %v", err)
		}
	})
	return pod
}

// sync defaults pod as the API server would (the engine expects
// defaulted pods) and runs one pass, failing the test on a pass error.
func (e *env) sync(pod *corev1.Pod) syncer.SyncResult {
	e.t.Helper()
	convert.Default(pod)
	res, err := e.s.SyncPod(e.ctx, pod, e.in, nil)
	// The next pass starts from this one's pull failures, as a pod
	// worker's does.
	e.in.PullFailures = res.PullFailures
	if err != nil {
		e.t.Fatalf("SyncPod: %v", err)
	}
	return res
}

// syncUntil runs passes, as a pod worker would, until cond holds for a
// pass's result, and returns the results of all passes.
func (e *env) syncUntil(pod *corev1.Pod, what string, cond func(syncer.SyncResult) bool) []syncer.SyncResult {
	e.t.Helper()
	var all []syncer.SyncResult
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		res := e.sync(pod)
		all = append(all, res)
		if cond(res) {
			return all
		}
		select {
		case <-e.ctx.Done():
			e.t.Fatalf("%s: not reached after %d passes; last steps %v", what, len(all), steps(res.Steps))
		case <-tick.C:
		}
	}
}

// until runs passes until cond holds and returns the last result.
func (e *env) until(pod *corev1.Pod, what string, cond func(syncer.SyncResult) bool) syncer.SyncResult {
	e.t.Helper()
	all := e.syncUntil(pod, what, cond)
	return all[len(all)-1]
}

// status is the pod's status from a pass's view.
func (e *env) status(pod *corev1.Pod, res syncer.SyncResult) corev1.PodStatus {
	return e.s.PodStatus(pod, res.View, model.ProbeResults{})
}

// running reports whether every regular container of pod runs.
func (e *env) running(pod *corev1.Pod) func(syncer.SyncResult) bool {
	return func(res syncer.SyncResult) bool {
		return e.status(pod, res).Phase == corev1.PodRunning && allRunning(pod, res)
	}
}

func allRunning(pod *corev1.Pod, res syncer.SyncResult) bool {
	for _, c := range pod.Spec.Containers {
		if inst := res.View.FindContainer(c.Name); inst == nil || inst.State != model.ContainerRunning {
			return false
		}
	}
	return true
}

// newest returns the newest instance of a container.
func newest(t *testing.T, res syncer.SyncResult, name string) model.ContainerInstance {
	t.Helper()
	inst := res.View.FindContainer(name)
	if inst == nil {
		t.Fatalf("no instance of %s", name)
	}
	return *inst
}

// steps renders steps as "Action Target Reason" ("!" marks failures).
func steps(ss []syncer.StepResult) []string {
	var out []string
	for _, s := range ss {
		line := fmt.Sprintf("%s %s", s.Action, s.Target)
		if s.Err != nil {
			line += " !" + s.Reason
		} else if s.Reason != "" {
			line += " " + s.Reason
		}
		out = append(out, line)
	}
	return out
}

// hasStep reports whether a result has a step with action on target and
// reason (with "!" for a failure).
func hasStep(res syncer.SyncResult, action syncer.StepAction, target, reason string) bool {
	return slices.ContainsFunc(res.Steps, func(s syncer.StepResult) bool {
		r := s.Reason
		if s.Err != nil {
			r = "!" + r
		}
		return s.Action == action && s.Target == target && r == reason
	})
}
