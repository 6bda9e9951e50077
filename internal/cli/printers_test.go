package cli

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
)

// The printers are tested on fixed API messages, against fixedNow.

func ago(d time.Duration) *timestamppb.Timestamp { return timestamppb.New(fixedNow.Add(-d)) }

func container(name string) *podsyncv1.Container {
	return &podsyncv1.Container{Name: name, Image: testImage}
}

func sidecar(name string) *podsyncv1.Container {
	c := container(name)
	c.RestartPolicy = proto.String("Always")
	return c
}

func running(name string, ready bool, since time.Duration) *podsyncv1.ContainerStatus {
	return &podsyncv1.ContainerStatus{Name: name, Ready: ready, Started: proto.Bool(true), Image: testImage,
		State: &podsyncv1.ContainerState{Running: &podsyncv1.ContainerStateRunning{StartedAt: ago(since)}}}
}

func waiting(name, reason string) *podsyncv1.ContainerStatus {
	return &podsyncv1.ContainerStatus{Name: name, Image: testImage, Started: proto.Bool(false),
		State: &podsyncv1.ContainerState{Waiting: &podsyncv1.ContainerStateWaiting{Reason: reason}}}
}

func terminated(name string, code int32, reason string) *podsyncv1.ContainerStatus {
	return &podsyncv1.ContainerStatus{Name: name, Image: testImage, Started: proto.Bool(false),
		State: &podsyncv1.ContainerState{Terminated: &podsyncv1.ContainerStateTerminated{ExitCode: code, Reason: reason, FinishedAt: ago(time.Minute)}}}
}

// restarted adds restarts, the last one finished ago.
func restarted(cs *podsyncv1.ContainerStatus, n int32, last time.Duration) *podsyncv1.ContainerStatus {
	cs.RestartCount = n
	cs.LastState = &podsyncv1.ContainerState{Terminated: &podsyncv1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", FinishedAt: ago(last)}}
	return cs
}

func cond(typ string, ok bool) *podsyncv1.PodCondition {
	s := "False"
	if ok {
		s = "True"
	}
	return &podsyncv1.PodCondition{Type: typ, Status: s}
}

type podCase struct {
	name                string
	init, containers    []*podsyncv1.Container
	phase               string
	conditions          []*podsyncv1.PodCondition
	initStatuses, stats []*podsyncv1.ContainerStatus
	age                 time.Duration
}

func (c podCase) pod(i int) *podsyncv1.Pod {
	ns := "default"
	if i%3 == 2 {
		ns = "demo"
	}
	return &podsyncv1.Pod{
		ApiVersion: "v1", Kind: "Pod",
		Metadata: &podsyncv1.ObjectMeta{Name: c.name, Namespace: ns, Uid: fmt.Sprintf("00000000-0000-0000-0000-%012d", i),
			CreationTimestamp: ago(c.age), Labels: map[string]string{"app": c.name}},
		Spec: &podsyncv1.PodSpec{InitContainers: c.init, Containers: c.containers, RestartPolicy: "Always"},
		Status: &podsyncv1.PodStatus{
			Phase: c.phase, Conditions: c.conditions, InitContainerStatuses: c.initStatuses, ContainerStatuses: c.stats,
			PodIp: fmt.Sprintf("10.88.0.%d", 2+i), NodeName: "node-1", QosClass: "BestEffort", StartTime: ago(c.age),
			SandboxId: "3f2a9c1b7d4e8f6a5b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a", SandboxAttempt: uint32(i % 2),
		},
	}
}

// testPods covers kubectl's STATUS rules.
func testPods() []*podsyncv1.Pod {
	cases := []podCase{
		{name: "web", containers: []*podsyncv1.Container{container("httpd")}, phase: "Running", age: 5 * time.Minute,
			conditions: []*podsyncv1.PodCondition{cond("Initialized", true), cond("Ready", true)},
			stats:      []*podsyncv1.ContainerStatus{running("httpd", true, 5*time.Minute)}},
		{name: "job", containers: []*podsyncv1.Container{container("sum")}, phase: "Succeeded", age: 2 * time.Hour,
			conditions: []*podsyncv1.PodCondition{cond("Initialized", true), cond("Ready", false)},
			stats:      []*podsyncv1.ContainerStatus{terminated("sum", 0, "Completed")}},
		{name: "crashloop", containers: []*podsyncv1.Container{container("app")}, phase: "Running", age: 3 * time.Minute,
			conditions: []*podsyncv1.PodCondition{cond("Initialized", true), cond("Ready", false)},
			stats:      []*podsyncv1.ContainerStatus{restarted(waiting("app", "CrashLoopBackOff"), 3, 45*time.Second)}},
		{name: "initializing", init: []*podsyncv1.Container{container("migrate"), container("seed")}, containers: []*podsyncv1.Container{container("app")},
			phase: "Pending", age: 20 * time.Second, conditions: []*podsyncv1.PodCondition{cond("Initialized", false)},
			initStatuses: []*podsyncv1.ContainerStatus{running("migrate", false, 10*time.Second), waiting("seed", "PodInitializing")},
			stats:        []*podsyncv1.ContainerStatus{waiting("app", "PodInitializing")}},
		{name: "init-crash", init: []*podsyncv1.Container{container("migrate")}, containers: []*podsyncv1.Container{container("app")},
			phase: "Pending", age: 10 * time.Minute, conditions: []*podsyncv1.PodCondition{cond("Initialized", false)},
			initStatuses: []*podsyncv1.ContainerStatus{restarted(waiting("migrate", "CrashLoopBackOff"), 5, 2*time.Minute)},
			stats:        []*podsyncv1.ContainerStatus{waiting("app", "PodInitializing")}},
		{name: "init-failed", init: []*podsyncv1.Container{container("migrate")}, containers: []*podsyncv1.Container{container("app")},
			phase: "Failed", age: 3 * 24 * time.Hour, conditions: []*podsyncv1.PodCondition{cond("Initialized", false)},
			initStatuses: []*podsyncv1.ContainerStatus{terminated("migrate", 2, "")},
			stats:        []*podsyncv1.ContainerStatus{waiting("app", "PodInitializing")}},
		{name: "with-sidecar", init: []*podsyncv1.Container{container("prepare"), sidecar("log-shipper")}, containers: []*podsyncv1.Container{container("app")},
			phase: "Running", age: 90 * time.Second, conditions: []*podsyncv1.PodCondition{cond("Initialized", true), cond("Ready", true)},
			initStatuses: []*podsyncv1.ContainerStatus{terminated("prepare", 0, "Completed"), restarted(running("log-shipper", true, time.Minute), 1, 70*time.Second)},
			stats:        []*podsyncv1.ContainerStatus{running("app", true, time.Minute)}},
		{name: "pulling", containers: []*podsyncv1.Container{container("app")}, phase: "Pending", age: 30 * time.Second,
			conditions: []*podsyncv1.PodCondition{cond("Initialized", true), cond("Ready", false)},
			stats:      []*podsyncv1.ContainerStatus{waiting("app", "ErrImagePull")}},
		{name: "failed", containers: []*podsyncv1.Container{container("app")}, phase: "Failed", age: time.Hour,
			conditions: []*podsyncv1.PodCondition{cond("Initialized", true), cond("Ready", false)},
			stats:      []*podsyncv1.ContainerStatus{terminated("app", 1, "Error")}},
		{name: "half-done", containers: []*podsyncv1.Container{container("once"), container("server")}, phase: "Running", age: time.Minute,
			conditions: []*podsyncv1.PodCondition{cond("Initialized", true), cond("Ready", false)},
			stats:      []*podsyncv1.ContainerStatus{terminated("once", 0, "Completed"), running("server", true, time.Minute)}},
		{name: "signalled", containers: []*podsyncv1.Container{container("app")}, phase: "Failed", age: time.Minute,
			stats: []*podsyncv1.ContainerStatus{{Name: "app", State: &podsyncv1.ContainerState{Terminated: &podsyncv1.ContainerStateTerminated{ExitCode: 137, Signal: 9}}}}},
		{name: "new", containers: []*podsyncv1.Container{container("app")}, age: 0},
	}
	pods := make([]*podsyncv1.Pod, len(cases))
	for i, c := range cases {
		pods[i] = c.pod(i)
	}
	// Asked to stop and still running: kubectl's Terminating.
	stopping := (podCase{name: "stopping", containers: []*podsyncv1.Container{container("app")}, phase: "Running", age: time.Minute,
		conditions: []*podsyncv1.PodCondition{cond("Initialized", true), cond("Ready", true)},
		stats:      []*podsyncv1.ContainerStatus{running("app", true, time.Minute)}}).pod(len(pods))
	stopping.Metadata.DeletionTimestamp = timestamppb.New(fixedNow.Add(-5 * time.Second))
	return append(pods, stopping)
}

func TestPodTableGolden(t *testing.T) {
	for _, tt := range []struct {
		file string
		wide bool
	}{{"get.txt", false}, {"get-wide.txt", true}} {
		var b bytes.Buffer
		if err := writePodTable(&b, testPods(), tt.wide, fixedNow); err != nil {
			t.Fatal(err)
		}
		golden(t, tt.file, b.String())
	}
}

func TestPodListJSONGolden(t *testing.T) {
	for _, tt := range []struct{ file, format string }{{"get.json", formatJSON}, {"get.yaml", formatYAML}} {
		var b bytes.Buffer
		if err := writePodList(&b, tt.format, testPods()[:2]); err != nil {
			t.Fatal(err)
		}
		golden(t, tt.file, b.String())
	}
}

func step(action podsyncv1.StepAction, target string, ct podsyncv1.ContainerType, outcome podsyncv1.StepOutcome, reason, message string) *podsyncv1.SyncStep {
	return &podsyncv1.SyncStep{Action: action, Target: target, ContainerType: ct, Outcome: outcome, Reason: reason, Message: message,
		StartTime: ago(time.Second), Duration: durationpb.New(40 * time.Millisecond)}
}

const (
	ok       = podsyncv1.StepOutcome_STEP_OUTCOME_SUCCEEDED
	fail     = podsyncv1.StepOutcome_STEP_OUTCOME_FAILED
	backoff  = podsyncv1.StepOutcome_STEP_OUTCOME_BACKING_OFF
	regular  = podsyncv1.ContainerType_CONTAINER_TYPE_REGULAR
	initCtr  = podsyncv1.ContainerType_CONTAINER_TYPE_INIT
	sideCtr  = podsyncv1.ContainerType_CONTAINER_TYPE_SIDECAR
	noCtr    = podsyncv1.ContainerType_CONTAINER_TYPE_UNSPECIFIED
	aCreate  = podsyncv1.StepAction_STEP_ACTION_CREATE_POD_SANDBOX
	aConfig  = podsyncv1.StepAction_STEP_ACTION_CONFIG_POD_SANDBOX
	aStart   = podsyncv1.StepAction_STEP_ACTION_START_CONTAINER
	aPull    = podsyncv1.StepAction_STEP_ACTION_PULL_IMAGE
	aKill    = podsyncv1.StepAction_STEP_ACTION_KILL_CONTAINER
	aKillPod = podsyncv1.StepAction_STEP_ACTION_KILL_POD_SANDBOX
	aRemove  = podsyncv1.StepAction_STEP_ACTION_REMOVE_CONTAINER
)

// TestRunOutputGolden: progress lines of a RunPods stream, then the
// summary with the details of the pods that did not make it.
func TestRunOutputGolden(t *testing.T) {
	pods := testPods()
	req := &podsyncv1.RunPodsRequest{Pods: []*podsyncv1.Pod{pods[0], pods[2], pods[1], pods[7]}, WaitFor: podsyncv1.WaitFor_WAIT_FOR_READY}
	var out bytes.Buffer
	a := &app{stdout: &out, now: func() time.Time { return fixedNow }}
	p := newRunPrinter(a, req, formatText)
	ref := func(i int) *podsyncv1.PodRef {
		m := req.Pods[i].GetMetadata()
		return &podsyncv1.PodRef{Namespace: m.GetNamespace(), Name: m.GetName(), Uid: m.GetUid()}
	}
	stepOf := func(i int, s *podsyncv1.SyncStep) *podsyncv1.RunPodsResponse {
		return &podsyncv1.RunPodsResponse{Event: &podsyncv1.RunPodsResponse_Step{Step: &podsyncv1.PodStep{Pod: ref(i), Step: s}}}
	}
	statusOf := func(i int, st *podsyncv1.PodStatus) *podsyncv1.RunPodsResponse {
		return &podsyncv1.RunPodsResponse{Event: &podsyncv1.RunPodsResponse_Status{Status: &podsyncv1.PodStatusUpdate{Pod: ref(i), Status: st}}}
	}
	created := step(aCreate, "web", noCtr, ok, "NoSandbox", "")
	created.Attempt = 0
	restart := step(aStart, "app", regular, ok, "Exited", "")
	restart.Attempt = 3
	backingOff := step(aStart, "app", regular, backoff, "CrashLoopBackOff", "back-off 40s restarting failed container=app pod=crashloop_demo")
	backingOff.NextRetryTime = timestamppb.New(fixedNow.Add(38 * time.Second))
	pending := proto.Clone(req.Pods[0].GetStatus()).(*podsyncv1.PodStatus)
	pending.ContainerStatuses = []*podsyncv1.ContainerStatus{running("httpd", false, time.Second)}
	for _, m := range []*podsyncv1.RunPodsResponse{
		stepOf(0, created),
		stepOf(0, step(aConfig, "web", noCtr, ok, "", "")),
		stepOf(0, step(aPull, testImage, regular, ok, "", "")),
		stepOf(0, step(aStart, "httpd", regular, ok, "NewSandbox", "")),
		stepOf(1, restart),
		stepOf(3, step(aPull, "registry.local/nope:1", regular, fail, "ErrImagePull", "rpc error: code = NotFound\ndesc = failed to pull and unpack image")),
		statusOf(0, pending),
		statusOf(0, pending), // unchanged: not printed again
		statusOf(0, req.Pods[0].GetStatus()),
		stepOf(1, backingOff),
		statusOf(1, req.Pods[1].GetStatus()),
		{Event: &podsyncv1.RunPodsResponse_Summary{Summary: &podsyncv1.RunPodsSummary{}}}, // ignored: printed at the end
	} {
		p.progress(m)
	}
	sum := &podsyncv1.RunPodsSummary{ReachedTarget: 1, Rejected: 1, Failed: 1, TimedOut: 1, Results: []*podsyncv1.PodResult{
		{Pod: ref(0), Admitted: true, Outcome: podsyncv1.PodOutcome_POD_OUTCOME_REACHED_TARGET, Status: req.Pods[0].GetStatus(), Duration: durationpb.New(3 * time.Second)},
		{Pod: ref(1), Admitted: true, Outcome: podsyncv1.PodOutcome_POD_OUTCOME_TIMED_OUT, Reason: "DeadlineExceeded",
			Message: "pod did not become Ready within 1m0s", Status: req.Pods[1].GetStatus(),
			FailedContainers: []*podsyncv1.FailedContainer{{Name: "app", ContainerType: regular, ExitCode: proto.Int32(1), Reason: "CrashLoopBackOff", RestartCount: 3,
				LogTail: []string{"starting, attempt at Sun Mar  1 11:59:20 UTC 2026", "something went wrong"}}}},
		{Pod: ref(2), Admitted: true, Outcome: podsyncv1.PodOutcome_POD_OUTCOME_FAILED, Reason: "PodFailed", Message: "the pod succeeded, it will never be Ready", Status: req.Pods[2].GetStatus()},
		{Pod: ref(3), Admitted: false, Outcome: podsyncv1.PodOutcome_POD_OUTCOME_REJECTED, Reason: "NodePorts", Message: "host port 8080/TCP is in use by default/web"},
	}}
	if err := writeRunSummary(&out, sum, p.specs, req.GetWaitFor(), fixedNow, palette{}); err != nil {
		t.Fatal(err)
	}
	golden(t, "run.txt", out.String())
}

// TestSyncResultGolden: the steps of a pass and the result.
func TestSyncResultGolden(t *testing.T) {
	var out bytes.Buffer
	kill := step(aKill, "httpd", regular, ok, "SpecChanged", "container spec changed: image")
	for _, s := range []*podsyncv1.SyncStep{
		step(aKillPod, "7841fe00-3ef4-53b6-a64f-429bf2ac0e4a", noCtr, ok, "", ""),
		kill,
		step(aRemove, "0123456789abcdef0123", initCtr, ok, "", ""),
		step(aStart, "log-shipper", sideCtr, fail, "RunContainerError", "failed to start: exec: \"tail\": not found"),
		step(podsyncv1.StepAction_STEP_ACTION_UPDATE_POD_SANDBOX_RESOURCES, "3f2a9c1b7d4e8f6a5b0c9d8e7f6a5b4c", noCtr, ok, "ResizePodInPlace", ""),
		step(podsyncv1.StepAction_STEP_ACTION_UPDATE_CONTAINER_RESOURCES, "httpd", regular, ok, "ResizePodInPlace", ""),
	} {
		if err := writeStep(&out, "", s, fixedNow, palette{}); err != nil {
			t.Fatal(err)
		}
	}
	pod := testPods()[6]
	res := &podsyncv1.SyncPodResult{Pod: &podsyncv1.PodRef{Namespace: "default", Name: "with-sidecar", Uid: "u"}, Status: pod.GetStatus(),
		Created: true, NextSyncTime: timestamppb.New(fixedNow.Add(10 * time.Second))}
	if err := writeSyncResult(&out, res, pod.GetSpec(), fixedNow, palette{}); err != nil {
		t.Fatal(err)
	}
	golden(t, "sync.txt", out.String())
}

// TestPlanGolden: each kind of plan line.
func TestPlanGolden(t *testing.T) {
	ref := &podsyncv1.PodRef{Namespace: "default", Name: "web", Uid: "622bb72c-96e1-5908-a7e7-f8f2f5cdf04b"}
	plans := []*podsyncv1.PlanPodResponse{
		{Pod: ref, Known: false, Plan: &podsyncv1.PodPlan{
			Sandbox: &podsyncv1.SandboxDecision{Create: true, Reason: "NoSandbox"},
			InitContainersToStart: []*podsyncv1.ContainerStart{
				{Name: "prepare", ContainerType: initCtr, Reason: "NotStarted"},
			},
		}},
		{Pod: ref, Known: true, Plan: &podsyncv1.PodPlan{
			Sandbox: &podsyncv1.SandboxDecision{CurrentSandboxId: "3f2a9c1b7d4e8f6a5b0c", Reason: "SandboxReady"},
			ContainersToKill: []*podsyncv1.ContainerKill{
				{Name: "httpd", ContainerType: regular, ContainerId: "containerd://9e8d7c6b5a4f3e2d1c0b", Reason: "SpecChanged",
					Message: "spec changed", ChangedFields: []string{"image", "env[GREETING]"}, Restart: true},
				{Name: "old", ContainerType: regular, ContainerId: "containerd://aaaabbbbccccdddd", Reason: "Removed", Message: "not in the spec any more"},
			},
			ContainersToStart: []*podsyncv1.ContainerStart{{Name: "httpd", ContainerType: regular, Reason: "Killed", RestartCount: 1}},
		}},
		{Pod: ref, Known: true, Plan: &podsyncv1.PodPlan{
			Sandbox:       &podsyncv1.SandboxDecision{Create: true, Attempt: 2, KillSandboxIds: []string{"3f2a9c1b7d4e8f6a5b0c"}, Reason: "SandboxNotReady"},
			KillPod:       true,
			KillPodReason: "SandboxNotReady",
			InitContainersToStart: []*podsyncv1.ContainerStart{
				{Name: "log-shipper", ContainerType: sideCtr, Reason: "PodSandboxChanged", RestartCount: 2},
			},
			ContainersToStart:     []*podsyncv1.ContainerStart{{Name: "app", ContainerType: regular, Reason: "PodSandboxChanged", RestartCount: 4}},
			InitInstancesToRemove: []string{"77aa88bb99cc00dd11ee"},
		}},
		{Pod: ref, Known: true, Plan: &podsyncv1.PodPlan{
			BackingOff: []*podsyncv1.ContainerBackoff{{Name: "app", ContainerType: regular, Reason: "CrashLoopBackOff",
				NextRetryTime: timestamppb.New(fixedNow.Add(17 * time.Second)), Delay: durationpb.New(20 * time.Second)}},
		}},
		{Pod: ref, Known: true, Plan: &podsyncv1.PodPlan{
			Sandbox: &podsyncv1.SandboxDecision{CurrentSandboxId: "3f2a9c1b7d4e8f6a5b0c", Reason: "SandboxReady"},
			ContainersToResize: []*podsyncv1.ContainerResize{{Name: "app", ContainerType: regular, ContainerId: "9e8d7c6b5a4f3e2d1c0b",
				Current: &podsyncv1.ResourceRequirements{Requests: map[string]string{"cpu": "100m", "memory": "64Mi"}, Limits: map[string]string{"cpu": "100m", "memory": "64Mi"}},
				Desired: &podsyncv1.ResourceRequirements{Requests: map[string]string{"cpu": "100m", "memory": "64Mi"}, Limits: map[string]string{"cpu": "100m", "memory": "128Mi"}}}},
		}},
		{Pod: ref, Known: true, Plan: &podsyncv1.PodPlan{UpToDate: true}},
	}
	var out bytes.Buffer
	for _, p := range plans {
		if err := writePlan(&out, p, fixedNow, palette{}); err != nil {
			t.Fatal(err)
		}
	}
	golden(t, "plan.txt", out.String())
}

// TestWatchGolden: status changes, events and deletions as lines.
func TestWatchGolden(t *testing.T) {
	pods := testPods()
	specs := map[string]*podsyncv1.PodSpec{}
	for _, p := range pods {
		specs[p.GetMetadata().GetUid()] = p.GetSpec()
	}
	var out bytes.Buffer
	w := &watchPrinter{w: &out, now: func() time.Time { return fixedNow }, specs: map[string]*podsyncv1.PodSpec{},
		spec: func(r *podsyncv1.PodRef) *podsyncv1.PodSpec { return specs[r.GetUid()] }}
	ref := func(p *podsyncv1.Pod) *podsyncv1.PodRef {
		return &podsyncv1.PodRef{Namespace: p.GetMetadata().GetNamespace(), Name: p.GetMetadata().GetName(), Uid: p.GetMetadata().GetUid()}
	}
	for _, m := range []*podsyncv1.WatchPodsResponse{
		{Revision: 7, Pod: ref(pods[0]), Change: &podsyncv1.WatchPodsResponse_Status{Status: pods[0].GetStatus()}},
		{Revision: 8, Pod: ref(pods[2]), Change: &podsyncv1.WatchPodsResponse_Event{Event: &podsyncv1.PodEvent{Type: podsyncv1.EventType_EVENT_TYPE_WARNING,
			Reason: "BackOff", Message: "Back-off restarting failed container app", Container: "app", Time: ago(0)}}},
		{Revision: 9, Pod: ref(pods[2]), Change: &podsyncv1.WatchPodsResponse_Status{Status: pods[2].GetStatus()}},
		{Revision: 10, Pod: ref(pods[0]), Change: &podsyncv1.WatchPodsResponse_Event{Event: &podsyncv1.PodEvent{Type: podsyncv1.EventType_EVENT_TYPE_NORMAL,
			Reason: "Killing", Message: "Stopping container httpd", Container: "httpd", Time: ago(0)}}},
		{Revision: 11, Pod: ref(pods[0]), Change: &podsyncv1.WatchPodsResponse_Deleted{Deleted: &podsyncv1.PodDeleted{Time: ago(0)}}},
	} {
		if err := w.write(m); err != nil {
			t.Fatal(err)
		}
	}
	golden(t, "watch.txt", out.String())
}

// TestRunPrintsARepeatOnce: a back-off's retries — the same failed pull,
// the same back-off — print once; once the step succeeds, a new failure
// prints again.
func TestRunPrintsARepeatOnce(t *testing.T) {
	var b bytes.Buffer
	a := &app{stdout: &b, now: func() time.Time { return fixedNow }}
	ref := &podsyncv1.PodRef{Namespace: "default", Name: "web"}
	req := &podsyncv1.RunPodsRequest{Pods: []*podsyncv1.Pod{{Metadata: &podsyncv1.ObjectMeta{Namespace: "default", Name: "web"}}}}
	p := newRunPrinter(a, req, formatText)
	send := func(s *podsyncv1.SyncStep) {
		p.progress(&podsyncv1.RunPodsResponse{Event: &podsyncv1.RunPodsResponse_Step{Step: &podsyncv1.PodStep{Pod: ref, Step: s}}})
	}
	pull := step(podsyncv1.StepAction_STEP_ACTION_START_CONTAINER, "app", regular, fail, "ErrImagePull", "registry: i/o timeout")
	wait := step(podsyncv1.StepAction_STEP_ACTION_START_CONTAINER, "app", regular, backoff, "ImagePullBackOff", "Back-off pulling image")
	for range 3 {
		send(pull)
		send(wait)
		wait.Message += "."
	}
	send(step(podsyncv1.StepAction_STEP_ACTION_START_CONTAINER, "app", regular, ok, "NewSandbox", ""))
	send(pull)
	if n := strings.Count(b.String(), "ErrImagePull"); n != 2 {
		t.Errorf("the failed pull printed %d times, want once before the start and once after:\n%s", n, b.String())
	}
	if n := strings.Count(b.String(), "ImagePullBackOff"); n != 1 {
		t.Errorf("the back-off printed %d times, want once:\n%s", n, b.String())
	}
}
