package plan_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/engine/plan"
	"github.com/podsync/podsync/engine/plan/plantest"
	"github.com/podsync/podsync/validation"
)

// planSummary is the part of PodActions most cases assert on.
type planSummary struct {
	KillPod   string
	Sandbox   string
	KillIDs   []string
	Kill      []string
	StartInit []string
	Start     []string
	BackOff   []string
	PruneInit []string
	// StartEphemeral lists the ephemeral containers to start.
	StartEphemeral []string
}

func summarize(a plan.PodActions) planSummary {
	s := planSummary{KillPod: a.KillPodReason, KillIDs: a.Sandbox.KillIDs}
	switch {
	case a.Sandbox.Create:
		s.Sandbox = fmt.Sprintf("create@%d:%s", a.Sandbox.Attempt, a.Sandbox.Reason)
	case a.Sandbox.ID != "":
		s.Sandbox = "use:" + a.Sandbox.ID
	default:
		s.Sandbox = "none:" + a.Sandbox.Reason
	}
	for _, k := range a.Kill {
		s.Kill = append(s.Kill, k.Name+"/"+k.ContainerID+":"+k.Reason)
	}
	for _, k := range a.StartInit {
		s.StartInit = append(s.StartInit, fmt.Sprintf("%s#%d:%s", k.Name, k.Attempt, k.Reason))
	}
	for _, k := range a.Start {
		s.Start = append(s.Start, fmt.Sprintf("%s#%d:%s", k.Name, k.Attempt, k.Reason))
	}
	for _, k := range a.BackOff {
		s.BackOff = append(s.BackOff, fmt.Sprintf("%s:%s@+%s", k.Name, k.Reason, k.NextAttempt.Sub(plantest.T0)))
	}
	for _, k := range a.PruneInit {
		s.PruneInit = append(s.PruneInit, k.Name+"/"+k.ContainerID)
	}
	for _, k := range a.StartEphemeral {
		s.StartEphemeral = append(s.StartEphemeral, fmt.Sprintf("%s#%d:%s", k.Name, k.Attempt, k.Reason))
	}
	return s
}

// withDebug gives the pod an ephemeral container "debug" targeting app.
func withDebug(p *corev1.Pod) {
	p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, corev1.EphemeralContainer{
		EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: "busybox:1", Command: []string{"ps"}},
		TargetContainerName:      "app",
	})
}

func keep() planSummary { return planSummary{Sandbox: "use:sb1"} }

func TestComputePodActions(t *testing.T) {
	mp := plantest.BasePod // the unmutated pod, for hashes of instances
	withSidecarStartup := func(p *corev1.Pod) {
		p.Spec.InitContainers[0].StartupProbe = &corev1.Probe{}
	}
	tests := []struct {
		name       string
		mutatePod  func(*corev1.Pod)
		mutateView func(*corev1.Pod, *plan.RuntimeView)
		probes     plan.ProbeResults
		want       planSummary
	}{
		// Sandbox rules (PodSandboxChanged).
		{
			name:       "no sandbox creates one with attempt 0 and starts every container",
			mutateView: func(_ *corev1.Pod, v *plan.RuntimeView) { *v = plan.RuntimeView{} },
			want:       planSummary{KillPod: plan.KillReasonSandboxChanged, Sandbox: "create@0:NoSandbox", Start: []string{"app#0:NewSandbox", "helper#0:NewSandbox"}},
		},
		{
			name: "all running with unchanged spec keeps everything",
			want: keep(),
		},
		{
			name: "newest sandbox not ready recreates with attempt plus one and kills the pod",
			mutateView: func(_ *corev1.Pod, v *plan.RuntimeView) {
				v.Sandboxes = []plan.Sandbox{plantest.Sandbox("sb2", 3, false, time.Minute), plantest.Sandbox("sb1", 2, false, time.Hour)}
				v.Containers = []plan.ContainerInstance{plantest.Exited(v.Containers[0], 137, time.Minute), plantest.Exited(v.Containers[1], 137, time.Minute)}
			},
			want: planSummary{KillPod: plan.KillReasonSandboxChanged, Sandbox: "create@4:SandboxNotReady", Start: []string{"app#1:NewSandbox", "helper#1:NewSandbox"}},
		},
		{
			name: "two ready sandboxes recreate and stop both",
			mutateView: func(_ *corev1.Pod, v *plan.RuntimeView) {
				v.Sandboxes = []plan.Sandbox{plantest.Sandbox("sb2", 1, true, time.Minute), plantest.Sandbox("sb1", 0, true, time.Hour)}
			},
			want: planSummary{KillPod: plan.KillReasonSandboxChanged, Sandbox: "create@2:MultipleReadySandboxes", KillIDs: []string{"sb2", "sb1"},
				Kill:  []string{"app/c-app:PodKilled", "helper/c-helper:PodKilled"},
				Start: []string{"app#1:NewSandbox", "helper#1:NewSandbox"}},
		},
		{
			name: "attempt is the highest seen plus one",
			mutateView: func(_ *corev1.Pod, v *plan.RuntimeView) {
				v.Sandboxes = []plan.Sandbox{plantest.Sandbox("sb3", 1, false, time.Minute), plantest.Sandbox("sb2", 7, false, time.Hour)}
				v.Containers = nil
			},
			want: planSummary{KillPod: plan.KillReasonSandboxChanged, Sandbox: "create@8:SandboxNotReady", Start: []string{"app#0:NewSandbox", "helper#0:NewSandbox"}},
		},
		{
			name:      "hostNetwork changed to true recreates the sandbox",
			mutatePod: func(p *corev1.Pod) { p.Spec.HostNetwork = true },
			want: planSummary{KillPod: plan.KillReasonSandboxChanged, Sandbox: "create@1:NetworkNamespaceChanged", KillIDs: []string{"sb1"},
				Kill:  []string{"app/c-app:PodKilled", "helper/c-helper:PodKilled"},
				Start: []string{"app#1:NewSandbox", "helper#1:NewSandbox"}},
		},
		{
			name: "host-network sandbox for a pod network pod is recreated",
			mutateView: func(_ *corev1.Pod, v *plan.RuntimeView) {
				v.Sandboxes[0].NetworkMode = runtimeapi.NamespaceMode_NODE
				v.Sandboxes[0].IPs = nil
			},
			want: planSummary{KillPod: plan.KillReasonSandboxChanged, Sandbox: "create@1:NetworkNamespaceChanged", KillIDs: []string{"sb1"},
				Kill:  []string{"app/c-app:PodKilled", "helper/c-helper:PodKilled"},
				Start: []string{"app#1:NewSandbox", "helper#1:NewSandbox"}},
		},
		{
			name:       "sandbox whose network status has no IP is recreated",
			mutateView: func(_ *corev1.Pod, v *plan.RuntimeView) { v.Sandboxes[0].IPs = []string{} },
			want: planSummary{KillPod: plan.KillReasonSandboxChanged, Sandbox: "create@1:SandboxWithoutIP", KillIDs: []string{"sb1"},
				Kill:  []string{"app/c-app:PodKilled", "helper/c-helper:PodKilled"},
				Start: []string{"app#1:NewSandbox", "helper#1:NewSandbox"}},
		},
		{
			name:      "host-network sandbox without IP is kept",
			mutatePod: func(p *corev1.Pod) { p.Spec.HostNetwork = true },
			mutateView: func(_ *corev1.Pod, v *plan.RuntimeView) {
				v.Sandboxes[0].NetworkMode = runtimeapi.NamespaceMode_NODE
				v.Sandboxes[0].IPs = nil
			},
			want: keep(),
		},
		{
			name:      "restartPolicy Never does not recreate a dead sandbox once containers ran",
			mutatePod: plantest.Policy(corev1.RestartPolicyNever),
			mutateView: func(_ *corev1.Pod, v *plan.RuntimeView) {
				v.Sandboxes[0].State = plan.SandboxNotReady
				v.Containers = []plan.ContainerInstance{plantest.Exited(v.Containers[0], 1, time.Minute), plantest.Exited(v.Containers[1], 0, time.Minute)}
			},
			want: planSummary{KillPod: plan.KillReasonSandboxChanged, Sandbox: "none:SandboxNotRecreated"},
		},
		{
			name:      "restartPolicy Never retries a sandbox when no container was ever created",
			mutatePod: plantest.Policy(corev1.RestartPolicyNever),
			mutateView: func(_ *corev1.Pod, v *plan.RuntimeView) {
				v.Sandboxes[0].State = plan.SandboxNotReady
				v.Containers = nil
			},
			want: planSummary{KillPod: plan.KillReasonSandboxChanged, Sandbox: "create@1:SandboxNotReady", Start: []string{"app#0:NewSandbox", "helper#0:NewSandbox"}},
		},
		{
			name:       "restartPolicy Never creates the first sandbox",
			mutatePod:  plantest.Policy(corev1.RestartPolicyNever),
			mutateView: func(_ *corev1.Pod, v *plan.RuntimeView) { *v = plan.RuntimeView{} },
			want:       planSummary{KillPod: plan.KillReasonSandboxChanged, Sandbox: "create@0:NoSandbox", Start: []string{"app#0:NewSandbox", "helper#0:NewSandbox"}},
		},
		{
			name:      "restartPolicy OnFailure with every container succeeded does not recreate the sandbox",
			mutatePod: plantest.Policy(corev1.RestartPolicyOnFailure),
			mutateView: func(_ *corev1.Pod, v *plan.RuntimeView) {
				v.Sandboxes[0].State = plan.SandboxNotReady
				v.Containers = []plan.ContainerInstance{plantest.Exited(v.Containers[0], 0, time.Minute), plantest.Exited(v.Containers[1], 0, time.Minute)}
			},
			want: planSummary{KillPod: plan.KillReasonSandboxChanged, Sandbox: "none:PodCompleted"},
		},
		{
			name:      "restartPolicy OnFailure recreates the sandbox for failed containers only",
			mutatePod: plantest.Policy(corev1.RestartPolicyOnFailure),
			mutateView: func(_ *corev1.Pod, v *plan.RuntimeView) {
				v.Sandboxes[0].State = plan.SandboxNotReady
				v.Containers = []plan.ContainerInstance{plantest.Exited(v.Containers[0], 0, time.Minute), plantest.Exited(v.Containers[1], 2, 20*time.Minute)}
			},
			want: planSummary{KillPod: plan.KillReasonSandboxChanged, Sandbox: "create@1:SandboxNotReady", Start: []string{"app#1:NewSandbox"}},
		},
		{
			name:      "new sandbox starts init containers from the first",
			mutatePod: plantest.WithInit("init-a", "init-b"),
			mutateView: func(p *corev1.Pod, v *plan.RuntimeView) {
				v.Sandboxes[0].State = plan.SandboxNotReady
				v.Containers = []plan.ContainerInstance{
					plantest.Exited(plantest.Inst(p, "app", "c-app", plan.ContainerExited, 0, time.Hour), 137, time.Minute),
					plantest.Exited(plantest.Inst(p, "init-b", "c-b", plan.ContainerExited, 0, 2*time.Hour), 0, 2*time.Hour),
					plantest.Exited(plantest.Inst(p, "init-a", "c-a", plan.ContainerExited, 0, 3*time.Hour), 0, 3*time.Hour),
				}
			},
			want: planSummary{KillPod: plan.KillReasonSandboxChanged, Sandbox: "create@1:SandboxNotReady", StartInit: []string{"init-a#1:NewSandbox"}},
		},
		{
			name:       "new sandbox with a sidecar starts the sidecar first",
			mutatePod:  plantest.WithInit("log-sidecar"),
			mutateView: func(_ *corev1.Pod, v *plan.RuntimeView) { *v = plan.RuntimeView{} },
			want:       planSummary{KillPod: plan.KillReasonSandboxChanged, Sandbox: "create@0:NoSandbox", StartInit: []string{"log-sidecar#0:NewSandbox"}},
		},

		// Regular containers.
		{
			name:       "missing container is started",
			mutateView: func(_ *corev1.Pod, v *plan.RuntimeView) { v.Containers = v.Containers[1:] },
			want:       planSummary{Sandbox: "use:sb1", Start: []string{"helper#0:NotStarted"}},
		},
		{
			name: "exited container restarts under Always",
			mutateView: func(_ *corev1.Pod, v *plan.RuntimeView) {
				v.Containers[0] = plantest.Exited(v.Containers[0], 0, time.Minute)
			},
			want: planSummary{Sandbox: "use:sb1", Start: []string{"helper#1:Exited"}},
		},
		{
			name:      "failed container restarts under OnFailure",
			mutatePod: plantest.Policy(corev1.RestartPolicyOnFailure),
			mutateView: func(_ *corev1.Pod, v *plan.RuntimeView) {
				v.Containers[0] = plantest.Exited(v.Containers[0], 1, time.Minute)
			},
			want: planSummary{Sandbox: "use:sb1", Start: []string{"helper#1:Exited"}},
		},
		{
			name:      "succeeded container is not restarted under OnFailure",
			mutatePod: plantest.Policy(corev1.RestartPolicyOnFailure),
			mutateView: func(_ *corev1.Pod, v *plan.RuntimeView) {
				v.Containers[0] = plantest.Exited(v.Containers[0], 0, time.Minute)
			},
			want: keep(),
		},
		{
			name:      "failed container is not restarted under Never",
			mutatePod: plantest.Policy(corev1.RestartPolicyNever),
			mutateView: func(_ *corev1.Pod, v *plan.RuntimeView) {
				v.Containers[0] = plantest.Exited(v.Containers[0], 1, time.Minute)
			},
			want: keep(),
		},
		{
			name:       "container never started is started under Never",
			mutatePod:  plantest.Policy(corev1.RestartPolicyNever),
			mutateView: func(_ *corev1.Pod, v *plan.RuntimeView) { v.Containers = v.Containers[1:] },
			want:       planSummary{Sandbox: "use:sb1", Start: []string{"helper#0:NotStarted"}},
		},
		{
			name:       "created container is restarted without a kill",
			mutatePod:  plantest.Policy(corev1.RestartPolicyNever),
			mutateView: func(_ *corev1.Pod, v *plan.RuntimeView) { v.Containers[0].State = plan.ContainerCreated },
			want:       planSummary{Sandbox: "use:sb1", Start: []string{"helper#1:Created"}},
		},
		{
			name:       "unknown container is killed and restarted",
			mutatePod:  plantest.Policy(corev1.RestartPolicyNever),
			mutateView: func(_ *corev1.Pod, v *plan.RuntimeView) { v.Containers[0].State = plan.ContainerUnknown },
			want:       planSummary{Sandbox: "use:sb1", Kill: []string{"helper/c-helper:Unknown"}, Start: []string{"helper#1:Unknown"}},
		},
		{
			name:      "changed image kills and restarts a running container",
			mutatePod: func(p *corev1.Pod) { p.Spec.Containers[0].Image = "busybox:2" },
			want:      planSummary{Sandbox: "use:sb1", Kill: []string{"app/c-app:DefinitionChanged"}, Start: []string{"app#1:DefinitionChanged"}},
		},
		{
			name:      "changed command restarts, unlike the kubelet",
			mutatePod: func(p *corev1.Pod) { p.Spec.Containers[0].Command = []string{"sleep", "1"} },
			want:      planSummary{Sandbox: "use:sb1", Kill: []string{"app/c-app:DefinitionChanged"}, Start: []string{"app#1:DefinitionChanged"}},
		},
		{
			name:      "changed env restarts, unlike the kubelet",
			mutatePod: func(p *corev1.Pod) { p.Spec.Containers[1].Env = []corev1.EnvVar{{Name: "FOO", Value: "1"}} },
			want:      planSummary{Sandbox: "use:sb1", Kill: []string{"helper/c-helper:DefinitionChanged"}, Start: []string{"helper#1:DefinitionChanged"}},
		},
		{
			name:      "changed spec restarts even under Never",
			mutatePod: plantest.Chain(plantest.Policy(corev1.RestartPolicyNever), func(p *corev1.Pod) { p.Spec.Containers[0].Args = []string{"x"} }),
			want:      planSummary{Sandbox: "use:sb1", Kill: []string{"app/c-app:DefinitionChanged"}, Start: []string{"app#1:DefinitionChanged"}},
		},
		{
			name:      "changed readiness probe does not restart",
			mutatePod: func(p *corev1.Pod) { p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{PeriodSeconds: 3} },
			want:      keep(),
		},
		{
			name:      "changed pull policy does not restart",
			mutatePod: func(p *corev1.Pod) { p.Spec.Containers[0].ImagePullPolicy = corev1.PullAlways },
			want:      keep(),
		},
		{
			name:   "liveness failure kills and restarts",
			probes: plan.ProbeResults{Liveness: map[string]plan.ProbeResult{"c-app": plan.ProbeFailure}},
			want:   planSummary{Sandbox: "use:sb1", Kill: []string{"app/c-app:LivenessProbeFailed"}, Start: []string{"app#1:LivenessProbeFailed"}},
		},
		{
			name:   "startup failure kills and restarts",
			probes: plan.ProbeResults{Startup: map[string]plan.ProbeResult{"c-helper": plan.ProbeFailure}},
			want:   planSummary{Sandbox: "use:sb1", Kill: []string{"helper/c-helper:StartupProbeFailed"}, Start: []string{"helper#1:StartupProbeFailed"}},
		},
		{
			name:   "liveness success keeps the container",
			probes: plan.ProbeResults{Liveness: map[string]plan.ProbeResult{"c-app": plan.ProbeSuccess}},
			want:   keep(),
		},
		{
			name:   "readiness failure does not restart",
			probes: plan.ProbeResults{Readiness: map[string]plan.ProbeResult{"c-app": plan.ProbeFailure}},
			want:   keep(),
		},
		{
			name:      "liveness failure under Never kills without restart",
			mutatePod: plantest.Policy(corev1.RestartPolicyNever),
			probes:    plan.ProbeResults{Liveness: map[string]plan.ProbeResult{"c-app": plan.ProbeFailure}},
			want:      planSummary{Sandbox: "use:sb1", Kill: []string{"app/c-app:LivenessProbeFailed"}},
		},
		{
			name:      "liveness failure of the last running container under Never kills the pod",
			mutatePod: plantest.Policy(corev1.RestartPolicyNever),
			mutateView: func(_ *corev1.Pod, v *plan.RuntimeView) {
				v.Containers[0] = plantest.Exited(v.Containers[0], 0, time.Minute)
			},
			probes: plan.ProbeResults{Liveness: map[string]plan.ProbeResult{"c-app": plan.ProbeFailure}},
			want:   planSummary{KillPod: plan.KillReasonAllContainersDone, Sandbox: "use:sb1", KillIDs: []string{"sb1"}, Kill: []string{"app/c-app:PodKilled"}},
		},
		{
			name:      "all containers exited under Never kills the pod",
			mutatePod: plantest.Policy(corev1.RestartPolicyNever),
			mutateView: func(_ *corev1.Pod, v *plan.RuntimeView) {
				v.Containers = []plan.ContainerInstance{plantest.Exited(v.Containers[0], 0, time.Minute), plantest.Exited(v.Containers[1], 1, time.Minute)}
			},
			want: planSummary{KillPod: plan.KillReasonAllContainersDone, Sandbox: "use:sb1", KillIDs: []string{"sb1"}},
		},
		{
			name:      "all containers succeeded under OnFailure kills the pod",
			mutatePod: plantest.Policy(corev1.RestartPolicyOnFailure),
			mutateView: func(_ *corev1.Pod, v *plan.RuntimeView) {
				v.Containers = []plan.ContainerInstance{plantest.Exited(v.Containers[0], 0, time.Minute), plantest.Exited(v.Containers[1], 0, time.Minute)}
			},
			want: planSummary{KillPod: plan.KillReasonAllContainersDone, Sandbox: "use:sb1", KillIDs: []string{"sb1"}},
		},
		{
			name:      "running container removed from the spec is killed",
			mutatePod: func(p *corev1.Pod) { p.Spec.Containers = p.Spec.Containers[:1] },
			want:      planSummary{Sandbox: "use:sb1", Kill: []string{"helper/c-helper:NotInSpec"}},
		},
		// Ephemeral containers (EphemeralContainersToStart).
		{
			name:      "ephemeral container not yet started is started",
			mutatePod: withDebug,
			want:      planSummary{Sandbox: "use:sb1", StartEphemeral: []string{"debug#0:NotStarted"}},
		},
		{
			name:      "ephemeral container is started while init containers run",
			mutatePod: func(p *corev1.Pod) { plantest.WithInit("init-a", "init-b")(p); withDebug(p) },
			mutateView: func(p *corev1.Pod, v *plan.RuntimeView) {
				v.Containers = []plan.ContainerInstance{plantest.Inst(p, "init-a", "c-a", plan.ContainerRunning, 0, time.Minute)}
			},
			want: planSummary{Sandbox: "use:sb1", StartEphemeral: []string{"debug#0:NotStarted"}},
		},
		{
			name:      "running ephemeral container is kept and not killed as not in the spec",
			mutatePod: withDebug,
			mutateView: func(p *corev1.Pod, v *plan.RuntimeView) {
				v.Containers = append(v.Containers, plantest.Inst(p, "debug", "c-debug", plan.ContainerRunning, 0, time.Minute))
			},
			want: keep(),
		},
		{
			name:      "exited ephemeral container is never restarted",
			mutatePod: withDebug,
			mutateView: func(p *corev1.Pod, v *plan.RuntimeView) {
				v.Containers = append(v.Containers, plantest.Exited(plantest.Inst(p, "debug", "c-debug", plan.ContainerExited, 0, time.Minute), 1, time.Second))
			},
			want: keep(),
		},
		{
			name:      "ephemeral container is not started in a sandbox being recreated",
			mutatePod: withDebug,
			mutateView: func(_ *corev1.Pod, v *plan.RuntimeView) {
				v.Sandboxes[0].State = plan.SandboxNotReady
				v.Containers = nil
			},
			want: planSummary{KillPod: plan.KillReasonSandboxChanged, Sandbox: "create@1:SandboxNotReady", Start: []string{"app#0:NewSandbox", "helper#0:NewSandbox"}},
		},
		{
			name:      "running ephemeral container does not keep a pod whose containers are done",
			mutatePod: func(p *corev1.Pod) { plantest.Policy(corev1.RestartPolicyNever)(p); withDebug(p) },
			mutateView: func(p *corev1.Pod, v *plan.RuntimeView) {
				v.Containers = []plan.ContainerInstance{plantest.Exited(v.Containers[0], 0, time.Minute), plantest.Exited(v.Containers[1], 0, time.Minute),
					plantest.Inst(p, "debug", "c-debug", plan.ContainerRunning, 0, time.Minute)}
			},
			want: planSummary{KillPod: plan.KillReasonAllContainersDone, Sandbox: "use:sb1", KillIDs: []string{"sb1"}, Kill: []string{"debug/c-debug:PodKilled"}},
		},
		{
			name:      "ephemeral container is killed with a deleted pod",
			mutatePod: func(p *corev1.Pod) { withDebug(p); p.DeletionTimestamp = &metav1.Time{Time: plantest.T0} },
			mutateView: func(p *corev1.Pod, v *plan.RuntimeView) {
				v.Containers = append(v.Containers, plantest.Inst(p, "debug", "c-debug", plan.ContainerRunning, 0, time.Minute))
			},
			want: planSummary{KillPod: plan.KillReasonPodDeleted, Sandbox: "use:sb1", KillIDs: []string{"sb1"},
				Kill: []string{"app/c-app:PodKilled", "helper/c-helper:PodKilled", "debug/c-debug:PodKilled"}},
		},
		{
			name: "ephemeral container the node no longer names is killed",
			mutateView: func(p *corev1.Pod, v *plan.RuntimeView) {
				v.Containers = append(v.Containers, plan.ContainerInstance{ID: "c-debug", SandboxID: "sb1", Name: "debug", State: plan.ContainerRunning})
			},
			want: planSummary{Sandbox: "use:sb1", Kill: []string{"debug/c-debug:NotInSpec"}},
		},

		// Pods that must only stop.
		{
			name:      "deleted pod is killed and nothing restarts",
			mutatePod: func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: plantest.T0} },
			mutateView: func(_ *corev1.Pod, v *plan.RuntimeView) {
				v.Containers[0] = plantest.Exited(v.Containers[0], 1, time.Minute)
			},
			want: planSummary{KillPod: plan.KillReasonPodDeleted, Sandbox: "use:sb1", KillIDs: []string{"sb1"}, Kill: []string{"app/c-app:PodKilled"}},
		},
		{
			name:       "deleted pod without sandbox creates none",
			mutatePod:  func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: plantest.T0} },
			mutateView: func(_ *corev1.Pod, v *plan.RuntimeView) { *v = plan.RuntimeView{} },
			want:       planSummary{KillPod: plan.KillReasonPodDeleted, Sandbox: "none:PodNotRunnable"},
		},
		{
			name:      "terminal phase Failed is sticky and nothing restarts",
			mutatePod: func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed },
			mutateView: func(_ *corev1.Pod, v *plan.RuntimeView) {
				v.Sandboxes[0].State = plan.SandboxNotReady
				v.Containers = []plan.ContainerInstance{plantest.Exited(v.Containers[0], 1, time.Minute), plantest.Exited(v.Containers[1], 1, time.Minute)}
			},
			want: planSummary{KillPod: plan.KillReasonPodTerminal, Sandbox: "none:PodNotRunnable"},
		},
		{
			name:      "terminal phase Succeeded kills running containers",
			mutatePod: func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded },
			want: planSummary{KillPod: plan.KillReasonPodTerminal, Sandbox: "use:sb1", KillIDs: []string{"sb1"},
				Kill: []string{"app/c-app:PodKilled", "helper/c-helper:PodKilled"}},
		},
		{
			name: "active deadline exceeded kills the pod",
			mutatePod: func(p *corev1.Pod) {
				p.Spec.ActiveDeadlineSeconds = ptr.To[int64](60)
				p.Status.StartTime = &metav1.Time{Time: plantest.T0.Add(-time.Minute)}
			},
			want: planSummary{KillPod: plan.KillReasonDeadlineExceeded, Sandbox: "use:sb1", KillIDs: []string{"sb1"},
				Kill: []string{"app/c-app:PodKilled", "helper/c-helper:PodKilled"}},
		},
		{
			name: "active deadline not yet reached keeps the pod",
			mutatePod: func(p *corev1.Pod) {
				p.Spec.ActiveDeadlineSeconds = ptr.To[int64](61)
				p.Status.StartTime = &metav1.Time{Time: plantest.T0.Add(-time.Minute)}
			},
			want: keep(),
		},

		{
			name: "backoff limit exceeded at the failed run past it kills the pod",
			mutatePod: func(p *corev1.Pod) {
				p.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
				p.Annotations = map[string]string{validation.AnnotationBackoffLimit: "2"}
			},
			mutateView: func(_ *corev1.Pod, v *plan.RuntimeView) {
				helper := plantest.Exited(v.Containers[0], 1, time.Second)
				helper.RestartCount = 2
				v.Containers[0] = helper
			},
			want: planSummary{KillPod: plan.KillReasonBackoffLimitExceeded, Sandbox: "use:sb1", KillIDs: []string{"sb1"},
				Kill: []string{"app/c-app:PodKilled"}},
		},
		{
			name: "backoff limit not reached restarts the failed container",
			mutatePod: func(p *corev1.Pod) {
				p.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
				p.Annotations = map[string]string{validation.AnnotationBackoffLimit: "2"}
			},
			mutateView: func(_ *corev1.Pod, v *plan.RuntimeView) {
				helper := plantest.Exited(v.Containers[0], 1, time.Hour)
				helper.RestartCount = 1
				v.Containers[0] = helper
			},
			want: planSummary{Sandbox: "use:sb1", Start: []string{"helper#2:Exited"}},
		},
		{
			name: "backoff limit counts the failures of every container",
			mutatePod: func(p *corev1.Pod) {
				p.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
				p.Annotations = map[string]string{validation.AnnotationBackoffLimit: "1"}
			},
			mutateView: func(_ *corev1.Pod, v *plan.RuntimeView) {
				app := v.Containers[1]
				app.RestartCount = 1
				v.Containers[1] = app
				v.Containers[0] = plantest.Exited(v.Containers[0], 2, time.Hour)
			},
			want: planSummary{KillPod: plan.KillReasonBackoffLimitExceeded, Sandbox: "use:sb1", KillIDs: []string{"sb1"},
				Kill: []string{"app/c-app:PodKilled"}},
		},
		{
			name: "a succeeded container is no failure under a backoff limit of 0",
			mutatePod: func(p *corev1.Pod) {
				p.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
				p.Annotations = map[string]string{validation.AnnotationBackoffLimit: "0"}
			},
			mutateView: func(_ *corev1.Pod, v *plan.RuntimeView) {
				v.Containers[0] = plantest.Exited(v.Containers[0], 0, time.Hour)
			},
			want: keep(),
		},

		// Crash-loop back-off.
		{
			name: "first crash restarts at once",
			mutateView: func(_ *corev1.Pod, v *plan.RuntimeView) {
				v.Containers[1] = plantest.Exited(v.Containers[1], 1, time.Second)
			},
			want: planSummary{Sandbox: "use:sb1", Start: []string{"app#1:Exited"}},
		},
		{
			name: "second crash within 10s is in CrashLoopBackOff",
			mutateView: func(_ *corev1.Pod, v *plan.RuntimeView) {
				p := mp()
				v.Containers = []plan.ContainerInstance{
					plantest.Exited(plantest.Inst(p, "app", "c-app2", plan.ContainerExited, 1, 5*time.Second), 1, 3*time.Second),
					v.Containers[0],
					plantest.Exited(plantest.Inst(p, "app", "c-app", plan.ContainerExited, 0, time.Minute), 1, 30*time.Second),
				}
			},
			want: planSummary{Sandbox: "use:sb1", BackOff: []string{"app:CrashLoopBackOff@+7s"}},
		},
		{
			name: "second crash after 10s restarts",
			mutateView: func(_ *corev1.Pod, v *plan.RuntimeView) {
				p := mp()
				v.Containers = []plan.ContainerInstance{
					plantest.Exited(plantest.Inst(p, "app", "c-app2", plan.ContainerExited, 1, 15*time.Second), 1, 11*time.Second),
					v.Containers[0],
				}
			},
			want: planSummary{Sandbox: "use:sb1", Start: []string{"app#2:Exited"}},
		},
		{
			name: "back-off doubles per restart count",
			mutateView: func(_ *corev1.Pod, v *plan.RuntimeView) {
				p := mp()
				v.Containers = []plan.ContainerInstance{
					plantest.Exited(plantest.Inst(p, "app", "c-app4", plan.ContainerExited, 4, 5*time.Second), 1, time.Second),
					v.Containers[0],
					plantest.Exited(plantest.Inst(p, "app", "c-app3", plan.ContainerExited, 3, 2*time.Minute), 1, 100*time.Second),
				}
			},
			// restart counts 3 and 4: two failures in the retained run, 10s.
			want: planSummary{Sandbox: "use:sb1", BackOff: []string{"app:CrashLoopBackOff@+9s"}},
		},
		{
			name: "back-off counts restarts across garbage-collected instances",
			mutateView: func(_ *corev1.Pod, v *plan.RuntimeView) {
				p := mp()
				v.Containers = []plan.ContainerInstance{
					plantest.Exited(plantest.Inst(p, "app", "c-app9", plan.ContainerExited, 9, 5*time.Second), 1, time.Second),
					plantest.Exited(plantest.Inst(p, "app", "c-app6", plan.ContainerExited, 6, 10*time.Minute), 1, 9*time.Minute),
				}
			},
			// restarts 6..9 are four failures: 10s×2^2 = 40s.
			want: planSummary{Sandbox: "use:sb1", Start: []string{"helper#0:NotStarted"}, BackOff: []string{"app:CrashLoopBackOff@+39s"}},
		},
		{
			name: "back-off is capped at 300s",
			mutateView: func(_ *corev1.Pod, v *plan.RuntimeView) {
				p := mp()
				v.Containers = []plan.ContainerInstance{
					plantest.Exited(plantest.Inst(p, "app", "c-app30", plan.ContainerExited, 30, 5*time.Second), 1, time.Second),
					v.Containers[0],
					plantest.Exited(plantest.Inst(p, "app", "c-app1", plan.ContainerExited, 1, 5*time.Minute), 1, 5*time.Minute-time.Second),
				}
			},
			want: planSummary{Sandbox: "use:sb1", BackOff: []string{"app:CrashLoopBackOff@+4m59s"}},
		},
		{
			name: "back-off resets after 10 minutes of running",
			mutateView: func(_ *corev1.Pod, v *plan.RuntimeView) {
				p := mp()
				long := plantest.Exited(plantest.Inst(p, "app", "c-app5", plan.ContainerExited, 5, 11*time.Minute), 1, time.Second)
				v.Containers = []plan.ContainerInstance{
					long,
					v.Containers[0],
					plantest.Exited(plantest.Inst(p, "app", "c-app4", plan.ContainerExited, 4, 12*time.Minute), 1, 11*time.Minute+time.Second),
				}
			},
			want: planSummary{Sandbox: "use:sb1", Start: []string{"app#6:Exited"}},
		},
		{
			name:      "changed spec starts a new back-off",
			mutatePod: func(p *corev1.Pod) { p.Spec.Containers[0].Image = "busybox:2" },
			mutateView: func(_ *corev1.Pod, v *plan.RuntimeView) {
				p := mp()
				v.Containers = []plan.ContainerInstance{
					plantest.Exited(plantest.Inst(p, "app", "c-app2", plan.ContainerExited, 1, 5*time.Second), 1, 3*time.Second),
					v.Containers[0],
					plantest.Exited(plantest.Inst(p, "app", "c-app", plan.ContainerExited, 0, time.Minute), 1, 30*time.Second),
				}
			},
			want: planSummary{Sandbox: "use:sb1", Start: []string{"app#2:Exited"}},
		},
		{
			name: "image pull back-off after a failed pull",
			mutateView: func(_ *corev1.Pod, v *plan.RuntimeView) {
				v.Containers = v.Containers[1:]
				v.PullFailures = []plan.PullFailure{{Image: "busybox:1", Failures: 2, At: plantest.T0.Add(-5 * time.Second)}}
			},
			want: planSummary{Sandbox: "use:sb1", BackOff: []string{"helper:ImagePullBackOff@+15s"}},
		},
		{
			name: "image pull back-off holds back every container of the pod with the image",
			mutateView: func(_ *corev1.Pod, v *plan.RuntimeView) {
				v.Containers = nil
				v.PullFailures = []plan.PullFailure{{Image: "busybox:1", Failures: 1, At: plantest.T0.Add(-5 * time.Second)}}
			},
			want: planSummary{Sandbox: "use:sb1", BackOff: []string{"app:ImagePullBackOff@+5s", "helper:ImagePullBackOff@+5s"}},
		},
		{
			name: "image pull retried once its back-off passed",
			mutateView: func(_ *corev1.Pod, v *plan.RuntimeView) {
				v.Containers = v.Containers[1:]
				v.PullFailures = []plan.PullFailure{{Image: "busybox:1", Failures: 1, At: plantest.T0.Add(-10 * time.Second)}}
			},
			want: planSummary{Sandbox: "use:sb1", Start: []string{"helper#0:NotStarted"}},
		},
		{
			name:      "pull failure of an old image does not hold back a new one",
			mutatePod: func(p *corev1.Pod) { p.Spec.Containers[1].Image = "busybox:2" },
			mutateView: func(_ *corev1.Pod, v *plan.RuntimeView) {
				v.Containers = v.Containers[1:]
				v.PullFailures = []plan.PullFailure{{Image: "busybox:1", Failures: 3, At: plantest.T0}}
			},
			want: planSummary{Sandbox: "use:sb1", Start: []string{"helper#0:NotStarted"}},
		},

		// Init containers.
		{
			name:       "first init container starts when none ran",
			mutatePod:  plantest.WithInit("init-a", "init-b"),
			mutateView: plantest.SetContainers(),
			want:       planSummary{Sandbox: "use:sb1", StartInit: []string{"init-a#0:NotStarted"}},
		},
		{
			name:      "running init container is waited for",
			mutatePod: plantest.WithInit("init-a", "init-b"),
			mutateView: func(p *corev1.Pod, v *plan.RuntimeView) {
				v.Containers = []plan.ContainerInstance{plantest.Inst(p, "init-a", "c-a", plan.ContainerRunning, 0, time.Second)}
			},
			want: planSummary{Sandbox: "use:sb1"},
		},
		{
			name:      "next init container starts after the previous succeeded",
			mutatePod: plantest.WithInit("init-a", "init-b"),
			mutateView: func(p *corev1.Pod, v *plan.RuntimeView) {
				v.Containers = []plan.ContainerInstance{plantest.Exited(plantest.Inst(p, "init-a", "c-a", plan.ContainerExited, 0, time.Minute), 0, time.Second)}
			},
			want: planSummary{Sandbox: "use:sb1", StartInit: []string{"init-b#0:NextInitContainer"}},
		},
		{
			name:      "regular containers start after the last init container succeeded",
			mutatePod: plantest.WithInit("init-a", "init-b"),
			mutateView: func(p *corev1.Pod, v *plan.RuntimeView) {
				v.Containers = []plan.ContainerInstance{
					plantest.Exited(plantest.Inst(p, "init-b", "c-b", plan.ContainerExited, 0, time.Minute), 0, time.Second),
					plantest.Exited(plantest.Inst(p, "init-a", "c-a", plan.ContainerExited, 0, 2*time.Minute), 0, time.Minute),
				}
			},
			want: planSummary{Sandbox: "use:sb1", Start: []string{"app#0:NotStarted", "helper#0:NotStarted"}},
		},
		{
			name:      "failed init container under Never fails the pod",
			mutatePod: plantest.Chain(plantest.WithInit("init-a", "init-b"), plantest.Policy(corev1.RestartPolicyNever)),
			mutateView: func(p *corev1.Pod, v *plan.RuntimeView) {
				v.Containers = []plan.ContainerInstance{plantest.Exited(plantest.Inst(p, "init-a", "c-a", plan.ContainerExited, 0, time.Minute), 2, time.Second)}
			},
			want: planSummary{KillPod: plan.KillReasonInitContainerFailed, Sandbox: "use:sb1", KillIDs: []string{"sb1"}},
		},
		{
			name:      "failed init container under OnFailure is retried",
			mutatePod: plantest.Chain(plantest.WithInit("init-a", "init-b"), plantest.Policy(corev1.RestartPolicyOnFailure)),
			mutateView: func(p *corev1.Pod, v *plan.RuntimeView) {
				v.Containers = []plan.ContainerInstance{plantest.Exited(plantest.Inst(p, "init-a", "c-a", plan.ContainerExited, 0, time.Minute), 2, time.Minute)}
			},
			want: planSummary{Sandbox: "use:sb1", StartInit: []string{"init-a#1:InitContainerFailed"}},
		},
		{
			name:      "failed init container is retried with back-off",
			mutatePod: plantest.WithInit("init-a", "init-b"),
			mutateView: func(p *corev1.Pod, v *plan.RuntimeView) {
				v.Containers = []plan.ContainerInstance{
					plantest.Exited(plantest.Inst(p, "init-a", "c-a2", plan.ContainerExited, 1, 5*time.Second), 2, 2*time.Second),
					plantest.Exited(plantest.Inst(p, "init-a", "c-a1", plan.ContainerExited, 0, time.Minute), 2, 30*time.Second),
				}
			},
			want: planSummary{Sandbox: "use:sb1", BackOff: []string{"init-a:CrashLoopBackOff@+8s"}},
		},
		{
			name:      "unknown init container under Never fails the pod",
			mutatePod: plantest.Chain(plantest.WithInit("init-a"), plantest.Policy(corev1.RestartPolicyNever)),
			mutateView: func(p *corev1.Pod, v *plan.RuntimeView) {
				v.Containers = []plan.ContainerInstance{plantest.Inst(p, "init-a", "c-a", plan.ContainerUnknown, 0, time.Minute)}
			},
			want: planSummary{KillPod: plan.KillReasonInitContainerFailed, Sandbox: "use:sb1", KillIDs: []string{"sb1"}},
		},
		{
			name:      "unknown init container is killed and restarted",
			mutatePod: plantest.WithInit("init-a"),
			mutateView: func(p *corev1.Pod, v *plan.RuntimeView) {
				v.Containers = []plan.ContainerInstance{plantest.Inst(p, "init-a", "c-a", plan.ContainerUnknown, 0, time.Minute)}
			},
			want: planSummary{Sandbox: "use:sb1", Kill: []string{"init-a/c-a:Unknown"}, StartInit: []string{"init-a#1:Unknown"}},
		},
		{
			name:      "created init container is restarted",
			mutatePod: plantest.WithInit("init-a"),
			mutateView: func(p *corev1.Pod, v *plan.RuntimeView) {
				v.Containers = []plan.ContainerInstance{plantest.Inst(p, "init-a", "c-a", plan.ContainerCreated, 0, time.Minute)}
			},
			want: planSummary{Sandbox: "use:sb1", StartInit: []string{"init-a#1:Created"}},
		},
		{
			name:      "init containers are not rerun once regular containers run",
			mutatePod: plantest.WithInit("init-a", "init-b"),
			want:      keep(),
		},
		{
			name:      "removed init container instances do not rerun init once initialized",
			mutatePod: plantest.WithInit("init-a"),
			mutateView: func(p *corev1.Pod, v *plan.RuntimeView) {
				v.Containers = []plan.ContainerInstance{plantest.Inst(p, "app", "c-app", plan.ContainerRunning, 0, time.Minute)}
			},
			want: planSummary{Sandbox: "use:sb1", Start: []string{"helper#0:NotStarted"}},
		},
		{
			// Upstream: HasAnyActiveRegularContainerStarted counts any
			// state; the init containers may have been removed since.
			name:      "an exited regular container of the current sandbox counts as initialized",
			mutatePod: plantest.WithInit("init-a"),
			mutateView: func(p *corev1.Pod, v *plan.RuntimeView) {
				v.Containers = []plan.ContainerInstance{plantest.Exited(plantest.Inst(p, "app", "c-app", plan.ContainerExited, 0, time.Minute), 1, time.Minute)}
			},
			want: planSummary{Sandbox: "use:sb1", Start: []string{"app#1:Exited", "helper#0:NotStarted"}},
		},
		{
			// Upstream's "stale main container from a previous sandbox
			// must not mark pod as initialized".
			name:      "a regular container of a previous sandbox does not count as initialized",
			mutatePod: plantest.WithInit("init-a"),
			mutateView: func(p *corev1.Pod, v *plan.RuntimeView) {
				v.Sandboxes = append(v.Sandboxes, plantest.Sandbox("sb0", 0, false, 2*time.Hour))
				app := plantest.Inst(p, "app", "c-app", plan.ContainerCreated, 0, time.Minute)
				app.SandboxID = "sb0"
				v.Containers = []plan.ContainerInstance{app}
			},
			want: planSummary{Sandbox: "use:sb1", StartInit: []string{"init-a#0:NotStarted"}},
		},

		// Native sidecars.
		{
			name:      "sidecar without startup probe gates the next init container on running",
			mutatePod: plantest.WithInit("log-sidecar", "init-b"),
			mutateView: func(p *corev1.Pod, v *plan.RuntimeView) {
				v.Containers = []plan.ContainerInstance{plantest.Inst(p, "log-sidecar", "c-s", plan.ContainerRunning, 0, time.Second)}
			},
			want: planSummary{Sandbox: "use:sb1", StartInit: []string{"init-b#0:NextInitContainer"}},
		},
		{
			name:      "sidecar with startup probe not yet run holds the next container",
			mutatePod: plantest.Chain(plantest.WithInit("log-sidecar"), withSidecarStartup),
			mutateView: func(p *corev1.Pod, v *plan.RuntimeView) {
				v.Containers = []plan.ContainerInstance{plantest.Inst(p, "log-sidecar", "c-s", plan.ContainerRunning, 0, time.Second)}
			},
			want: planSummary{Sandbox: "use:sb1"},
		},
		{
			name:      "sidecar startup success starts regular containers",
			mutatePod: plantest.Chain(plantest.WithInit("log-sidecar"), withSidecarStartup),
			mutateView: func(p *corev1.Pod, v *plan.RuntimeView) {
				v.Containers = []plan.ContainerInstance{plantest.Inst(p, "log-sidecar", "c-s", plan.ContainerRunning, 0, time.Second)}
			},
			probes: plan.ProbeResults{Startup: map[string]plan.ProbeResult{"c-s": plan.ProbeSuccess}},
			want:   planSummary{Sandbox: "use:sb1", Start: []string{"app#0:NotStarted", "helper#0:NotStarted"}},
		},
		{
			name:      "sidecar startup failure kills and restarts it",
			mutatePod: plantest.Chain(plantest.WithInit("log-sidecar"), withSidecarStartup),
			mutateView: func(p *corev1.Pod, v *plan.RuntimeView) {
				v.Containers = []plan.ContainerInstance{plantest.Inst(p, "log-sidecar", "c-s", plan.ContainerRunning, 0, time.Second)}
			},
			probes: plan.ProbeResults{Startup: map[string]plan.ProbeResult{"c-s": plan.ProbeFailure}},
			want:   planSummary{Sandbox: "use:sb1", Kill: []string{"log-sidecar/c-s:StartupProbeFailed"}, StartInit: []string{"log-sidecar#1:StartupProbeFailed"}},
		},
		{
			name:      "exited sidecar restarts regardless of restartPolicy Never",
			mutatePod: plantest.Chain(plantest.WithInit("log-sidecar"), plantest.Policy(corev1.RestartPolicyNever)),
			mutateView: func(p *corev1.Pod, v *plan.RuntimeView) {
				v.Containers = append([]plan.ContainerInstance{plantest.Exited(plantest.Inst(p, "log-sidecar", "c-s", plan.ContainerExited, 0, time.Hour), 0, time.Minute)}, v.Containers...)
			},
			want: planSummary{Sandbox: "use:sb1", StartInit: []string{"log-sidecar#1:SidecarExited"}},
		},
		{
			name:      "missing sidecar is restarted once the pod initialized",
			mutatePod: plantest.WithInit("log-sidecar"),
			want:      planSummary{Sandbox: "use:sb1", StartInit: []string{"log-sidecar#0:SidecarMissing"}},
		},
		{
			name:      "sidecar liveness failure kills and restarts it",
			mutatePod: plantest.Chain(plantest.WithInit("log-sidecar"), func(p *corev1.Pod) { p.Spec.InitContainers[0].LivenessProbe = &corev1.Probe{} }),
			mutateView: func(p *corev1.Pod, v *plan.RuntimeView) {
				v.Containers = append([]plan.ContainerInstance{plantest.Inst(p, "log-sidecar", "c-s", plan.ContainerRunning, 0, time.Hour)}, v.Containers...)
			},
			probes: plan.ProbeResults{Liveness: map[string]plan.ProbeResult{"c-s": plan.ProbeFailure}},
			want:   planSummary{Sandbox: "use:sb1", Kill: []string{"log-sidecar/c-s:LivenessProbeFailed"}, StartInit: []string{"log-sidecar#1:LivenessProbeFailed"}},
		},
		{
			name:      "sidecar with changed definition is restarted",
			mutatePod: plantest.Chain(plantest.WithInit("log-sidecar"), func(p *corev1.Pod) { p.Spec.InitContainers[0].Image = "busybox:2" }),
			mutateView: func(p *corev1.Pod, v *plan.RuntimeView) {
				old := p.DeepCopy()
				old.Spec.InitContainers[0].Image = "busybox:1"
				v.Containers = append([]plan.ContainerInstance{plantest.Inst(old, "log-sidecar", "c-s", plan.ContainerRunning, 0, time.Hour)}, v.Containers...)
			},
			want: planSummary{Sandbox: "use:sb1", Kill: []string{"log-sidecar/c-s:DefinitionChanged"}, StartInit: []string{"log-sidecar#1:DefinitionChanged"}},
		},
		{
			name:      "sidecars are stopped once all regular containers are done",
			mutatePod: plantest.Chain(plantest.WithInit("log-sidecar"), plantest.Policy(corev1.RestartPolicyNever)),
			mutateView: func(p *corev1.Pod, v *plan.RuntimeView) {
				v.Containers = []plan.ContainerInstance{
					plantest.Exited(v.Containers[0], 0, time.Minute), plantest.Exited(v.Containers[1], 0, time.Minute),
					plantest.Inst(p, "log-sidecar", "c-s", plan.ContainerRunning, 0, time.Hour),
				}
			},
			want: planSummary{KillPod: plan.KillReasonAllContainersDone, Sandbox: "use:sb1", KillIDs: []string{"sb1"}, Kill: []string{"log-sidecar/c-s:PodKilled"}},
		},
		{
			name:      "killing the pod stops regular containers before sidecars in reverse order",
			mutatePod: plantest.Chain(plantest.WithInit("a-sidecar", "b-sidecar"), func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: plantest.T0} }),
			mutateView: func(p *corev1.Pod, v *plan.RuntimeView) {
				v.Containers = append(v.Containers,
					plantest.Inst(p, "b-sidecar", "c-b", plan.ContainerRunning, 0, 2*time.Hour),
					plantest.Inst(p, "a-sidecar", "c-a", plan.ContainerRunning, 0, 3*time.Hour))
			},
			want: planSummary{KillPod: plan.KillReasonPodDeleted, Sandbox: "use:sb1", KillIDs: []string{"sb1"},
				Kill: []string{"app/c-app:PodKilled", "helper/c-helper:PodKilled", "b-sidecar/c-b:PodKilled", "a-sidecar/c-a:PodKilled"}},
		},
		{
			name:      "sidecar in back-off does not hold back regular containers",
			mutatePod: plantest.WithInit("log-sidecar"),
			mutateView: func(p *corev1.Pod, v *plan.RuntimeView) {
				v.Containers = []plan.ContainerInstance{
					v.Containers[0],
					plantest.Exited(plantest.Inst(p, "log-sidecar", "c-s2", plan.ContainerExited, 1, 5*time.Second), 1, 2*time.Second),
					plantest.Exited(plantest.Inst(p, "log-sidecar", "c-s1", plan.ContainerExited, 0, time.Minute), 1, 20*time.Second),
					v.Containers[1],
				}
				v.Containers[0] = plantest.Exited(v.Containers[0], 0, time.Minute)
			},
			want: planSummary{Sandbox: "use:sb1", Start: []string{"helper#1:Exited"}, BackOff: []string{"log-sidecar:CrashLoopBackOff@+8s"}},
		},
		{
			name:      "init container in back-off holds back everything after it",
			mutatePod: plantest.WithInit("init-a"),
			mutateView: func(p *corev1.Pod, v *plan.RuntimeView) {
				v.Sandboxes[0].State = plan.SandboxNotReady
				v.Containers = []plan.ContainerInstance{
					plantest.Exited(plantest.Inst(p, "init-a", "c-a2", plan.ContainerExited, 1, 5*time.Second), 1, 2*time.Second),
					plantest.Exited(plantest.Inst(p, "init-a", "c-a1", plan.ContainerExited, 0, time.Minute), 1, 20*time.Second),
				}
			},
			want: planSummary{KillPod: plan.KillReasonSandboxChanged, Sandbox: "create@1:SandboxNotReady", BackOff: []string{"init-a:CrashLoopBackOff@+8s"}},
		},
	}
	if len(tests) < 60 {
		t.Errorf("only %d planner cases; the issue asks for at least 60", len(tests))
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		if seen[tt.name] {
			t.Fatalf("duplicate case name %q", tt.name)
		}
		seen[tt.name] = true
		t.Run(tt.name, func(t *testing.T) {
			pod := plantest.BasePod()
			if tt.mutatePod != nil {
				tt.mutatePod(pod)
			}
			view := plantest.BaseView()
			if tt.mutateView != nil {
				tt.mutateView(pod, &view)
			}
			before := pod.DeepCopy()
			got := plan.ComputePodActions(pod, view, tt.probes, plantest.T0, plan.BackoffPolicy{})
			if diff := cmp.Diff(tt.want, summarize(got)); diff != "" {
				t.Errorf("ComputePodActions() mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, pod); diff != "" {
				t.Errorf("ComputePodActions() mutated the pod:\n%s", diff)
			}
		})
	}
}

func TestComputePodActionsDetails(t *testing.T) {
	pod := plantest.BasePod()
	pod.Spec.Containers[0].Image = "busybox:2"
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "FOO", Value: "1"}}
	got := plan.ComputePodActions(pod, plantest.BaseView(), plan.ProbeResults{}, plantest.T0, plan.BackoffPolicy{})
	want := []plan.ContainerAction{{
		Name: "app", ContainerID: "c-app", Reason: plan.ReasonDefinitionChanged,
		Message:       "Container app definition changed, will be restarted",
		ChangedFields: []string{"image", "env[FOO]"},
	}}
	if diff := cmp.Diff(want, got.Kill); diff != "" {
		t.Errorf("Kill mismatch (-want +got):\n%s", diff)
	}

	view := plantest.BaseView()
	p := plantest.BasePod()
	view.Containers = []plan.ContainerInstance{
		plantest.Exited(plantest.Inst(p, "app", "c-app2", plan.ContainerExited, 1, 5*time.Second), 1, 3*time.Second),
		view.Containers[0],
		plantest.Exited(plantest.Inst(p, "app", "c-app", plan.ContainerExited, 0, time.Minute), 1, 30*time.Second),
	}
	got = plan.ComputePodActions(plantest.BasePod(), view, plan.ProbeResults{}, plantest.T0, plan.BackoffPolicy{})
	wantBO := []plan.ContainerAction{{
		Name: "app", Attempt: 2, Reason: plan.ReasonCrashLoopBackOff,
		Message:     "back-off 10s restarting failed container=app pod=web_shop(uid-1)",
		NextAttempt: plantest.T0.Add(7 * time.Second),
	}}
	if diff := cmp.Diff(wantBO, got.BackOff); diff != "" {
		t.Errorf("BackOff mismatch (-want +got):\n%s", diff)
	}
}

func TestBackoffPolicyDelay(t *testing.T) {
	tests := []struct {
		p    plan.BackoffPolicy
		n    int
		want time.Duration
	}{
		{plan.BackoffPolicy{}, 0, 0},
		{plan.BackoffPolicy{}, 1, 10 * time.Second},
		{plan.BackoffPolicy{}, 2, 20 * time.Second},
		{plan.BackoffPolicy{}, 5, 160 * time.Second},
		{plan.BackoffPolicy{}, 6, 300 * time.Second},
		{plan.BackoffPolicy{}, 100, 300 * time.Second},
		{plan.BackoffPolicy{Base: time.Second, Cap: 5 * time.Second}, 3, 4 * time.Second},
		{plan.BackoffPolicy{Base: time.Second, Cap: 5 * time.Second}, 4, 5 * time.Second},
	}
	for _, tt := range tests {
		if got := tt.p.Delay(tt.n); got != tt.want {
			t.Errorf("%+v.Delay(%d) = %s, want %s", tt.p, tt.n, got, tt.want)
		}
	}
}

func TestChangedFields(t *testing.T) {
	pod := plantest.BasePod()
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/a"}}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}}
	old := plan.NewContainerSpec(pod, &pod.Spec.Containers[0])

	changed := pod.DeepCopy()
	changed.Spec.Volumes[0].HostPath.Path = "/b"
	changed.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "B", Value: "3"}, {Name: "C", Value: "1"}}
	changed.Spec.Containers[0].VolumeMounts[0].ReadOnly = true
	changed.Spec.Containers[0].Args = []string{"x"}
	got := plan.ChangedFields(old, plan.NewContainerSpec(changed, &changed.Spec.Containers[0]))
	want := []string{"args", "env[B]", "env[C]", "env[A]", "volumeMounts[/data]", "volumes[data]"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ChangedFields mismatch (-want +got):\n%s", diff)
	}
	if got := plan.ChangedFields(old, old); got != nil {
		t.Errorf("ChangedFields(same) = %v, want nil", got)
	}
	reordered := pod.DeepCopy()
	reordered.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "B", Value: "2"}, {Name: "A", Value: "1"}}
	if got := plan.ChangedFields(old, plan.NewContainerSpec(reordered, &reordered.Spec.Containers[0])); !cmp.Equal(got, []string{"env"}) {
		t.Errorf("ChangedFields(reordered env) = %v, want [env]", got)
	}
	if plan.ContainerHash(pod, &pod.Spec.Containers[0]) == plan.ContainerHash(changed, &changed.Spec.Containers[0]) {
		t.Error("ContainerHash did not change with the spec")
	}
}

// TestChangedFieldsPodNamespaces: shareProcessNamespace true and hostUsers
// false change every container's hash and are named (the runtime sets a
// container's namespaces at creation); their default values, set or not,
// are one spec, so a manifest that spells them out restarts nothing.
func TestChangedFieldsPodNamespaces(t *testing.T) {
	pod := plantest.BasePod()
	c := &pod.Spec.Containers[0]
	old := plan.NewContainerSpec(pod, c)
	oldHash := plan.ContainerHash(pod, c)
	for _, tt := range []struct {
		name   string
		mutate func(*corev1.Pod)
		want   []string
	}{
		{"shareProcessNamespace false", func(p *corev1.Pod) { p.Spec.ShareProcessNamespace = ptr.To(false) }, nil},
		{"hostUsers true", func(p *corev1.Pod) { p.Spec.HostUsers = ptr.To(true) }, nil},
		{"shareProcessNamespace true", func(p *corev1.Pod) { p.Spec.ShareProcessNamespace = ptr.To(true) }, []string{"shareProcessNamespace"}},
		{"hostUsers false", func(p *corev1.Pod) { p.Spec.HostUsers = ptr.To(false) }, []string{"hostUsers"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := pod.DeepCopy()
			tt.mutate(p)
			nc := &p.Spec.Containers[0]
			if diff := cmp.Diff(tt.want, plan.ChangedFields(old, plan.NewContainerSpec(p, nc))); diff != "" {
				t.Errorf("ChangedFields (-want +got):\n%s", diff)
			}
			if changed := plan.ContainerHash(p, nc) != oldHash; changed != (tt.want != nil) {
				t.Errorf("hash changed = %v, want %v", changed, tt.want != nil)
			}
		})
	}
}

// TestChangedFieldsSecurityProfiles: a changed seccomp, AppArmor or SELinux
// profile or procMount, the container's or the pod's that it inherits,
// changes the container's hash and is named, so the planner restarts the
// container with the new profile (the runtime applies a profile only at
// creation).
func TestChangedFieldsSecurityProfiles(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*corev1.Pod)
		want   []string
	}{
		{"container seccompProfile", func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}
		}, []string{"securityContext"}},
		{"container localhostProfile", func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("b.json")}}
		}, []string{"securityContext"}},
		{"container appArmorProfile", func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}}
		}, []string{"securityContext"}},
		{"container seLinuxOptions", func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{SELinuxOptions: &corev1.SELinuxOptions{Level: "s0:c1"}}
		}, []string{"securityContext"}},
		{"container procMount", func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{ProcMount: ptr.To(corev1.UnmaskedProcMount)}
		}, []string{"securityContext"}},
		{"pod seccompProfile", func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
		}, []string{"podSecurityContext"}},
		{"pod appArmorProfile", func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault}}
		}, []string{"podSecurityContext"}},
		{"pod seLinuxOptions", func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{SELinuxOptions: &corev1.SELinuxOptions{Type: "spc_t"}}
		}, []string{"podSecurityContext"}},
	}
	base := plantest.BasePod()
	base.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("a.json")}}
	old := plan.NewContainerSpec(base, &base.Spec.Containers[0])
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			changed := base.DeepCopy()
			tt.mutate(changed)
			c := &changed.Spec.Containers[0]
			if diff := cmp.Diff(tt.want, plan.ChangedFields(old, plan.NewContainerSpec(changed, c))); diff != "" {
				t.Errorf("ChangedFields (-want +got):\n%s", diff)
			}
			if plan.ContainerHash(base, &base.Spec.Containers[0]) == plan.ContainerHash(changed, c) {
				t.Error("ContainerHash did not change with the profile")
			}
			if got := plan.NewContainerSpec(changed, c).Hash(); got != plan.ContainerHash(changed, c) {
				t.Errorf("Hash %s differs from ContainerHash %s", got, plan.ContainerHash(changed, c))
			}
		})
	}
}

// TestChangedFieldsContainerFields: a change of a lifecycle hook or stop
// signal, a subPathExpr, a mount propagation or stdin, stdinOnce or tty
// changes the container's hash and is named, so PlanPod says what
// restarts it; a probe change does neither.
func TestChangedFieldsContainerFields(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*corev1.Container)
		want   []string
	}{
		{"preStop exec to sleep", func(c *corev1.Container) {
			c.Lifecycle.PreStop = &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 5}}
		}, []string{"lifecycle.preStop"}},
		{"preStop command", func(c *corev1.Container) { c.Lifecycle.PreStop.Exec.Command = []string{"false"} }, []string{"lifecycle.preStop"}},
		{"postStart httpGet added", func(c *corev1.Container) {
			c.Lifecycle.PostStart = &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(80)}}
		}, []string{"lifecycle.postStart"}},
		{"stopSignal", func(c *corev1.Container) { c.Lifecycle.StopSignal = ptr.To(corev1.SIGUSR1) }, []string{"lifecycle.stopSignal"}},
		{"lifecycle removed", func(c *corev1.Container) { c.Lifecycle = nil }, []string{"lifecycle.preStop"}},
		{"subPathExpr", func(c *corev1.Container) { c.VolumeMounts[0].SubPathExpr = "$(POD_NAME)" }, []string{"volumeMounts[/data]"}},
		{"mountPropagation", func(c *corev1.Container) {
			c.VolumeMounts[0].MountPropagation = ptr.To(corev1.MountPropagationHostToContainer)
		}, []string{"volumeMounts[/data]"}},
		{"stdin and tty", func(c *corev1.Container) { c.Stdin, c.TTY = true, true }, []string{"stdin", "tty"}},
		{"stdinOnce", func(c *corev1.Container) { c.StdinOnce = true }, []string{"stdinOnce"}},
	}
	base := plantest.BasePod()
	base.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	base.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	base.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
	old := plan.NewContainerSpec(base, &base.Spec.Containers[0])
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			changed := base.DeepCopy()
			c := &changed.Spec.Containers[0]
			tt.mutate(c)
			if diff := cmp.Diff(tt.want, plan.ChangedFields(old, plan.NewContainerSpec(changed, c))); diff != "" {
				t.Errorf("ChangedFields (-want +got):\n%s", diff)
			}
			if plan.ContainerHash(base, &base.Spec.Containers[0]) == plan.ContainerHash(changed, c) {
				t.Error("ContainerHash did not change with the field")
			}
			if got := plan.NewContainerSpec(changed, c).Hash(); got != plan.ContainerHash(changed, c) {
				t.Errorf("Hash %s differs from ContainerHash %s", got, plan.ContainerHash(changed, c))
			}
		})
	}
	t.Run("probes are not hashed", func(t *testing.T) {
		changed := base.DeepCopy()
		changed.Spec.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9090}}}
		if plan.ContainerHash(base, &base.Spec.Containers[0]) != plan.ContainerHash(changed, &changed.Spec.Containers[0]) {
			t.Error("ContainerHash changed with a grpc probe")
		}
	})
}

// TestChangedFieldsNewVolumeSources: a change in any field of a
// downwardAPI, projected, persistentVolumeClaim or image volume the
// container mounts, or of an env resourceFieldRef, changes its hash and
// is named (volumes[name], env[NAME]), so PlanPod shows it. A change of
// what a downwardAPI file shows (the pod's labels) is not: the files are
// swapped in place.
func TestChangedFieldsNewVolumeSources(t *testing.T) {
	base := func() *corev1.Pod {
		pod := plantest.BasePod()
		pod.Spec.Volumes = []corev1.Volume{
			{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{DefaultMode: ptr.To[int32](0o644), Items: []corev1.DownwardAPIVolumeFile{
				{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.labels"}},
				{Path: "cpu", ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "app", Resource: "limits.cpu", Divisor: resource.MustParse("1m")}},
			}}}},
			{Name: "all", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: ptr.To[int32](0o644), Sources: []corev1.VolumeProjection{
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}, Items: []corev1.KeyToPath{{Key: "k", Path: "k"}}}},
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Optional: ptr.To(false)}},
				{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "name", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}}}},
			}}}},
			{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
			{Name: "model", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "model:1", PullPolicy: corev1.PullIfNotPresent}}},
		}
		c := &pod.Spec.Containers[0]
		for _, v := range pod.Spec.Volumes {
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: v.Name, MountPath: "/" + v.Name})
		}
		c.Env = []corev1.EnvVar{{Name: "CPU", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}}}}
		return pod
	}
	tests := []struct {
		name   string
		mutate func(*corev1.Pod)
		want   []string
	}{
		{"downwardAPI defaultMode", func(p *corev1.Pod) { p.Spec.Volumes[0].DownwardAPI.DefaultMode = ptr.To[int32](0o600) }, []string{"volumes[info]"}},
		{"downwardAPI item path", func(p *corev1.Pod) { p.Spec.Volumes[0].DownwardAPI.Items[0].Path = "l" }, []string{"volumes[info]"}},
		{"downwardAPI item mode", func(p *corev1.Pod) { p.Spec.Volumes[0].DownwardAPI.Items[0].Mode = ptr.To[int32](0o400) }, []string{"volumes[info]"}},
		{"downwardAPI fieldPath", func(p *corev1.Pod) {
			p.Spec.Volumes[0].DownwardAPI.Items[0].FieldRef.FieldPath = "metadata.annotations"
		}, []string{"volumes[info]"}},
		{"downwardAPI resource divisor", func(p *corev1.Pod) {
			p.Spec.Volumes[0].DownwardAPI.Items[1].ResourceFieldRef.Divisor = resource.MustParse("1")
		}, []string{"volumes[info]"}},
		{"downwardAPI resource", func(p *corev1.Pod) { p.Spec.Volumes[0].DownwardAPI.Items[1].ResourceFieldRef.Resource = "requests.cpu" }, []string{"volumes[info]"}},
		{"projected defaultMode", func(p *corev1.Pod) { p.Spec.Volumes[1].Projected.DefaultMode = ptr.To[int32](0o400) }, []string{"volumes[all]"}},
		{"projected configMap item", func(p *corev1.Pod) { p.Spec.Volumes[1].Projected.Sources[0].ConfigMap.Items[0].Path = "x" }, []string{"volumes[all]"}},
		{"projected secret optional", func(p *corev1.Pod) { p.Spec.Volumes[1].Projected.Sources[1].Secret.Optional = ptr.To(true) }, []string{"volumes[all]"}},
		{"projected downwardAPI", func(p *corev1.Pod) {
			p.Spec.Volumes[1].Projected.Sources[2].DownwardAPI.Items[0].FieldRef.FieldPath = "metadata.uid"
		}, []string{"volumes[all]"}},
		{"claimName", func(p *corev1.Pod) { p.Spec.Volumes[2].PersistentVolumeClaim.ClaimName = "other" }, []string{"volumes[data]"}},
		{"claim readOnly", func(p *corev1.Pod) { p.Spec.Volumes[2].PersistentVolumeClaim.ReadOnly = true }, []string{"volumes[data]"}},
		{"image reference", func(p *corev1.Pod) { p.Spec.Volumes[3].Image.Reference = "model:2" }, []string{"volumes[model]"}},
		{"image pullPolicy", func(p *corev1.Pod) { p.Spec.Volumes[3].Image.PullPolicy = corev1.PullAlways }, []string{"volumes[model]"}},
		{"env resourceFieldRef", func(p *corev1.Pod) {
			p.Spec.Containers[0].Env[0].ValueFrom.ResourceFieldRef.Divisor = resource.MustParse("1m")
		}, []string{"env[CPU]"}},
		{"the labels a downwardAPI file shows", func(p *corev1.Pod) { p.Labels = map[string]string{"tier": "gold"} }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := base()
			changed := pod.DeepCopy()
			tt.mutate(changed)
			got := plan.ChangedFields(plan.NewContainerSpec(pod, &pod.Spec.Containers[0]), plan.NewContainerSpec(changed, &changed.Spec.Containers[0]))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ChangedFields (-want +got):\n%s", diff)
			}
			if same := plan.ContainerHash(pod, &pod.Spec.Containers[0]) == plan.ContainerHash(changed, &changed.Spec.Containers[0]); same != (tt.want == nil) {
				t.Errorf("hash unchanged: %v, want %v", same, tt.want == nil)
			}
		})
	}
}
