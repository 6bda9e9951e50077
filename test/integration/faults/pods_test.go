//go:build integration

package faults_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cri "k8s.io/cri-api/pkg/apis"
	"k8s.io/utils/ptr"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/convert"
	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/internal/testing/localcri/localcritest"
)

// namespace is the namespace of every test pod.
const namespace = "faults"

// batchSize is the number of pods of a batch, the veteran included.
const batchSize = 20

// testPod is a pod of a batch: the API's and the engine's view of it.
type testPod struct {
	core  *corev1.Pod
	proto *podsyncv1.Pod
	// init is set when the pod has an init container, which appends a
	// line to /data/init-runs each time it runs.
	init bool
}

func (p *testPod) uid() string  { return string(p.core.UID) }
func (p *testPod) name() string { return p.core.Name }

var nonDNS = regexp.MustCompile(`[^a-z0-9]+`)

// dnsName turns s into a DNS label of at most max characters.
func dnsName(s string, limit int) string {
	s = strings.Trim(nonDNS.ReplaceAllString(strings.ToLower(s), "-"), "-")
	if len(s) > limit {
		s = strings.Trim(s[len(s)-limit:], "-")
	}
	return s
}

// newPod returns a defaulted pod named prefix-<uid>, with grace period 1 s,
// an emptyDir at /data for every container and the given containers.
func newPod(t *testing.T, prefix string, containers ...corev1.Container) *testPod {
	t.Helper()
	uid := uuid.NewString()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: dnsName(prefix, 40) + "-" + uid[:6], Namespace: namespace, UID: types.UID(uid)},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers:                    containers,
			Volumes:                       []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
	return finish(t, pod)
}

// finish mounts /data into every container, defaults the pod as the API
// server would and converts it.
func finish(t *testing.T, pod *corev1.Pod) *testPod {
	t.Helper()
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			cs[i].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
		}
	}
	convert.Default(pod)
	p, err := convert.PodToProto(pod)
	if err != nil {
		t.Fatal(err)
	}
	return &testPod{core: pod, proto: p, init: len(pod.Spec.InitContainers) > 0}
}

// sleeper is a container that runs until SIGTERM.
func sleeper(name string) corev1.Container {
	return localcritest.Shell(name, "while true; do sleep 1; done")
}

// newBatch returns batchSize-1 fresh pods named after prefix — every
// fifth with an init container, every sixth pulling its image (pull
// policy Always) — followed by the veteran, if not nil.
func newBatch(t *testing.T, prefix string, veteran *testPod) []*testPod {
	t.Helper()
	var pods []*testPod
	for i := range batchSize - 1 {
		app := sleeper("app")
		if i%6 == 2 {
			app.ImagePullPolicy = corev1.PullAlways
		}
		pod := newPod(t, fmt.Sprintf("%s-%d", prefix, i), app)
		if i%5 == 1 {
			pod.core.Spec.InitContainers = []corev1.Container{localcritest.Shell("init", "echo ran >> /data/init-runs")}
			pod = finish(t, pod.core)
		}
		pods = append(pods, pod)
	}
	if veteran != nil {
		pods = append(pods, veteran)
	}
	return pods
}

// newVeteran returns a pod whose container fails its first run and then
// runs: its restart count is 1 once it runs again.
func newVeteran(t *testing.T) *testPod {
	t.Helper()
	return newPod(t, "veteran", localcritest.Shell("app",
		"if [ ! -e /data/crashed ]; then touch /data/crashed; exit 1; fi; while true; do sleep 1; done"))
}

// runRequest is the RunPods request of pods: wait for Running, 2 minutes
// each.
func runRequest(pods []*testPod) *podsyncv1.RunPodsRequest {
	req := &podsyncv1.RunPodsRequest{WaitFor: podsyncv1.WaitFor_WAIT_FOR_RUNNING, Timeout: durationpb.New(2 * time.Minute)}
	for _, p := range pods {
		req.Pods = append(req.Pods, p.proto)
	}
	return req
}

// runPods issues RunPods and reads the stream to its end. progress, if
// not nil, is called for every message before the summary. It returns the
// summary, or the stream's error.
func (n *node) runPods(ctx context.Context, pods []*testPod, progress func(*podsyncv1.RunPodsResponse)) (*podsyncv1.RunPodsSummary, error) {
	stream, err := n.client().RunPods(ctx, runRequest(pods))
	if err != nil {
		return nil, err
	}
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil, errors.New("RunPods stream ended without a summary")
		}
		if err != nil {
			return nil, err
		}
		if s := msg.GetSummary(); s != nil {
			return s, nil
		}
		if progress != nil {
			progress(msg)
		}
	}
}

// runAll runs pods and fails the test unless every pod reaches Running.
func (n *node) runAll(ctx context.Context, pods []*testPod) {
	n.t.Helper()
	sum, err := n.runPods(ctx, pods, nil)
	if err != nil {
		n.t.Fatalf("RunPods: %v", err)
	}
	var bad []string
	for _, r := range sum.GetResults() {
		switch {
		case r.GetOutcome() == podsyncv1.PodOutcome_POD_OUTCOME_REACHED_TARGET:
		case r.GetReason() == "CrashLoopBackOff" && strings.Contains(r.GetMessage(), "(StartError)"):
			// containerd reports a start that podsyncd's death cut
			// short (the CRI call cancelled) as StartError, exit 128:
			// the restart back-off that follows makes RunPods fail the
			// pod as crash-looping, though nothing of the pod's failed.
			// It is left to converge: checkConverged waits for it.
			n.t.Logf("RunPods: %s: %s (a start cut short by a kill; left to converge)", r.GetPod().GetName(), r.GetMessage())
		default:
			bad = append(bad, fmt.Sprintf("%s: %s %s %s", r.GetPod().GetName(), r.GetOutcome(), r.GetReason(), r.GetMessage()))
		}
	}
	if len(bad) > 0 {
		n.t.Fatalf("RunPods: %d of %d pods reached Running:\n%s", sum.GetReachedTarget(), len(pods), strings.Join(bad, "\n"))
	}
}

// deletePods deletes pods through the API with grace 0, in parallel, and
// returns the first error.
func (n *node) deletePods(ctx context.Context, pods []*testPod) error {
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	for _, p := range pods {
		wg.Go(func() {
			_, err := n.client().DeletePod(ctx, &podsyncv1.DeletePodRequest{
				Namespace: namespace, Name: p.name(), Uid: p.uid(), GracePeriodSeconds: ptr.To[int64](0)})
			mu.Lock()
			defer mu.Unlock()
			if err != nil && first == nil {
				first = fmt.Errorf("delete pod %s: %w", p.name(), err)
			}
		})
	}
	wg.Wait()
	return first
}

// deleteAll deletes every pod the running podsyncd holds (a test's
// cleanup).
func (n *node) deleteAll() {
	t := n.t
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	list, err := n.client().ListPods(ctx, &podsyncv1.ListPodsRequest{})
	if err != nil {
		t.Errorf("cleanup: list pods: %v", err)
		return
	}
	var pods []*testPod
	for _, p := range list.GetPods() {
		core, err := convert.PodFromProto(p)
		if err != nil {
			t.Errorf("cleanup: %v", err)
			continue
		}
		pods = append(pods, &testPod{core: core, proto: p})
	}
	if err := n.deletePods(ctx, pods); err != nil {
		if !n.restartForLeakedTasks(ctx) {
			t.Errorf("cleanup: %v", err)
		} else if err := n.deleteAfterRestart(ctx, pods); err != nil {
			t.Errorf("cleanup, after the restart of containerd: %v", err)
		}
	}
}

// removeBatch deletes pods through the API and checks that nothing of
// them is left: in the store, the runtime and the pod and log
// directories. Containers containerd cannot remove (see
// restartForLeakedTasks) are removed after a restart of containerd.
func (n *node) removeBatch(ctx context.Context, pods []*testPod) {
	n.t.Helper()
	if err := n.deletePods(ctx, pods); err != nil {
		if !n.restartForLeakedTasks(ctx) {
			n.t.Fatal(err)
		}
		if err := n.deleteAfterRestart(ctx, pods); err != nil {
			n.t.Fatalf("after the restart of containerd: %v", err)
		}
	}
	n.checkGone(ctx, pods)
}

// deleteAfterRestart deletes pods once podsyncd's connection to the
// restarted containerd is back: UNAVAILABLE is retried for a minute.
func (n *node) deleteAfterRestart(ctx context.Context, pods []*testPod) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		err := n.deletePods(ctx, pods)
		if !isCode(err, codes.Unavailable) || ctx.Err() != nil {
			return err
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// restartForLeakedTasks works around containerd/containerd#11037: when
// the caller of StartContainer goes away (podsyncd died) while containerd
// 2.x creates the task, the container is reported exited (StartError,
// "failed to get task pid: context canceled") but its task stays CREATED,
// and RemoveContainer fails ("cannot delete running task") until
// containerd restarts, which deletes created tasks. If the runtime holds
// such tasks, restartForLeakedTasks restarts containerd, waits until
// podsyncd serves again and returns true.
func (n *node) restartForLeakedTasks(ctx context.Context) bool {
	t := n.t
	t.Helper()
	rt, err := readRuntime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rt.leaked) == 0 {
		return false
	}
	t.Logf("containerd/containerd#11037: %d tasks left CREATED behind containers reported exited:\n  %s\nrestarting containerd",
		len(rt.leaked), strings.Join(rt.leaked, "\n  "))
	if err := inst.Stop(ctx); err != nil {
		t.Fatalf("stop containerd: %v", err)
	}
	if err := inst.Start(ctx); err != nil {
		t.Fatalf("start containerd: %v", err)
	}
	if d := n.cur; d != nil && !d.Exited() && !d.awaitServing(time.Minute) {
		t.Fatalf("%s exited", d.Name())
	}
	n.removeResurrected(ctx, rt.ghosts)
	return true
}

// removeResurrected removes the sandboxes containerd brought back when it
// restarted: ghosts are the tasks it held, before the restart, for
// sandboxes RemovePodSandbox had removed (runtimeState.ghosts). Such a
// sandbox is NOTREADY and of a pod podsyncd deleted; the podsyncd that
// runs would remove it at its next garbage collection, but a podsyncd
// started after it finds it on the runtime without the deletion on
// record, and keeps it as an orphan.
func (n *node) removeResurrected(ctx context.Context, ghosts []string) {
	t := n.t
	t.Helper()
	if len(ghosts) == 0 {
		return
	}
	rs, err := inst.RuntimeService(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rs.Close(context.WithoutCancel(ctx)) }()
	sandboxes, err := rs.ListPodSandbox(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range sandboxes {
		if !slices.Contains(ghosts, sb.GetId()) {
			continue
		}
		t.Logf("containerd brought back sandbox %.12s of pod %s (%s), which RemovePodSandbox had removed leaving its task behind; removing it",
			sb.GetId(), sb.GetMetadata().GetName(), sb.GetState())
		if err := removeSandbox(ctx, rs, sb.GetId()); err != nil {
			t.Fatal(err)
		}
	}
}

// removeSandbox stops and removes a sandbox through CRI; one that is gone
// already is no error.
func removeSandbox(ctx context.Context, rs cri.RuntimeService, id string) error {
	if err := rs.StopPodSandbox(ctx, id); err != nil && status.Code(err) != codes.NotFound {
		return fmt.Errorf("stop sandbox %.12s: %w", id, err)
	}
	if err := rs.RemovePodSandbox(ctx, id); err != nil && status.Code(err) != codes.NotFound {
		return fmt.Errorf("remove sandbox %.12s: %w", id, err)
	}
	return nil
}

// removeLeftovers removes, through CRI, what the runtime still holds
// under podsync's labels once a test's podsyncd has stopped, and fails
// the test if there was any: every test starts podsyncd on an empty
// store, which it refuses while the runtime holds podsync's pods, so a
// test's leftovers would fail every test after it.
func removeLeftovers(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := readRuntime(ctx)
	if err != nil {
		t.Errorf("cleanup: %v", err)
		return
	}
	if len(st.pods) == 0 {
		return
	}
	for _, uid := range slices.Sorted(maps.Keys(st.pods)) {
		t.Errorf("cleanup: the runtime still holds pod %s:%s; removing it", uid, st.pods[uid])
	}
	if err := inst.RemovePods(ctx); err != nil {
		t.Errorf("cleanup: %v", err)
	}
}

// checkGone checks that nothing of pods is left.
func (n *node) checkGone(ctx context.Context, pods []*testPod) {
	t := n.t
	t.Helper()
	uids := map[string]bool{}
	for _, p := range pods {
		uids[p.uid()] = true
	}
	eventually(ctx, t, "deleted pods are gone from the store and the runtime", func() []string {
		var problems []string
		list, err := n.client().ListPods(ctx, &podsyncv1.ListPodsRequest{})
		if err != nil {
			return []string{fmt.Sprintf("ListPods: %v", err)}
		}
		for _, p := range list.GetPods() {
			if uids[p.GetMetadata().GetUid()] {
				problems = append(problems, "still stored: "+p.GetMetadata().GetName())
			}
		}
		rt, err := readRuntime(ctx)
		if err != nil {
			return []string{err.Error()}
		}
		for uid := range rt.pods {
			if uids[uid] {
				problems = append(problems, fmt.Sprintf("runtime holds objects of deleted pod %s: %s", uid, rt.pods[uid]))
			}
		}
		for _, p := range pods {
			cfg := criconfig.Options{RootDir: n.rootDir, PodLogDir: n.podLogDir}
			for _, dir := range []string{criconfig.PodDir(p.core, cfg), criconfig.PodLogDirectory(p.core, cfg)} {
				if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
					problems = append(problems, fmt.Sprintf("directory of deleted pod %s left: %s (%v)", p.name(), dir, err))
				}
			}
		}
		return problems
	})
}

// eventually calls check every 250 ms until it reports no problem,
// failing the test with the last problems at ctx's deadline.
func eventually(ctx context.Context, t *testing.T, what string, check func() []string) {
	t.Helper()
	for {
		problems := check()
		if len(problems) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			slices.Sort(problems)
			t.Fatalf("%s: not reached:\n  %s", what, strings.Join(problems, "\n  "))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// isCode reports whether err is a status error with code c.
func isCode(err error, c codes.Code) bool {
	return status.Code(err) == c
}
