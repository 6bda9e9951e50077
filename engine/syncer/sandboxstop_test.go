package syncer_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/plan"
	"github.com/podsync/podsync/engine/syncer"
	"github.com/podsync/podsync/engine/syncer/syncertest"
)

// stopPoint is where in a restart's calls the sandbox stops under a pass.
type stopPoint int

const (
	// atImageStatus: after the pass read the view, before it checks the
	// sandbox ahead of CreateContainer.
	atImageStatus stopPoint = iota + 1
	// atCreate: right before CreateContainer, which the runtime refuses.
	atCreate
	// atStart: between CreateContainer and StartContainer, which the
	// runtime refuses (StartError).
	atStart
	// afterStartRefused: StartContainer is refused as the pause process
	// is gone, while the runtime still reports the sandbox ready for one
	// more status read (containerd handles the pause's exit a few
	// milliseconds after it refused the start).
	afterStartRefused
	// afterStartRefusedSlowly: as afterStartRefused, the refusal naming
	// the pause process's namespace that is gone (runc's words), and the
	// runtime reports the sandbox ready for a second longer than
	// sandboxSettle's 500 ms (a loaded machine).
	afterStartRefusedSlowly
)

// goneRefusal is containerd's refusal of a start into a sandbox whose
// pause process is gone, as containerd 2.4 and runc reported it.
const goneRefusal = "failed to create containerd task: failed to create shim task: OCI runtime create failed: " +
	"runc create failed: unable to create new parent process: namespace path: lstat /proc/21014/ns/ipc: no such file or directory"

// stoppingRuntime is the fake runtime whose sandbox `crictl stopp` stops
// at one point of a pass, once armed: the container's exit reached the
// pass before the sandbox's stop.
type stoppingRuntime struct {
	*enginetest.FakeRuntime
	at stopPoint

	mu      sync.Mutex
	armed   bool
	sandbox string
	reads   int // PodSandboxStatus reads since a refused start
	refused time.Time
}

func (r *stoppingRuntime) arm(sandboxID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.armed, r.sandbox = true, sandboxID
}

// fire stops the sandbox if the runtime is armed for point p.
func (r *stoppingRuntime) fire(ctx context.Context, p stopPoint) error {
	r.mu.Lock()
	if !r.armed || r.at != p {
		r.mu.Unlock()
		return nil
	}
	r.armed = false
	id := r.sandbox
	r.mu.Unlock()
	return r.StopPodSandbox(ctx, id)
}

func (r *stoppingRuntime) ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec, verbose bool) (*runtimeapi.ImageStatusResponse, error) {
	if err := r.fire(ctx, atImageStatus); err != nil {
		return nil, err
	}
	return r.FakeRuntime.ImageStatus(ctx, image, verbose)
}

func (r *stoppingRuntime) CreateContainer(ctx context.Context, podSandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	if err := r.fire(ctx, atCreate); err != nil {
		return "", err
	}
	return r.FakeRuntime.CreateContainer(ctx, podSandboxID, config, sandboxConfig)
}

func (r *stoppingRuntime) StartContainer(ctx context.Context, id string) error {
	if err := r.fire(ctx, atStart); err != nil {
		return err
	}
	r.mu.Lock()
	refuse := r.armed && (r.at == afterStartRefused || r.at == afterStartRefusedSlowly)
	if refuse {
		r.armed, r.refused = false, time.Now()
	}
	at := r.at
	r.mu.Unlock()
	if !refuse {
		return r.FakeRuntime.StartContainer(ctx, id)
	}
	// containerd's refusal: the container is left exited, StartError.
	r.Lock() // the fake's lock, not mu
	c := r.Containers[id]
	c.State, c.ExitCode, c.Reason = runtimeapi.ContainerState_CONTAINER_EXITED, enginetest.StartErrorExitCode, enginetest.StartErrorReason
	r.Unlock()
	if at == afterStartRefusedSlowly {
		return errors.New(goneRefusal)
	}
	return errors.New("failed to create containerd task: OCI runtime create failed: namespace path: no such file or directory")
}

func (r *stoppingRuntime) PodSandboxStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	r.mu.Lock()
	stop := false
	if !r.refused.IsZero() {
		r.reads++
		if r.at == afterStartRefusedSlowly {
			stop = time.Since(r.refused) > 1500*time.Millisecond
		} else {
			// The first read after the refusal still says ready.
			stop = r.reads == 2
		}
		if stop {
			r.refused = time.Time{}
		}
	}
	r.mu.Unlock()
	if stop {
		if err := r.StopPodSandbox(ctx, id); err != nil {
			return nil, err
		}
	}
	return r.FakeRuntime.PodSandboxStatus(ctx, id, verbose)
}

// TestSandboxStoppedUnderARestartIsASandboxChange: a container's exit
// reaches the pass before its sandbox's stop (`crictl stopp` kills the
// containers first), so the pass plans a restart into a sandbox that is
// READY in its view. Wherever the stop becomes visible — before the
// create, at a refused create or start, or only a moment after a refused
// start — the pass starts nothing into the dead sandbox, reports no
// failed start, and plans again: the kubelet's sandbox change (kill the
// pod, create attempt 1, start the containers in it at once, restart
// count 1), with no StartError instance left to count as a crash.
func TestSandboxStoppedUnderARestartIsASandboxChange(t *testing.T) {
	for _, tc := range []struct {
		name string
		at   stopPoint
		// creates counts the pass's CreateContainer calls: one in the
		// dead sandbox unless the check before the create saw it.
		creates int
	}{
		{"stop visible before the create", atImageStatus, 1},
		{"create refused", atCreate, 2},
		{"start refused", atStart, 2},
		{"start refused before the stop is visible", afterStartRefused, 2},
		{"start refused, the pause gone, the stop visible a second later", afterStartRefusedSlowly, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := &stoppingRuntime{at: tc.at}
			h := syncertest.New(t, func(o *syncer.SyncerOptions) {
				rt.FakeRuntime = o.Runtime.(*enginetest.FakeRuntime)
				o.Runtime, o.Images = rt, rt
			})
			pod := enginetest.Pod()
			pod.Spec.Containers = pod.Spec.Containers[:1]
			res := h.Sync(pod)
			first := syncertest.Newest(t, res, "app")

			h.Exit(res, "app", enginetest.KillExitCode)
			rt.arm(res.SandboxID)
			h.Calls()
			res = h.Sync(pod)
			if n := countCalls(h.Calls(), "CreateContainer"); n != tc.creates {
				t.Errorf("%d CreateContainer calls, want %d", n, tc.creates)
			}
			syncertest.WantSteps(t, res,
				"ConfigPodSandbox #0",
				"KillPodSandbox #0 SandboxChanged",
				"CreatePodSandbox #1 SandboxNotReady",
				"ConfigPodSandbox #1",
				"StartContainer app NewSandbox",
			)
			if res.Plan.Sandbox.PreviousID != first.SandboxID || !res.Plan.Sandbox.Create {
				t.Errorf("the result's plan %+v, want the sandbox change from %s", res.Plan.Sandbox, first.SandboxID)
			}
			app := syncertest.Newest(t, res, "app")
			if sb := res.View.Sandboxes[0]; app.SandboxID != sb.ID || sb.Attempt != 1 || app.RestartCount != 1 {
				t.Errorf("app %s restart %d in sandbox %+v, want restart 1 in attempt 1", app.ID, app.RestartCount, sb)
			}
			if got, want := h.CriContainers(), []string{"app/0 EXITED", "app/1 RUNNING"}; !slices.Equal(got, want) {
				t.Errorf("containers = %v, want %v (nothing left in the dead sandbox)", got, want)
			}
			h.Converged(pod, res)

			// The start in the new sandbox was the run's first restart,
			// as the kubelet counts it: the next crash waits the base
			// delay, not twice it.
			h.Exit(res, "app", 1)
			crashed := h.Clock.Now()
			res = h.Sync(pod)
			want := []syncer.StepResult{{Action: syncer.ActionStartContainer, Target: "app", Reason: plan.ReasonCrashLoopBackOff,
				NextRetry: crashed.Add(plan.DefaultBackoffBase)}}
			if diff := cmp.Diff(want, res.Steps, cmpStep); diff != "" {
				t.Errorf("after the next crash (-want +got):\n%s", diff)
			}
		})
	}
}

func countCalls(calls []string, method string) int {
	n := 0
	for _, c := range calls {
		if c == method {
			n++
		}
	}
	return n
}

// cmpStep compares the action, target, reason and next retry of steps.
var cmpStep = cmp.Comparer(func(a, b syncer.StepResult) bool {
	return a.Action == b.Action && a.Target == b.Target && a.Reason == b.Reason && a.NextRetry.Equal(b.NextRetry)
})

// TestRefusedStartInAReadySandboxIsAContainerFailure: a start the runtime
// refuses while its sandbox stays ready is the container's failure, as
// before: RunContainerError, the instance kept.
func TestRefusedStartInAReadySandboxIsAContainerFailure(t *testing.T) {
	h := syncertest.New(t)
	pod := enginetest.Pod()
	pod.Spec.Containers = pod.Spec.Containers[:1]
	res := h.Sync(pod)
	h.Exit(res, "app", 1)
	h.RT.InjectError("StartContainer", errors.New("exec: \"nope\": executable file not found"))
	res = h.Sync(pod)
	syncertest.WantSteps(t, res, "ConfigPodSandbox #0", "StartContainer app !"+syncer.ReasonRunContainerError)
	if got, want := h.CriContainers(), []string{"app/0 EXITED", "app/1 CREATED"}; !slices.Equal(got, want) {
		t.Errorf("containers = %v, want %v", got, want)
	}
}
