package runpods

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsync/podsync/engine/admit"
	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/store"
	"github.com/podsync/podsync/engine/syncer"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// script is what the fake node does with one pod after applying it: the
// statuses it records, in order, each after a short delay.
type script []corev1.PodStatus

// fakeNode stores pods in a real store and plays each pod's script into
// its revision log, as the pod workers would.
type fakeNode struct {
	t        *testing.T
	st       *store.Store
	scripts  map[string]script
	applyErr map[string]error
	wg       sync.WaitGroup
	mu       sync.Mutex
	applied  []string
	stop     chan struct{}
	// observers get a StartContainer step before each scripted status,
	// as the worker's later passes would report, or the pod's laterSteps
	// one by one; applySteps are the steps of a pod's Apply pass.
	observers  map[types.UID]func(syncer.StepResult)
	applySteps map[string][]syncer.StepResult
	laterSteps map[string][]syncer.StepResult
	// cutShort are the pods whose pass runs until the caller's deadline
	// and fails its sandbox's create for it.
	cutShort map[string]bool
}

func newFakeNode(t *testing.T) *fakeNode {
	st, err := store.Open(filepath.Join(t.TempDir(), "state.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	n := &fakeNode{t: t, st: st, scripts: map[string]script{}, applyErr: map[string]error{}, cutShort: map[string]bool{}, stop: make(chan struct{})}
	t.Cleanup(func() {
		close(n.stop)
		n.wg.Wait()
		_ = st.Close()
	})
	return n
}

func (n *fakeNode) Apply(ctx context.Context, pod *corev1.Pod, _ []*corev1.ConfigMap, _ []*corev1.Secret, emit func(syncer.StepResult)) (corev1.PodStatus, []syncer.StepResult, error) {
	if err := n.applyErr[pod.Name]; err != nil {
		return corev1.PodStatus{}, nil, err
	}
	if n.cutShort[pod.Name] {
		// A pass whose sandbox create the caller's deadline cuts short:
		// a failed step, not a failed call.
		// The CRI client reports its cancelled call as a gRPC status,
		// which is no context error.
		<-ctx.Done()
		cut := errors.New("run pod sandbox: rpc error: code = DeadlineExceeded desc = stream terminated by RST_STREAM with error code: CANCEL")
		return corev1.PodStatus{Phase: corev1.PodPending}, []syncer.StepResult{{Action: syncer.ActionCreatePodSandbox, Target: pod.Name,
			Err: cut, Reason: syncer.ReasonCreatePodSandboxError, Message: cut.Error()}}, nil
	}
	if _, err := n.st.Put(store.PodRecord{Pod: pod.DeepCopy()}); err != nil {
		return corev1.PodStatus{}, nil, err
	}
	n.mu.Lock()
	n.applied = append(n.applied, pod.Name)
	n.mu.Unlock()
	emit(syncer.StepResult{Action: syncer.ActionCreatePodSandbox, Target: pod.Name})
	pending := corev1.PodStatus{Phase: corev1.PodPending}
	ref := store.RefOf(pod)
	if _, err := n.st.Append(store.StatusChange(ref, &pending)); err != nil {
		return corev1.PodStatus{}, nil, err
	}
	steps := n.scripts[pod.Name]
	later := n.laterSteps[pod.Name]
	n.wg.Go(func() {
		for i, s := range steps {
			select {
			case <-n.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			n.mu.Lock()
			observe := n.observers[pod.UID]
			n.mu.Unlock()
			step := syncer.StepResult{Action: syncer.ActionStartContainer, Target: "app"}
			if i < len(later) {
				step = later[i]
			}
			if observe != nil {
				observe(step)
			}
			if _, err := n.st.Append(store.StatusChange(ref, &s)); err != nil {
				n.t.Errorf("append: %v", err)
				return
			}
		}
	})
	return pending, n.applySteps[pod.Name], nil
}

// admit is the fake node's admission of a batch: admit.Batch against the
// stored pods, with the node and policy of options.
func (n *fakeNode) admit(node admit.Node, policy admit.Policy) AdmitFunc {
	return func(pods []*corev1.Pod, allOrNothing bool) ([]admit.Result, []func(), error) {
		recs, _, err := n.st.ListShared(store.Filter{})
		if err != nil {
			return nil, nil, err
		}
		others := make([]*corev1.Pod, 0, len(recs))
		for _, rec := range recs {
			others = append(others, rec.Pod)
		}
		releases := make([]func(), len(pods))
		for i := range releases {
			releases[i] = func() {}
		}
		return admit.Batch(pods, others, node, policy, allOrNothing), releases, nil
	}
}

func (n *fakeNode) ObserveSteps(uid types.UID, fn func(syncer.StepResult)) func() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.observers == nil {
		n.observers = map[types.UID]func(syncer.StepResult){}
	}
	n.observers[uid] = fn
	return func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		delete(n.observers, uid)
	}
}

func (n *fakeNode) ListShared(_ context.Context, f store.Filter) ([]*store.PodRecord, int64, error) {
	return n.st.ListShared(f)
}

func (n *fakeNode) Events(_ context.Context, f store.EventFilter) ([]store.Entry, int64, error) {
	return n.st.Events(f)
}

func (n *fakeNode) Watch(ctx context.Context, since int64) (*store.Watcher, error) {
	return n.st.Watch(ctx, since)
}

func pod(name string, cpu string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyAlways,
			Containers:    []corev1.Container{{Name: "app", Image: "registry.local/busybox:local"}},
		},
	}
	if cpu != "" {
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
	}
	return p
}

func withHostPort(p *corev1.Pod, port int32) *corev1.Pod {
	p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: port, HostPort: port, Protocol: corev1.ProtocolTCP}}
	return p
}

var (
	running = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
		Name: "app", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
	}}}
	ready = func() corev1.PodStatus {
		s := *running.DeepCopy()
		s.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		return s
	}()
	succeeded = corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{
		Name: "app", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}},
	}}}
	failed = corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{
		Name: "app", RestartCount: 0,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}},
	}}}
)

func options(n *fakeNode, logDir string) Options {
	return Options{
		Pods: n,
		Admit: n.admit(admit.Node{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110")}},
			admit.Policy{AllowedHostPorts: []admit.PortRange{{From: 9000, To: 9000}}}),
		Apply:     n.Apply,
		PodLogDir: logDir,
	}
}

func outcomes(s Summary) []string {
	var out []string
	for _, r := range s.Results {
		out = append(out, r.Pod.Name+":"+r.Outcome.String()+":"+r.Reason)
	}
	return out
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

// TestBatchAdmission is the scenario: ten pods, one asking for
// more CPU than the node has, one for a host port another holds.
func TestBatchAdmission(t *testing.T) {
	build := func() []*corev1.Pod {
		var pods []*corev1.Pod
		for i := range 10 {
			pods = append(pods, pod(fmt.Sprintf("p%d", i), "100m"))
		}
		pods[3] = pod("p3", "8")
		pods[1] = withHostPort(pods[1], 9000)
		pods[6] = withHostPort(pods[6], 9000)
		return pods
	}
	t.Run("best effort runs 8", func(t *testing.T) {
		n := newFakeNode(t)
		for i := range 10 {
			n.scripts[fmt.Sprintf("p%d", i)] = script{running}
		}
		s, err := Run(ctx(t), options(n, t.TempDir()), Request{Pods: build(), Timeout: 5 * time.Second}, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"p0:ReachedTarget:", "p1:ReachedTarget:", "p2:ReachedTarget:", "p3:Rejected:OutOfcpu", "p4:ReachedTarget:",
			"p5:ReachedTarget:", "p6:Rejected:NodePorts", "p7:ReachedTarget:", "p8:ReachedTarget:", "p9:ReachedTarget:"}
		if diff := cmp.Diff(want, outcomes(s)); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		if s.ReachedTarget != 8 || s.Rejected != 2 || s.Failed != 0 || s.TimedOut != 0 {
			t.Errorf("summary counts %+v", s)
		}
		if len(n.applied) != 8 {
			t.Errorf("applied %v, want the 8 admitted pods", n.applied)
		}
	})
	t.Run("all or nothing runs none", func(t *testing.T) {
		n := newFakeNode(t)
		s, err := Run(ctx(t), options(n, t.TempDir()), Request{Pods: build(), AllOrNothing: true, Timeout: 5 * time.Second}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if s.Rejected != 10 || len(n.applied) != 0 {
			t.Errorf("rejected %d, applied %v; want all rejected and none applied", s.Rejected, n.applied)
		}
		if s.Results[0].Reason != admit.ReasonNotRunAllOrNothing || s.Results[3].Reason != admit.ReasonOutOfCPU {
			t.Errorf("reasons %v", outcomes(s))
		}
	})
	t.Run("running pods count against the batch", func(t *testing.T) {
		n := newFakeNode(t)
		old := pod("old", "3900m")
		if _, err := n.st.Put(store.PodRecord{Pod: old}); err != nil {
			t.Fatal(err)
		}
		n.scripts["p0"] = script{running}
		s, err := Run(ctx(t), options(n, t.TempDir()), Request{Pods: []*corev1.Pod{pod("p0", "50m"), pod("p1", "500m")}, Timeout: 5 * time.Second}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"p0:ReachedTarget:", "p1:Rejected:OutOfcpu"}, outcomes(s)); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
}

func TestTargets(t *testing.T) {
	tests := []struct {
		name       string
		waitFor    WaitFor
		script     script
		want       Outcome
		wantReason string
	}{
		{"running is reached when every container runs", Running, script{running}, ReachedTarget, ""},
		{"ready waits for the Ready condition", Ready, script{running, ready}, ReachedTarget, ""},
		{"succeeded waits for phase Succeeded", Succeeded, script{running, succeeded}, ReachedTarget, ""},
		{"a failed pod is a failure, never a success", Succeeded, script{running, failed}, Failed, ReasonPodFailed},
		{"a pod that completes is not running", Running, script{succeeded}, Failed, ReasonPodCompleted},
		{"a failed pod fails a wait for running", Running, script{failed}, Failed, ReasonPodFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newFakeNode(t)
			n.scripts["a"] = tt.script
			s, err := Run(ctx(t), options(n, t.TempDir()), Request{Pods: []*corev1.Pod{pod("a", "")}, WaitFor: tt.waitFor, Timeout: 5 * time.Second}, nil)
			if err != nil {
				t.Fatal(err)
			}
			r := s.Results[0]
			if r.Outcome != tt.want || r.Reason != tt.wantReason {
				t.Errorf("outcome %s %q, want %s %q", r.Outcome, r.Reason, tt.want, tt.wantReason)
			}
		})
	}
}

// TestFailedPodReportsContainerAndLog: a container that prints a line and
// exits 1 under restartPolicy Never gives a failed result naming it, its
// exit code and that line.
func TestFailedPodReportsContainerAndLog(t *testing.T) {
	n := newFakeNode(t)
	logDir := t.TempDir()
	p := pod("job", "")
	p.Spec.RestartPolicy = corev1.RestartPolicyNever
	dir := filepath.Join(criconfig.PodLogDirectory(p, criconfig.Options{PodLogDir: logDir}), "app")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	log := "2026-11-29T10:00:00.000000000Z stdout F starting\n2026-11-29T10:00:01.000000000Z stderr F boom: cannot connect\n"
	if err := os.WriteFile(filepath.Join(dir, "0.log"), []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	n.scripts["job"] = script{failed}
	s, err := Run(ctx(t), options(n, logDir), Request{Pods: []*corev1.Pod{p}, WaitFor: Succeeded, Timeout: 5 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := s.Results[0]
	code := int32(1)
	want := []FailedContainer{{Name: "app", ContainerType: syncer.ContainerTypeRegular, ExitCode: &code, Reason: "Error",
		LogTail: []string{"starting", "boom: cannot connect"}}}
	if diff := cmp.Diff(want, r.FailedContainers); diff != "" {
		t.Errorf("failed containers (-want +got):\n%s", diff)
	}
	if s.Failed != 1 || r.Status.Phase != corev1.PodFailed {
		t.Errorf("summary %+v, status phase %s", s, r.Status.Phase)
	}
}

// TestTimeoutIsPerPod: a pod that misses its timeout is reported alone;
// the others are unaffected, and nothing is done to the slow pod.
func TestTimeoutIsPerPod(t *testing.T) {
	n := newFakeNode(t)
	n.scripts["fast"] = script{running}
	n.scripts["slow"] = script{} // never runs
	s, err := Run(ctx(t), options(n, t.TempDir()), Request{Pods: []*corev1.Pod{pod("fast", ""), pod("slow", "")}, Timeout: 300 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"fast:ReachedTarget:", "slow:TimedOut:DeadlineExceeded"}, outcomes(s)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := n.st.Get("uid-slow"); err != nil {
		t.Errorf("the slow pod was removed: %v", err)
	}
}

func TestSyncErrorFailsThePod(t *testing.T) {
	n := newFakeNode(t)
	n.applyErr["a"] = errors.New("runtime exploded")
	s, err := Run(ctx(t), options(n, t.TempDir()), Request{Pods: []*corev1.Pod{pod("a", "")}, Timeout: time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := s.Results[0]; r.Outcome != Failed || r.Reason != ReasonSyncError {
		t.Errorf("result %+v, want Failed SyncError", r)
	}
}

// TestRuntimeUnavailableEndsTheRun: a pod whose apply finds the runtime
// unavailable has not failed; the run ends at once with the error, without
// waiting for the pods applied, which stay stored.
func TestRuntimeUnavailableEndsTheRun(t *testing.T) {
	n := newFakeNode(t)
	n.scripts["waiting"] = script{} // never runs
	n.applyErr["late"] = fmt.Errorf("read runtime state: %w", errdefs.ErrRuntimeUnavailable)
	start := time.Now()
	_, err := Run(ctx(t), options(n, t.TempDir()), Request{Pods: []*corev1.Pod{pod("waiting", ""), pod("late", "")}, Timeout: time.Minute}, nil)
	if !errors.Is(err, errdefs.ErrRuntimeUnavailable) {
		t.Fatalf("err = %v, want one wrapping ErrRuntimeUnavailable", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Run took %s to give up", d)
	}
	if _, err := n.st.Get("uid-waiting"); err != nil {
		t.Errorf("the applied pod was removed: %v", err)
	}
}

// TestCallerGoneStopsWaitingOnly: cancelling the caller's ctx returns its
// error promptly; the pods stay stored.
func TestCallerGoneStopsWaitingOnly(t *testing.T) {
	n := newFakeNode(t)
	c, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := Run(c, options(n, t.TempDir()), Request{Pods: []*corev1.Pod{pod("a", "")}, Timeout: time.Minute}, nil)
		done <- err
	}()
	deadline := time.After(5 * time.Second)
	for {
		if _, err := n.st.Get("uid-a"); err == nil {
			break
		}
		select {
		case <-deadline:
			t.Fatal("pod never applied")
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after the caller went away")
	}
	if _, err := n.st.Get("uid-a"); err != nil {
		t.Errorf("the pod was removed: %v", err)
	}
}

func TestProgressStreamsStepsAndStatuses(t *testing.T) {
	n := newFakeNode(t)
	n.scripts["a"] = script{running}
	var mu sync.Mutex
	var got []string
	_, err := Run(ctx(t), options(n, t.TempDir()), Request{Pods: []*corev1.Pod{pod("a", "")}, Timeout: 5 * time.Second}, func(p Progress) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case p.Step != nil:
			got = append(got, "step:"+string(p.Step.Action))
		case p.Status != nil:
			got = append(got, "status:"+string(p.Status.Phase))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	// The worker's later steps are queued apart from the statuses: their
	// relative order is not fixed.
	want := []string{"status:Pending", "status:Running", "step:" + string(syncer.ActionCreatePodSandbox), "step:" + string(syncer.ActionStartContainer)}
	slices.Sort(got)
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("progress (-want +got):\n%s", diff)
	}
}

// TestTimeoutDuringThePassIsATimeout: a pod whose deadline ends during
// its first pass, failing a step the deadline cut short (a sandbox's
// create on a loaded machine), timed out: it is not failed with a sync
// error.
func TestTimeoutDuringThePassIsATimeout(t *testing.T) {
	n := newFakeNode(t)
	n.cutShort["slow"] = true
	s, err := Run(ctx(t), options(n, t.TempDir()), Request{Pods: []*corev1.Pod{pod("slow", "")}, Timeout: 200 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := s.Results[0]; r.Outcome != TimedOut || r.Reason != ReasonDeadlineExceeded {
		t.Errorf("slow pod: %s %s (%s), want TimedOut DeadlineExceeded", r.Outcome, r.Reason, r.Message)
	}
}

// TestRunningMeansStayingUp: with MinReady, a container that exits soon
// after it started is not reported as running: its crash-loop back-off
// fails the run with its exit; without MinReady the first running status
// is enough (the kubelet's run-once rule), and a container that stays up
// MinReady is running.
func TestRunningMeansStayingUp(t *testing.T) {
	startedNow := func() corev1.PodStatus {
		s := *running.DeepCopy()
		s.ContainerStatuses[0].State.Running.StartedAt = metav1.Now()
		return s
	}
	crashLoop := corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
		Name: "app", RestartCount: 1,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 10s restarting failed container"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error",
			StartedAt: metav1.NewTime(time.Unix(100, 0)), FinishedAt: metav1.NewTime(time.Unix(101, 0))}},
	}}}
	for _, tt := range []struct {
		name     string
		minReady time.Duration
		script   func() script
		want     string
	}{
		{"a crash within MinReady fails the run", 5 * time.Second, func() script { return script{startedNow(), crashLoop} }, "a:Failed:CrashLoopBackOff"},
		{"without MinReady running is enough", 0, func() script { return script{startedNow(), crashLoop} }, "a:ReachedTarget:"},
		{"a container up MinReady is running", 100 * time.Millisecond, func() script { return script{startedNow()} }, "a:ReachedTarget:"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := newFakeNode(t)
			n.scripts["a"] = tt.script()
			s, err := Run(ctx(t), options(n, t.TempDir()), Request{Pods: []*corev1.Pod{pod("a", "")}, WaitFor: Running, Timeout: 5 * time.Second, MinReady: tt.minReady}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := outcomes(s); got[0] != tt.want {
				t.Fatalf("outcome %s, want %s (%s)", got[0], tt.want, s.Results[0].Message)
			}
			if r := s.Results[0]; r.Reason == ReasonCrashLoopBackOff &&
				r.Message != "container app exited with code 3 (Error) after 1s and is restarted with back-off (1 restarts)" {
				t.Errorf("message %q", r.Message)
			}
		})
	}
}

// TestTimeoutNamesWhatBlocks: a pod that misses its timeout is reported
// with what each container not yet at the target waits for and its last
// event, not only that it did not get there.
func TestTimeoutNamesWhatBlocks(t *testing.T) {
	n := newFakeNode(t)
	p := pod("a", "")
	n.scripts["a"] = script{{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: "app",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError", Message: `secret "creds" not found`}}}}}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// The worker's event, once the pod is stored.
		for range 100 {
			if _, err := n.st.Append(store.EventChange(store.RefOf(p), store.Event{Type: corev1.EventTypeWarning, Reason: "Failed", Container: "app",
				Message: `Error: CreateContainerConfigError: secret "creds" not found`})); err == nil {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	s, err := Run(ctx(t), options(n, t.TempDir()), Request{Pods: []*corev1.Pod{p}, WaitFor: Running, Timeout: 500 * time.Millisecond}, nil)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	want := `pod did not reach Running within 500ms: container app waiting: CreateContainerConfigError: secret "creds" not found; ` +
		`last event: Warning Failed: Error: CreateContainerConfigError: secret "creds" not found`
	if r := s.Results[0]; r.Outcome != TimedOut || r.Message != want {
		t.Errorf("result %s %q\nwant TimedOut %q", r.Outcome, r.Message, want)
	}
}
