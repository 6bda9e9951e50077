package server_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/convert"
	"github.com/podsync/podsync/engine/admit"
	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/store"
	"github.com/podsync/podsync/errorinfo"
	"github.com/podsync/podsync/internal/testing/testdaemon"
	"github.com/podsync/podsync/server"
)

// testImage is held by every fake runtime.
const testImage = testdaemon.Image

// svcHarness is an in-process podsyncd (internal/testing/testdaemon) for one
// test, with the test's context: the real PodSyncService on an
// engine.Node on a FakeRuntime with its own store.
type svcHarness struct {
	t         *testing.T
	ctx       context.Context
	rt        *enginetest.FakeRuntime
	st        *store.Store
	storePath string
	// logs are every component's logs (newFullHarness only).
	logs *observer.ObservedLogs
	c    podsyncv1.PodSyncServiceClient
}

func newHarness(t *testing.T, o testdaemon.Options, logs *observer.ObservedLogs) *svcHarness {
	t.Helper()
	ctx := testContext(t)
	d := testdaemon.New(t, o)
	return &svcHarness{t: t, ctx: ctx, rt: d.Runtime, st: d.Store, storePath: d.StorePath, logs: logs, c: d.Client}
}

// newSvcHarness serves the bare service (behind the error interceptors
// only) over bufconn, its options adjusted by mutate.
func newSvcHarness(t *testing.T, mutate ...func(*server.ServiceOptions)) *svcHarness {
	t.Helper()
	return newHarness(t, testdaemon.Options{Transport: testdaemon.Bufconn, Logger: zaptest.NewLogger(t),
		Service: func(o *server.ServiceOptions) {
			for _, m := range mutate {
				m(o)
			}
		}}, nil)
}

// newFullHarness is podsyncd's server as the daemon builds it — server.New
// with every interceptor — on a unix socket (the caller is root, hence
// admin), every component logging to one observer, its options adjusted
// by mutate.
func newFullHarness(t *testing.T, mutate ...func(*testdaemon.Options)) *svcHarness {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	o := testdaemon.Options{Logger: zap.New(core), Service: func(o *server.ServiceOptions) {
		o.Validator = &server.Validator{NodeName: testdaemon.NodeName}
	}}
	for _, m := range mutate {
		m(&o)
	}
	return newHarness(t, o, logs)
}

// testPod is a one-container pod that runs until stopped.
func testPod(t *testing.T, namespace, name string, labels map[string]string) *podsyncv1.Pod {
	t.Helper()
	p, err := convert.PodToProto(&corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: testImage, Command: []string{"sleep", "inf"},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// sync runs SyncPod to its end and returns the steps and the result.
func (h *svcHarness) sync(pod *podsyncv1.Pod) ([]*podsyncv1.SyncStep, *podsyncv1.SyncPodResult) {
	h.t.Helper()
	stream, err := h.c.SyncPod(h.ctx, &podsyncv1.SyncPodRequest{Pod: pod})
	if err != nil {
		h.t.Fatal(err)
	}
	var steps []*podsyncv1.SyncStep
	var res *podsyncv1.SyncPodResult
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			h.t.Fatalf("SyncPod: %v", err)
		}
		if res != nil {
			h.t.Fatal("SyncPod: a message after the result")
		}
		if s := m.GetStep(); s != nil {
			steps = append(steps, s)
		}
		res = m.GetResult()
	}
	if res == nil {
		h.t.Fatal("SyncPod: no result")
	}
	return steps, res
}

func hasAction(steps []*podsyncv1.SyncStep, a podsyncv1.StepAction) *podsyncv1.SyncStep {
	for _, s := range steps {
		if s.GetAction() == a {
			return s
		}
	}
	return nil
}

// TestSyncPodStreamsStepsThenResult: the steps of the pass come first,
// then the result, and the pod is stored; a second sync of the same pod
// changes nothing.
func TestSyncPodStreamsStepsThenResult(t *testing.T) {
	h := newSvcHarness(t)
	steps, res := h.sync(testPod(t, "default", "web", nil))
	for _, a := range []podsyncv1.StepAction{podsyncv1.StepAction_STEP_ACTION_CREATE_POD_SANDBOX, podsyncv1.StepAction_STEP_ACTION_START_CONTAINER} {
		s := hasAction(steps, a)
		if s == nil {
			t.Fatalf("no %v step in %v", a, steps)
		}
		if s.GetOutcome() != podsyncv1.StepOutcome_STEP_OUTCOME_SUCCEEDED {
			t.Errorf("%v: outcome %v", a, s.GetOutcome())
		}
	}
	if !res.GetCreated() || res.GetPod().GetUid() == "" || res.GetPod().GetName() != "web" {
		t.Errorf("result %v: want created, with a uid", res)
	}
	if res.GetStatus().GetNodeName() != "node-1" || res.GetStatus().GetSandboxId() == "" {
		t.Errorf("status %v: want node name and sandbox id", res.GetStatus())
	}
	got, err := h.c.GetPod(h.ctx, &podsyncv1.GetPodRequest{Name: "web"})
	if err != nil {
		t.Fatalf("GetPod after SyncPod: %v", err)
	}
	if got.GetPod().GetMetadata().GetUid() != res.GetPod().GetUid() || got.GetRevision() == 0 {
		t.Errorf("stored pod %v rev %d", got.GetPod().GetMetadata(), got.GetRevision())
	}

	steps, res = h.sync(testPod(t, "default", "web", nil))
	for _, s := range steps {
		switch s.GetAction() {
		case podsyncv1.StepAction_STEP_ACTION_CREATE_POD_SANDBOX, podsyncv1.StepAction_STEP_ACTION_START_CONTAINER,
			podsyncv1.StepAction_STEP_ACTION_KILL_CONTAINER, podsyncv1.StepAction_STEP_ACTION_KILL_POD_SANDBOX:
			t.Errorf("re-sync did %v", s)
		}
	}
	if res.GetCreated() {
		t.Error("re-sync: created")
	}
	if sb := got.GetPod().GetStatus().GetSandboxId(); sb == "" || res.GetStatus().GetSandboxId() != sb {
		t.Errorf("re-sync names sandbox %q, GetPod %q: want the same, set", res.GetStatus().GetSandboxId(), sb)
	}

	// deletionTimestamp in a request is podsyncd's to set: ignored.
	pod := testPod(t, "default", "web", nil)
	pod.Metadata.DeletionTimestamp = timestamppb.Now()
	pod.Metadata.DeletionGracePeriodSeconds = proto.Int64(0)
	steps, _ = h.sync(pod)
	if s := hasAction(steps, podsyncv1.StepAction_STEP_ACTION_KILL_CONTAINER); s != nil {
		t.Errorf("a request's deletionTimestamp killed %v", s)
	}
	if got, err = h.c.GetPod(h.ctx, &podsyncv1.GetPodRequest{Name: "web"}); err != nil || got.GetPod().GetMetadata().GetDeletionTimestamp() != nil {
		t.Errorf("GetPod after a request with deletionTimestamp: %v, %v", got.GetPod().GetMetadata(), err)
	}
}

// TestPlanPodHasNoSideEffects: a plan of a new pod creates a sandbox and
// starts its container, and nothing is stored or run.
func TestPlanPodHasNoSideEffects(t *testing.T) {
	h := newSvcHarness(t)
	resp, err := h.c.PlanPod(h.ctx, &podsyncv1.PlanPodRequest{Pod: testPod(t, "default", "web", nil)})
	if err != nil {
		t.Fatal(err)
	}
	plan := resp.GetPlan()
	if resp.GetKnown() || !plan.GetSandbox().GetCreate() || len(plan.GetContainersToStart()) != 1 || plan.GetUpToDate() {
		t.Errorf("plan %v known %v: want a new sandbox and one start", plan, resp.GetKnown())
	}
	if ct := plan.GetContainersToStart()[0].GetContainerType(); ct != podsyncv1.ContainerType_CONTAINER_TYPE_REGULAR {
		t.Errorf("container type %v", ct)
	}
	_, err = h.c.GetPod(h.ctx, &podsyncv1.GetPodRequest{Name: "web"})
	wantError(t, err, codes.NotFound, errorinfo.ReasonPodNotFound)
	sandboxes, err := h.rt.ListPodSandbox(h.ctx, nil)
	if err != nil || len(sandboxes) != 0 {
		t.Errorf("sandboxes after PlanPod: %d %v", len(sandboxes), err)
	}
}

// TestGetAndListPods: filters by namespace, label selector and phase, in
// namespace/name order, each pod with its sandbox and creation time; an
// unknown pod is NOT_FOUND.
func TestGetAndListPods(t *testing.T) {
	h := newSvcHarness(t)
	h.sync(testPod(t, "b", "one", map[string]string{"app": "web"}))
	h.sync(testPod(t, "a", "two", map[string]string{"app": "db"}))
	h.sync(testPod(t, "a", "one", map[string]string{"app": "web"}))

	names := func(req *podsyncv1.ListPodsRequest) []string {
		t.Helper()
		resp, err := h.c.ListPods(h.ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetRevision() == 0 {
			t.Error("ListPods: revision 0")
		}
		var out []string
		for _, p := range resp.GetPods() {
			out = append(out, p.GetMetadata().GetNamespace()+"/"+p.GetMetadata().GetName())
			if p.GetStatus().GetNodeName() != "node-1" {
				t.Errorf("%s: node name %q", p.GetMetadata().GetName(), p.GetStatus().GetNodeName())
			}
			if p.GetStatus().GetSandboxId() == "" || p.GetMetadata().GetCreationTimestamp() == nil {
				t.Errorf("%s: sandbox %q, creationTimestamp %v: want both set", p.GetMetadata().GetName(),
					p.GetStatus().GetSandboxId(), p.GetMetadata().GetCreationTimestamp())
			}
		}
		return out
	}
	for _, tc := range []struct {
		name string
		req  *podsyncv1.ListPodsRequest
		want []string
	}{
		{"all", &podsyncv1.ListPodsRequest{}, []string{"a/one", "a/two", "b/one"}},
		{"namespace", &podsyncv1.ListPodsRequest{Namespace: "a"}, []string{"a/one", "a/two"}},
		{"selector", &podsyncv1.ListPodsRequest{LabelSelector: "app=web"}, []string{"a/one", "b/one"}},
		{"both", &podsyncv1.ListPodsRequest{Namespace: "b", LabelSelector: "app in (web)"}, []string{"b/one"}},
		{"running", &podsyncv1.ListPodsRequest{Phases: []string{"Running"}}, []string{"a/one", "a/two", "b/one"}},
		{"succeeded", &podsyncv1.ListPodsRequest{Phases: []string{"Succeeded"}}, nil},
	} {
		if got := names(tc.req); !equalStrings(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	_, err := h.c.ListPods(h.ctx, &podsyncv1.ListPodsRequest{LabelSelector: "app in (("})
	wantError(t, err, codes.InvalidArgument, errorinfo.ReasonInvalidSpec)

	got, err := h.c.GetPod(h.ctx, &podsyncv1.GetPodRequest{Namespace: "a", Name: "two"})
	if err != nil || got.GetPod().GetMetadata().GetLabels()["app"] != "db" {
		t.Fatalf("GetPod: %v %v", got, err)
	}
	_, err = h.c.GetPod(h.ctx, &podsyncv1.GetPodRequest{Namespace: "a", Name: "three"})
	wantError(t, err, codes.NotFound, errorinfo.ReasonPodNotFound)
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestDeletePod: an unknown pod is found = false; another uid is
// ABORTED (UID_MISMATCH) and deletes nothing; the pod's uid deletes it, with
// the steps.
func TestDeletePod(t *testing.T) {
	h := newSvcHarness(t)
	resp, err := h.c.DeletePod(h.ctx, &podsyncv1.DeletePodRequest{Name: "web"})
	if err != nil || resp.GetFound() {
		t.Fatalf("DeletePod of an unknown pod: %v %v, want found = false", resp, err)
	}
	_, res := h.sync(testPod(t, "default", "web", nil))
	_, err = h.c.DeletePod(h.ctx, &podsyncv1.DeletePodRequest{Name: "web", Uid: "6f1e7a4e-1d5b-4a8e-9c3b-2f0a1b2c3d4e"})
	wantError(t, err, codes.Aborted, errorinfo.ReasonUIDMismatch)
	if _, err := h.c.GetPod(h.ctx, &podsyncv1.GetPodRequest{Name: "web"}); err != nil {
		t.Fatalf("GetPod after a refused delete: %v", err)
	}
	grace := int64(0)
	resp, err = h.c.DeletePod(h.ctx, &podsyncv1.DeletePodRequest{Name: "web", Uid: res.GetPod().GetUid(), GracePeriodSeconds: &grace})
	if err != nil || !resp.GetFound() || resp.GetPod().GetUid() != res.GetPod().GetUid() {
		t.Fatalf("DeletePod: %v %v", resp, err)
	}
	if hasAction(resp.GetSteps(), podsyncv1.StepAction_STEP_ACTION_KILL_CONTAINER) == nil {
		t.Errorf("steps %v: want a kill", resp.GetSteps())
	}
	_, err = h.c.GetPod(h.ctx, &podsyncv1.GetPodRequest{Name: "web"})
	wantError(t, err, codes.NotFound, errorinfo.ReasonPodNotFound)
}

// watch opens a WatchPods stream and returns a function that receives
// the next message.
func (h *svcHarness) watch(req *podsyncv1.WatchPodsRequest) (func() (*podsyncv1.WatchPodsResponse, error), context.CancelFunc) {
	ctx, cancel := context.WithCancel(h.ctx)
	stream, err := h.c.WatchPods(ctx, req)
	if err != nil {
		h.t.Fatal(err)
	}
	return stream.Recv, cancel
}

// TestWatchPods: since 0 lists first, marks the list's end with synced at
// the list's revision, then follows the changes; since R resumes after R,
// filtered; a compacted revision is OUT_OF_RANGE.
func TestWatchPods(t *testing.T) {
	h := newSvcHarness(t)
	// An empty list is a synced message alone.
	recv, cancel := h.watch(&podsyncv1.WatchPodsRequest{})
	if m, err := recv(); err != nil || m.GetSynced() == nil || m.GetPod() != nil || m.GetRevision() != h.st.Revision() {
		t.Fatalf("watch of no pods: %v, %v: want synced at revision %d", m, err, h.st.Revision())
	}
	cancel()

	h.sync(testPod(t, "default", "web", map[string]string{"app": "web"}))
	// An event after web's last status: the list's revision is past it.
	web, err := h.st.GetByName("default", "web")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.st.Append(store.EventChange(web.Ref(), store.Event{Type: corev1.EventTypeNormal, Reason: "Test"})); err != nil {
		t.Fatal(err)
	}
	listedAt := h.st.Revision()

	recv, cancel = h.watch(&podsyncv1.WatchPodsRequest{})
	first, err := recv()
	if err != nil {
		t.Fatal(err)
	}
	if first.GetPod().GetName() != "web" || first.GetStatus() == nil || first.GetRevision() == 0 || first.GetRevision() >= listedAt {
		t.Fatalf("first message %v: want web's status at its last change, before %d", first, listedAt)
	}
	if synced, err := recv(); err != nil || synced.GetSynced() == nil || synced.GetRevision() != listedAt {
		t.Fatalf("after the list: %v, %v: want synced at revision %d", synced, err, listedAt)
	}
	if first.GetStatus().GetSandboxId() == "" {
		t.Errorf("listed status %v: no sandbox", first.GetStatus())
	}
	h.sync(testPod(t, "default", "db", map[string]string{"app": "db"}))
	var live *podsyncv1.WatchPodsResponse
	for live == nil || live.GetStatus() == nil {
		if live, err = recv(); err != nil {
			t.Fatal(err)
		}
	}
	if live.GetPod().GetName() != "db" || live.GetRevision() <= first.GetRevision() {
		t.Fatalf("live change %v after revision %d: want db's status", live, first.GetRevision())
	}
	if live.GetStatus().GetSandboxId() == "" {
		t.Errorf("live status %v: no sandbox", live.GetStatus())
	}
	cancel()
	if _, err := recv(); status.Code(err) != codes.Canceled {
		t.Errorf("after cancel: %v", err)
	}

	// Resume after web's revision, selecting web: db's changes are
	// filtered out; a change of web arrives.
	recv, cancel = h.watch(&podsyncv1.WatchPodsRequest{SinceRevision: first.GetRevision(), LabelSelector: "app=web"})
	defer cancel()
	grace := int64(0)
	if _, err := h.c.DeletePod(h.ctx, &podsyncv1.DeletePodRequest{Name: "web", GracePeriodSeconds: &grace}); err != nil {
		t.Fatal(err)
	}
	for {
		m, err := recv()
		if err != nil {
			t.Fatal(err)
		}
		if m.GetPod().GetName() != "web" || m.GetRevision() <= first.GetRevision() {
			t.Fatalf("resumed watch sent %v", m)
		}
		if m.GetDeleted() != nil {
			break
		}
	}

	if err := h.st.Compact(h.st.Revision()); err != nil {
		t.Fatal(err)
	}
	recv, cancel2 := h.watch(&podsyncv1.WatchPodsRequest{SinceRevision: 1})
	defer cancel2()
	_, err = recv()
	wantError(t, err, codes.OutOfRange, errorinfo.ReasonRevisionCompacted)
	var info *errdetails.ErrorInfo
	for _, d := range status.Convert(err).Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok {
			info = ei
		}
	}
	if info.GetMetadata()[errorinfo.MetadataCompactRevision] == "" {
		t.Errorf("ErrorInfo %v: no compact_revision", info)
	}
}

// TestWatchPodsDeletionOfUnseenPod: a watch resumed with a label selector
// after the pods' last changes still gets the deletion of a selected pod
// it never saw, and not that of an unselected one.
// Deletions carry the pod's labels for this.
func TestWatchPodsDeletionOfUnseenPod(t *testing.T) {
	h := newSvcHarness(t)
	h.sync(testPod(t, "default", "web", map[string]string{"app": "web"}))
	h.sync(testPod(t, "default", "db", map[string]string{"app": "db"}))

	recv, cancel := h.watch(&podsyncv1.WatchPodsRequest{SinceRevision: h.st.Revision(), LabelSelector: "app=web"})
	defer cancel()
	// Delete through the store: a DeletePod would first record a
	// terminating status, which the stream would see.
	for _, name := range []string{"db", "web"} {
		got, err := h.c.GetPod(h.ctx, &podsyncv1.GetPodRequest{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.st.Delete(types.UID(got.GetPod().GetMetadata().GetUid())); err != nil {
			t.Fatal(err)
		}
	}
	for {
		m, err := recv()
		if err != nil {
			t.Fatal(err)
		}
		if m.GetPod().GetName() != "web" {
			t.Fatalf("watch selecting app=web sent %v", m)
		}
		if m.GetDeleted() != nil {
			break
		}
	}
}

// TestRunPods: of two pods, the one that fits reaches its target and the
// one asking for more CPU than the node has is rejected with OutOfcpu.
func TestRunPods(t *testing.T) {
	h := newHarness(t, testdaemon.Options{Transport: testdaemon.Bufconn, Logger: zaptest.NewLogger(t),
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}, nil)
	big := testPod(t, "default", "big", nil)
	big.GetSpec().GetContainers()[0].Resources = &podsyncv1.ResourceRequirements{Requests: map[string]string{"cpu": "2"}}
	stream, err := h.c.RunPods(h.ctx, &podsyncv1.RunPodsRequest{Pods: []*podsyncv1.Pod{testPod(t, "default", "small", nil), big}})
	if err != nil {
		t.Fatal(err)
	}
	var sum *podsyncv1.RunPodsSummary
	var steps int
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if m.GetStep() != nil {
			steps++
			if m.GetStep().GetPod().GetName() != "small" {
				t.Errorf("step of %v", m.GetStep().GetPod())
			}
		}
		if m.GetSummary() != nil {
			sum = m.GetSummary()
		}
	}
	if sum == nil || steps == 0 {
		t.Fatalf("summary %v after %d steps", sum, steps)
	}
	if sum.GetReachedTarget() != 1 || sum.GetRejected() != 1 || sum.GetFailed() != 0 || sum.GetTimedOut() != 0 {
		t.Errorf("counts %v", sum)
	}
	small, rejected := sum.GetResults()[0], sum.GetResults()[1]
	if !small.GetAdmitted() || small.GetOutcome() != podsyncv1.PodOutcome_POD_OUTCOME_REACHED_TARGET {
		t.Errorf("small: %v", small)
	}
	if rejected.GetAdmitted() || rejected.GetOutcome() != podsyncv1.PodOutcome_POD_OUTCOME_REJECTED || rejected.GetReason() != admit.ReasonOutOfCPU {
		t.Errorf("big: %v", rejected)
	}
}

// TestGetContainerLogsTail: tail_lines returns the last lines the
// container wrote.
func TestGetContainerLogsTail(t *testing.T) {
	h := newSvcHarness(t)
	steps, _ := h.sync(testPod(t, "default", "web", nil))
	id := hasAction(steps, podsyncv1.StepAction_STEP_ACTION_START_CONTAINER).GetContainerId()
	if err := h.rt.WriteLog(id, "stdout", "one", "two", "three"); err != nil {
		t.Fatal(err)
	}
	tail := int64(2)
	stream, err := h.c.GetContainerLogs(h.ctx, &podsyncv1.GetContainerLogsRequest{Name: "web", TailLines: &tail})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range m.GetLines() {
			got = append(got, string(l.GetContent()))
			if l.GetStream() != podsyncv1.LogStream_LOG_STREAM_STDOUT || l.GetTime() == nil {
				t.Errorf("line %v", l)
			}
		}
	}
	if !equalStrings(got, []string{"two", "three"}) {
		t.Errorf("lines %q, want two, three", got)
	}
	stream, err = h.c.GetContainerLogs(h.ctx, &podsyncv1.GetContainerLogsRequest{Name: "web", Container: "nope"})
	if err == nil {
		_, err = stream.Recv()
	}
	wantError(t, err, codes.NotFound, errorinfo.ReasonContainerNotFound)
}

// TestSyncPodInvalidImage: a bad image is INVALID_ARGUMENT with a field
// violation naming it, and nothing is stored.
func TestSyncPodInvalidImage(t *testing.T) {
	h := newSvcHarness(t)
	pod := testPod(t, "default", "web", nil)
	pod.GetSpec().GetContainers()[0].Image = "Not An Image!"
	stream, err := h.c.SyncPod(h.ctx, &podsyncv1.SyncPodRequest{Pod: pod})
	if err == nil {
		_, err = stream.Recv()
	}
	wantError(t, err, codes.InvalidArgument, errorinfo.ReasonInvalidSpec)
	var fields []string
	for _, d := range status.Convert(err).Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				fields = append(fields, v.GetField())
			}
		}
	}
	if !equalStrings(fields, []string{"pod.spec.containers[0].image"}) {
		t.Errorf("field violations %q", fields)
	}
	resp, err := h.c.ListPods(h.ctx, &podsyncv1.ListPodsRequest{})
	if err != nil || len(resp.GetPods()) != 0 {
		t.Errorf("ListPods after an invalid SyncPod: %v %v", resp, err)
	}
}

// TestUnavailableBeforeReady: until the runtime answered, every RPC is
// UNAVAILABLE with RUNTIME_UNAVAILABLE.
func TestUnavailableBeforeReady(t *testing.T) {
	hc := server.NewHealthChecker(func(context.Context) error { return errors.New("down") }, time.Hour, nil)
	h := newSvcHarness(t, func(o *server.ServiceOptions) { o.Health = hc })
	_, err := h.c.GetPod(h.ctx, &podsyncv1.GetPodRequest{Name: "web"})
	wantError(t, err, codes.Unavailable, errorinfo.ReasonRuntimeUnavailable)
	_, err = h.c.ListPods(h.ctx, &podsyncv1.ListPodsRequest{})
	wantError(t, err, codes.Unavailable, errorinfo.ReasonRuntimeUnavailable)
	stream, err := h.c.SyncPod(h.ctx, &podsyncv1.SyncPodRequest{Pod: testPod(t, "default", "web", nil)})
	if err == nil {
		_, err = stream.Recv()
	}
	wantError(t, err, codes.Unavailable, errorinfo.ReasonRuntimeUnavailable)
}

// TestListEvents: ListEvents lists one entry per event series, its newest
// occurrence with the series' name, count and first and last timestamps,
// filtered by pod; a name without its namespace is INVALID_ARGUMENT.
func TestListEvents(t *testing.T) {
	h := newSvcHarness(t)
	h.sync(testPod(t, "default", "web", map[string]string{"app": "web"}))
	h.sync(testPod(t, "default", "db", map[string]string{"app": "db"}))
	web, err := h.st.GetByName("default", "web")
	if err != nil {
		t.Fatal(err)
	}
	unhealthy := store.Event{Type: corev1.EventTypeWarning, Reason: "Unhealthy", Container: "app", Message: "Readiness probe failed: "}
	for range 3 {
		if _, err := h.st.Append(store.EventChange(web.Ref(), unhealthy)); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := h.c.ListEvents(h.ctx, &podsyncv1.ListEventsRequest{Namespace: "default", PodName: "web"})
	if err != nil {
		t.Fatal(err)
	}
	var found *podsyncv1.ListedEvent
	for _, e := range resp.GetEvents() {
		if e.GetPod().GetName() != "web" {
			t.Errorf("event of %s listed for web", e.GetPod().GetName())
		}
		if e.GetEvent().GetReason() == "Unhealthy" {
			if found != nil {
				t.Errorf("the Unhealthy series is listed twice")
			}
			found = e
		}
	}
	ev := found.GetEvent()
	if ev.GetCount() != 3 || ev.GetName() == "" || ev.GetType() != podsyncv1.EventType_EVENT_TYPE_WARNING ||
		ev.GetContainer() != "app" || !ev.GetTime().AsTime().After(ev.GetFirstTimestamp().AsTime()) && !ev.GetTime().AsTime().Equal(ev.GetFirstTimestamp().AsTime()) {
		t.Errorf("Unhealthy listed as %v: want count 3, a name, the container and first ≤ last", ev)
	}
	if found.GetRevision() != h.st.Revision() {
		t.Errorf("listed at revision %d, want the newest occurrence's %d", found.GetRevision(), h.st.Revision())
	}
	_, err = h.c.ListEvents(h.ctx, &podsyncv1.ListEventsRequest{PodName: "web"})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("a name without its namespace: %v, want INVALID_ARGUMENT", err)
	}
}
