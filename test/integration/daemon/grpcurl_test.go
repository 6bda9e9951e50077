//go:build integration

package daemon_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"regexp"
	goruntime "runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"
	cri "k8s.io/cri-api/pkg/apis"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/internal/testing/localcri"
)

// TestGrpcurlListAndDescribe: what an operator sees first — podsyncd
// starts with the shipped config file (the flags override its paths), and
// grpcurl lists the API, health and reflection, and describes every RPC of
// the service.
func TestGrpcurlListAndDescribe(t *testing.T) {
	ctx := testContext(t)
	repo, err := localcri.RepoDir()
	if err != nil {
		t.Fatal(err)
	}
	d := startPodsyncd(t, daemonOptions{ConfigFile: filepath.Join(repo, "deploy", "systemd", "podsyncd.yaml")})

	out, err := d.grpcurl(ctx, "", nil, "list")
	if err != nil {
		t.Fatal(err)
	}
	services := strings.Fields(out)
	for _, want := range []string{
		"podsync.v1.PodSyncService", "grpc.health.v1.Health",
		"grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection",
	} {
		if !slices.Contains(services, want) {
			t.Errorf("grpcurl list lacks %s:\n%s", want, out)
		}
	}

	out, err = d.grpcurl(ctx, "", nil, "describe", "podsync.v1.PodSyncService")
	if err != nil {
		t.Fatal(err)
	}
	// The contract's RPCs, and any the generated code has besides.
	rpcs := []string{"RunPods", "SyncPod", "PlanPod", "GetPod", "GetNode", "ListPods", "DeletePod", "WatchPods", "GetContainerLogs"}
	desc := podsyncv1.PodSyncService_ServiceDesc
	for _, m := range desc.Methods {
		rpcs = append(rpcs, m.MethodName)
	}
	for _, s := range desc.Streams {
		rpcs = append(rpcs, s.StreamName)
	}
	slices.Sort(rpcs)
	for _, rpc := range slices.Compact(rpcs) {
		if !strings.Contains(out, "rpc "+rpc+" (") {
			t.Errorf("grpcurl describe lacks rpc %s:\n%s", rpc, out)
		}
	}
	// The idempotency levels of the contract travel with reflection
	// (comments do not: generated descriptors carry no source info).
	for _, rpc := range []string{"DeletePod", "SyncPod"} {
		if !regexp.MustCompile(`rpc ` + rpc + ` \([^\n]*\{\n\s*option idempotency_level = IDEMPOTENT;`).MatchString(out) {
			t.Errorf("grpcurl describe: %s is not IDEMPOTENT:\n%s", rpc, out)
		}
	}
	for _, rpc := range []string{"GetContainerLogs", "GetNode", "GetPod", "ListPods", "PlanPod", "WatchPods"} {
		if !regexp.MustCompile(`rpc ` + rpc + ` \([^\n]*\{\n\s*option idempotency_level = NO_SIDE_EFFECTS;`).MatchString(out) {
			t.Errorf("grpcurl describe: %s is not NO_SIDE_EFFECTS:\n%s", rpc, out)
		}
	}
}

// TestGrpcurlGetNode: GetNode, as the docs call it, returns the node's
// labels (the operator's and the three podsyncd sets), taints and
// resources.
func TestGrpcurlGetNode(t *testing.T) {
	ctx := testContext(t)
	d := startPodsyncd(t, daemonOptions{Args: []string{"--node-name=node-7", "--node-labels=disk=ssd", "--node-taints=dedicated=db:NoSchedule"}})
	out, err := d.grpcurl(ctx, "", nil, "podsync.v1.PodSyncService/GetNode")
	if err != nil {
		t.Fatal(err)
	}
	var resp podsyncv1.GetNodeResponse
	if err := protojson.Unmarshal([]byte(out), &resp); err != nil {
		t.Fatalf("GetNode output: %v\n%s", err, out)
	}
	n := resp.GetNode()
	want := map[string]string{"disk": "ssd", "kubernetes.io/hostname": "node-7", "kubernetes.io/os": goruntime.GOOS, "kubernetes.io/arch": goruntime.GOARCH}
	if n.GetName() != "node-7" || !maps.Equal(n.GetLabels(), want) {
		t.Errorf("GetNode name %q labels %v, want node-7 and %v", n.GetName(), n.GetLabels(), want)
	}
	if len(n.GetTaints()) != 1 || n.GetTaints()[0].GetKey() != "dedicated" || n.GetTaints()[0].GetValue() != "db" || n.GetTaints()[0].GetEffect() != "NoSchedule" {
		t.Errorf("GetNode taints %v, want dedicated=db:NoSchedule", n.GetTaints())
	}
	if n.GetCapacity()["cpu"] == "" || n.GetAllocatable()["pods"] != "110" {
		t.Errorf("GetNode capacity %v, allocatable %v", n.GetCapacity(), n.GetAllocatable())
	}
}

// TestGrpcurlRunPodsAndSyncPod drives the streaming RPCs through grpcurl
// with request JSON on stdin (-d @), as the docs show.
func TestGrpcurlRunPodsAndSyncPod(t *testing.T) {
	ctx := testContext(t)
	d := startPodsyncd(t, daemonOptions{})

	t.Run("RunPods", func(t *testing.T) {
		pods := []*podsyncv1.Pod{newPod(t, "a", sleeper("app")), newPod(t, "b", sleeper("app"))}
		req := &podsyncv1.RunPodsRequest{Pods: pods, Timeout: durationpb.New(time.Minute)}
		out, err := d.grpcurl(ctx, requestJSON(t, req), nil, "podsync.v1.PodSyncService/RunPods")
		if err != nil {
			t.Fatal(err)
		}
		msgs := decodeStream(t, out, func() *podsyncv1.RunPodsResponse { return &podsyncv1.RunPodsResponse{} })
		if len(msgs) == 0 {
			t.Fatalf("no messages:\n%s", out)
		}
		steps := map[string][]string{}
		for i, m := range msgs[:len(msgs)-1] {
			switch {
			case m.GetStep() != nil:
				s := m.GetStep()
				steps[s.GetPod().GetName()] = append(steps[s.GetPod().GetName()], s.GetStep().GetAction().String())
				if o := s.GetStep().GetOutcome(); o != podsyncv1.StepOutcome_STEP_OUTCOME_SUCCEEDED {
					t.Errorf("message %d: step %v %s: %v %s", i, s.GetStep().GetAction(), s.GetStep().GetTarget(), o, s.GetStep().GetMessage())
				}
			case m.GetStatus() != nil:
			default:
				t.Errorf("message %d of %d is neither a step nor a status: %v", i, len(msgs), m)
			}
		}
		for _, p := range pods {
			got := steps[p.GetMetadata().GetName()]
			// Sandbox created, then the container started (a pull may come
			// between): several steps per pod before the summary.
			if len(got) < 2 || got[0] != "STEP_ACTION_CREATE_POD_SANDBOX" || got[len(got)-1] != "STEP_ACTION_START_CONTAINER" {
				t.Errorf("pod %s: steps %v, want CREATE_POD_SANDBOX … START_CONTAINER", p.GetMetadata().GetName(), got)
			}
		}
		sum := msgs[len(msgs)-1].GetSummary()
		if sum == nil {
			t.Fatalf("last message is not the summary: %v", msgs[len(msgs)-1])
		}
		if sum.GetReachedTarget() != 2 || len(sum.GetResults()) != 2 {
			t.Errorf("summary: %v", sum)
		}
		for i, r := range sum.GetResults() {
			if r.GetPod().GetName() != pods[i].GetMetadata().GetName() || r.GetOutcome() != podsyncv1.PodOutcome_POD_OUTCOME_REACHED_TARGET ||
				r.GetStatus().GetPhase() != "Running" {
				t.Errorf("result %d: %s %v phase %q, want %s reached target and Running", i, r.GetPod().GetName(), r.GetOutcome(),
					r.GetStatus().GetPhase(), pods[i].GetMetadata().GetName())
			}
		}
	})

	t.Run("SyncPod", func(t *testing.T) {
		pod := newPod(t, "", sleeper("app"))
		sync := func(want ...podsyncv1.StepAction) *podsyncv1.SyncPodResult {
			t.Helper()
			out, err := d.grpcurl(ctx, requestJSON(t, &podsyncv1.SyncPodRequest{Pod: pod}), nil, "podsync.v1.PodSyncService/SyncPod")
			if err != nil {
				t.Fatal(err)
			}
			msgs := decodeStream(t, out, func() *podsyncv1.SyncPodResponse { return &podsyncv1.SyncPodResponse{} })
			if len(msgs) == 0 {
				t.Fatalf("no messages:\n%s", out)
			}
			var got []podsyncv1.StepAction
			for i, m := range msgs[:len(msgs)-1] {
				if m.GetStep() == nil {
					t.Fatalf("message %d of %d is not a step: %v", i, len(msgs), m)
				}
				got = append(got, m.GetStep().GetAction())
			}
			if !slices.Equal(got, want) {
				t.Errorf("steps %v, want %v", got, want)
			}
			res := msgs[len(msgs)-1].GetResult()
			if res == nil {
				t.Fatalf("last message is not the result: %v", msgs[len(msgs)-1])
			}
			if res.GetPod().GetUid() != pod.GetMetadata().GetUid() || res.GetStatus().GetPhase() != "Running" {
				t.Errorf("result: pod %v phase %q, want %s Running", res.GetPod(), res.GetStatus().GetPhase(), pod.GetMetadata().GetUid())
			}
			return res
		}
		res := sync(podsyncv1.StepAction_STEP_ACTION_CREATE_POD_SANDBOX, podsyncv1.StepAction_STEP_ACTION_CONFIG_POD_SANDBOX,
			podsyncv1.StepAction_STEP_ACTION_START_CONTAINER)
		if !res.GetCreated() {
			t.Errorf("result of the first SyncPod: created = false")
		}
		// A pod that names no seccomp profile runs with the runtime's
		// default one (podsyncd's --seccomp-default), as crictl inspect
		// shows it: the container's OCI spec has a seccomp filter.
		wantSeccompFilter(ctx, t, runtimeClient(t), res.GetStatus().GetContainerStatuses()[0].GetContainerId())
		// A changed command restarts the container in the same sandbox.
		pod.GetSpec().GetContainers()[0].Command = []string{"/bin/sh", "-c", "trap 'exit 0' TERM; echo changed; while true; do sleep 1; done"}
		res = sync(podsyncv1.StepAction_STEP_ACTION_KILL_CONTAINER, podsyncv1.StepAction_STEP_ACTION_CONFIG_POD_SANDBOX,
			podsyncv1.StepAction_STEP_ACTION_START_CONTAINER)
		if res.GetCreated() {
			t.Errorf("result of the second SyncPod: created = true")
		}
		if cs := res.GetStatus().GetContainerStatuses(); len(cs) != 1 || cs[0].GetRestartCount() != 1 {
			t.Errorf("container statuses %v, want app with restart count 1", cs)
		}
	})
}

// grpcurlHealth returns the status grpcurl reads from
// grpc.health.v1.Health/Check for the service.
func (d *podsyncd) grpcurlHealth(t *testing.T, service string) (string, error) {
	out, err := d.grpcurl(t.Context(), fmt.Sprintf(`{"service": %q}`, service), []string{"-max-time", "5"}, "grpc.health.v1.Health/Check")
	if err != nil {
		return "", err
	}
	var resp struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		return "", fmt.Errorf("health output %q: %w", out, err)
	}
	return resp.Status, nil
}

// TestHealthFollowsRuntime stops and starts containerd under a running
// podsyncd: health goes NOT_SERVING and back to SERVING, and the pod it
// runs is the same, still running, afterwards.
func TestHealthFollowsRuntime(t *testing.T) {
	ctx := testContext(t)
	d := startPodsyncd(t, daemonOptions{})
	rs := runtimeClient(t)

	pod := newPod(t, "", sleeper("app"))
	stream, err := d.client().SyncPod(ctx, &podsyncv1.SyncPodRequest{Pod: pod})
	if err != nil {
		t.Fatal(err)
	}
	res := lastSyncResult(t, stream)
	if res.GetStatus().GetPhase() != "Running" {
		t.Fatalf("phase %q after SyncPod, want Running", res.GetStatus().GetPhase())
	}
	containerID := res.GetStatus().GetContainerStatuses()[0].GetContainerId()
	uid := pod.GetMetadata().GetUid()
	before, _ := sandboxesOf(ctx, t, rs, uid)

	waitGrpcurlHealth := func(want string, timeout time.Duration) {
		t.Helper()
		start := time.Now()
		var got []string
		for _, svc := range []string{"", "podsync.v1.PodSyncService"} {
			for {
				st, err := d.grpcurlHealth(t, svc)
				if err != nil {
					t.Fatal(err)
				}
				if st == want {
					break
				}
				if time.Since(start) > timeout {
					t.Fatalf("health %q is %s %s after the change, want %s", svc, st, timeout, want)
				}
				time.Sleep(200 * time.Millisecond)
			}
			got = append(got, fmt.Sprintf("%q=%s", svc, want))
		}
		t.Logf("health %v within %s", got, time.Since(start).Round(time.Millisecond))
	}
	waitGrpcurlHealth("SERVING", 0)

	// A failed test leaves the runtime running for the next one.
	t.Cleanup(func() {
		if inst.PID() == 0 {
			cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := inst.Start(cctx); err != nil {
				t.Errorf("start containerd again: %v", err)
			}
		}
	})
	// podsyncd logs each outage and each recovery once.
	down, up := d.logCount(`"runtime unavailable"`), d.logCount(`"runtime available"`)

	// The probe runs every 2 s with a 2 s timeout.
	if err := inst.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	waitGrpcurlHealth("NOT_SERVING", 15*time.Second)
	if n := d.logCount(`"runtime unavailable"`); n != down+1 {
		t.Errorf("podsyncd logged the outage %d times, want once", n-down)
	}

	if err := inst.Start(ctx); err != nil {
		t.Fatal(err)
	}
	waitGrpcurlHealth("SERVING", 15*time.Second)
	if n := d.logCount(`"runtime available"`); n != up+1 {
		t.Errorf("podsyncd logged the recovery %d times, want once", n-up)
	}

	// The pod was left alone: same sandbox, same container, running; a
	// sync pass with the same spec changes nothing.
	ready, notReady := sandboxesOf(ctx, t, rs, uid)
	if !slices.Equal(ready, before) || len(notReady) != 0 {
		t.Errorf("sandboxes ready %v, not ready %v; want %v ready as before the runtime restart", ready, notReady, before)
	}
	stream, err = d.client().SyncPod(ctx, &podsyncv1.SyncPodRequest{Pod: pod})
	if err != nil {
		t.Fatal(err)
	}
	res = lastSyncResult(t, stream)
	cs := res.GetStatus().GetContainerStatuses()
	if res.GetStatus().GetPhase() != "Running" || len(cs) != 1 || cs[0].GetContainerId() != containerID || cs[0].GetRestartCount() != 0 ||
		cs[0].GetState().GetRunning() == nil {
		t.Errorf("after the runtime restart: phase %q, containers %v; want Running, %s running, no restart",
			res.GetStatus().GetPhase(), cs, containerID)
	}
}

// lastSyncResult reads a SyncPod stream to its end, failing the test if a
// step did not succeed or there is no result.
func lastSyncResult(t *testing.T, stream grpc.ServerStreamingClient[podsyncv1.SyncPodResponse]) *podsyncv1.SyncPodResult {
	t.Helper()
	var res *podsyncv1.SyncPodResult
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) && res != nil {
			return res
		}
		if err != nil {
			t.Fatalf("SyncPod: %v", err)
		}
		if s := m.GetStep(); s != nil && s.GetOutcome() != podsyncv1.StepOutcome_STEP_OUTCOME_SUCCEEDED {
			t.Errorf("step %v %s: %v %s", s.GetAction(), s.GetTarget(), s.GetOutcome(), s.GetMessage())
		}
		if r := m.GetResult(); r != nil {
			res = r
		}
	}
}

// wantSeccompFilter fails t unless the container with id (a
// "containerd://" ID from a status) runs under a seccomp filter: the
// runtime's verbose status (crictl inspect's) shows its OCI spec.
func wantSeccompFilter(ctx context.Context, t *testing.T, rs cri.RuntimeService, id string) {
	t.Helper()
	st, err := rs.ContainerStatus(ctx, strings.TrimPrefix(id, "containerd://"), true)
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		RuntimeSpec struct {
			Linux struct {
				Seccomp *struct {
					DefaultAction string `json:"defaultAction"`
				} `json:"seccomp"`
			} `json:"linux"`
		} `json:"runtimeSpec"`
	}
	if err := json.Unmarshal([]byte(st.GetInfo()["info"]), &info); err != nil {
		t.Fatalf("container %s: verbose info: %v", id, err)
	}
	if sc := info.RuntimeSpec.Linux.Seccomp; sc == nil || sc.DefaultAction == "" || sc.DefaultAction == "SCMP_ACT_ALLOW" {
		t.Errorf("container %s: seccomp %+v, want the runtime's default filter", id, sc)
	}
}
