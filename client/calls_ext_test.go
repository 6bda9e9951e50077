package client_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/client"
	"github.com/podsync/podsync/convert"
	"github.com/podsync/podsync/internal/testing/testdaemon"
)

func hasAction(steps []*podsyncv1.SyncStep, a podsyncv1.StepAction) *podsyncv1.SyncStep {
	for _, s := range steps {
		if s.GetAction() == a {
			return s
		}
	}
	return nil
}

// TestSyncPlanGetListDelete: the unary calls and SyncPod against the real
// service, each on its happy path.
func TestSyncPlanGetListDelete(t *testing.T) {
	d := newDaemon(t)
	c := d.client(t)
	ctx := testContext(t)

	plan, err := c.PlanPod(ctx, &podsyncv1.PlanPodRequest{Pod: syncReq(t, "", "web", nil).GetPod()})
	if err != nil {
		t.Fatalf("PlanPod: %v", err)
	}
	if plan.GetKnown() || !plan.GetPlan().GetSandbox().GetCreate() || len(plan.GetPlan().GetContainersToStart()) != 1 {
		t.Errorf("plan of a new pod: %v", plan)
	}

	var steps []*podsyncv1.SyncStep
	res, err := c.SyncPod(ctx, syncReq(t, "", "web", map[string]string{"app": "web"}), func(s *podsyncv1.SyncStep) { steps = append(steps, s) })
	if err != nil {
		t.Fatalf("SyncPod: %v", err)
	}
	if !res.GetCreated() || res.GetPod().GetUid() != string(convert.PodUID("default", "web")) || res.GetStatus().GetPhase() == "" {
		t.Errorf("result %v: want created, with the derived uid and a status", res)
	}
	if s := hasAction(steps, podsyncv1.StepAction_STEP_ACTION_START_CONTAINER); s == nil || s.GetOutcome() != podsyncv1.StepOutcome_STEP_OUTCOME_SUCCEEDED {
		t.Errorf("steps %v: want a successful start", steps)
	}
	// Steps are optional.
	if _, err := c.SyncPod(ctx, syncReq(t, "", "web", map[string]string{"app": "web"}), nil); err != nil {
		t.Fatalf("SyncPod again: %v", err)
	}
	syncPod(t, c, "other", "db", map[string]string{"app": "db"})

	got, err := c.GetPod(ctx, "", "web")
	if err != nil {
		t.Fatalf("GetPod: %v", err)
	}
	if got.GetPod().GetMetadata().GetUid() != res.GetPod().GetUid() || got.GetRevision() == 0 {
		t.Errorf("GetPod: %v", got)
	}

	list, err := c.ListPods(ctx, &podsyncv1.ListPodsRequest{})
	if err != nil {
		t.Fatalf("ListPods: %v", err)
	}
	var names []string
	for _, p := range list.GetPods() {
		names = append(names, p.GetMetadata().GetNamespace()+"/"+p.GetMetadata().GetName())
	}
	if !slices.Equal(names, []string{"default/web", "other/db"}) || list.GetRevision() < got.GetRevision() {
		t.Errorf("ListPods: %v at %d", names, list.GetRevision())
	}
	list, err = c.ListPods(ctx, &podsyncv1.ListPodsRequest{LabelSelector: "app=db"})
	if err != nil || len(list.GetPods()) != 1 || list.GetPods()[0].GetMetadata().GetName() != "db" {
		t.Errorf("ListPods app=db: %v %v", list, err)
	}

	grace := int64(0)
	del, err := c.DeletePod(ctx, &podsyncv1.DeletePodRequest{Name: "web", Uid: res.GetPod().GetUid(), GracePeriodSeconds: &grace})
	if err != nil || !del.GetFound() || hasAction(del.GetSteps(), podsyncv1.StepAction_STEP_ACTION_KILL_CONTAINER) == nil {
		t.Fatalf("DeletePod: %v %v", del, err)
	}
	del, err = c.DeletePod(ctx, &podsyncv1.DeletePodRequest{Name: "web"})
	if err != nil || del.GetFound() {
		t.Errorf("DeletePod again: %v %v, want found = false", del, err)
	}
}

// TestRunPods: progress sees every message; the result has one entry per
// requested pod in request order, with its steps and last status; a pod
// refused by admission makes OK false.
func TestRunPods(t *testing.T) {
	d := newDaemon(t, func(o *testdaemon.Options) {
		o.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourcePods: resource.MustParse("10")}
	})
	c := d.client(t)
	ctx := testContext(t)

	big := testPod("", "big", nil)
	big.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
	req, err := client.RunPodsRequestFromManifests(&convert.Manifests{Pods: []*corev1.Pod{testPod("", "b", nil), big, testPod("", "a", nil)}})
	if err != nil {
		t.Fatal(err)
	}
	var msgs int
	var last *podsyncv1.RunPodsResponse
	res, err := c.RunPods(ctx, req, func(m *podsyncv1.RunPodsResponse) { msgs++; last = m })
	if err != nil {
		t.Fatalf("RunPods: %v", err)
	}
	if res.OK() {
		t.Error("OK with a rejected pod")
	}
	if last.GetSummary() != res.Summary || msgs < 3 {
		t.Errorf("progress saw %d messages, the last %v", msgs, last)
	}
	if len(res.Pods) != 3 {
		t.Fatalf("%d outcomes, want 3", len(res.Pods))
	}
	for i, want := range []struct {
		name    string
		outcome podsyncv1.PodOutcome
	}{{"b", podsyncv1.PodOutcome_POD_OUTCOME_REACHED_TARGET}, {"big", podsyncv1.PodOutcome_POD_OUTCOME_REJECTED}, {"a", podsyncv1.PodOutcome_POD_OUTCOME_REACHED_TARGET}} {
		p := res.Pods[i]
		if p.Result.GetPod().GetName() != want.name || p.Result.GetOutcome() != want.outcome {
			t.Errorf("pods[%d]: %v, want %s %v", i, p.Result, want.name, want.outcome)
		}
		if want.outcome == podsyncv1.PodOutcome_POD_OUTCOME_REJECTED {
			if len(p.Steps) != 0 || p.Result.GetReason() != "OutOfcpu" {
				t.Errorf("rejected pod: steps %v, reason %q", p.Steps, p.Result.GetReason())
			}
			continue
		}
		if hasAction(p.Steps, podsyncv1.StepAction_STEP_ACTION_START_CONTAINER) == nil || p.Status.GetPhase() != "Running" {
			t.Errorf("pods[%d] %s: steps %v, status %v", i, want.name, p.Steps, p.Status)
		}
	}

	// Without the big pod every pod reaches its target; nil progress.
	req.Pods = slices.Delete(req.Pods, 1, 2)
	res, err = c.RunPods(ctx, req, nil)
	if err != nil || !res.OK() {
		t.Fatalf("RunPods again: %v %v", res, err)
	}
}

// TestLogs: the lines a container wrote, then a follow that ends with its
// context.
func TestLogs(t *testing.T) {
	d := newDaemon(t)
	c := d.client(t)
	ctx := testContext(t)
	var steps []*podsyncv1.SyncStep
	if _, err := c.SyncPod(ctx, syncReq(t, "", "web", nil), func(s *podsyncv1.SyncStep) { steps = append(steps, s) }); err != nil {
		t.Fatal(err)
	}
	id := hasAction(steps, podsyncv1.StepAction_STEP_ACTION_START_CONTAINER).GetContainerId()
	if err := d.Runtime.WriteLog(id, "stderr", "oops"); err != nil {
		t.Fatal(err)
	}

	var lines []string
	err := c.Logs(ctx, &podsyncv1.GetContainerLogsRequest{Name: "web"}, func(l *podsyncv1.LogLine) error {
		lines = append(lines, l.GetStream().String()+" "+string(l.GetContent()))
		return nil
	})
	if err != nil {
		t.Fatalf("Logs: %v", err)
	}
	if want := []string{"LOG_STREAM_STDOUT hello web", "LOG_STREAM_STDERR oops"}; !slices.Equal(lines, want) {
		t.Errorf("lines %q, want %q", lines, want)
	}

	// fn's error ends the stream and is returned as it is.
	errStop := errors.New("stop")
	if err := c.Logs(ctx, &podsyncv1.GetContainerLogsRequest{Name: "web", Follow: true}, func(*podsyncv1.LogLine) error { return errStop }); err != errStop { //nolint:errorlint // returned as it is
		t.Errorf("Logs with a failing fn: %v", err)
	}

	// A follow ends with its context.
	fctx, cancel := context.WithCancel(ctx)
	got := make(chan string, 8)
	done := make(chan error, 1)
	go func() {
		done <- c.Logs(fctx, &podsyncv1.GetContainerLogsRequest{Name: "web", Container: "app", Follow: true}, func(l *podsyncv1.LogLine) error {
			got <- string(l.GetContent())
			return nil
		})
	}()
	if l := <-got; l != "hello web" {
		t.Errorf("first followed line %q", l)
	}
	if err := d.Runtime.WriteLog(id, "stdout", "later"); err != nil {
		t.Fatal(err)
	}
	for l := ""; l != "later"; {
		select {
		case l = <-got:
		case <-ctx.Done():
			t.Fatal("no followed line \"later\"")
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Logs after cancel: %v, want context.Canceled", err)
	}
}

// TestWatchPodsOneStream: the current pods, then the changes, until fn
// says stop.
func TestWatchPodsOneStream(t *testing.T) {
	d := newDaemon(t)
	c := d.client(t)
	syncPod(t, c, "", "web", nil)
	ctx := testContext(t)

	errDone := errors.New("done")
	var first *podsyncv1.WatchPodsResponse
	dbReq := syncReq(t, "", "db", nil)
	synced := make(chan error, 1)
	err := c.WatchPods(ctx, &podsyncv1.WatchPodsRequest{}, func(m *podsyncv1.WatchPodsResponse) error {
		if first == nil {
			first = m
			go func() {
				_, err := c.SyncPod(ctx, dbReq, nil)
				synced <- err
			}()
			return nil
		}
		if m.GetPod().GetName() == "db" && m.GetStatus() != nil {
			return errDone
		}
		return nil
	})
	if !errors.Is(err, errDone) {
		t.Fatalf("WatchPods: %v", err)
	}
	if err := <-synced; err != nil {
		t.Fatalf("SyncPod db: %v", err)
	}
	if first.GetPod().GetName() != "web" || first.GetStatus() == nil {
		t.Errorf("first message %v: want web's status", first)
	}
	// A canceled watch returns an error matching context.Canceled.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := c.WatchPods(cctx, &podsyncv1.WatchPodsRequest{}, func(*podsyncv1.WatchPodsResponse) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("WatchPods canceled: %v", err)
	}
}

// TestHealth: the server is SERVING.
func TestHealth(t *testing.T) {
	d := newDaemon(t)
	st, err := d.client(t).Health(testContext(t))
	if err != nil || st != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Health: %v %v", st, err)
	}
}

// TestNewFromConn: a Client over an in-process connection; Close leaves
// the connection open.
func TestNewFromConn(t *testing.T) {
	d := newDaemon(t, func(o *testdaemon.Options) { o.Transport = testdaemon.Bufconn })
	c := client.NewFromConn(d.Conn)
	syncPod(t, c, "", "web", nil)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := client.NewFromConn(d.Conn).GetPod(testContext(t), "", "web"); err != nil {
		t.Fatalf("GetPod on the conn after Close: %v", err)
	}
	if _, err := c.API().GetPod(testContext(t), &podsyncv1.GetPodRequest{Name: "web"}); err != nil {
		t.Fatalf("API().GetPod: %v", err)
	}
}
