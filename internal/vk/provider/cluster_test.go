package provider

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/client"
	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
)

// recorded is one event a provider recorded.
type recorded struct {
	obj                  runtime.Object
	typ, reason, message string
}

type fakeRecorder struct {
	mu     sync.Mutex
	events []recorded
	ch     chan recorded
}

func (r *fakeRecorder) Event(obj runtime.Object, typ, reason, message string) {
	r.mu.Lock()
	r.events = append(r.events, recorded{obj, typ, reason, message})
	r.mu.Unlock()
	if r.ch != nil {
		r.ch <- recorded{obj, typ, reason, message}
	}
}

func TestAPIServerMetadataNeverReachesPodsync(t *testing.T) {
	f := newFake()
	p := New("vk-1", f, zap.NewNop())
	pod := testPod("1")
	pod.GenerateName = "pi-"
	pod.Finalizers = []string{"batch.kubernetes.io/job-tracking"}
	pod.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "example.com/lb"}}
	pod.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debugger", Image: "busybox"}}}
	if err := p.CreatePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	// podsync's API has none of these fields and refuses a pod with
	// them (convert); applied at all, the pod left them out.
	if len(f.synced) != 1 {
		t.Fatalf("SyncPod calls = %d, want 1: the pod was not applied", len(f.synced))
	}
	if got := f.synced[0].GetPod().GetSpec().GetEphemeralContainers(); len(got) != 0 {
		t.Errorf("ephemeral containers in the spec sent = %v, want none: they are added one by one", got)
	}
	if len(f.added) != 1 {
		t.Errorf("AddEphemeralContainer calls = %v, want the debugger added", f.added)
	}
	if len(pod.Finalizers) != 1 || len(pod.Spec.EphemeralContainers) != 1 {
		t.Error("CreatePod modified its argument")
	}
}

func TestEphemeralContainersAreAddedOnce(t *testing.T) {
	f := newFake()
	rec := &fakeRecorder{}
	p := New("vk-1", f, zap.NewNop())
	p.UseEvents(rec)
	pod := testPod("1")
	if err := p.CreatePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if len(f.added) != 0 {
		t.Fatalf("AddEphemeralContainer calls for a pod without any: %v", f.added)
	}
	// kubectl debug: the ephemeralcontainers subresource adds one.
	dbg := pod.DeepCopy()
	dbg.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
		Name: "debugger-x", Image: "busybox", Stdin: true, TTY: true}, TargetContainerName: "c"}}
	if err := p.UpdatePod(context.Background(), dbg); err != nil {
		t.Fatal(err)
	}
	if len(f.added) != 1 || f.added[0] != "debugger-x" {
		t.Fatalf("added = %v, want [debugger-x]", f.added)
	}
	ec := f.ephemeral["default/web"][0]
	if ec.GetTargetContainerName() != "c" || !ec.GetStdin() || !ec.GetTty() {
		t.Errorf("ephemeral container sent = %v, want the target, stdin and tty kept", ec)
	}
	// A later update (a status, a label) adds nothing again; a second
	// debug container is added alone.
	if err := p.UpdatePod(context.Background(), dbg); err != nil {
		t.Fatal(err)
	}
	two := dbg.DeepCopy()
	two.Spec.EphemeralContainers = append(two.Spec.EphemeralContainers, corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debugger-y", Image: "busybox"}})
	if err := p.UpdatePod(context.Background(), two); err != nil {
		t.Fatal(err)
	}
	if strings.Join(f.added, ",") != "debugger-x,debugger-y" {
		t.Errorf("added = %v, want each ephemeral container once", f.added)
	}
	// One podsyncd refuses is an event on the pod, not the pod's failure.
	f.addErr = &client.Error{Op: "AddEphemeralContainer", Code: codes.InvalidArgument, Reason: "InvalidSpec", Message: "ephemeralContainers[0].ports: not allowed"}
	three := two.DeepCopy()
	three.Spec.EphemeralContainers = append(three.Spec.EphemeralContainers, corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "bad", Image: "busybox"}})
	if err := p.UpdatePod(context.Background(), three); err != nil {
		t.Fatalf("UpdatePod with a refused ephemeral container: %v, want nil", err)
	}
	if len(rec.events) != 1 || rec.events[0].typ != corev1.EventTypeWarning || rec.events[0].reason != "Failed" ||
		!strings.Contains(rec.events[0].message, "ports: not allowed") {
		t.Fatalf("events = %+v, want one warning Failed with podsyncd's message", rec.events)
	}
	if ref, ok := rec.events[0].obj.(*corev1.ObjectReference); !ok || ref.FieldPath != "spec.ephemeralContainers{bad}" || ref.UID != pod.UID {
		t.Errorf("event on %+v, want the pod's ephemeral container bad, as the kubelet's", rec.events[0].obj)
	}
	// The refusal is for good: a later update neither adds it again nor
	// warns again.
	if err := p.UpdatePod(context.Background(), three); err != nil {
		t.Fatal(err)
	}
	if strings.Join(f.added, ",") != "debugger-x,debugger-y,bad" || len(rec.events) != 1 {
		t.Errorf("after another update: added = %v, %d events; want bad tried once, one event", f.added, len(rec.events))
	}
	if len(f.synced) != 6 {
		t.Errorf("SyncPod calls = %d, want 6 (the create and each update applied)", len(f.synced))
	}
}

// runProvider runs p (and its fake's watch) until the test ends and
// returns the pods it notifies.
func runProvider(t *testing.T, p *Provider, f *fakePodsync) *notified {
	t.Helper()
	n := &notified{ch: make(chan *corev1.Pod, 64)}
	p.NotifyPods(context.Background(), n.fn)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	<-f.watched
	return n
}

// statusOf sends podsyncd's status of pod through the fake's watch.
func statusOf(f *fakePodsync, pod *corev1.Pod, st *podsyncv1.PodStatus) {
	f.events <- &podsyncv1.WatchPodsResponse{Pod: &podsyncv1.PodRef{Namespace: pod.Namespace, Name: pod.Name, Uid: string(pod.UID)},
		Change: &podsyncv1.WatchPodsResponse_Status{Status: st}}
}

// until waits for the notified pod that cond accepts.
func (n *notified) until(t *testing.T, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	deadline := time.After(5 * time.Second)
	var last *corev1.Pod
	for {
		select {
		case p := <-n.ch:
			if cond(p) {
				return p
			}
			last = p
		case <-deadline:
			if last != nil {
				t.Fatalf("%s: not within 5s; last status %+v", what, last.Status)
			}
			t.Fatalf("%s: nothing notified within 5s", what)
			return nil
		}
	}
}

func ephemeralWaiting(p *corev1.Pod, name string) *corev1.ContainerStateWaiting {
	if st := getStatus(p.Status.EphemeralContainerStatuses, name); st != nil {
		return st.State.Waiting
	}
	return nil
}

// TestRefusedEphemeralContainerWaitsInTheStatus: a debug container
// podsyncd refuses is, in the pod's ephemeralContainerStatuses, waiting
// with podsyncd's reason and message (kubectl debug prints the message
// instead of waiting silently), beside podsyncd's own statuses; the pod
// stays Running.
func TestRefusedEphemeralContainerWaitsInTheStatus(t *testing.T) {
	f := newFake()
	p := New("vk-1", f, zap.NewNop())
	n := runProvider(t, p, f)
	pod := testPod("1")
	if err := p.CreatePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	running := &podsyncv1.PodStatus{Phase: "Running", EphemeralContainerStatuses: []*podsyncv1.ContainerStatus{{
		Name: "ok", State: &podsyncv1.ContainerState{Running: &podsyncv1.ContainerStateRunning{}}}}}
	statusOf(f, pod, running)
	n.until(t, "the pod running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })

	f.mu.Lock()
	f.addErrs = []error{nil, &client.Error{Op: "AddEphemeralContainer", Code: codes.FailedPrecondition, Reason: "PodSecurity",
		Message: `violates PodSecurity "baseline:latest": privileged (container "priv" must not set securityContext.privileged=true)`}}
	f.mu.Unlock()
	dbg := pod.DeepCopy()
	dbg.Spec.EphemeralContainers = []corev1.EphemeralContainer{
		{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "ok", Image: "busybox"}},
		{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "priv", Image: "busybox",
			SecurityContext: &corev1.SecurityContext{Privileged: new(true)}}},
	}
	if err := p.UpdatePod(context.Background(), dbg); err != nil {
		t.Fatalf("UpdatePod with a refused ephemeral container: %v, want nil", err)
	}
	got := n.until(t, "priv waiting", func(p *corev1.Pod) bool { return ephemeralWaiting(p, "priv") != nil })
	w := ephemeralWaiting(got, "priv")
	if w.Reason != "PodSecurity" || !strings.Contains(w.Message, "securityContext.privileged=true") {
		t.Errorf("priv waiting %+v, want podsyncd's reason and message", w)
	}
	if got.Status.Phase != corev1.PodRunning || len(got.Status.EphemeralContainerStatuses) != 2 ||
		got.Status.EphemeralContainerStatuses[0].Name != "ok" || got.Status.EphemeralContainerStatuses[0].State.Running == nil {
		t.Errorf("status = %s %+v, want Running with ok running (podsyncd's) and priv waiting", got.Status.Phase, got.Status.EphemeralContainerStatuses)
	}
	// A later status from podsyncd keeps the refusal shown.
	later := proto.Clone(running).(*podsyncv1.PodStatus)
	later.PodIp = "10.88.0.9"
	statusOf(f, pod, later)
	got = n.next(t)
	if w := ephemeralWaiting(got, "priv"); w == nil || w.Reason != "PodSecurity" || got.Status.PodIP != "10.88.0.9" {
		t.Errorf("after podsyncd's next status: IP %q, %+v, want its IP and priv still waiting", got.Status.PodIP, got.Status.EphemeralContainerStatuses)
	}
	// The pod's end ends it too.
	if err := p.DeletePod(context.Background(), dbg); err != nil {
		t.Fatal(err)
	}
	last := n.next(t)
	if st := getStatus(last.Status.EphemeralContainerStatuses, "priv"); st == nil || st.State.Terminated == nil {
		t.Errorf("deleted pod's statuses %+v, want priv terminated", last.Status.EphemeralContainerStatuses)
	}
}

// TestEphemeralContainerOfAPodNotRunningYet: podsyncd adds debug
// containers to running pods only; one added earlier waits
// (ContainerCreating) and is added once podsyncd reports the pod
// running; one a transient error stopped is added again shortly.
func TestEphemeralContainerOfAPodNotRunningYet(t *testing.T) {
	f := newFake()
	p := New("vk-1", f, zap.NewNop())
	p.debug.retryDelay = 10 * time.Millisecond
	n := runProvider(t, p, f)
	pod := testPod("1")
	if err := p.CreatePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	statusOf(f, pod, &podsyncv1.PodStatus{Phase: "Pending"})
	n.until(t, "the pod pending", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodPending })

	f.mu.Lock()
	f.addErrs = []error{
		&client.Error{Op: "AddEphemeralContainer", Code: codes.FailedPrecondition, Reason: client.ReasonContainerNotRunning, Message: `pod phase is "Pending"`},
		&client.Error{Op: "AddEphemeralContainer", Code: codes.Unavailable, Reason: client.ReasonRuntimeUnavailable, Message: "containerd restarting"},
	}
	f.mu.Unlock()
	dbg := pod.DeepCopy()
	dbg.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "dbg", Image: "busybox"}}}
	if err := p.UpdatePod(context.Background(), dbg); err != nil {
		t.Fatal(err)
	}
	got := n.until(t, "dbg waiting", func(p *corev1.Pod) bool { return ephemeralWaiting(p, "dbg") != nil })
	if w := ephemeralWaiting(got, "dbg"); w.Reason != ReasonContainerCreating || w.Message == "" {
		t.Errorf("dbg waiting %+v, want ContainerCreating, saying why", w)
	}
	// Running: added again (refused once more, as unavailable), then again
	// after the delay: podsyncd holds it.
	statusOf(f, pod, &podsyncv1.PodStatus{Phase: "Running"})
	deadline := time.Now().Add(5 * time.Second)
	for {
		f.mu.Lock()
		added := strings.Join(f.added, ",")
		held := len(f.ephemeral["default/web"])
		f.mu.Unlock()
		if held == 1 {
			if added != "dbg,dbg,dbg" {
				t.Errorf("AddEphemeralContainer calls = %s, want dbg three times (not running, unavailable, added)", added)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("dbg not added within 5s of the pod running: calls %s", added)
		}
		time.Sleep(10 * time.Millisecond)
	}
	got = n.until(t, "dbg no longer waiting on podsync-vk's account", func(p *corev1.Pod) bool { return ephemeralWaiting(p, "dbg") == nil })
	if got.Status.Phase != corev1.PodRunning {
		t.Errorf("phase = %s, want Running", got.Status.Phase)
	}
}

func TestReadinessGatesAsTheKubelet(t *testing.T) {
	ready := func(status corev1.ConditionStatus, reason string) corev1.PodCondition {
		return corev1.PodCondition{Type: corev1.PodReady, Status: status, Reason: reason}
	}
	gate := func(status corev1.ConditionStatus) corev1.PodCondition {
		return corev1.PodCondition{Type: "example.com/lb", Status: status}
	}
	for _, tc := range []struct {
		name       string
		gates      bool
		podsync    corev1.PodCondition
		current    []corev1.PodCondition
		wantStatus corev1.ConditionStatus
		wantReason string
		wantMsg    string
	}{
		{name: "no gates", podsync: ready(corev1.ConditionTrue, ""), wantStatus: corev1.ConditionTrue},
		{name: "gate missing", gates: true, podsync: ready(corev1.ConditionTrue, ""), wantStatus: corev1.ConditionFalse,
			wantReason: "ReadinessGatesNotReady", wantMsg: `corresponding condition of pod readiness gate "example.com/lb" does not exist.`},
		{name: "gate false", gates: true, podsync: ready(corev1.ConditionTrue, ""), current: []corev1.PodCondition{gate(corev1.ConditionFalse)},
			wantStatus: corev1.ConditionFalse, wantReason: "ReadinessGatesNotReady", wantMsg: `the status of pod readiness gate "example.com/lb" is not "True", but False`},
		{name: "gate true", gates: true, podsync: ready(corev1.ConditionTrue, ""), current: []corev1.PodCondition{gate(corev1.ConditionTrue)},
			wantStatus: corev1.ConditionTrue},
		{name: "containers not ready", gates: true, podsync: ready(corev1.ConditionFalse, "ContainersNotReady"), current: []corev1.PodCondition{gate(corev1.ConditionTrue)},
			wantStatus: corev1.ConditionFalse, wantReason: "ContainersNotReady"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod("1")
			if tc.gates {
				pod.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "example.com/lb"}}
			}
			pod.Status.Conditions = []corev1.PodCondition{tc.podsync}
			applyReadinessGates(pod, tc.current)
			var got *corev1.PodCondition
			for i := range pod.Status.Conditions {
				if pod.Status.Conditions[i].Type == corev1.PodReady {
					got = &pod.Status.Conditions[i]
				}
			}
			if got == nil || got.Status != tc.wantStatus || got.Reason != tc.wantReason || got.Message != tc.wantMsg {
				t.Errorf("Ready = %+v, want %s %q %q", got, tc.wantStatus, tc.wantReason, tc.wantMsg)
			}
			if len(tc.current) > 0 {
				found := false
				for _, c := range pod.Status.Conditions {
					found = found || c.Type == "example.com/lb"
				}
				if !found {
					t.Error("the gate's condition is not in the status: the status update would remove it")
				}
			}
		})
	}
}

func TestGateChangeIsReported(t *testing.T) {
	f := newFake()
	p := New("vk-1", f, zap.NewNop())
	var mu sync.Mutex
	current := []corev1.PodCondition{}
	p.UseKubeConditions(func(namespace, name string) []corev1.PodCondition {
		mu.Lock()
		defer mu.Unlock()
		return current
	})
	n := &notified{ch: make(chan *corev1.Pod, 8)}
	p.NotifyPods(context.Background(), n.fn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = p.Run(ctx) }()
	<-f.watched
	pod := testPod("1")
	pod.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "example.com/lb"}}
	if err := p.CreatePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	f.events <- &podsyncv1.WatchPodsResponse{Revision: 2, Pod: &podsyncv1.PodRef{Namespace: "default", Name: "web", Uid: uid1},
		Change: &podsyncv1.WatchPodsResponse_Status{Status: &podsyncv1.PodStatus{Phase: "Running",
			Conditions: []*podsyncv1.PodCondition{{Type: "Ready", Status: "True"}}}}}
	got := n.next(t)
	for got.Status.Phase != corev1.PodRunning {
		got = n.next(t)
	}
	if c := readyOf(got); c.Status != corev1.ConditionFalse || c.Reason != "ReadinessGatesNotReady" {
		t.Errorf("Ready with the gate unset = %+v, want False ReadinessGatesNotReady", c)
	}
	mu.Lock()
	current = []corev1.PodCondition{{Type: "example.com/lb", Status: corev1.ConditionTrue}}
	mu.Unlock()
	p.GateChanged("default", "web")
	if c := readyOf(n.next(t)); c.Status != corev1.ConditionTrue {
		t.Errorf("Ready once the gate is True = %+v, want True", c)
	}
}

func readyOf(pod *corev1.Pod) corev1.PodCondition {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c
		}
	}
	return corev1.PodCondition{}
}

func TestPodsyncEventsAreTheKubelets(t *testing.T) {
	f := newFake()
	rec := &fakeRecorder{ch: make(chan recorded, 4)}
	p := New("vk-1", f, zap.NewNop())
	p.UseEvents(rec)
	p.NotifyPods(context.Background(), func(*corev1.Pod) {})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = p.Run(ctx) }()
	<-f.watched
	pod := testPod("1")
	pod.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox"}}
	if err := p.CreatePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	ref := &podsyncv1.PodRef{Namespace: "default", Name: "web", Uid: uid1}
	// An event of another incarnation is not this pod's.
	f.events <- &podsyncv1.WatchPodsResponse{Revision: 2, Pod: &podsyncv1.PodRef{Namespace: "default", Name: "web", Uid: uid2},
		Change: &podsyncv1.WatchPodsResponse_Event{Event: &podsyncv1.PodEvent{Reason: "Pulled", Container: "c"}}}
	f.events <- &podsyncv1.WatchPodsResponse{Revision: 3, Pod: ref,
		Change: &podsyncv1.WatchPodsResponse_Event{Event: &podsyncv1.PodEvent{Type: podsyncv1.EventType_EVENT_TYPE_NORMAL, Reason: "Pulled", Container: "init", Message: "Container image \"busybox\" already present on machine"}}}
	f.events <- &podsyncv1.WatchPodsResponse{Revision: 4, Pod: ref,
		Change: &podsyncv1.WatchPodsResponse_Event{Event: &podsyncv1.PodEvent{Type: podsyncv1.EventType_EVENT_TYPE_WARNING, Reason: "BackOff", Container: "c", Message: "Back-off restarting failed container c"}}}
	for i, want := range []struct{ typ, reason, path string }{
		{corev1.EventTypeNormal, "Pulled", "spec.initContainers{init}"},
		{corev1.EventTypeWarning, "BackOff", "spec.containers{c}"},
	} {
		var got recorded
		select {
		case got = <-rec.ch:
		case <-time.After(5 * time.Second):
			t.Fatalf("event %d not recorded within 5s", i)
		}
		r, ok := got.obj.(*corev1.ObjectReference)
		if !ok || got.typ != want.typ || got.reason != want.reason || r.FieldPath != want.path || r.UID != uid1 || r.Kind != "Pod" {
			t.Errorf("event %d = %+v (%+v), want %s %s on %s", i, got, r, want.typ, want.reason, want.path)
		}
	}
}

// fakeKube records the pods the provider finishes on the API server.
type fakeKube struct {
	mu       sync.Mutex
	finished []*corev1.PodStatus
	// ch, if set, is sent each status finished.
	ch chan *corev1.PodStatus
}

func (k *fakeKube) FinishDeleted(_ context.Context, pod *corev1.Pod, st *corev1.PodStatus) error {
	k.mu.Lock()
	k.finished = append(k.finished, st.DeepCopy())
	ch := k.ch
	k.mu.Unlock()
	if ch != nil {
		ch <- st.DeepCopy()
	}
	return nil
}

func (k *fakeKube) count() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.finished)
}

func TestDeletedPodIsFinishedWithItsRealExit(t *testing.T) {
	f := newFake()
	f.final = &podsyncv1.PodStatus{Phase: "Running", ContainerStatuses: []*podsyncv1.ContainerStatus{{Name: "c",
		State: &podsyncv1.ContainerState{Terminated: &podsyncv1.ContainerStateTerminated{ExitCode: 3, Reason: "Error"}}}}}
	k := &fakeKube{}
	p := New("vk-1", f, zap.NewNop())
	p.UseKube(k)
	n := &notified{ch: make(chan *corev1.Pod, 4)}
	p.NotifyPods(context.Background(), n.fn)
	pod := testPod("1")
	if err := p.CreatePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if err := p.DeletePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if len(k.finished) != 1 {
		t.Fatalf("FinishDeleted calls = %d, want 1", len(k.finished))
	}
	st := k.finished[0]
	if len(st.ContainerStatuses) != 1 || st.ContainerStatuses[0].State.Terminated == nil || st.ContainerStatuses[0].State.Terminated.ExitCode != 3 {
		t.Errorf("finished status = %+v, want the container's own exit code 3", st.ContainerStatuses)
	}
	if st.Phase != corev1.PodFailed {
		t.Errorf("finished phase = %s, want Failed (a container exited 3)", st.Phase)
	}
}

func TestStatusObservesTheAppliedGeneration(t *testing.T) {
	f := newFake()
	p := New("vk-1", f, zap.NewNop())
	n := &notified{ch: make(chan *corev1.Pod, 8)}
	p.NotifyPods(context.Background(), n.fn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = p.Run(ctx) }()
	<-f.watched
	pod := testPod("1")
	pod.Generation = 3
	if err := p.CreatePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	// podsyncd's status carries its own counter; the pod's is reported.
	f.events <- &podsyncv1.WatchPodsResponse{Revision: 2, Pod: &podsyncv1.PodRef{Namespace: "default", Name: "web", Uid: uid1},
		Change: &podsyncv1.WatchPodsResponse_Status{Status: &podsyncv1.PodStatus{Phase: "Running", ObservedGeneration: 1,
			Conditions: []*podsyncv1.PodCondition{{Type: "Ready", Status: "True"}}}}}
	got := n.next(t)
	if got.Status.ObservedGeneration != 3 || got.Status.Conditions[0].ObservedGeneration != 3 {
		t.Errorf("observedGeneration = %d, Ready's %d, want 3 (the pod's metadata.generation)", got.Status.ObservedGeneration, got.Status.Conditions[0].ObservedGeneration)
	}
	resized := pod.DeepCopy()
	resized.Generation = 4
	if err := p.UpdatePod(context.Background(), resized); err != nil {
		t.Fatal(err)
	}
	if got := n.next(t); got.Status.ObservedGeneration != 4 {
		t.Errorf("observedGeneration after an update = %d, want 4", got.Status.ObservedGeneration)
	}
}

// TestADeletedPodsObjectGoesOnceItIsKilled: the kill's last status on the
// watch finishes the pod's object while podsyncd still removes the pod
// (as the kubelet deletes the object before its garbage collection
// removes the sandbox), and only a killed status of the pod's own
// incarnation does; DeletePod still returns only with podsyncd's answer,
// and the object is finished once.
func TestADeletedPodsObjectGoesOnceItIsKilled(t *testing.T) {
	f := newFake()
	f.deleteCalled = make(chan *podsyncv1.DeletePodRequest, 1)
	f.deleteGate = make(chan struct{})
	k := &fakeKube{ch: make(chan *corev1.PodStatus, 2)}
	p := New("vk-1", f, zap.NewNop())
	p.UseKube(k)
	runProvider(t, p, f)
	pod := testPod("1")
	if err := p.CreatePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	deleted := make(chan error, 1)
	go func() { deleted <- p.DeletePod(context.Background(), pod) }()
	<-f.deleteCalled
	status := func(pod *corev1.Pod, phase string, state *podsyncv1.ContainerState) {
		statusOf(f, pod, &podsyncv1.PodStatus{Phase: phase, ContainerStatuses: []*podsyncv1.ContainerStatus{{Name: "c", State: state}}})
	}
	exited := &podsyncv1.ContainerState{Terminated: &podsyncv1.ContainerStateTerminated{ExitCode: 143, Reason: "Error"}}
	// Not killed: a container still runs; another incarnation's.
	status(pod, "Running", &podsyncv1.ContainerState{Running: &podsyncv1.ContainerStateRunning{}})
	status(testPod("2"), "Failed", &podsyncv1.ContainerState{Terminated: &podsyncv1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}})
	// The kill's end.
	status(pod, "Failed", exited)
	var st *corev1.PodStatus
	select {
	case st = <-k.ch:
	case <-time.After(5 * time.Second):
		t.Fatal("the killed pod's object was not finished while podsyncd removed it")
	}
	if st.Phase != corev1.PodFailed || len(st.ContainerStatuses) != 1 || st.ContainerStatuses[0].State.Terminated == nil ||
		st.ContainerStatuses[0].State.Terminated.ExitCode != 143 {
		t.Errorf("finished status = %s %+v, want Failed with the kill's exit code 143", st.Phase, st.ContainerStatuses)
	}
	select {
	case err := <-deleted:
		t.Fatalf("DeletePod returned (%v) before podsyncd answered", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(f.deleteGate)
	if err := <-deleted; err != nil {
		t.Fatal(err)
	}
	if got := k.count(); got != 1 {
		t.Errorf("FinishDeleted calls = %d, want 1", got)
	}
	if _, err := p.GetPod(context.Background(), "default", "web"); !errdefs.IsNotFound(err) {
		t.Errorf("GetPod after delete: %v, want NotFound", err)
	}
}
