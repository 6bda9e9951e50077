package syncer_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/plan"
	"github.com/podsync/podsync/engine/syncer"
	"github.com/podsync/podsync/engine/syncer/syncertest"
)

func TestNewPodStartsInKubeletOrder(t *testing.T) {
	h := syncertest.New(t)
	pod := enginetest.Pod()
	res := h.Sync(pod)
	syncertest.WantSteps(t, res,
		"CreatePodSandbox #0 NoSandbox",
		"ConfigPodSandbox #0",
		"StartContainer app NewSandbox",
		"StartContainer helper NewSandbox",
	)
	if len(res.PodIPs) != 1 || res.SandboxID == "" {
		t.Errorf("sandbox %q with IPs %v, want one IP", res.SandboxID, res.PodIPs)
	}
	st := h.S.PodStatus(pod, res.View, model.ProbeResults{})
	if st.Phase != corev1.PodRunning || st.PodIP == "" {
		t.Errorf("status phase %s ip %q, want Running with an IP", st.Phase, st.PodIP)
	}
	for _, cs := range st.ContainerStatuses {
		if cs.ImageID == "" || cs.ContainerID == "" || cs.State.Running == nil {
			t.Errorf("container status %+v, want running with enginetest.Image and container IDs", cs)
		}
	}
	for _, s := range res.Steps {
		if s.Action == syncer.ActionStartContainer && (s.ContainerID == "" || s.SandboxID != res.SandboxID || s.ContainerType != syncer.ContainerTypeRegular) {
			t.Errorf("step %+v lacks its IDs or type", s)
		}
	}
	// The files the containers mount exist.
	for _, f := range []string{
		filepath.Join(criconfig.PodDir(pod, h.Cfg), "etc-hosts"),
		criconfig.TerminationMessageFile(pod, "app", 0, h.Cfg),
	} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("mounted file: %v", err)
		}
	}
	hosts, _ := os.ReadFile(filepath.Join(criconfig.PodDir(pod, h.Cfg), "etc-hosts"))
	if !strings.Contains(string(hosts), res.PodIPs[0]+"\tweb\n") {
		t.Errorf("hosts file lacks the pod's entry:\n%s", hosts)
	}
	h.Converged(pod, res)
}

// TestHostsFileOfHostnameOverride: the pod's hosts file names the pod by
// its hostnameOverride, without a domain, as the kubelet's
// managedHostsFileContent with GeneratePodHostNameAndDomain's result.
func TestHostsFileOfHostnameOverride(t *testing.T) {
	h := syncertest.New(t)
	pod := enginetest.Pod()
	pod.Spec.Hostname, pod.Spec.Subdomain, pod.Spec.HostnameOverride = "custom-host", "t", ptr.To("override.example.host")
	res := h.Sync(pod)
	hosts, err := os.ReadFile(filepath.Join(criconfig.PodDir(pod, h.Cfg), "etc-hosts"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(hosts), "\n"+res.PodIPs[0]+"\toverride.example.host\n") || strings.Contains(string(hosts), "custom-host") {
		t.Errorf("hosts file, want the pod's IP for override.example.host alone:\n%s", hosts)
	}
}

// TestRuntimeClassNameIsTheSandboxHandler: runtimeClassName names the
// CRI runtime handler the sandbox runs with (the kubelet's
// createPodSandbox passes its RuntimeClass's handler to RunPodSandbox);
// without one the runtime's default handler ("").
func TestRuntimeClassNameIsTheSandboxHandler(t *testing.T) {
	for _, tc := range []struct {
		name string
		rc   *string
		want string
	}{
		{"default", nil, ""},
		{"kata", ptr.To("kata"), "kata"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := syncertest.New(t)
			pod := enginetest.Pod()
			pod.Spec.RuntimeClassName = tc.rc
			res := h.Sync(pod)
			h.RT.Lock()
			sb := h.RT.Sandboxes[res.SandboxID]
			h.RT.Unlock()
			if sb == nil || sb.RuntimeHandler != tc.want {
				t.Fatalf("sandbox %s: %+v, want runtime handler %q", res.SandboxID, sb, tc.want)
			}
		})
	}
}

func TestRestartPolicies(t *testing.T) {
	for _, tc := range []struct {
		policy   corev1.RestartPolicy
		code     int32
		restarts bool
	}{
		{corev1.RestartPolicyAlways, 0, true},
		{corev1.RestartPolicyAlways, 1, true},
		{corev1.RestartPolicyOnFailure, 0, false},
		{corev1.RestartPolicyOnFailure, 137, true},
		{corev1.RestartPolicyNever, 1, false},
	} {
		t.Run(fmt.Sprintf("%s/exit%d", tc.policy, tc.code), func(t *testing.T) {
			h := syncertest.New(t)
			pod := enginetest.Pod()
			pod.Spec.RestartPolicy = tc.policy
			res := h.Sync(pod)
			h.Exit(res, "app", tc.code)
			res = h.Sync(pod)
			if tc.restarts {
				syncertest.WantSteps(t, res, "ConfigPodSandbox #0", "StartContainer app Exited")
				if inst := syncertest.Newest(t, res, "app"); inst.RestartCount != 1 || inst.State != model.ContainerRunning {
					t.Errorf("app = %+v, want running with restart count 1", inst)
				}
				h.Converged(pod, res)
				return
			}
			// helper keeps running; app stays exited.
			syncertest.WantSteps(t, res)
			if inst := syncertest.Newest(t, res, "app"); inst.State != model.ContainerExited || inst.RestartCount != 0 {
				t.Errorf("app = %+v, want exited with restart count 0", inst)
			}
			// Once helper ends too, the pod is done and its sandbox stopped.
			h.Exit(res, "helper", 0)
			res = h.Sync(pod)
			syncertest.WantSteps(t, res, "KillPodSandbox #0 AllContainersDone")
			want := corev1.PodSucceeded
			if tc.code != 0 {
				want = corev1.PodFailed
			}
			if st := h.S.PodStatus(pod, res.View, model.ProbeResults{}); st.Phase != want {
				t.Errorf("phase = %s, want %s", st.Phase, want)
			}
		})
	}
}

func TestCrashLoopBackOff(t *testing.T) {
	h := syncertest.New(t)
	pod := enginetest.Pod()
	pod.Spec.Containers = pod.Spec.Containers[:1]
	res := h.Sync(pod)

	// The first crash restarts at once.
	h.Exit(res, "app", 1)
	res = h.Sync(pod)
	syncertest.WantSteps(t, res, "ConfigPodSandbox #0", "StartContainer app Exited")

	// The second waits the base delay from the crash.
	h.Exit(res, "app", 1)
	crashed := h.Clock.Now()
	res = h.Sync(pod)
	syncertest.WantSteps(t, res, "StartContainer app CrashLoopBackOff")
	st := res.Steps[0]
	if want := crashed.Add(plan.DefaultBackoffBase); !st.NextRetry.Equal(want) || st.Err != nil || !st.BackedOff() {
		t.Errorf("back-off step %+v, want next retry %s and no error", st, want)
	}
	if cs := h.S.PodStatus(pod, res.View, model.ProbeResults{}).ContainerStatuses[0]; cs.State.Waiting == nil || cs.State.Waiting.Reason != plan.ReasonCrashLoopBackOff {
		t.Errorf("container status %+v, want waiting in CrashLoopBackOff", cs.State)
	}
	h.Clock.Step(plan.DefaultBackoffBase - 3*time.Millisecond)
	syncertest.WantSteps(t, h.Sync(pod), "StartContainer app CrashLoopBackOff")
	h.Clock.Step(time.Millisecond)
	res = h.Sync(pod)
	syncertest.WantSteps(t, res, "ConfigPodSandbox #0", "StartContainer app Exited")
	if inst := syncertest.Newest(t, res, "app"); inst.RestartCount != 2 {
		t.Errorf("restart count %d, want 2", inst.RestartCount)
	}

	// The third waits twice as long; the instance between the first of
	// the run and the last exited one is garbage.
	h.Exit(res, "app", 1)
	h.Clock.Step(2 * plan.DefaultBackoffBase)
	res = h.Sync(pod)
	syncertest.WantSteps(t, res, "ConfigPodSandbox #0", "StartContainer app Exited", "RemoveContainer app GarbageCollected")
	if got, want := h.CriContainers(), []string{"app/0 EXITED", "app/2 EXITED", "app/3 RUNNING"}; !slices.Equal(got, want) {
		t.Errorf("containers = %v, want %v", got, want)
	}
	// The run's length survives the removal: the next crash waits 4×.
	h.Exit(res, "app", 1)
	crashed = h.Clock.Now()
	res = h.Sync(pod)
	if want := crashed.Add(4 * plan.DefaultBackoffBase); len(res.Steps) != 1 || !res.Steps[0].NextRetry.Equal(want) {
		t.Errorf("steps %v, want one back-off until %s", res.Steps, want)
	}
}

func TestDefinitionChangeRecreates(t *testing.T) {
	h := syncertest.New(t)
	pod := enginetest.Pod()
	res := h.Sync(pod)
	old := syncertest.Newest(t, res, "app")

	pod = pod.DeepCopy()
	pod.Spec.Containers[0].Command = []string{"/bin/sh", "-c", "while :; do sleep 2; done"}
	res = h.Sync(pod)
	syncertest.WantSteps(t, res,
		"KillContainer app DefinitionChanged",
		"ConfigPodSandbox #0",
		"StartContainer app DefinitionChanged",
	)
	if kill := res.Steps[0]; kill.ContainerID != old.ID || !strings.Contains(kill.Message, "definition changed") {
		t.Errorf("kill step %+v, want the old instance and the planner's message", kill)
	}
	if inst := syncertest.Newest(t, res, "app"); inst.ID == old.ID || inst.RestartCount != 1 {
		t.Errorf("app = %+v, want a new instance with restart count 1", inst)
	}

	// A new enginetest.Image is pulled (IfNotPresent, not held).
	pod = pod.DeepCopy()
	pod.Spec.Containers[0].Image = "registry.local/busybox:2"
	res = h.Sync(pod)
	syncertest.WantSteps(t, res,
		"KillContainer app DefinitionChanged",
		"ConfigPodSandbox #0",
		"PullImage registry.local/busybox:2",
		"StartContainer app DefinitionChanged",
		// Only the newest dead instance is kept once the spec changed.
		"RemoveContainer app GarbageCollected",
	)
	if inst := syncertest.Newest(t, res, "app"); inst.Image != "registry.local/busybox:2" || inst.RestartCount != 2 {
		t.Errorf("app = %+v, want enginetest.Image 2 and restart count 2", inst)
	}
	h.Converged(pod, res)
}

func TestSandboxStoppedFromOutside(t *testing.T) {
	h := syncertest.New(t)
	pod := enginetest.Pod()
	res := h.Sync(pod)
	if err := h.RT.StopPodSandbox(h.Ctx, res.SandboxID); err != nil {
		t.Fatal(err)
	}
	res = h.Sync(pod)
	syncertest.WantSteps(t, res,
		"KillPodSandbox #0 SandboxChanged",
		"CreatePodSandbox #1 SandboxNotReady",
		"ConfigPodSandbox #1",
		"StartContainer app NewSandbox",
		"StartContainer helper NewSandbox",
	)
	if sb := res.View.Sandboxes[0]; sb.Attempt != 1 || sb.State != model.SandboxReady {
		t.Errorf("newest sandbox %+v, want attempt 1 and ready", sb)
	}
	if inst := syncertest.Newest(t, res, "app"); inst.RestartCount != 1 {
		t.Errorf("app restart count %d, want 1", inst.RestartCount)
	}
	h.Converged(pod, res)
}

// TestSandboxWithoutANetworkStatusIsKept: the kubelet replaces a ready
// sandbox for a missing IP only when the runtime reported a network status
// (sandboxStatus.Network != nil && Ip == ""); one without a network status
// is kept.
func TestSandboxWithoutANetworkStatusIsKept(t *testing.T) {
	h := syncertest.New(t)
	pod := enginetest.Pod()
	res := h.Sync(pod)
	setNetwork := func(n *runtimeapi.PodSandboxNetworkStatus) {
		h.RT.Lock()
		h.RT.Sandboxes[res.SandboxID].Network = n
		h.RT.Unlock()
	}
	setNetwork(nil)
	syncertest.WantSteps(t, h.Sync(pod))
	setNetwork(&runtimeapi.PodSandboxNetworkStatus{})
	steps := syncertest.Summary(h.Sync(pod).Steps)
	if !slices.Contains(steps, "CreatePodSandbox #1 SandboxWithoutIP") {
		t.Errorf("steps %v, want a new sandbox for the missing IP", steps)
	}
}

func TestInitContainers(t *testing.T) {
	h := syncertest.New(t)
	pod := enginetest.Pod()
	pod.Spec.InitContainers = []corev1.Container{enginetest.Container("init1", "true"), enginetest.Container("init2", "/bin/sh", "-c", "echo ok; exit 0")}
	res := h.Sync(pod)
	syncertest.WantSteps(t, res, "CreatePodSandbox #0 NoSandbox", "ConfigPodSandbox #0", "StartContainer init1 NewSandbox")
	if res.Steps[2].ContainerType != syncer.ContainerTypeInit {
		t.Errorf("init step type %q", res.Steps[2].ContainerType)
	}
	res = h.Sync(pod)
	syncertest.WantSteps(t, res, "ConfigPodSandbox #0", "StartContainer init2 NextInitContainer")
	res = h.Sync(pod)
	syncertest.WantSteps(t, res, "ConfigPodSandbox #0", "StartContainer app NotStarted", "StartContainer helper NotStarted")
	h.Converged(pod, res)

	// A new sandbox runs the init containers again from the first: their
	// old instances are purged, and their logs continue.
	if err := h.RT.StopPodSandbox(h.Ctx, res.SandboxID); err != nil {
		t.Fatal(err)
	}
	res = h.Sync(pod)
	syncertest.WantSteps(t, res,
		"KillPodSandbox #0 SandboxChanged",
		"RemoveContainer init1 InitContainersPurged",
		"RemoveContainer init2 InitContainersPurged",
		"CreatePodSandbox #1 SandboxNotReady",
		"ConfigPodSandbox #1",
		"StartContainer init1 NewSandbox",
	)
	if inst := syncertest.Newest(t, res, "init1"); inst.RestartCount != 1 {
		t.Errorf("init1 restart count %d, want 1", inst.RestartCount)
	}
	res = h.Sync(pod)
	if inst := syncertest.Newest(t, res, "init2"); inst.RestartCount != 1 {
		t.Errorf("init2 restart count %d, want 1 (from its log directory)", inst.RestartCount)
	}
	res = h.Sync(pod)
	h.Converged(pod, res)
}

// TestInitContainerInstancesPrunedBeforeStart: before init containers
// start again, the dead instances of each are pruned as the kubelet's
// pruneInitContainersBeforeStart does, keeping the newest exited one
// (and the crash-loop run's first, which the back-off is counted from).
func TestInitContainerInstancesPrunedBeforeStart(t *testing.T) {
	h := syncertest.New(t)
	pod := enginetest.Pod()
	pod.Spec.InitContainers = []corev1.Container{enginetest.Container("init", enginetest.RunForever...)}
	res := h.Sync(pod)
	h.Exit(res, "init", 1)
	res = h.Sync(pod) // the first failure restarts at once
	h.Exit(res, "init", 1)
	h.Clock.Step(plan.DefaultBackoffBase)
	res = h.Sync(pod)
	syncertest.WantSteps(t, res, "ConfigPodSandbox #0", "StartContainer init InitContainerFailed")
	if got, want := h.CriContainers(), []string{"init/0 EXITED", "init/1 EXITED", "init/2 RUNNING"}; !slices.Equal(got, want) {
		t.Errorf("containers = %v, want %v", got, want)
	}

	h.Exit(res, "init", 1)
	h.Clock.Step(2 * plan.DefaultBackoffBase)
	res = h.Sync(pod)
	syncertest.WantSteps(t, res, "RemoveContainer init InitContainerPruned", "ConfigPodSandbox #0", "StartContainer init InitContainerFailed")
	if got, want := h.CriContainers(), []string{"init/0 EXITED", "init/2 EXITED", "init/3 RUNNING"}; !slices.Equal(got, want) {
		t.Errorf("containers = %v, want %v", got, want)
	}
	// The run's length survives the pruning: the next crash waits 4×.
	// A removal that fails is reported and the pass goes on, as the
	// kubelet's; the next pass prunes again.
	h.Exit(res, "init", 1)
	crashed := h.Clock.Now()
	h.RT.InjectError("RemoveContainer", errors.New("device busy"))
	res = h.Sync(pod)
	syncertest.WantSteps(t, res, "RemoveContainer init !RemoveContainerError", "StartContainer init CrashLoopBackOff")
	if want := crashed.Add(4 * plan.DefaultBackoffBase); !res.Steps[1].NextRetry.Equal(want) {
		t.Errorf("back-off until %s, want %s", res.Steps[1].NextRetry, want)
	}
	syncertest.WantSteps(t, h.Sync(pod), "RemoveContainer init InitContainerPruned", "StartContainer init CrashLoopBackOff")
}

func TestFailedInitContainerUnderNever(t *testing.T) {
	h := syncertest.New(t)
	pod := enginetest.Pod()
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	pod.Spec.InitContainers = []corev1.Container{enginetest.Container("init", "false")}
	h.Sync(pod)
	res := h.Sync(pod)
	syncertest.WantSteps(t, res, "KillPodSandbox #0 InitContainerFailed")
	if st := h.S.PodStatus(pod, res.View, model.ProbeResults{}); st.Phase != corev1.PodFailed {
		t.Errorf("phase = %s, want Failed", st.Phase)
	}
	// Nothing restarts, the main containers never start.
	for range 3 {
		res = h.Sync(pod)
		if slices.ContainsFunc(res.Steps, func(s syncer.StepResult) bool {
			return s.Action == syncer.ActionStartContainer || s.Action == syncer.ActionCreatePodSandbox
		}) {
			t.Errorf("pass after failure did %v", syncertest.Summary(res.Steps))
		}
	}
	if got := h.CriContainers(); !slices.Equal(got, []string{"init/0 EXITED"}) {
		t.Errorf("containers = %v, want only the failed init container", got)
	}
}

func TestSidecarsStartFirstAndStopLast(t *testing.T) {
	h := syncertest.New(t)
	pod := enginetest.Pod()
	pod.Spec.Containers = pod.Spec.Containers[:1]
	sidecar := enginetest.Container("proxy", enginetest.RunForever...)
	sidecar.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
	pod.Spec.InitContainers = []corev1.Container{sidecar}
	res := h.Sync(pod)
	syncertest.WantSteps(t, res, "CreatePodSandbox #0 NoSandbox", "ConfigPodSandbox #0", "StartContainer proxy NewSandbox")
	if res.Steps[2].ContainerType != syncer.ContainerTypeSidecar {
		t.Errorf("sidecar step type %q", res.Steps[2].ContainerType)
	}
	res = h.Sync(pod)
	syncertest.WantSteps(t, res, "ConfigPodSandbox #0", "StartContainer app NotStarted")

	// A sidecar that exits restarts beside the running app.
	h.Exit(res, "proxy", 0)
	res = h.Sync(pod)
	syncertest.WantSteps(t, res, "ConfigPodSandbox #0", "StartContainer proxy SidecarExited")

	// Deleting the pod stops the app first, then the sidecar.
	pod = pod.DeepCopy()
	pod.DeletionTimestamp = ptr.To(metav1.NewTime(syncertest.T0))
	pod.DeletionGracePeriodSeconds = ptr.To[int64](5)
	res = h.Sync(pod)
	syncertest.WantSteps(t, res, "KillContainer app PodKilled", "KillContainer proxy PodKilled", "KillPodSandbox #0 PodDeleted")
	h.RT.Lock()
	var stops []string
	for _, c := range h.RT.Called {
		if c == "StopContainer" || c == "StopPodSandbox" {
			stops = append(stops, c)
		}
	}
	h.RT.Unlock()
	if len(stops) < 3 || stops[len(stops)-1] != "StopPodSandbox" {
		t.Errorf("calls %v, want containers stopped before the sandbox", stops)
	}
}

func TestKillPodStopsEverything(t *testing.T) {
	h := syncertest.New(t)
	pod := enginetest.Pod()
	h.Sync(pod)
	pod = pod.DeepCopy()
	pod.DeletionTimestamp = ptr.To(metav1.NewTime(syncertest.T0))
	res := h.Sync(pod)
	got := syncertest.Summary(res.Steps)
	// Regular containers stop in parallel: their order is not fixed.
	slices.Sort(got[:2])
	if diff := cmp.Diff([]string{"KillContainer app PodKilled", "KillContainer helper PodKilled", "KillPodSandbox #0 PodDeleted"}, got); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	if got := h.CriSandboxes(); !slices.Equal(got, []string{"0 NOTREADY"}) {
		t.Errorf("sandboxes = %v", got)
	}
	if len(h.Sync(pod).Steps) != 1 {
		t.Error("a deleted pod's next pass should only stop its stopped sandbox again")
	}
	// A cgroup v1 layout: the pod's cgroup with a container cgroup runc
	// left, in two hierarchies and an alias symlink.
	parent := criconfig.PodCgroupParent(pod, h.Cfg)
	for _, hier := range []string{"memory", "cpu,cpuacct"} {
		if err := os.MkdirAll(filepath.Join(h.Cfg.CgroupFS, hier, parent, "ctr"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("cpu,cpuacct", filepath.Join(h.Cfg.CgroupFS, "cpu")); err != nil {
		t.Fatal(err)
	}
	if err := h.S.RemovePod(h.Ctx, pod); err != nil {
		t.Fatal(err)
	}
	if got := append(h.CriSandboxes(), h.CriContainers()...); len(got) != 0 {
		t.Errorf("left after RemovePod: %v", got)
	}
	if _, err := os.Stat(criconfig.PodDir(pod, h.Cfg)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pod directory after RemovePod: %v", err)
	}
	for _, hier := range []string{"memory", "cpu,cpuacct"} {
		if _, err := os.Stat(filepath.Join(h.Cfg.CgroupFS, hier, parent)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("pod cgroup in %s after RemovePod: %v", hier, err)
		}
		if _, err := os.Stat(filepath.Join(h.Cfg.CgroupFS, hier, filepath.Dir(parent))); err != nil {
			t.Errorf("QoS cgroup in %s: %v", hier, err)
		}
	}
}

func TestLifecycleHooks(t *testing.T) {
	h := syncertest.New(t)
	pod := enginetest.Pod()
	pod.Spec.Containers = pod.Spec.Containers[:1]
	pod.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{
		PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-c", "echo started"}}},
		PreStop:   &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-c", "echo stopping"}}},
	}
	res := h.Sync(pod)
	syncertest.WantSteps(t, res, "CreatePodSandbox #0 NoSandbox", "ConfigPodSandbox #0", "PostStartHook app", "StartContainer app NewSandbox")
	pod = pod.DeepCopy()
	pod.DeletionTimestamp = ptr.To(metav1.NewTime(syncertest.T0))
	res = h.Sync(pod)
	syncertest.WantSteps(t, res, "PreStopHook app", "KillContainer app PodKilled", "KillPodSandbox #0 PodDeleted")
	if n := strings.Count(strings.Join(h.Calls(), " "), "ExecSync"); n != 2 {
		t.Errorf("%d ExecSync calls, want 2", n)
	}
}

func TestFailingHooks(t *testing.T) {
	h := syncertest.New(t)
	pod := enginetest.Pod()
	pod.Spec.Containers = pod.Spec.Containers[:1]
	pod.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{
		PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-c", "echo no >&2; exit 3"}}},
	}
	res := h.Sync(pod)
	syncertest.WantSteps(t, res,
		"CreatePodSandbox #0 NoSandbox",
		"ConfigPodSandbox #0",
		"PostStartHook app !PostStartHookError",
		"KillContainer app FailedPostStartHook",
		"StartContainer app !PostStartHookError",
	)
	st := syncertest.FailedStep(t, res, syncer.ActionStartContainer, "app")
	if !strings.Contains(st.Message, "Exec lifecycle hook") || !strings.Contains(st.Message, "no") {
		t.Errorf("message %q, want the kubelet's with the hook's output", st.Message)
	}
	if inst := syncertest.Newest(t, res, "app"); inst.State != model.ContainerExited {
		t.Errorf("app %+v, want killed", inst)
	}

	// A failing preStop hook does not stop the kill.
	pod = enginetest.Pod()
	pod.UID = "uid-2"
	pod.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{
		PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-c", "exit 1"}}},
	}
	h.Sync(pod)
	pod.DeletionTimestamp = ptr.To(metav1.NewTime(syncertest.T0))
	res = h.Sync(pod)
	if got := syncertest.Summary(res.Steps); !slices.Contains(got, "PreStopHook app !PreStopHookError") || !slices.Contains(got, "KillContainer app PodKilled") {
		t.Errorf("steps %v, want a failed preStop hook and a killed app", got)
	}
}

func TestConfigErrors(t *testing.T) {
	h := syncertest.New(t)
	pod := enginetest.Pod()
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MODE", ValueFrom: &corev1.EnvVarSource{
		ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Key: "mode"},
	}}}
	pod.Spec.Volumes = []corev1.Volume{{Name: "conf", VolumeSource: corev1.VolumeSource{
		Secret: &corev1.SecretVolumeSource{SecretName: "creds", Items: []corev1.KeyToPath{{Key: "token", Path: "auth/token", Mode: ptr.To[int32](0o600)}}},
	}}}
	pod.Spec.Containers[1].VolumeMounts = []corev1.VolumeMount{{Name: "conf", MountPath: "/etc/conf"}}

	// A missing secret holds the whole pod back.
	res := h.Sync(pod)
	syncertest.WantSteps(t, res, "MountVolumes web_shop(uid-1) !FailedMount")
	if step := res.Steps[0]; !errors.Is(step.Err, errdefs.ErrNotFound) {
		t.Errorf("mount error %v, want ErrNotFound", step.Err)
	}

	// A missing config map fails only the container that needs it.
	h.In.Secrets = []*corev1.Secret{{ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: "shop"}, Data: map[string][]byte{"token": []byte("s3cr3t")}}}
	res = h.Sync(pod)
	syncertest.WantSteps(t, res,
		"CreatePodSandbox #0 NoSandbox",
		"ConfigPodSandbox #0",
		"StartContainer app !CreateContainerConfigError",
		"StartContainer helper NewSandbox",
	)
	data, err := os.ReadFile(filepath.Join(criconfig.VolumeDir(pod, criconfig.VolumePluginSecret, "conf", h.Cfg), "auth", "token"))
	if err != nil || string(data) != "s3cr3t" {
		t.Errorf("secret file = %q, %v", data, err)
	}

	h.In.ConfigMaps = []*corev1.ConfigMap{{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "shop"}, Data: map[string]string{"mode": "fast"}}}
	res = h.Sync(pod)
	syncertest.WantSteps(t, res, "ConfigPodSandbox #0", "StartContainer app NotStarted")
	h.Converged(pod, res)
}

func TestTerminationMessages(t *testing.T) {
	h := syncertest.New(t)
	pod := enginetest.Pod()
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	pod.Spec.Containers[1].TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
	res := h.Sync(pod)
	if err := os.WriteFile(criconfig.TerminationMessageFile(pod, "app", 0, h.Cfg), []byte("bye"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.Exit(res, "app", 0)
	h.Exit(res, "helper", 2, "first", "last words")
	res = h.Sync(pod)
	st := h.S.PodStatus(pod, res.View, model.ProbeResults{})
	msgs := map[string]string{}
	for _, cs := range st.ContainerStatuses {
		if cs.State.Terminated != nil {
			msgs[cs.Name] = cs.State.Terminated.Message
		}
	}
	if diff := cmp.Diff(map[string]string{"app": "bye", "helper": "first\nlast words\n"}, msgs); diff != "" {
		t.Errorf("termination messages (-want +got):\n%s", diff)
	}
}

// TestPodWithoutUID: a pass needs the pod's UID. (That passes of one pod
// never overlap is the node's to ensure: engine's
// TestWorkersNeverOverlapPassesOfAPod.)
func TestPodWithoutUID(t *testing.T) {
	h := syncertest.New(t)
	if _, err := h.S.SyncPod(h.Ctx, &corev1.Pod{}, h.In, nil); !errors.Is(err, errdefs.ErrInvalidSpec) {
		t.Errorf("pod without uid: %v, want ErrInvalidSpec", err)
	}
}

func TestCancelledPass(t *testing.T) {
	h := syncertest.New(t)
	pod := enginetest.Pod()
	ctx, cancel := context.WithCancel(h.Ctx)
	res, err := h.S.SyncPod(ctx, pod, h.In, func(s syncer.StepResult) {
		if s.Action == syncer.ActionCreatePodSandbox {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("SyncPod: %v, want context.Canceled", err)
	}
	if len(res.Steps) == 0 {
		t.Error("the steps done before the cancellation are missing")
	}
	// Nothing created is left unstarted; the next pass converges.
	for _, c := range h.CriContainers() {
		if strings.HasSuffix(c, "CREATED") {
			t.Errorf("created container left: %s", c)
		}
	}
	h.Converged(pod, h.Sync(pod))
}

// TestPassEndReadsWhatItCreated: a pass that created the pod's sandbox
// and containers reads their statuses at its end without listing the
// runtime (and reuses the new sandbox's status); the view is the one a
// full read gives.
func TestPassEndReadsWhatItCreated(t *testing.T) {
	h := syncertest.New(t)
	pod := enginetest.Pod()
	h.Calls()
	res := h.Sync(pod)
	want := []string{
		"ListPodSandbox", "ListContainers", // the pass's start
		"RunPodSandbox", "PodSandboxStatus",
		"CreateContainer", "StartContainer",
		"CreateContainer", "StartContainer",
		"ContainerStatus", "ContainerStatus", // the pass's end
		"ImageStatus", "ImageStatus", // the enginetest.Image service's, listed last
	}
	if diff := cmp.Diff(want, h.Calls()); diff != "" {
		t.Errorf("CRI calls (-want +got):\n%s", diff)
	}
	full, err := syncer.ReadView(h.Ctx, h.RT, pod.UID)
	if err != nil {
		t.Fatal(err)
	}
	// Instances created in the same instant (the fake clock's) have no
	// order of their own.
	byID := cmpopts.SortSlices(func(a, b model.ContainerInstance) bool { return a.ID < b.ID })
	if diff := cmp.Diff(full, res.View, byID, cmpopts.IgnoreFields(model.RuntimeView{}, "PullFailures")); diff != "" {
		t.Errorf("the pass's view differs from a full read (-full +pass):\n%s", diff)
	}
	h.Converged(pod, res)
}

// TestViewNamesEachInstancesSandbox: CRI's ContainerStatus does not say
// which sandbox a container is in, so the view takes it from the list (and
// from the pass's own creates): the status's "initialized" rule counts
// only the current sandbox's containers.
func TestViewNamesEachInstancesSandbox(t *testing.T) {
	h := syncertest.New(t)
	pod := enginetest.Pod()
	res := h.Sync(pod)
	full, err := syncer.ReadView(h.Ctx, h.RT, pod.UID)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []model.RuntimeView{res.View, full} {
		for _, inst := range v.Containers {
			if inst.SandboxID != res.SandboxID || inst.SandboxID == "" {
				t.Errorf("instance %s in sandbox %q, want %q", inst.String(), inst.SandboxID, res.SandboxID)
			}
		}
	}
}

// TestPassEndListsAfterAFailedCreate: a create that failed may have left
// an object whose id the pass never learnt, so the pass's end lists the
// runtime.
func TestPassEndListsAfterAFailedCreate(t *testing.T) {
	h := syncertest.New(t)
	pod := enginetest.Pod()
	h.RT.InjectError("CreateContainer", errors.New("deadline exceeded"))
	h.Calls()
	res := h.Sync(pod)
	syncertest.FailedStep(t, res, syncer.ActionStartContainer, "app")
	calls := h.Calls()
	if n := strings.Count(strings.Join(calls, " "), "ListContainers"); n != 2 {
		t.Errorf("ListContainers called %d times, want 2 (start and end of the pass): %v", n, calls)
	}
	if inst := res.View.FindContainer("helper"); inst == nil || inst.State != model.ContainerRunning {
		t.Errorf("helper in the pass's view: %+v", inst)
	}
}

// TestViewMark: the result's view carries the read mark taken before the
// read behind it — the read at the end of a pass that changed the pod,
// the first read of one that did nothing — so that the worker knows
// which relists are older than the view.
func TestViewMark(t *testing.T) {
	h := syncertest.New(t)
	var marks uint64
	h.In.ReadMark = func() uint64 { marks++; return marks }
	pod := enginetest.Pod()
	if res := h.Sync(pod); res.ViewMark != 2 || marks != 2 {
		t.Errorf("pass that started the pod: view mark %d of %d taken, want the second (the read after the starts)", res.ViewMark, marks)
	}
	if res := h.Sync(pod); res.ViewMark != 3 || marks != 3 {
		t.Errorf("pass that did nothing: view mark %d of %d taken, want the third (its only read)", res.ViewMark, marks)
	}
	h.In.ReadMark = nil
	if res := h.Sync(pod); res.ViewMark != 0 {
		t.Errorf("without ReadMark: view mark %d, want 0", res.ViewMark)
	}
}
