package plan_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/plan"
	"github.com/podsync/podsync/engine/plan/plantest"
)

// res builds requirements from "cpu=100m,memory=100Mi"-style lists.
func res(requests, limits corev1.ResourceList) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Requests: requests, Limits: limits}
}

func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

var (
	cpuRestart = corev1.ContainerResizePolicy{ResourceName: corev1.ResourceCPU, RestartPolicy: corev1.RestartContainer}
	memRestart = corev1.ContainerResizePolicy{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.RestartContainer}
	cpuInPlace = corev1.ContainerResizePolicy{ResourceName: corev1.ResourceCPU, RestartPolicy: corev1.NotRequired}
	memInPlace = corev1.ContainerResizePolicy{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.NotRequired}
)

// resizeSummary is what a resize case asserts on.
type resizeSummary struct {
	Kill         []string
	Start        []string
	Resize       []string
	StartResized []string
}

func summarizeResize(a plan.PodActions) resizeSummary {
	var s resizeSummary
	for _, k := range a.Kill {
		s.Kill = append(s.Kill, k.Name+":"+k.Reason+":"+k.Message)
	}
	for _, k := range append(append([]plan.ContainerAction{}, a.StartInit...), a.Start...) {
		s.Start = append(s.Start, fmt.Sprintf("%s#%d:%s", k.Name, k.Attempt, k.Reason))
	}
	for _, r := range a.Resize {
		s.Resize = append(s.Resize, fmt.Sprintf("%s/%s %+v->%+v", r.Name, r.ContainerID, r.Current, r.Desired))
	}
	for _, r := range a.StartResized {
		s.StartResized = append(s.StartResized, fmt.Sprintf("%s/%s %+v->%+v", r.Name, r.ContainerID, r.Current, r.Desired))
	}
	return s
}

// TestComputePodActionsForPodResize ports the cases of the kubelet's
// TestComputePodActionsForPodResize (kuberuntime_manager_test.go) that
// concern container resources, plus podsync's rules for what is not a
// resize. The app container runs with created; the pod asks for desired.
func TestComputePodActionsForPodResize(t *testing.T) {
	const mi = 1 << 20
	restartMsg := "Container app resize requires restart"
	tests := []struct {
		name      string
		created   corev1.ResourceRequirements
		desired   corev1.ResourceRequirements
		policy    []corev1.ContainerResizePolicy
		mutatePod func(*corev1.Pod)
		// reported, if set, is what the runtime reports the instance runs with.
		reported *model.RuntimeResources
		noSpec   bool
		probes   model.ProbeResults
		want     resizeSummary
	}{
		{
			name:    "a decrease of CPU and memory limits is a resize in place",
			created: res(nil, rl("cpu", "200m", "memory", "200Mi")),
			desired: res(nil, rl("cpu", "100m", "memory", "100Mi")),
			want:    resizeSummary{Resize: []string{fmt.Sprintf("app/c-app {CPURequest:200 CPULimit:200 MemoryRequest:%d MemoryLimit:%d}->{CPURequest:100 CPULimit:100 MemoryRequest:%d MemoryLimit:%d}", 200*mi, 200*mi, 100*mi, 100*mi)}},
		},
		{
			name:    "a CPU limit change alone is a resize in place",
			created: res(nil, rl("cpu", "200m", "memory", "100Mi")),
			desired: res(nil, rl("cpu", "100m", "memory", "100Mi")),
			want:    resizeSummary{Resize: []string{fmt.Sprintf("app/c-app {CPURequest:200 CPULimit:200 MemoryRequest:%d MemoryLimit:%d}->{CPURequest:100 CPULimit:100 MemoryRequest:%d MemoryLimit:%d}", 100*mi, 100*mi, 100*mi, 100*mi)}},
		},
		{
			name:    "a memory limit increase alone is a resize in place",
			created: res(rl("memory", "100Mi"), rl("memory", "100Mi")),
			desired: res(rl("memory", "100Mi"), rl("memory", "200Mi")),
			want:    resizeSummary{Resize: []string{fmt.Sprintf("app/c-app {CPURequest:0 CPULimit:0 MemoryRequest:%d MemoryLimit:%d}->{CPURequest:0 CPULimit:0 MemoryRequest:%d MemoryLimit:%d}", 100*mi, 100*mi, 100*mi, 200*mi)}},
		},
		{
			name:     "nothing when the runtime already runs the desired resources",
			created:  res(nil, rl("cpu", "100m")),
			desired:  res(nil, rl("cpu", "200m")),
			reported: &model.RuntimeResources{CPUShares: 204, CPUQuota: 20000, CPUPeriod: 100000},
		},
		{
			name:     "a CPU limit change is no change when the runtime applies no CFS quota",
			created:  res(rl("cpu", "100m"), rl("cpu", "200m")),
			desired:  res(rl("cpu", "100m"), rl("cpu", "400m")),
			reported: &model.RuntimeResources{CPUShares: 102},
		},
		{
			name:    "nothing when spec and instance are best-effort",
			created: res(nil, nil),
			desired: res(nil, nil),
		},
		{
			name:    "a CPU and memory change with RestartContainer for CPU restarts the container",
			created: res(nil, rl("cpu", "100m", "memory", "100Mi")),
			desired: res(nil, rl("cpu", "200m", "memory", "200Mi")),
			policy:  []corev1.ContainerResizePolicy{cpuRestart, memInPlace},
			want:    resizeSummary{Kill: []string{"app:ResizeRequiresRestart:" + restartMsg}, Start: []string{"app#1:ResizeRequiresRestart"}, StartResized: []string{fmt.Sprintf("app/c-app {CPURequest:100 CPULimit:100 MemoryRequest:%d MemoryLimit:%d}->{CPURequest:200 CPULimit:200 MemoryRequest:%d MemoryLimit:%d}", 100*mi, 100*mi, 200*mi, 200*mi)}},
		},
		{
			name:    "a CPU and memory change with RestartContainer for memory restarts the container",
			created: res(nil, rl("cpu", "100m", "memory", "100Mi")),
			desired: res(nil, rl("cpu", "200m", "memory", "200Mi")),
			policy:  []corev1.ContainerResizePolicy{cpuInPlace, memRestart},
			want:    resizeSummary{Kill: []string{"app:ResizeRequiresRestart:" + restartMsg}, Start: []string{"app#1:ResizeRequiresRestart"}, StartResized: []string{fmt.Sprintf("app/c-app {CPURequest:100 CPULimit:100 MemoryRequest:%d MemoryLimit:%d}->{CPURequest:200 CPULimit:200 MemoryRequest:%d MemoryLimit:%d}", 100*mi, 100*mi, 200*mi, 200*mi)}},
		},
		{
			name:    "a memory change with RestartContainer for CPU only is a resize in place",
			created: res(nil, rl("cpu", "100m", "memory", "100Mi")),
			desired: res(nil, rl("cpu", "100m", "memory", "200Mi")),
			policy:  []corev1.ContainerResizePolicy{cpuRestart, memInPlace},
			want:    resizeSummary{Resize: []string{fmt.Sprintf("app/c-app {CPURequest:100 CPULimit:100 MemoryRequest:%d MemoryLimit:%d}->{CPURequest:100 CPULimit:100 MemoryRequest:%d MemoryLimit:%d}", 100*mi, 100*mi, 200*mi, 200*mi)}},
		},
		{
			name:    "a CPU change with RestartContainer for memory only is a resize in place",
			created: res(nil, rl("cpu", "100m", "memory", "100Mi")),
			desired: res(nil, rl("cpu", "200m", "memory", "100Mi")),
			policy:  []corev1.ContainerResizePolicy{cpuInPlace, memRestart},
			want:    resizeSummary{Resize: []string{fmt.Sprintf("app/c-app {CPURequest:100 CPULimit:100 MemoryRequest:%d MemoryLimit:%d}->{CPURequest:200 CPULimit:200 MemoryRequest:%d MemoryLimit:%d}", 100*mi, 100*mi, 100*mi, 100*mi)}},
		},
		{
			name:    "a memory request change with RestartContainer for memory restarts the container",
			created: res(rl("memory", "100Mi"), rl("memory", "300Mi")),
			desired: res(rl("memory", "200Mi"), rl("memory", "300Mi")),
			policy:  []corev1.ContainerResizePolicy{memRestart},
			want:    resizeSummary{Kill: []string{"app:ResizeRequiresRestart:" + restartMsg}, Start: []string{"app#1:ResizeRequiresRestart"}, StartResized: []string{fmt.Sprintf("app/c-app {CPURequest:0 CPULimit:0 MemoryRequest:%d MemoryLimit:%d}->{CPURequest:0 CPULimit:0 MemoryRequest:%d MemoryLimit:%d}", 100*mi, 300*mi, 200*mi, 300*mi)}},
		},
		{
			name:    "a memory request change with NotRequired changes nothing in the runtime",
			created: res(rl("memory", "100Mi"), rl("memory", "300Mi")),
			desired: res(rl("memory", "200Mi"), rl("memory", "300Mi")),
		},
		{
			name:    "a CPU request change at or below the minimum shares is no change",
			created: res(rl("cpu", "1m"), nil),
			desired: res(rl("cpu", "2m"), nil),
		},
		{
			name:    "a CPU limit change at or below the minimum quota is no change",
			created: res(rl("cpu", "1m"), rl("cpu", "5m")),
			desired: res(rl("cpu", "1m"), rl("cpu", "10m")),
		},
		{
			name:    "a CPU request change above the minimum shares is a resize in place",
			created: res(rl("cpu", "2m"), nil),
			desired: res(rl("cpu", "3m"), nil),
			want:    resizeSummary{Resize: []string{"app/c-app {CPURequest:2 CPULimit:0 MemoryRequest:0 MemoryLimit:0}->{CPURequest:3 CPULimit:0 MemoryRequest:0 MemoryLimit:0}"}},
		},
		{
			name:      "resources changed with another field restart the container for the definition change",
			created:   res(nil, rl("memory", "100Mi")),
			desired:   res(nil, rl("memory", "200Mi")),
			mutatePod: func(p *corev1.Pod) { p.Spec.Containers[0].Args = []string{"x"} },
			want:      resizeSummary{Kill: []string{"app:DefinitionChanged:Container app definition changed, will be restarted"}, Start: []string{"app#1:DefinitionChanged"}, StartResized: []string{fmt.Sprintf("app/c-app {CPURequest:0 CPULimit:0 MemoryRequest:%d MemoryLimit:%d}->{CPURequest:0 CPULimit:0 MemoryRequest:%d MemoryLimit:%d}", 100*mi, 100*mi, 200*mi, 200*mi)}},
		},
		{
			name:    "a change of a resource other than CPU and memory restarts the container",
			created: res(nil, rl("memory", "100Mi", "ephemeral-storage", "1Gi")),
			desired: res(nil, rl("memory", "100Mi", "ephemeral-storage", "2Gi")),
			want:    resizeSummary{Kill: []string{"app:DefinitionChanged:Container app definition changed, will be restarted"}, Start: []string{"app#1:DefinitionChanged"}},
		},
		{
			// pod_resize.go's "6 containers - various operations performed
			// (including adding limits and requests)" [Conformance]: no
			// restart.
			name:    "an added memory limit is a resize in place",
			created: res(rl("memory", "100Mi"), nil),
			desired: res(rl("memory", "100Mi"), rl("memory", "200Mi")),
			want:    resizeSummary{Resize: []string{fmt.Sprintf("app/c-app {CPURequest:0 CPULimit:0 MemoryRequest:%d MemoryLimit:0}->{CPURequest:0 CPULimit:0 MemoryRequest:%d MemoryLimit:%d}", 100*mi, 100*mi, 200*mi)}},
		},
		{
			name:    "an added CPU limit is a resize in place",
			created: res(rl("cpu", "100m"), nil),
			desired: res(rl("cpu", "200m"), rl("cpu", "400m")),
			want:    resizeSummary{Resize: []string{"app/c-app {CPURequest:100 CPULimit:0 MemoryRequest:0 MemoryLimit:0}->{CPURequest:200 CPULimit:400 MemoryRequest:0 MemoryLimit:0}"}},
		},
		{
			name:    "a removed limit restarts the container",
			created: res(rl("memory", "100Mi"), rl("memory", "200Mi")),
			desired: res(rl("memory", "100Mi"), nil),
			want:    resizeSummary{Kill: []string{"app:DefinitionChanged:Container app definition changed, will be restarted"}, Start: []string{"app#1:DefinitionChanged"}, StartResized: []string{fmt.Sprintf("app/c-app {CPURequest:0 CPULimit:0 MemoryRequest:%d MemoryLimit:%d}->{CPURequest:0 CPULimit:0 MemoryRequest:%d MemoryLimit:0}", 100*mi, 200*mi, 100*mi)}},
		},
		{
			name:    "a resize that changes the QoS class restarts the container",
			created: res(nil, nil),
			desired: res(rl("memory", "100Mi"), nil),
			want:    resizeSummary{Kill: []string{"app:DefinitionChanged:Container app definition changed, will be restarted"}, Start: []string{"app#1:DefinitionChanged"}, StartResized: []string{fmt.Sprintf("app/c-app {CPURequest:0 CPULimit:0 MemoryRequest:0 MemoryLimit:0}->{CPURequest:0 CPULimit:0 MemoryRequest:%d MemoryLimit:0}", 100*mi)}},
		},
		{
			name:    "a resize of an instance whose spec annotation is lost restarts the container",
			created: res(nil, rl("memory", "100Mi")),
			desired: res(nil, rl("memory", "200Mi")),
			noSpec:  true,
			want:    resizeSummary{Kill: []string{"app:DefinitionChanged:Container app definition changed, will be restarted"}, Start: []string{"app#1:DefinitionChanged"}},
		},
		{
			name:    "a failed liveness probe restarts a container that would be resized",
			created: res(nil, rl("memory", "100Mi")),
			desired: res(nil, rl("memory", "200Mi")),
			probes:  model.ProbeResults{Liveness: map[string]model.ProbeResult{"c-app": model.ProbeFailure}},
			want:    resizeSummary{Kill: []string{"app:LivenessProbeFailed:Container app failed liveness probe, will be restarted"}, Start: []string{"app#1:LivenessProbeFailed"}, StartResized: []string{fmt.Sprintf("app/c-app {CPURequest:0 CPULimit:0 MemoryRequest:%d MemoryLimit:%d}->{CPURequest:0 CPULimit:0 MemoryRequest:%d MemoryLimit:%d}", 100*mi, 100*mi, 200*mi, 200*mi)}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := plantest.BasePod()
			old.Spec.Containers[0].Resources = tt.created
			old.Spec.Containers[0].ResizePolicy = tt.policy
			pod := plantest.BasePod()
			pod.Spec.Containers[0].Resources = tt.desired
			pod.Spec.Containers[0].ResizePolicy = tt.policy
			if tt.mutatePod != nil {
				tt.mutatePod(pod)
				tt.mutatePod(old)
				old.Spec.Containers[0].Args = nil
			}
			view := plantest.BaseView()
			app := plantest.Inst(old, "app", "c-app", model.ContainerRunning, 0, 55*time.Minute)
			app.Resources = tt.reported
			if tt.noSpec {
				app.Spec = nil
			}
			view.Containers[1] = app
			got := plan.ComputePodActions(pod, view, tt.probes, plantest.T0, plan.BackoffPolicy{})
			if diff := cmp.Diff(tt.want, summarizeResize(got)); diff != "" {
				t.Errorf("ComputePodActions() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSidecarResizedInPlace(t *testing.T) {
	old := plantest.BasePod()
	plantest.WithInit("log-sidecar")(old)
	old.Spec.InitContainers[0].Resources = res(nil, rl("memory", "100Mi"))
	pod := old.DeepCopy()
	pod.Spec.InitContainers[0].Resources = res(nil, rl("memory", "200Mi"))
	view := plantest.BaseView()
	view.Containers = append(view.Containers, plantest.Inst(old, "log-sidecar", "c-sc", model.ContainerRunning, 0, 58*time.Minute))
	got := plan.ComputePodActions(pod, view, model.ProbeResults{}, plantest.T0, plan.BackoffPolicy{})
	want := resizeSummary{Resize: []string{"log-sidecar/c-sc {CPURequest:0 CPULimit:0 MemoryRequest:104857600 MemoryLimit:104857600}->{CPURequest:0 CPULimit:0 MemoryRequest:209715200 MemoryLimit:209715200}"}}
	if diff := cmp.Diff(want, summarizeResize(got)); diff != "" {
		t.Errorf("ComputePodActions() mismatch (-want +got):\n%s", diff)
	}
}

// TestResizeOrderDecreasesBeforeIncreases is the kubelet's order of
// ContainersToUpdate: per resource, decreases (prepended) before
// increases (appended).
func TestResizeOrderDecreasesBeforeIncreases(t *testing.T) {
	r := func(name string, curMem, wantMem, curCPU, wantCPU int64) plan.ResizeAction {
		return plan.ResizeAction{Name: name,
			Current: plan.ContainerResources{MemoryLimit: curMem, CPULimit: curCPU},
			Desired: plan.ContainerResources{MemoryLimit: wantMem, CPULimit: wantCPU}}
	}
	rs := []plan.ResizeAction{
		r("a", 100, 200, 100, 100), // memory up
		r("b", 200, 100, 200, 100), // memory and CPU down
		r("c", 300, 100, 100, 500), // memory down, CPU up
		r("d", 100, 100, 500, 100), // CPU down
	}
	names := func(rs []plan.ResizeAction) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.Name)
		}
		return out
	}
	if got, want := names(plan.ResizeOrder(rs, corev1.ResourceMemory)), []string{"c", "b", "a"}; !cmp.Equal(got, want) {
		t.Errorf("memory order %v, want %v", got, want)
	}
	if got, want := names(plan.ResizeOrder(rs, corev1.ResourceCPU)), []string{"d", "b", "c"}; !cmp.Equal(got, want) {
		t.Errorf("CPU order %v, want %v", got, want)
	}
}

// TestActualResourcesFromRuntime: what the runtime reports wins over the
// spec annotation, converted back as the kubelet does (shares rounded up).
func TestActualResourcesFromRuntime(t *testing.T) {
	pod := plantest.BasePod()
	pod.Spec.Containers[0].Resources = res(rl("cpu", "100m", "memory", "64Mi"), rl("cpu", "200m", "memory", "128Mi"))
	inst := plantest.Inst(pod, "app", "c-app", model.ContainerRunning, 0, time.Minute)
	inst.Resources = &model.RuntimeResources{CPUShares: 307, CPUQuota: 50000, CPUPeriod: 100000, MemoryLimitInBytes: 256 << 20}
	got, ok := plan.ActualResources(&inst)
	want := plan.ContainerResources{CPURequest: 300, CPULimit: 500, MemoryRequest: 64 << 20, MemoryLimit: 256 << 20}
	if !ok || got != want {
		t.Errorf("ActualResources() = %+v, %v, want %+v", got, ok, want)
	}
	inst.Spec = nil
	if _, ok := plan.ActualResources(&inst); ok {
		t.Error("ActualResources() without the spec annotation is ok")
	}
}

// TestCrashLoopBackOffSurvivesAResize: the kubelet's back-off key has the
// container hash, which leaves resources out, so an instance that exited
// before a resize still counts.
func TestCrashLoopBackOffSurvivesAResize(t *testing.T) {
	old := plantest.BasePod()
	old.Spec.Containers[0].Resources = res(nil, rl("memory", "64Mi"))
	pod := plantest.BasePod()
	pod.Spec.Containers[0].Resources = res(nil, rl("memory", "128Mi"))
	view := plantest.BaseView()
	view.Containers[1] = plantest.Exited(plantest.Inst(old, "app", "c-app-3", model.ContainerExited, 3, 2*time.Minute), 1, time.Second)
	view.Containers = append(view.Containers, plantest.Exited(plantest.Inst(old, "app", "c-app-2", model.ContainerExited, 2, 5*time.Minute), 1, 3*time.Minute))
	b := plan.CrashLoopBackoff(pod, model.SpecContainer(pod, "app"), &view, plan.BackoffPolicy{})
	if b.Failures != 2 || b.Delay == 0 {
		t.Errorf("back-off %+v after a resize, want the run of 2 failures to go on", b)
	}
	pod.Spec.Containers[0].Image = "busybox:2"
	if b := plan.CrashLoopBackoff(pod, model.SpecContainer(pod, "app"), &view, plan.BackoffPolicy{}); b.Failures != 0 {
		t.Errorf("back-off %+v after an image change, want none", b)
	}
}

// TestStartResized: the containers a pass starts with other CPU or memory
// than their newest instance ran with change the pod-level resources (the
// kubelet's UpdatePodResources: computePodResizeAction for a resize that
// restarts, startingResizedContainer for any other start); a container
// that never ran, one that starts with what it had, one that waits in a
// back-off and a pod whose sandbox is re-created do not.
func TestStartResized(t *testing.T) {
	const mi = 1 << 20
	small, large := res(nil, rl("memory", "64Mi")), res(nil, rl("memory", "128Mi"))
	grown := fmt.Sprintf("{CPURequest:0 CPULimit:0 MemoryRequest:%d MemoryLimit:%d}->{CPURequest:0 CPULimit:0 MemoryRequest:%d MemoryLimit:%d}", 64*mi, 64*mi, 128*mi, 128*mi)
	tests := []struct {
		name string
		// build returns the pod and what the runtime holds; old is the pod
		// as the instances were created.
		build func(old, pod *corev1.Pod) model.RuntimeView
		want  []string
	}{
		{
			name: "a resize under RestartContainer",
			build: func(old, pod *corev1.Pod) model.RuntimeView {
				pod.Spec.Containers[0].ResizePolicy = []corev1.ContainerResizePolicy{memRestart}
				old.Spec.Containers[0].ResizePolicy = []corev1.ContainerResizePolicy{memRestart}
				view := plantest.BaseView()
				view.Containers[1] = plantest.Inst(old, "app", "c-app", model.ContainerRunning, 0, time.Hour)
				return view
			},
			want: []string{"app/c-app " + grown},
		},
		{
			name: "an exited container restarted after its resources changed",
			build: func(old, _ *corev1.Pod) model.RuntimeView {
				view := plantest.BaseView()
				view.Containers[1] = plantest.Exited(plantest.Inst(old, "app", "c-app", model.ContainerExited, 0, time.Hour), 1, 30*time.Minute)
				return view
			},
			want: []string{"app/c-app " + grown},
		},
		{
			name: "an exited container restarted with what it had",
			build: func(old, pod *corev1.Pod) model.RuntimeView {
				pod.Spec.Containers[0].Resources = small
				view := plantest.BaseView()
				view.Containers[1] = plantest.Exited(plantest.Inst(old, "app", "c-app", model.ContainerExited, 0, time.Hour), 1, 30*time.Minute)
				return view
			},
		},
		{
			name: "a container that never ran",
			build: func(_, _ *corev1.Pod) model.RuntimeView {
				view := plantest.BaseView()
				view.Containers = view.Containers[:1]
				return view
			},
		},
		{
			name: "an exited container in a crash-loop back-off",
			build: func(old, _ *corev1.Pod) model.RuntimeView {
				view := plantest.BaseView()
				view.Containers[1] = plantest.Exited(plantest.Inst(old, "app", "c-app-2", model.ContainerExited, 2, 2*time.Minute), 1, time.Second)
				view.Containers = append(view.Containers, plantest.Exited(plantest.Inst(old, "app", "c-app-1", model.ContainerExited, 1, 5*time.Minute), 1, 3*time.Minute))
				return view
			},
		},
		{
			name: "a sidecar resized under RestartContainer",
			build: func(old, pod *corev1.Pod) model.RuntimeView {
				for _, p := range []*corev1.Pod{old, pod} {
					plantest.WithInit("log-sidecar")(p)
					p.Spec.InitContainers[0].ResizePolicy = []corev1.ContainerResizePolicy{memRestart}
					p.Spec.Containers[0].Resources = small
				}
				old.Spec.InitContainers[0].Resources = small
				pod.Spec.InitContainers[0].Resources = large
				view := plantest.BaseView()
				view.Containers = append(view.Containers, plantest.Inst(old, "log-sidecar", "c-sc", model.ContainerRunning, 0, 58*time.Minute))
				view.Containers[1] = plantest.Inst(old, "app", "c-app", model.ContainerRunning, 0, 55*time.Minute)
				return view
			},
			want: []string{"log-sidecar/c-sc " + grown},
		},
		{
			name: "a sandbox re-created",
			build: func(old, _ *corev1.Pod) model.RuntimeView {
				view := plantest.BaseView()
				view.Sandboxes[0] = plantest.Sandbox("sb1", 0, false, time.Hour)
				view.Containers[1] = plantest.Exited(plantest.Inst(old, "app", "c-app", model.ContainerExited, 0, time.Hour), 1, 30*time.Minute)
				return view
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old, pod := plantest.BasePod(), plantest.BasePod()
			old.Spec.Containers[0].Resources = small
			pod.Spec.Containers[0].Resources = large
			view := tt.build(old, pod)
			got := summarizeResize(plan.ComputePodActions(pod, view, model.ProbeResults{}, plantest.T0, plan.BackoffPolicy{})).StartResized
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("StartResized mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
