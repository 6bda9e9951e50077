package plan_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/engine/model"
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

// restartRule gives the container named name its own restart policy and,
// when op is set, a rule that restarts it on exit codes op codes.
func restartRule(name string, policy corev1.ContainerRestartPolicy, op corev1.ContainerRestartRuleOnExitCodesOperator, codes ...int32) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		c := model.SpecContainer(p, name)
		c.RestartPolicy = ptr.To(policy)
		if op != "" {
			c.RestartPolicyRules = []corev1.ContainerRestartRule{{
				Action:    corev1.ContainerRestartRuleActionRestart,
				ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: op, Values: codes},
			}}
		}
	}
}

func TestComputePodActions(t *testing.T) {
	mp := plantest.BasePod // the unmutated pod, for hashes of instances
	withSidecarStartup := func(p *corev1.Pod) {
		p.Spec.InitContainers[0].StartupProbe = &corev1.Probe{}
	}
	tests := []struct {
		name       string
		mutatePod  func(*corev1.Pod)
		mutateView func(*corev1.Pod, *model.RuntimeView)
		probes     model.ProbeResults
		want       planSummary
	}{
		// Sandbox rules (PodSandboxChanged).
		{
			name:       "no sandbox creates one with attempt 0 and starts every container",
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) { *v = model.RuntimeView{} },
			want:       planSummary{KillPod: plan.KillReasonSandboxChanged, Sandbox: "create@0:NoSandbox", Start: []string{"app#0:NewSandbox", "helper#0:NewSandbox"}},
		},
		{
			name: "all running with unchanged spec keeps everything",
			want: keep(),
		},
		{
			name: "newest sandbox not ready recreates with attempt plus one and kills the pod",
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				v.Sandboxes = []model.Sandbox{plantest.Sandbox("sb2", 3, false, time.Minute), plantest.Sandbox("sb1", 2, false, time.Hour)}
				v.Containers = []model.ContainerInstance{plantest.Exited(v.Containers[0], 137, time.Minute), plantest.Exited(v.Containers[1], 137, time.Minute)}
			},
			want: planSummary{KillPod: plan.KillReasonSandboxChanged, Sandbox: "create@4:SandboxNotReady", Start: []string{"app#1:NewSandbox", "helper#1:NewSandbox"}},
		},
		{
			name: "two ready sandboxes recreate and stop both",
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				v.Sandboxes = []model.Sandbox{plantest.Sandbox("sb2", 1, true, time.Minute), plantest.Sandbox("sb1", 0, true, time.Hour)}
			},
			want: planSummary{KillPod: plan.KillReasonSandboxChanged, Sandbox: "create@2:MultipleReadySandboxes", KillIDs: []string{"sb2", "sb1"},
				Kill:  []string{"app/c-app:PodKilled", "helper/c-helper:PodKilled"},
				Start: []string{"app#1:NewSandbox", "helper#1:NewSandbox"}},
		},
		{
			name: "attempt is the highest seen plus one",
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				v.Sandboxes = []model.Sandbox{plantest.Sandbox("sb3", 1, false, time.Minute), plantest.Sandbox("sb2", 7, false, time.Hour)}
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
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				v.Sandboxes[0].NetworkMode = runtimeapi.NamespaceMode_NODE
				v.Sandboxes[0].IPs = nil
			},
			want: planSummary{KillPod: plan.KillReasonSandboxChanged, Sandbox: "create@1:NetworkNamespaceChanged", KillIDs: []string{"sb1"},
				Kill:  []string{"app/c-app:PodKilled", "helper/c-helper:PodKilled"},
				Start: []string{"app#1:NewSandbox", "helper#1:NewSandbox"}},
		},
		{
			name:       "sandbox whose network status has no IP is recreated",
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) { v.Sandboxes[0].IPs = []string{} },
			want: planSummary{KillPod: plan.KillReasonSandboxChanged, Sandbox: "create@1:SandboxWithoutIP", KillIDs: []string{"sb1"},
				Kill:  []string{"app/c-app:PodKilled", "helper/c-helper:PodKilled"},
				Start: []string{"app#1:NewSandbox", "helper#1:NewSandbox"}},
		},
		{
			name:      "host-network sandbox without IP is kept",
			mutatePod: func(p *corev1.Pod) { p.Spec.HostNetwork = true },
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				v.Sandboxes[0].NetworkMode = runtimeapi.NamespaceMode_NODE
				v.Sandboxes[0].IPs = nil
			},
			want: keep(),
		},
		{
			name:      "restartPolicy Never does not recreate a dead sandbox once containers ran",
			mutatePod: plantest.Policy(corev1.RestartPolicyNever),
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				v.Sandboxes[0].State = model.SandboxNotReady
				v.Containers = []model.ContainerInstance{plantest.Exited(v.Containers[0], 1, time.Minute), plantest.Exited(v.Containers[1], 0, time.Minute)}
			},
			want: planSummary{KillPod: plan.KillReasonSandboxChanged, Sandbox: "none:SandboxNotRecreated"},
		},
		{
			name:      "restartPolicy Never retries a sandbox when no container was ever created",
			mutatePod: plantest.Policy(corev1.RestartPolicyNever),
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				v.Sandboxes[0].State = model.SandboxNotReady
				v.Containers = nil
			},
			want: planSummary{KillPod: plan.KillReasonSandboxChanged, Sandbox: "create@1:SandboxNotReady", Start: []string{"app#0:NewSandbox", "helper#0:NewSandbox"}},
		},
		{
			name:       "restartPolicy Never creates the first sandbox",
			mutatePod:  plantest.Policy(corev1.RestartPolicyNever),
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) { *v = model.RuntimeView{} },
			want:       planSummary{KillPod: plan.KillReasonSandboxChanged, Sandbox: "create@0:NoSandbox", Start: []string{"app#0:NewSandbox", "helper#0:NewSandbox"}},
		},
		{
			name:      "restartPolicy OnFailure with every container succeeded does not recreate the sandbox",
			mutatePod: plantest.Policy(corev1.RestartPolicyOnFailure),
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				v.Sandboxes[0].State = model.SandboxNotReady
				v.Containers = []model.ContainerInstance{plantest.Exited(v.Containers[0], 0, time.Minute), plantest.Exited(v.Containers[1], 0, time.Minute)}
			},
			want: planSummary{KillPod: plan.KillReasonSandboxChanged, Sandbox: "none:PodCompleted"},
		},
		{
			name:      "restartPolicy OnFailure recreates the sandbox for failed containers only",
			mutatePod: plantest.Policy(corev1.RestartPolicyOnFailure),
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				v.Sandboxes[0].State = model.SandboxNotReady
				v.Containers = []model.ContainerInstance{plantest.Exited(v.Containers[0], 0, time.Minute), plantest.Exited(v.Containers[1], 2, 20*time.Minute)}
			},
			want: planSummary{KillPod: plan.KillReasonSandboxChanged, Sandbox: "create@1:SandboxNotReady", Start: []string{"app#1:NewSandbox"}},
		},
		{
			name:      "new sandbox starts init containers from the first",
			mutatePod: plantest.WithInit("init-a", "init-b"),
			mutateView: func(p *corev1.Pod, v *model.RuntimeView) {
				v.Sandboxes[0].State = model.SandboxNotReady
				v.Containers = []model.ContainerInstance{
					plantest.Exited(plantest.Inst(p, "app", "c-app", model.ContainerExited, 0, time.Hour), 137, time.Minute),
					plantest.Exited(plantest.Inst(p, "init-b", "c-b", model.ContainerExited, 0, 2*time.Hour), 0, 2*time.Hour),
					plantest.Exited(plantest.Inst(p, "init-a", "c-a", model.ContainerExited, 0, 3*time.Hour), 0, 3*time.Hour),
				}
			},
			want: planSummary{KillPod: plan.KillReasonSandboxChanged, Sandbox: "create@1:SandboxNotReady", StartInit: []string{"init-a#1:NewSandbox"}},
		},
		{
			name:       "new sandbox with a sidecar starts the sidecar first",
			mutatePod:  plantest.WithInit("log-sidecar"),
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) { *v = model.RuntimeView{} },
			want:       planSummary{KillPod: plan.KillReasonSandboxChanged, Sandbox: "create@0:NoSandbox", StartInit: []string{"log-sidecar#0:NewSandbox"}},
		},

		// Regular containers.
		{
			name:       "missing container is started",
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) { v.Containers = v.Containers[1:] },
			want:       planSummary{Sandbox: "use:sb1", Start: []string{"helper#0:NotStarted"}},
		},
		{
			name: "exited container restarts under Always",
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				v.Containers[0] = plantest.Exited(v.Containers[0], 0, time.Minute)
			},
			want: planSummary{Sandbox: "use:sb1", Start: []string{"helper#1:Exited"}},
		},
		{
			name:      "failed container restarts under OnFailure",
			mutatePod: plantest.Policy(corev1.RestartPolicyOnFailure),
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				v.Containers[0] = plantest.Exited(v.Containers[0], 1, time.Minute)
			},
			want: planSummary{Sandbox: "use:sb1", Start: []string{"helper#1:Exited"}},
		},
		{
			name:      "succeeded container is not restarted under OnFailure",
			mutatePod: plantest.Policy(corev1.RestartPolicyOnFailure),
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				v.Containers[0] = plantest.Exited(v.Containers[0], 0, time.Minute)
			},
			want: keep(),
		},
		{
			name:      "failed container is not restarted under Never",
			mutatePod: plantest.Policy(corev1.RestartPolicyNever),
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				v.Containers[0] = plantest.Exited(v.Containers[0], 1, time.Minute)
			},
			want: keep(),
		},
		// Container restart policy and rules (ContainerRestartRules,
		// KEP-5307): the container's rules, then its policy, then the
		// pod's decide by exit code, as the kubelet's
		// ContainerShouldRestart.
		{
			name:      "a restart rule restarts a container on its exit code under the pod's Never",
			mutatePod: plantest.Chain(plantest.Policy(corev1.RestartPolicyNever), restartRule("helper", corev1.ContainerRestartPolicyNever, corev1.ContainerRestartRuleOnExitCodesOpIn, 42)),
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				v.Containers[0] = plantest.Exited(v.Containers[0], 42, time.Minute)
			},
			want: planSummary{Sandbox: "use:sb1", Start: []string{"helper#1:Exited"}},
		},
		{
			name:      "a restart rule that does not match leaves the container's policy to decide",
			mutatePod: plantest.Chain(plantest.Policy(corev1.RestartPolicyNever), restartRule("helper", corev1.ContainerRestartPolicyNever, corev1.ContainerRestartRuleOnExitCodesOpIn, 42)),
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				v.Containers[0] = plantest.Exited(v.Containers[0], 1, time.Minute)
			},
			want: keep(),
		},
		{
			name:      "a NotIn rule restarts on any other exit code",
			mutatePod: restartRule("helper", corev1.ContainerRestartPolicyNever, corev1.ContainerRestartRuleOnExitCodesOpNotIn, 0, 3),
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				v.Containers[0] = plantest.Exited(v.Containers[0], 137, time.Minute)
			},
			want: planSummary{Sandbox: "use:sb1", Start: []string{"helper#1:Exited"}},
		},
		{
			name:      "a NotIn rule does not restart on one of its exit codes",
			mutatePod: restartRule("helper", corev1.ContainerRestartPolicyNever, corev1.ContainerRestartRuleOnExitCodesOpNotIn, 0, 3),
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				v.Containers[0] = plantest.Exited(v.Containers[0], 3, time.Minute)
			},
			want: keep(),
		},
		{
			name:      "a container's own restartPolicy Never overrides the pod's Always",
			mutatePod: restartRule("helper", corev1.ContainerRestartPolicyNever, ""),
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				v.Containers[0] = plantest.Exited(v.Containers[0], 1, time.Minute)
			},
			want: keep(),
		},
		{
			name:      "a container's own restartPolicy OnFailure restarts a failure under the pod's Never",
			mutatePod: plantest.Chain(plantest.Policy(corev1.RestartPolicyNever), restartRule("helper", corev1.ContainerRestartPolicyOnFailure, "")),
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				v.Containers[0] = plantest.Exited(v.Containers[0], 1, time.Minute)
			},
			want: planSummary{Sandbox: "use:sb1", Start: []string{"helper#1:Exited"}},
		},
		{
			name:      "a container's own restartPolicy Never: a liveness failure kills without restart, whatever its rules",
			mutatePod: restartRule("app", corev1.ContainerRestartPolicyNever, corev1.ContainerRestartRuleOnExitCodesOpIn, 137),
			probes:    model.ProbeResults{Liveness: map[string]model.ProbeResult{"c-app": model.ProbeFailure}},
			want:      planSummary{Sandbox: "use:sb1", Kill: []string{"app/c-app:LivenessProbeFailed"}},
		},
		{
			name:      "a container's own restartPolicy Always: a liveness failure restarts it under the pod's Never",
			mutatePod: plantest.Chain(plantest.Policy(corev1.RestartPolicyNever), restartRule("app", corev1.ContainerRestartPolicyAlways, "")),
			probes:    model.ProbeResults{Liveness: map[string]model.ProbeResult{"c-app": model.ProbeFailure}},
			want:      planSummary{Sandbox: "use:sb1", Kill: []string{"app/c-app:LivenessProbeFailed"}, Start: []string{"app#1:LivenessProbeFailed"}},
		},
		{
			name:      "a new sandbox does not start a succeeded container whose own restartPolicy is OnFailure",
			mutatePod: restartRule("helper", corev1.ContainerRestartPolicyOnFailure, ""),
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				v.Sandboxes[0].State = model.SandboxNotReady
				v.Containers = []model.ContainerInstance{plantest.Exited(v.Containers[0], 0, time.Minute), plantest.Exited(v.Containers[1], 137, time.Minute)}
			},
			want: planSummary{KillPod: plan.KillReasonSandboxChanged, Sandbox: "create@1:SandboxNotReady", Start: []string{"app#1:NewSandbox"}},
		},
		{
			name:      "every container exited and none restarts by its rules kills the pod",
			mutatePod: plantest.Chain(plantest.Policy(corev1.RestartPolicyNever), restartRule("helper", corev1.ContainerRestartPolicyNever, corev1.ContainerRestartRuleOnExitCodesOpIn, 42)),
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				v.Containers = []model.ContainerInstance{plantest.Exited(v.Containers[0], 1, time.Minute), plantest.Exited(v.Containers[1], 0, time.Minute)}
			},
			want: planSummary{KillPod: plan.KillReasonAllContainersDone, Sandbox: "use:sb1", KillIDs: []string{"sb1"}},
		},
		{
			name:      "a failed init container a rule matches is retried under the pod's Never",
			mutatePod: plantest.Chain(plantest.WithInit("init-a", "init-b"), plantest.Policy(corev1.RestartPolicyNever), restartRule("init-a", corev1.ContainerRestartPolicyNever, corev1.ContainerRestartRuleOnExitCodesOpIn, 2)),
			mutateView: func(p *corev1.Pod, v *model.RuntimeView) {
				v.Containers = []model.ContainerInstance{plantest.Exited(plantest.Inst(p, "init-a", "c-a", model.ContainerExited, 0, time.Minute), 2, time.Minute)}
			},
			want: planSummary{Sandbox: "use:sb1", StartInit: []string{"init-a#1:InitContainerFailed"}},
		},
		{
			name:      "a failed init container whose own restartPolicy is Never fails the pod under OnFailure",
			mutatePod: plantest.Chain(plantest.WithInit("init-a", "init-b"), plantest.Policy(corev1.RestartPolicyOnFailure), restartRule("init-a", corev1.ContainerRestartPolicyNever, corev1.ContainerRestartRuleOnExitCodesOpIn, 2)),
			mutateView: func(p *corev1.Pod, v *model.RuntimeView) {
				v.Containers = []model.ContainerInstance{plantest.Exited(plantest.Inst(p, "init-a", "c-a", model.ContainerExited, 0, time.Minute), 1, time.Second)}
			},
			want: planSummary{KillPod: plan.KillReasonInitContainerFailed, Sandbox: "use:sb1", KillIDs: []string{"sb1"}},
		},
		{
			name:      "an unknown init container whose own restartPolicy is OnFailure is restarted under the pod's Never",
			mutatePod: plantest.Chain(plantest.WithInit("init-a"), plantest.Policy(corev1.RestartPolicyNever), restartRule("init-a", corev1.ContainerRestartPolicyOnFailure, "")),
			mutateView: func(p *corev1.Pod, v *model.RuntimeView) {
				v.Containers = []model.ContainerInstance{plantest.Inst(p, "init-a", "c-a", model.ContainerUnknown, 0, time.Minute)}
			},
			want: planSummary{Sandbox: "use:sb1", Kill: []string{"init-a/c-a:Unknown"}, StartInit: []string{"init-a#1:Unknown"}},
		},
		{
			name:       "container never started is started under Never",
			mutatePod:  plantest.Policy(corev1.RestartPolicyNever),
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) { v.Containers = v.Containers[1:] },
			want:       planSummary{Sandbox: "use:sb1", Start: []string{"helper#0:NotStarted"}},
		},
		{
			name:       "created container is restarted without a kill",
			mutatePod:  plantest.Policy(corev1.RestartPolicyNever),
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) { v.Containers[0].State = model.ContainerCreated },
			want:       planSummary{Sandbox: "use:sb1", Start: []string{"helper#1:Created"}},
		},
		{
			name:       "unknown container is killed and restarted",
			mutatePod:  plantest.Policy(corev1.RestartPolicyNever),
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) { v.Containers[0].State = model.ContainerUnknown },
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
			probes: model.ProbeResults{Liveness: map[string]model.ProbeResult{"c-app": model.ProbeFailure}},
			want:   planSummary{Sandbox: "use:sb1", Kill: []string{"app/c-app:LivenessProbeFailed"}, Start: []string{"app#1:LivenessProbeFailed"}},
		},
		{
			name:   "startup failure kills and restarts",
			probes: model.ProbeResults{Startup: map[string]model.ProbeResult{"c-helper": model.ProbeFailure}},
			want:   planSummary{Sandbox: "use:sb1", Kill: []string{"helper/c-helper:StartupProbeFailed"}, Start: []string{"helper#1:StartupProbeFailed"}},
		},
		{
			name:   "liveness success keeps the container",
			probes: model.ProbeResults{Liveness: map[string]model.ProbeResult{"c-app": model.ProbeSuccess}},
			want:   keep(),
		},
		{
			name:   "readiness failure does not restart",
			probes: model.ProbeResults{Readiness: map[string]model.ProbeResult{"c-app": model.ProbeFailure}},
			want:   keep(),
		},
		{
			name:      "liveness failure under Never kills without restart",
			mutatePod: plantest.Policy(corev1.RestartPolicyNever),
			probes:    model.ProbeResults{Liveness: map[string]model.ProbeResult{"c-app": model.ProbeFailure}},
			want:      planSummary{Sandbox: "use:sb1", Kill: []string{"app/c-app:LivenessProbeFailed"}},
		},
		{
			name:      "liveness failure of the last running container under Never kills the pod",
			mutatePod: plantest.Policy(corev1.RestartPolicyNever),
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				v.Containers[0] = plantest.Exited(v.Containers[0], 0, time.Minute)
			},
			probes: model.ProbeResults{Liveness: map[string]model.ProbeResult{"c-app": model.ProbeFailure}},
			want:   planSummary{KillPod: plan.KillReasonAllContainersDone, Sandbox: "use:sb1", KillIDs: []string{"sb1"}, Kill: []string{"app/c-app:PodKilled"}},
		},
		{
			name:      "all containers exited under Never kills the pod",
			mutatePod: plantest.Policy(corev1.RestartPolicyNever),
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				v.Containers = []model.ContainerInstance{plantest.Exited(v.Containers[0], 0, time.Minute), plantest.Exited(v.Containers[1], 1, time.Minute)}
			},
			want: planSummary{KillPod: plan.KillReasonAllContainersDone, Sandbox: "use:sb1", KillIDs: []string{"sb1"}},
		},
		{
			name:      "all containers succeeded under OnFailure kills the pod",
			mutatePod: plantest.Policy(corev1.RestartPolicyOnFailure),
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				v.Containers = []model.ContainerInstance{plantest.Exited(v.Containers[0], 0, time.Minute), plantest.Exited(v.Containers[1], 0, time.Minute)}
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
			mutateView: func(p *corev1.Pod, v *model.RuntimeView) {
				v.Containers = []model.ContainerInstance{plantest.Inst(p, "init-a", "c-a", model.ContainerRunning, 0, time.Minute)}
			},
			want: planSummary{Sandbox: "use:sb1", StartEphemeral: []string{"debug#0:NotStarted"}},
		},
		{
			name:      "running ephemeral container is kept and not killed as not in the spec",
			mutatePod: withDebug,
			mutateView: func(p *corev1.Pod, v *model.RuntimeView) {
				v.Containers = append(v.Containers, plantest.Inst(p, "debug", "c-debug", model.ContainerRunning, 0, time.Minute))
			},
			want: keep(),
		},
		{
			name:      "exited ephemeral container is never restarted",
			mutatePod: withDebug,
			mutateView: func(p *corev1.Pod, v *model.RuntimeView) {
				v.Containers = append(v.Containers, plantest.Exited(plantest.Inst(p, "debug", "c-debug", model.ContainerExited, 0, time.Minute), 1, time.Second))
			},
			want: keep(),
		},
		{
			name:      "ephemeral container is not started in a sandbox being recreated",
			mutatePod: withDebug,
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				v.Sandboxes[0].State = model.SandboxNotReady
				v.Containers = nil
			},
			want: planSummary{KillPod: plan.KillReasonSandboxChanged, Sandbox: "create@1:SandboxNotReady", Start: []string{"app#0:NewSandbox", "helper#0:NewSandbox"}},
		},
		{
			name:      "running ephemeral container does not keep a pod whose containers are done",
			mutatePod: func(p *corev1.Pod) { plantest.Policy(corev1.RestartPolicyNever)(p); withDebug(p) },
			mutateView: func(p *corev1.Pod, v *model.RuntimeView) {
				v.Containers = []model.ContainerInstance{plantest.Exited(v.Containers[0], 0, time.Minute), plantest.Exited(v.Containers[1], 0, time.Minute),
					plantest.Inst(p, "debug", "c-debug", model.ContainerRunning, 0, time.Minute)}
			},
			want: planSummary{KillPod: plan.KillReasonAllContainersDone, Sandbox: "use:sb1", KillIDs: []string{"sb1"}, Kill: []string{"debug/c-debug:PodKilled"}},
		},
		{
			name:      "ephemeral container is killed with a deleted pod",
			mutatePod: func(p *corev1.Pod) { withDebug(p); p.DeletionTimestamp = &metav1.Time{Time: plantest.T0} },
			mutateView: func(p *corev1.Pod, v *model.RuntimeView) {
				v.Containers = append(v.Containers, plantest.Inst(p, "debug", "c-debug", model.ContainerRunning, 0, time.Minute))
			},
			want: planSummary{KillPod: plan.KillReasonPodDeleted, Sandbox: "use:sb1", KillIDs: []string{"sb1"},
				Kill: []string{"app/c-app:PodKilled", "helper/c-helper:PodKilled", "debug/c-debug:PodKilled"}},
		},
		{
			name: "ephemeral container the node no longer names is killed",
			mutateView: func(p *corev1.Pod, v *model.RuntimeView) {
				v.Containers = append(v.Containers, model.ContainerInstance{ID: "c-debug", SandboxID: "sb1", Name: "debug", State: model.ContainerRunning})
			},
			want: planSummary{Sandbox: "use:sb1", Kill: []string{"debug/c-debug:NotInSpec"}},
		},

		// Pods that must only stop.
		{
			name:      "deleted pod is killed and nothing restarts",
			mutatePod: func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: plantest.T0} },
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				v.Containers[0] = plantest.Exited(v.Containers[0], 1, time.Minute)
			},
			want: planSummary{KillPod: plan.KillReasonPodDeleted, Sandbox: "use:sb1", KillIDs: []string{"sb1"}, Kill: []string{"app/c-app:PodKilled"}},
		},
		{
			name:       "deleted pod without sandbox creates none",
			mutatePod:  func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: plantest.T0} },
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) { *v = model.RuntimeView{} },
			want:       planSummary{KillPod: plan.KillReasonPodDeleted, Sandbox: "none:PodNotRunnable"},
		},
		{
			name:      "terminal phase Failed is sticky and nothing restarts",
			mutatePod: func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed },
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				v.Sandboxes[0].State = model.SandboxNotReady
				v.Containers = []model.ContainerInstance{plantest.Exited(v.Containers[0], 1, time.Minute), plantest.Exited(v.Containers[1], 1, time.Minute)}
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
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
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
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
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
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
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
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				v.Containers[0] = plantest.Exited(v.Containers[0], 0, time.Hour)
			},
			want: keep(),
		},

		// Crash-loop back-off.
		{
			name: "first crash restarts at once",
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				v.Containers[1] = plantest.Exited(v.Containers[1], 1, time.Second)
			},
			want: planSummary{Sandbox: "use:sb1", Start: []string{"app#1:Exited"}},
		},
		{
			name: "second crash within 10s is in CrashLoopBackOff",
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				p := mp()
				v.Containers = []model.ContainerInstance{
					plantest.Exited(plantest.Inst(p, "app", "c-app2", model.ContainerExited, 1, 5*time.Second), 1, 3*time.Second),
					v.Containers[0],
					plantest.Exited(plantest.Inst(p, "app", "c-app", model.ContainerExited, 0, time.Minute), 1, 30*time.Second),
				}
			},
			want: planSummary{Sandbox: "use:sb1", BackOff: []string{"app:CrashLoopBackOff@+7s"}},
		},
		{
			name: "second crash after 10s restarts",
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				p := mp()
				v.Containers = []model.ContainerInstance{
					plantest.Exited(plantest.Inst(p, "app", "c-app2", model.ContainerExited, 1, 15*time.Second), 1, 11*time.Second),
					v.Containers[0],
				}
			},
			want: planSummary{Sandbox: "use:sb1", Start: []string{"app#2:Exited"}},
		},
		{
			name: "back-off doubles per restart count",
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				p := mp()
				v.Containers = []model.ContainerInstance{
					plantest.Exited(plantest.Inst(p, "app", "c-app4", model.ContainerExited, 4, 5*time.Second), 1, time.Second),
					v.Containers[0],
					plantest.Exited(plantest.Inst(p, "app", "c-app3", model.ContainerExited, 3, 2*time.Minute), 1, 100*time.Second),
				}
			},
			// restart counts 3 and 4: two failures in the retained run, 10s.
			want: planSummary{Sandbox: "use:sb1", BackOff: []string{"app:CrashLoopBackOff@+9s"}},
		},
		{
			name: "back-off counts restarts across garbage-collected instances",
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				p := mp()
				v.Containers = []model.ContainerInstance{
					plantest.Exited(plantest.Inst(p, "app", "c-app9", model.ContainerExited, 9, 5*time.Second), 1, time.Second),
					plantest.Exited(plantest.Inst(p, "app", "c-app6", model.ContainerExited, 6, 10*time.Minute), 1, 9*time.Minute),
				}
			},
			// restarts 6..9 are four failures: 10s×2^2 = 40s.
			want: planSummary{Sandbox: "use:sb1", Start: []string{"helper#0:NotStarted"}, BackOff: []string{"app:CrashLoopBackOff@+39s"}},
		},
		{
			name: "back-off is capped at 300s",
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				p := mp()
				v.Containers = []model.ContainerInstance{
					plantest.Exited(plantest.Inst(p, "app", "c-app30", model.ContainerExited, 30, 5*time.Second), 1, time.Second),
					v.Containers[0],
					plantest.Exited(plantest.Inst(p, "app", "c-app1", model.ContainerExited, 1, 5*time.Minute), 1, 5*time.Minute-time.Second),
				}
			},
			want: planSummary{Sandbox: "use:sb1", BackOff: []string{"app:CrashLoopBackOff@+4m59s"}},
		},
		{
			name: "back-off resets after 10 minutes of running",
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				p := mp()
				long := plantest.Exited(plantest.Inst(p, "app", "c-app5", model.ContainerExited, 5, 11*time.Minute), 1, time.Second)
				v.Containers = []model.ContainerInstance{
					long,
					v.Containers[0],
					plantest.Exited(plantest.Inst(p, "app", "c-app4", model.ContainerExited, 4, 12*time.Minute), 1, 11*time.Minute+time.Second),
				}
			},
			want: planSummary{Sandbox: "use:sb1", Start: []string{"app#6:Exited"}},
		},
		{
			name:      "changed spec starts a new back-off",
			mutatePod: func(p *corev1.Pod) { p.Spec.Containers[0].Image = "busybox:2" },
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				p := mp()
				v.Containers = []model.ContainerInstance{
					plantest.Exited(plantest.Inst(p, "app", "c-app2", model.ContainerExited, 1, 5*time.Second), 1, 3*time.Second),
					v.Containers[0],
					plantest.Exited(plantest.Inst(p, "app", "c-app", model.ContainerExited, 0, time.Minute), 1, 30*time.Second),
				}
			},
			want: planSummary{Sandbox: "use:sb1", Start: []string{"app#2:Exited"}},
		},
		{
			name: "image pull back-off after a failed pull",
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				v.Containers = v.Containers[1:]
				v.PullFailures = []model.PullFailure{{Image: "busybox:1", Failures: 2, At: plantest.T0.Add(-5 * time.Second)}}
			},
			want: planSummary{Sandbox: "use:sb1", BackOff: []string{"helper:ImagePullBackOff@+15s"}},
		},
		{
			name: "image pull back-off holds back every container of the pod with the image",
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				v.Containers = nil
				v.PullFailures = []model.PullFailure{{Image: "busybox:1", Failures: 1, At: plantest.T0.Add(-5 * time.Second)}}
			},
			want: planSummary{Sandbox: "use:sb1", BackOff: []string{"app:ImagePullBackOff@+5s", "helper:ImagePullBackOff@+5s"}},
		},
		{
			name: "image pull retried once its back-off passed",
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				v.Containers = v.Containers[1:]
				v.PullFailures = []model.PullFailure{{Image: "busybox:1", Failures: 1, At: plantest.T0.Add(-10 * time.Second)}}
			},
			want: planSummary{Sandbox: "use:sb1", Start: []string{"helper#0:NotStarted"}},
		},
		{
			name:      "pull failure of an old image does not hold back a new one",
			mutatePod: func(p *corev1.Pod) { p.Spec.Containers[1].Image = "busybox:2" },
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				v.Containers = v.Containers[1:]
				v.PullFailures = []model.PullFailure{{Image: "busybox:1", Failures: 3, At: plantest.T0}}
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
			mutateView: func(p *corev1.Pod, v *model.RuntimeView) {
				v.Containers = []model.ContainerInstance{plantest.Inst(p, "init-a", "c-a", model.ContainerRunning, 0, time.Second)}
			},
			want: planSummary{Sandbox: "use:sb1"},
		},
		{
			name:      "next init container starts after the previous succeeded",
			mutatePod: plantest.WithInit("init-a", "init-b"),
			mutateView: func(p *corev1.Pod, v *model.RuntimeView) {
				v.Containers = []model.ContainerInstance{plantest.Exited(plantest.Inst(p, "init-a", "c-a", model.ContainerExited, 0, time.Minute), 0, time.Second)}
			},
			want: planSummary{Sandbox: "use:sb1", StartInit: []string{"init-b#0:NextInitContainer"}},
		},
		{
			name:      "regular containers start after the last init container succeeded",
			mutatePod: plantest.WithInit("init-a", "init-b"),
			mutateView: func(p *corev1.Pod, v *model.RuntimeView) {
				v.Containers = []model.ContainerInstance{
					plantest.Exited(plantest.Inst(p, "init-b", "c-b", model.ContainerExited, 0, time.Minute), 0, time.Second),
					plantest.Exited(plantest.Inst(p, "init-a", "c-a", model.ContainerExited, 0, 2*time.Minute), 0, time.Minute),
				}
			},
			want: planSummary{Sandbox: "use:sb1", Start: []string{"app#0:NotStarted", "helper#0:NotStarted"}},
		},
		{
			name:      "failed init container under Never fails the pod",
			mutatePod: plantest.Chain(plantest.WithInit("init-a", "init-b"), plantest.Policy(corev1.RestartPolicyNever)),
			mutateView: func(p *corev1.Pod, v *model.RuntimeView) {
				v.Containers = []model.ContainerInstance{plantest.Exited(plantest.Inst(p, "init-a", "c-a", model.ContainerExited, 0, time.Minute), 2, time.Second)}
			},
			want: planSummary{KillPod: plan.KillReasonInitContainerFailed, Sandbox: "use:sb1", KillIDs: []string{"sb1"}},
		},
		{
			name:      "failed init container under OnFailure is retried",
			mutatePod: plantest.Chain(plantest.WithInit("init-a", "init-b"), plantest.Policy(corev1.RestartPolicyOnFailure)),
			mutateView: func(p *corev1.Pod, v *model.RuntimeView) {
				v.Containers = []model.ContainerInstance{plantest.Exited(plantest.Inst(p, "init-a", "c-a", model.ContainerExited, 0, time.Minute), 2, time.Minute)}
			},
			want: planSummary{Sandbox: "use:sb1", StartInit: []string{"init-a#1:InitContainerFailed"}},
		},
		{
			name:      "failed init container is retried with back-off",
			mutatePod: plantest.WithInit("init-a", "init-b"),
			mutateView: func(p *corev1.Pod, v *model.RuntimeView) {
				v.Containers = []model.ContainerInstance{
					plantest.Exited(plantest.Inst(p, "init-a", "c-a2", model.ContainerExited, 1, 5*time.Second), 2, 2*time.Second),
					plantest.Exited(plantest.Inst(p, "init-a", "c-a1", model.ContainerExited, 0, time.Minute), 2, 30*time.Second),
				}
			},
			want: planSummary{Sandbox: "use:sb1", BackOff: []string{"init-a:CrashLoopBackOff@+8s"}},
		},
		{
			name:      "unknown init container under Never fails the pod",
			mutatePod: plantest.Chain(plantest.WithInit("init-a"), plantest.Policy(corev1.RestartPolicyNever)),
			mutateView: func(p *corev1.Pod, v *model.RuntimeView) {
				v.Containers = []model.ContainerInstance{plantest.Inst(p, "init-a", "c-a", model.ContainerUnknown, 0, time.Minute)}
			},
			want: planSummary{KillPod: plan.KillReasonInitContainerFailed, Sandbox: "use:sb1", KillIDs: []string{"sb1"}},
		},
		{
			name:      "unknown init container is killed and restarted",
			mutatePod: plantest.WithInit("init-a"),
			mutateView: func(p *corev1.Pod, v *model.RuntimeView) {
				v.Containers = []model.ContainerInstance{plantest.Inst(p, "init-a", "c-a", model.ContainerUnknown, 0, time.Minute)}
			},
			want: planSummary{Sandbox: "use:sb1", Kill: []string{"init-a/c-a:Unknown"}, StartInit: []string{"init-a#1:Unknown"}},
		},
		{
			name:      "created init container is restarted",
			mutatePod: plantest.WithInit("init-a"),
			mutateView: func(p *corev1.Pod, v *model.RuntimeView) {
				v.Containers = []model.ContainerInstance{plantest.Inst(p, "init-a", "c-a", model.ContainerCreated, 0, time.Minute)}
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
			mutateView: func(p *corev1.Pod, v *model.RuntimeView) {
				v.Containers = []model.ContainerInstance{plantest.Inst(p, "app", "c-app", model.ContainerRunning, 0, time.Minute)}
			},
			want: planSummary{Sandbox: "use:sb1", Start: []string{"helper#0:NotStarted"}},
		},
		{
			// Upstream: HasAnyActiveRegularContainerStarted counts any
			// state; the init containers may have been removed since.
			name:      "an exited regular container of the current sandbox counts as initialized",
			mutatePod: plantest.WithInit("init-a"),
			mutateView: func(p *corev1.Pod, v *model.RuntimeView) {
				v.Containers = []model.ContainerInstance{plantest.Exited(plantest.Inst(p, "app", "c-app", model.ContainerExited, 0, time.Minute), 1, time.Minute)}
			},
			want: planSummary{Sandbox: "use:sb1", Start: []string{"app#1:Exited", "helper#0:NotStarted"}},
		},
		{
			// Upstream's "stale main container from a previous sandbox
			// must not mark pod as initialized".
			name:      "a regular container of a previous sandbox does not count as initialized",
			mutatePod: plantest.WithInit("init-a"),
			mutateView: func(p *corev1.Pod, v *model.RuntimeView) {
				v.Sandboxes = append(v.Sandboxes, plantest.Sandbox("sb0", 0, false, 2*time.Hour))
				app := plantest.Inst(p, "app", "c-app", model.ContainerCreated, 0, time.Minute)
				app.SandboxID = "sb0"
				v.Containers = []model.ContainerInstance{app}
			},
			want: planSummary{Sandbox: "use:sb1", StartInit: []string{"init-a#0:NotStarted"}},
		},

		// Native sidecars.
		{
			name:      "sidecar without startup probe gates the next init container on running",
			mutatePod: plantest.WithInit("log-sidecar", "init-b"),
			mutateView: func(p *corev1.Pod, v *model.RuntimeView) {
				v.Containers = []model.ContainerInstance{plantest.Inst(p, "log-sidecar", "c-s", model.ContainerRunning, 0, time.Second)}
			},
			want: planSummary{Sandbox: "use:sb1", StartInit: []string{"init-b#0:NextInitContainer"}},
		},
		{
			name:      "sidecar with startup probe not yet run holds the next container",
			mutatePod: plantest.Chain(plantest.WithInit("log-sidecar"), withSidecarStartup),
			mutateView: func(p *corev1.Pod, v *model.RuntimeView) {
				v.Containers = []model.ContainerInstance{plantest.Inst(p, "log-sidecar", "c-s", model.ContainerRunning, 0, time.Second)}
			},
			want: planSummary{Sandbox: "use:sb1"},
		},
		{
			name:      "sidecar startup success starts regular containers",
			mutatePod: plantest.Chain(plantest.WithInit("log-sidecar"), withSidecarStartup),
			mutateView: func(p *corev1.Pod, v *model.RuntimeView) {
				v.Containers = []model.ContainerInstance{plantest.Inst(p, "log-sidecar", "c-s", model.ContainerRunning, 0, time.Second)}
			},
			probes: model.ProbeResults{Startup: map[string]model.ProbeResult{"c-s": model.ProbeSuccess}},
			want:   planSummary{Sandbox: "use:sb1", Start: []string{"app#0:NotStarted", "helper#0:NotStarted"}},
		},
		{
			name:      "sidecar startup failure kills and restarts it",
			mutatePod: plantest.Chain(plantest.WithInit("log-sidecar"), withSidecarStartup),
			mutateView: func(p *corev1.Pod, v *model.RuntimeView) {
				v.Containers = []model.ContainerInstance{plantest.Inst(p, "log-sidecar", "c-s", model.ContainerRunning, 0, time.Second)}
			},
			probes: model.ProbeResults{Startup: map[string]model.ProbeResult{"c-s": model.ProbeFailure}},
			want:   planSummary{Sandbox: "use:sb1", Kill: []string{"log-sidecar/c-s:StartupProbeFailed"}, StartInit: []string{"log-sidecar#1:StartupProbeFailed"}},
		},
		{
			name:      "exited sidecar restarts regardless of restartPolicy Never",
			mutatePod: plantest.Chain(plantest.WithInit("log-sidecar"), plantest.Policy(corev1.RestartPolicyNever)),
			mutateView: func(p *corev1.Pod, v *model.RuntimeView) {
				v.Containers = append([]model.ContainerInstance{plantest.Exited(plantest.Inst(p, "log-sidecar", "c-s", model.ContainerExited, 0, time.Hour), 0, time.Minute)}, v.Containers...)
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
			mutateView: func(p *corev1.Pod, v *model.RuntimeView) {
				v.Containers = append([]model.ContainerInstance{plantest.Inst(p, "log-sidecar", "c-s", model.ContainerRunning, 0, time.Hour)}, v.Containers...)
			},
			probes: model.ProbeResults{Liveness: map[string]model.ProbeResult{"c-s": model.ProbeFailure}},
			want:   planSummary{Sandbox: "use:sb1", Kill: []string{"log-sidecar/c-s:LivenessProbeFailed"}, StartInit: []string{"log-sidecar#1:LivenessProbeFailed"}},
		},
		{
			name:      "sidecar with changed definition is restarted",
			mutatePod: plantest.Chain(plantest.WithInit("log-sidecar"), func(p *corev1.Pod) { p.Spec.InitContainers[0].Image = "busybox:2" }),
			mutateView: func(p *corev1.Pod, v *model.RuntimeView) {
				old := p.DeepCopy()
				old.Spec.InitContainers[0].Image = "busybox:1"
				v.Containers = append([]model.ContainerInstance{plantest.Inst(old, "log-sidecar", "c-s", model.ContainerRunning, 0, time.Hour)}, v.Containers...)
			},
			want: planSummary{Sandbox: "use:sb1", Kill: []string{"log-sidecar/c-s:DefinitionChanged"}, StartInit: []string{"log-sidecar#1:DefinitionChanged"}},
		},
		{
			name:      "sidecars are stopped once all regular containers are done",
			mutatePod: plantest.Chain(plantest.WithInit("log-sidecar"), plantest.Policy(corev1.RestartPolicyNever)),
			mutateView: func(p *corev1.Pod, v *model.RuntimeView) {
				v.Containers = []model.ContainerInstance{
					plantest.Exited(v.Containers[0], 0, time.Minute), plantest.Exited(v.Containers[1], 0, time.Minute),
					plantest.Inst(p, "log-sidecar", "c-s", model.ContainerRunning, 0, time.Hour),
				}
			},
			want: planSummary{KillPod: plan.KillReasonAllContainersDone, Sandbox: "use:sb1", KillIDs: []string{"sb1"}, Kill: []string{"log-sidecar/c-s:PodKilled"}},
		},
		{
			name:      "killing the pod stops regular containers before sidecars in reverse order",
			mutatePod: plantest.Chain(plantest.WithInit("a-sidecar", "b-sidecar"), func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: plantest.T0} }),
			mutateView: func(p *corev1.Pod, v *model.RuntimeView) {
				v.Containers = append(v.Containers,
					plantest.Inst(p, "b-sidecar", "c-b", model.ContainerRunning, 0, 2*time.Hour),
					plantest.Inst(p, "a-sidecar", "c-a", model.ContainerRunning, 0, 3*time.Hour))
			},
			want: planSummary{KillPod: plan.KillReasonPodDeleted, Sandbox: "use:sb1", KillIDs: []string{"sb1"},
				Kill: []string{"app/c-app:PodKilled", "helper/c-helper:PodKilled", "b-sidecar/c-b:PodKilled", "a-sidecar/c-a:PodKilled"}},
		},
		{
			name:      "sidecar in back-off does not hold back regular containers",
			mutatePod: plantest.WithInit("log-sidecar"),
			mutateView: func(p *corev1.Pod, v *model.RuntimeView) {
				v.Containers = []model.ContainerInstance{
					v.Containers[0],
					plantest.Exited(plantest.Inst(p, "log-sidecar", "c-s2", model.ContainerExited, 1, 5*time.Second), 1, 2*time.Second),
					plantest.Exited(plantest.Inst(p, "log-sidecar", "c-s1", model.ContainerExited, 0, time.Minute), 1, 20*time.Second),
					v.Containers[1],
				}
				v.Containers[0] = plantest.Exited(v.Containers[0], 0, time.Minute)
			},
			want: planSummary{Sandbox: "use:sb1", Start: []string{"helper#1:Exited"}, BackOff: []string{"log-sidecar:CrashLoopBackOff@+8s"}},
		},
		{
			name:      "init container in back-off holds back everything after it",
			mutatePod: plantest.WithInit("init-a"),
			mutateView: func(p *corev1.Pod, v *model.RuntimeView) {
				v.Sandboxes[0].State = model.SandboxNotReady
				v.Containers = []model.ContainerInstance{
					plantest.Exited(plantest.Inst(p, "init-a", "c-a2", model.ContainerExited, 1, 5*time.Second), 1, 2*time.Second),
					plantest.Exited(plantest.Inst(p, "init-a", "c-a1", model.ContainerExited, 0, time.Minute), 1, 20*time.Second),
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
	got := plan.ComputePodActions(pod, plantest.BaseView(), model.ProbeResults{}, plantest.T0, plan.BackoffPolicy{})
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
	view.Containers = []model.ContainerInstance{
		plantest.Exited(plantest.Inst(p, "app", "c-app2", model.ContainerExited, 1, 5*time.Second), 1, 3*time.Second),
		view.Containers[0],
		plantest.Exited(plantest.Inst(p, "app", "c-app", model.ContainerExited, 0, time.Minute), 1, 30*time.Second),
	}
	got = plan.ComputePodActions(plantest.BasePod(), view, model.ProbeResults{}, plantest.T0, plan.BackoffPolicy{})
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
