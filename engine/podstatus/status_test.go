package podstatus

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/plan/plantest"
	"github.com/podsync/podsync/validation"
)

// statusSummary is the golden form of a pod status: phase and reason,
// conditions as "Type=Status(Reason)", and each container as
// "name: state last=state restarts=N ready started".
type statusSummary struct {
	Phase      string
	Conditions []string
	Init       []string
	Containers []string
	PodIPs     string
}

func stateString(s corev1.ContainerState) string {
	switch {
	case s.Running != nil:
		return "running"
	case s.Terminated != nil:
		t := s.Terminated
		out := fmt.Sprintf("terminated(%s,%d", t.Reason, t.ExitCode)
		if t.Message != "" {
			out += "," + t.Message
		}
		return out + ")"
	case s.Waiting != nil:
		return "waiting(" + s.Waiting.Reason + ")"
	}
	return "none"
}

func summarizeStatuses(ss []corev1.ContainerStatus) []string {
	var out []string
	for _, s := range ss {
		line := s.Name + ": " + stateString(s.State)
		if l := stateString(s.LastTerminationState); l != "none" {
			line += " last=" + l
		}
		line += fmt.Sprintf(" restarts=%d", s.RestartCount)
		if s.Ready {
			line += " ready"
		}
		if s.Started != nil && *s.Started {
			line += " started"
		}
		out = append(out, line)
	}
	return out
}

func summarizeStatus(s corev1.PodStatus) statusSummary {
	out := statusSummary{Phase: string(s.Phase), Init: summarizeStatuses(s.InitContainerStatuses), Containers: summarizeStatuses(s.ContainerStatuses)}
	if s.Reason != "" {
		out.Phase += "(" + s.Reason + ")"
	}
	for _, c := range s.Conditions {
		if c.Type == corev1.PodScheduled {
			continue
		}
		line := string(c.Type) + "=" + string(c.Status)
		if c.Reason != "" {
			line += "(" + c.Reason + ")"
		}
		out.Conditions = append(out.Conditions, line)
	}
	var ips []string
	for _, ip := range s.PodIPs {
		ips = append(ips, ip.IP)
	}
	out.PodIPs = strings.Join(ips, ",")
	return out
}

var (
	condAllTrue  = []string{"PodReadyToStartContainers=True", "Initialized=True", "Ready=True", "ContainersReady=True"}
	condNotReady = []string{"PodReadyToStartContainers=True", "Initialized=True", "Ready=False(ContainersNotReady)", "ContainersReady=False(ContainersNotReady)"}
)

func TestComputePodStatus(t *testing.T) {
	mp := plantest.BasePod
	initPending := []string{"PodReadyToStartContainers=True", "Initialized=False(ContainersNotInitialized)", "Ready=False(ContainersNotReady)", "ContainersReady=False(ContainersNotReady)"}
	tests := []struct {
		name       string
		mutatePod  func(*corev1.Pod)
		mutateView func(*corev1.Pod, *model.RuntimeView)
		probes     model.ProbeResults
		want       statusSummary
	}{
		{
			name: "all running is Running and Ready",
			want: statusSummary{Phase: "Running", Conditions: condAllTrue, PodIPs: "10.0.0.5",
				Containers: []string{"app: running restarts=0 ready started", "helper: running restarts=0 ready started"}},
		},
		{
			name:       "no sandbox and no containers is Pending with ContainerCreating",
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) { *v = model.RuntimeView{} },
			want: statusSummary{Phase: "Pending",
				Conditions: []string{"PodReadyToStartContainers=False", "Initialized=True", "Ready=False(ContainersNotReady)", "ContainersReady=False(ContainersNotReady)"},
				Containers: []string{"app: waiting(ContainerCreating) restarts=0", "helper: waiting(ContainerCreating) restarts=0"}},
		},
		{
			name:       "a created container keeps the pod Pending",
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) { v.Containers[0].State = model.ContainerCreated },
			want: statusSummary{Phase: "Pending", Conditions: condNotReady, PodIPs: "10.0.0.5",
				Containers: []string{"app: running restarts=0 ready started", "helper: waiting() restarts=0"}},
		},
		{
			name:      "readiness is false until the readiness probe passed",
			mutatePod: func(p *corev1.Pod) { p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{} },
			want: statusSummary{Phase: "Running", Conditions: condNotReady, PodIPs: "10.0.0.5",
				Containers: []string{"app: running restarts=0 started", "helper: running restarts=0 ready started"}},
		},
		{
			name:      "readiness probe success makes the container ready",
			mutatePod: func(p *corev1.Pod) { p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{} },
			probes:    model.ProbeResults{Readiness: map[string]model.ProbeResult{"c-app": model.ProbeSuccess}},
			want: statusSummary{Phase: "Running", Conditions: condAllTrue, PodIPs: "10.0.0.5",
				Containers: []string{"app: running restarts=0 ready started", "helper: running restarts=0 ready started"}},
		},
		{
			name:      "readiness probe failure makes the container unready",
			mutatePod: func(p *corev1.Pod) { p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{} },
			probes:    model.ProbeResults{Readiness: map[string]model.ProbeResult{"c-app": model.ProbeFailure}},
			want: statusSummary{Phase: "Running", Conditions: condNotReady, PodIPs: "10.0.0.5",
				Containers: []string{"app: running restarts=0 started", "helper: running restarts=0 ready started"}},
		},
		{
			name:      "a container is not started nor ready until its startup probe passed",
			mutatePod: func(p *corev1.Pod) { p.Spec.Containers[1].StartupProbe = &corev1.Probe{} },
			want: statusSummary{Phase: "Running", Conditions: condNotReady, PodIPs: "10.0.0.5",
				Containers: []string{"app: running restarts=0 ready started", "helper: running restarts=0"}},
		},
		{
			name: "crash-looping container is waiting CrashLoopBackOff with its last state",
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				p := mp()
				v.Containers = []model.ContainerInstance{
					plantest.Exited(plantest.Inst(p, "app", "c-app2", model.ContainerExited, 1, 5*time.Second), 1, 3*time.Second),
					v.Containers[0],
					plantest.Exited(plantest.Inst(p, "app", "c-app", model.ContainerExited, 0, time.Minute), 1, 30*time.Second),
				}
				v.Containers[0].Reason = "Error"
			},
			want: statusSummary{Phase: "Running", Conditions: condNotReady, PodIPs: "10.0.0.5",
				Containers: []string{"app: waiting(CrashLoopBackOff) last=terminated(Error,1) restarts=1", "helper: running restarts=0 ready started"}},
		},
		{
			name: "exited container about to restart shows terminated with the previous as last state",
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				p := mp()
				v.Containers = []model.ContainerInstance{
					plantest.Exited(plantest.Inst(p, "app", "c-app3", model.ContainerExited, 3, 5*time.Minute), 137, 4*time.Minute),
					v.Containers[0],
					plantest.Exited(plantest.Inst(p, "app", "c-app2", model.ContainerExited, 2, 30*time.Minute), 0, 20*time.Minute),
				}
				v.Containers[0].Reason = "OOMKilled"
			},
			want: statusSummary{Phase: "Running", Conditions: condNotReady, PodIPs: "10.0.0.5",
				Containers: []string{"app: terminated(OOMKilled,137) last=terminated(Completed,0) restarts=3", "helper: running restarts=0 ready started"}},
		},
		{
			name:      "all succeeded under OnFailure is Succeeded",
			mutatePod: plantest.Policy(corev1.RestartPolicyOnFailure),
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				v.Containers = []model.ContainerInstance{plantest.Exited(v.Containers[0], 0, time.Minute), plantest.Exited(v.Containers[1], 0, time.Minute)}
			},
			want: statusSummary{Phase: "Succeeded", PodIPs: "10.0.0.5",
				Conditions: []string{"PodReadyToStartContainers=True", "Initialized=True", "Ready=False(PodCompleted)", "ContainersReady=False(PodCompleted)"},
				Containers: []string{"app: terminated(Completed,0) restarts=0", "helper: terminated(Completed,0) restarts=0"}},
		},
		{
			name:      "one failure under Never is Failed",
			mutatePod: plantest.Policy(corev1.RestartPolicyNever),
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				v.Containers = []model.ContainerInstance{plantest.Exited(v.Containers[0], 2, time.Minute), plantest.Exited(v.Containers[1], 0, time.Minute)}
				v.Containers[0].Message = "boom"
				v.Containers[0].TerminationMessage = "disk full"
			},
			want: statusSummary{Phase: "Failed", PodIPs: "10.0.0.5",
				Conditions: []string{"PodReadyToStartContainers=True", "Initialized=True", "Ready=False(PodFailed)", "ContainersReady=False(PodFailed)"},
				Containers: []string{"app: terminated(Completed,0) restarts=0", "helper: terminated(Error,2,boom: disk full) restarts=0"}},
		},
		{
			name:      "one failure restarting under OnFailure is Running",
			mutatePod: plantest.Policy(corev1.RestartPolicyOnFailure),
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				v.Containers = []model.ContainerInstance{plantest.Exited(v.Containers[0], 2, time.Minute), plantest.Exited(v.Containers[1], 0, time.Minute)}
			},
			want: statusSummary{Phase: "Running", Conditions: condNotReady, PodIPs: "10.0.0.5",
				Containers: []string{"app: terminated(Completed,0) restarts=0", "helper: terminated(Error,2) restarts=0"}},
		},
		{
			name: "all exited under Always is Running while they restart",
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				v.Containers = []model.ContainerInstance{plantest.Exited(v.Containers[0], 0, time.Minute), plantest.Exited(v.Containers[1], 0, time.Minute)}
			},
			want: statusSummary{Phase: "Running", Conditions: condNotReady, PodIPs: "10.0.0.5",
				Containers: []string{"app: terminated(Completed,0) restarts=0", "helper: terminated(Completed,0) restarts=0"}},
		},
		{
			name:      "deleted pod with all exited under Always is terminal Succeeded",
			mutatePod: func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: plantest.T0} },
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				v.Containers = []model.ContainerInstance{plantest.Exited(v.Containers[0], 0, time.Minute), plantest.Exited(v.Containers[1], 0, time.Minute)}
			},
			want: statusSummary{Phase: "Succeeded", PodIPs: "10.0.0.5",
				Conditions: []string{"PodReadyToStartContainers=True", "Initialized=True", "Ready=False(PodCompleted)", "ContainersReady=False(PodCompleted)"},
				Containers: []string{"app: terminated(Completed,0) restarts=0", "helper: terminated(Completed,0) restarts=0"}},
		},
		{
			name:      "deleted pod with a failure under Always is terminal Failed",
			mutatePod: func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: plantest.T0} },
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				v.Containers = []model.ContainerInstance{plantest.Exited(v.Containers[0], 137, time.Minute), plantest.Exited(v.Containers[1], 0, time.Minute)}
			},
			want: statusSummary{Phase: "Failed", PodIPs: "10.0.0.5",
				Conditions: []string{"PodReadyToStartContainers=True", "Initialized=True", "Ready=False(PodFailed)", "ContainersReady=False(PodFailed)"},
				Containers: []string{"app: terminated(Completed,0) restarts=0", "helper: terminated(Error,137) restarts=0"}},
		},
		{
			name:      "terminal phase sticks even if containers run again",
			mutatePod: func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed; p.Status.Reason = "Evicted" },
			want: statusSummary{Phase: "Failed(Evicted)", PodIPs: "10.0.0.5",
				Conditions: []string{"PodReadyToStartContainers=True", "Initialized=True", "Ready=False(PodFailed)", "ContainersReady=False(PodFailed)"},
				Containers: []string{"app: running restarts=0 ready started", "helper: running restarts=0 ready started"}},
		},
		{
			name: "active deadline exceeded fails the pod",
			mutatePod: func(p *corev1.Pod) {
				p.Spec.ActiveDeadlineSeconds = ptr.To[int64](10)
				p.Status.StartTime = &metav1.Time{Time: plantest.T0.Add(-time.Minute)}
			},
			want: statusSummary{Phase: "Failed(DeadlineExceeded)", PodIPs: "10.0.0.5",
				Conditions: []string{"PodReadyToStartContainers=True", "Initialized=True", "Ready=False(PodFailed)", "ContainersReady=False(PodFailed)"},
				Containers: []string{"app: running restarts=0 ready started", "helper: running restarts=0 ready started"}},
		},
		{
			name: "backoff limit exceeded fails the pod",
			mutatePod: func(p *corev1.Pod) {
				p.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
				p.Annotations = map[string]string{validation.AnnotationBackoffLimit: "1"}
			},
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				// Within the crash-loop back-off, which does not show: the
				// container never starts again.
				p := mp()
				v.Containers = []model.ContainerInstance{
					plantest.Exited(plantest.Inst(p, "app", "c-app2", model.ContainerExited, 1, 5*time.Second), 1, 3*time.Second),
					v.Containers[0],
					plantest.Exited(plantest.Inst(p, "app", "c-app", model.ContainerExited, 0, time.Minute), 1, 30*time.Second),
				}
				v.Containers[0].Reason = "Error"
			},
			want: statusSummary{Phase: "Failed(BackoffLimitExceeded)", PodIPs: "10.0.0.5",
				Conditions: []string{"PodReadyToStartContainers=True", "Initialized=True", "Ready=False(PodFailed)", "ContainersReady=False(PodFailed)"},
				Containers: []string{"app: terminated(Error,1) last=terminated(Error,1) restarts=1", "helper: running restarts=0 ready started"}},
		},
		{
			name: "image pull failure is ErrImagePull once its back-off passed",
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				v.Containers = v.Containers[1:]
				v.PullFailures = []model.PullFailure{{Image: "busybox:1", Failures: 1, At: plantest.T0.Add(-time.Minute), Message: "not found"}}
			},
			want: statusSummary{Phase: "Pending", Conditions: condNotReady, PodIPs: "10.0.0.5",
				Containers: []string{"app: running restarts=0 ready started", "helper: waiting(ErrImagePull) restarts=0"}},
		},
		{
			name: "image pull in back-off is ImagePullBackOff",
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				v.Containers = v.Containers[1:]
				v.PullFailures = []model.PullFailure{{Image: "busybox:1", Failures: 2, At: plantest.T0.Add(-time.Second)}}
			},
			want: statusSummary{Phase: "Pending", Conditions: condNotReady, PodIPs: "10.0.0.5",
				Containers: []string{"app: running restarts=0 ready started", "helper: waiting(ImagePullBackOff) restarts=0"}},
		},

		// Init containers and sidecars.
		{
			name:       "init containers not started are PodInitializing",
			mutatePod:  plantest.WithInit("init-a", "init-b"),
			mutateView: plantest.SetContainers(),
			want: statusSummary{Phase: "Pending", Conditions: initPending, PodIPs: "10.0.0.5",
				Init:       []string{"init-a: waiting(PodInitializing) restarts=0", "init-b: waiting(PodInitializing) restarts=0"},
				Containers: []string{"app: waiting(PodInitializing) restarts=0", "helper: waiting(PodInitializing) restarts=0"}},
		},
		{
			name:      "running init container keeps the pod Pending",
			mutatePod: plantest.WithInit("init-a"),
			mutateView: func(p *corev1.Pod, v *model.RuntimeView) {
				v.Containers = []model.ContainerInstance{plantest.Inst(p, "init-a", "c-a", model.ContainerRunning, 0, time.Second)}
			},
			want: statusSummary{Phase: "Pending", Conditions: initPending, PodIPs: "10.0.0.5",
				Init:       []string{"init-a: running restarts=0 started"},
				Containers: []string{"app: waiting(PodInitializing) restarts=0", "helper: waiting(PodInitializing) restarts=0"}},
		},
		{
			name:      "failed init container under Never fails the pod",
			mutatePod: plantest.Chain(plantest.WithInit("init-a"), plantest.Policy(corev1.RestartPolicyNever)),
			mutateView: func(p *corev1.Pod, v *model.RuntimeView) {
				v.Containers = []model.ContainerInstance{plantest.Exited(plantest.Inst(p, "init-a", "c-a", model.ContainerExited, 0, time.Minute), 1, time.Second)}
			},
			want: statusSummary{Phase: "Failed", PodIPs: "10.0.0.5",
				Conditions: []string{"PodReadyToStartContainers=True", "Initialized=False(ContainersNotInitialized)", "Ready=False(PodFailed)", "ContainersReady=False(PodFailed)"},
				Init:       []string{"init-a: terminated(Error,1) restarts=0"},
				Containers: []string{"app: waiting(PodInitializing) restarts=0", "helper: waiting(PodInitializing) restarts=0"}},
		},
		{
			name:      "failed init container in back-off keeps the pod Pending",
			mutatePod: plantest.WithInit("init-a"),
			mutateView: func(p *corev1.Pod, v *model.RuntimeView) {
				v.Containers = []model.ContainerInstance{
					plantest.Exited(plantest.Inst(p, "init-a", "c-a2", model.ContainerExited, 1, 5*time.Second), 1, time.Second),
					plantest.Exited(plantest.Inst(p, "init-a", "c-a1", model.ContainerExited, 0, time.Minute), 1, 30*time.Second),
				}
			},
			want: statusSummary{Phase: "Pending", Conditions: initPending, PodIPs: "10.0.0.5",
				Init:       []string{"init-a: waiting(CrashLoopBackOff) last=terminated(Error,1) restarts=1"},
				Containers: []string{"app: waiting(PodInitializing) restarts=0", "helper: waiting(PodInitializing) restarts=0"}},
		},
		{
			name:      "completed init containers are ready and the pod initialized",
			mutatePod: plantest.WithInit("init-a"),
			mutateView: func(p *corev1.Pod, v *model.RuntimeView) {
				v.Containers = append(v.Containers, plantest.Exited(plantest.Inst(p, "init-a", "c-a", model.ContainerExited, 0, 2*time.Hour), 0, 2*time.Hour))
			},
			want: statusSummary{Phase: "Running", Conditions: condAllTrue, PodIPs: "10.0.0.5",
				Init:       []string{"init-a: terminated(Completed,0) restarts=0 ready"},
				Containers: []string{"app: running restarts=0 ready started", "helper: running restarts=0 ready started"}},
		},
		{
			name:      "sidecar not yet started keeps the pod Pending",
			mutatePod: plantest.Chain(plantest.WithInit("log-sidecar"), func(p *corev1.Pod) { p.Spec.InitContainers[0].StartupProbe = &corev1.Probe{} }),
			mutateView: func(p *corev1.Pod, v *model.RuntimeView) {
				v.Containers = []model.ContainerInstance{plantest.Inst(p, "log-sidecar", "c-s", model.ContainerRunning, 0, time.Second)}
			},
			want: statusSummary{Phase: "Pending", Conditions: initPending, PodIPs: "10.0.0.5",
				Init:       []string{"log-sidecar: running restarts=0"},
				Containers: []string{"app: waiting(PodInitializing) restarts=0", "helper: waiting(PodInitializing) restarts=0"}},
		},
		{
			name:      "started sidecar and running containers are Running",
			mutatePod: plantest.WithInit("log-sidecar"),
			mutateView: func(p *corev1.Pod, v *model.RuntimeView) {
				v.Containers = append(v.Containers, plantest.Inst(p, "log-sidecar", "c-s", model.ContainerRunning, 0, 2*time.Hour))
			},
			want: statusSummary{Phase: "Running", Conditions: condAllTrue, PodIPs: "10.0.0.5",
				Init:       []string{"log-sidecar: running restarts=0 ready started"},
				Containers: []string{"app: running restarts=0 ready started", "helper: running restarts=0 ready started"}},
		},
		{
			name:      "sidecar restarting after initialization keeps the pod Running",
			mutatePod: plantest.WithInit("log-sidecar"),
			mutateView: func(p *corev1.Pod, v *model.RuntimeView) {
				v.Containers = append(v.Containers,
					plantest.Exited(plantest.Inst(p, "log-sidecar", "c-s2", model.ContainerExited, 1, time.Minute), 1, time.Second),
					plantest.Exited(plantest.Inst(p, "log-sidecar", "c-s1", model.ContainerExited, 0, 2*time.Hour), 1, 30*time.Second))
			},
			want: statusSummary{Phase: "Running", PodIPs: "10.0.0.5",
				Conditions: []string{"PodReadyToStartContainers=True", "Initialized=True", "Ready=False(ContainersNotReady)", "ContainersReady=False(ContainersNotReady)"},
				Init:       []string{"log-sidecar: waiting(CrashLoopBackOff) last=terminated(Error,1) restarts=1"},
				Containers: []string{"app: running restarts=0 ready started", "helper: running restarts=0 ready started"}},
		},
		{
			name: "container in unknown state that was running is terminated ContainerStatusUnknown",
			mutatePod: func(p *corev1.Pod) {
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", RestartCount: 2, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
			},
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) { v.Containers[1].State = model.ContainerUnknown },
			want: statusSummary{Phase: "Running", Conditions: condNotReady, PodIPs: "10.0.0.5",
				Containers: []string{"app: terminated(ContainerStatusUnknown,137,The container could not be located when the pod was terminated) restarts=3", "helper: running restarts=0 ready started"}},
		},
		{
			name: "container that was running and vanished is not Pending",
			mutatePod: func(p *corev1.Pod) {
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", RestartCount: 2, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
			},
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) { v.Containers = v.Containers[:1] },
			want: statusSummary{Phase: "Running", Conditions: condNotReady, PodIPs: "10.0.0.5",
				Containers: []string{"app: waiting(ContainerCreating) last=terminated(ContainerStatusUnknown,137,The container could not be located when the pod was deleted.  The container used to be Running) restarts=3", "helper: running restarts=0 ready started"}},
		},
		{
			name: "terminated status is kept from the previous status when the instance is gone",
			mutatePod: plantest.Chain(plantest.Policy(corev1.RestartPolicyNever), func(p *corev1.Pod) {
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}}}
			}),
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) { v.Containers = v.Containers[:1] },
			want: statusSummary{Phase: "Running", Conditions: condNotReady, PodIPs: "10.0.0.5",
				Containers: []string{"app: terminated(Completed,0) restarts=0", "helper: running restarts=0 ready started"}},
		},
		{
			name:      "host-network pod reports the node IPs",
			mutatePod: func(p *corev1.Pod) { p.Spec.HostNetwork = true },
			mutateView: func(_ *corev1.Pod, v *model.RuntimeView) {
				v.Sandboxes[0].NetworkMode = 2 // NODE
				v.Sandboxes[0].IPs = nil
			},
			want: statusSummary{Phase: "Running", Conditions: condAllTrue, PodIPs: "192.0.2.1",
				Containers: []string{"app: running restarts=0 ready started", "helper: running restarts=0 ready started"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := plantest.BasePod()
			if tt.mutatePod != nil {
				tt.mutatePod(pod)
			}
			view := plantest.BaseView()
			if tt.mutateView != nil {
				tt.mutateView(pod, &view)
			}
			got := ComputePodStatus(pod, view, tt.probes, plantest.T0, StatusOptions{HostIPs: []string{"192.0.2.1"}})
			if diff := cmp.Diff(tt.want, summarizeStatus(got)); diff != "" {
				t.Errorf("ComputePodStatus() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestComputePodStatusDetails(t *testing.T) {
	pod := plantest.BasePod()
	pod.Spec.Containers[0].ReadinessProbe = &corev1.Probe{}
	before := metav1.NewTime(plantest.T0.Add(-time.Hour))
	pod.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: before},
		{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: before},
	}
	view := plantest.BaseView()
	view.Containers[1].RestartCount = 4
	view.Containers[1].ImageRef = "sha256:abc"
	got := ComputePodStatus(pod, view, model.ProbeResults{}, plantest.T0, StatusOptions{})

	if got.StartTime == nil || !got.StartTime.Time.Equal(plantest.T0.Add(-time.Hour)) {
		t.Errorf("StartTime = %v, want the sandbox's creation %v", got.StartTime, plantest.T0.Add(-time.Hour))
	}
	if got.QOSClass != corev1.PodQOSBestEffort {
		t.Errorf("QOSClass = %s, want BestEffort", got.QOSClass)
	}
	for _, c := range got.Conditions {
		want := metav1.NewTime(plantest.T0)
		if c.Type == corev1.PodInitialized {
			want = before
		}
		if !c.LastTransitionTime.Equal(&want) {
			t.Errorf("condition %s LastTransitionTime = %v, want %v", c.Type, c.LastTransitionTime, want)
		}
		if c.Type == corev1.PodReady && c.Message != "containers with unready status: [app]" {
			t.Errorf("Ready message = %q", c.Message)
		}
	}
	app := got.ContainerStatuses[0]
	if app.RestartCount != 4 || app.ImageID != "sha256:abc" || app.ContainerID != "containerd://c-app" {
		t.Errorf("app status = %+v, want restartCount 4 from the annotation, imageID and containerd:// ID", app)
	}
}

// TestTerminationMessagesShareThePodBudget: each container's termination
// messages are cut to its share of the pod's 12 KiB (the kubelet's
// TestTruncatePodStatus idea: many containers with long messages).
func TestTerminationMessagesShareThePodBudget(t *testing.T) {
	pod := plantest.BasePod()
	long := strings.Repeat("x", 10000)
	view := plantest.BaseView()
	for i := range view.Containers {
		view.Containers[i] = plantest.Exited(view.Containers[i], 1, time.Minute)
		view.Containers[i].Message = long
	}
	st := ComputePodStatus(pod, view, model.ProbeResults{}, plantest.T0, StatusOptions{})
	total := 0
	for _, cs := range st.ContainerStatuses {
		for _, s := range []corev1.ContainerState{cs.State, cs.LastTerminationState} {
			if s.Terminated != nil {
				if l := len(s.Terminated.Message); l != MaxPodTerminationMessageLogLength/2 {
					t.Errorf("%s: message of %d bytes, want %d (its share)", cs.Name, l, MaxPodTerminationMessageLogLength/2)
				}
				total += len(s.Terminated.Message)
			}
		}
	}
	if total == 0 || total > MaxPodTerminationMessageLogLength {
		t.Errorf("termination messages hold %d bytes, want some and at most %d", total, MaxPodTerminationMessageLogLength)
	}
}

// TestPhaseInitializedByARegularContainerOfTheActiveSandbox: getPhase's
// podHasInitialized is the kubelet's HasAnyActiveRegularContainerStarted,
// true once any instance of a regular container, in any state, is in the
// newest ready sandbox, so a sidecar that is running but not started does
// not put an initialized pod back into Pending.
func TestPhaseInitializedByARegularContainerOfTheActiveSandbox(t *testing.T) {
	sidecarPod := func(rp corev1.RestartPolicy) *corev1.Pod {
		p := plantest.BasePod()
		plantest.Chain(plantest.WithInit("log-sidecar"), plantest.Policy(rp))(p)
		p.Spec.InitContainers[0].StartupProbe = &corev1.Probe{}
		return p
	}
	view := func(p *corev1.Pod, code int32, regularSandbox string) model.RuntimeView {
		v := plantest.BaseView()
		v.Containers = []model.ContainerInstance{
			plantest.Inst(p, "log-sidecar", "c-sidecar", model.ContainerRunning, 0, 5*time.Minute),
			plantest.Exited(plantest.Inst(p, "helper", "c-helper", model.ContainerRunning, 0, 50*time.Minute), code, time.Minute),
			plantest.Exited(plantest.Inst(p, "app", "c-app", model.ContainerRunning, 0, 55*time.Minute), code, time.Minute),
		}
		for i := range v.Containers[1:] {
			v.Containers[1+i].SandboxID = regularSandbox
		}
		if regularSandbox != "sb1" {
			v.Sandboxes = append(v.Sandboxes, plantest.Sandbox(regularSandbox, 0, false, 2*time.Hour))
			v.Sandboxes[0].Attempt = 1
		}
		return v
	}
	tests := []struct {
		name string
		pod  *corev1.Pod
		view func(*corev1.Pod) model.RuntimeView
		want corev1.PodPhase
	}{
		{
			name: "Never: unstarted sidecar, regular containers succeeded in the sandbox is Running",
			pod:  sidecarPod(corev1.RestartPolicyNever),
			view: func(p *corev1.Pod) model.RuntimeView { return view(p, 0, "sb1") },
			want: corev1.PodRunning,
		},
		{
			name: "Never: unstarted sidecar, regular containers failed in the sandbox is Running",
			pod:  sidecarPod(corev1.RestartPolicyNever),
			view: func(p *corev1.Pod) model.RuntimeView { return view(p, 1, "sb1") },
			want: corev1.PodRunning,
		},
		{
			name: "OnFailure: unstarted sidecar, regular containers failed in the sandbox is Running",
			pod:  sidecarPod(corev1.RestartPolicyOnFailure),
			view: func(p *corev1.Pod) model.RuntimeView { return view(p, 1, "sb1") },
			want: corev1.PodRunning,
		},
		{
			name: "regular containers of an older sandbox do not initialize the pod: Pending",
			pod:  sidecarPod(corev1.RestartPolicyNever),
			view: func(p *corev1.Pod) model.RuntimeView { return view(p, 0, "sb0") },
			want: corev1.PodPending,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ComputePodStatus(tt.pod, tt.view(tt.pod), model.ProbeResults{}, plantest.T0, StatusOptions{})
			if got.Phase != tt.want {
				t.Errorf("phase = %s, want %s (init %v, containers %v)", got.Phase, tt.want,
					got.InitContainerStatuses, got.ContainerStatuses)
			}
		})
	}
}

// TestDisruptionTargetIsKept: the DisruptionTarget condition an eviction
// or a preemption set stays on the next status, as the kubelet's
// generateAPIPodStatus copies it over; the QoS class follows pod-level
// resources when they are set.
func TestDisruptionTargetIsKept(t *testing.T) {
	pod := plantest.BasePod()
	at := metav1.NewTime(plantest.T0.Add(-time.Minute))
	cond := corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: corev1.PodReasonTerminationByKubelet,
		Message: "Pod was preempted by Kubelet to accommodate a critical pod.", LastTransitionTime: at}
	pod.Status.Phase, pod.Status.Reason = corev1.PodFailed, "Preempting"
	pod.Status.Conditions = []corev1.PodCondition{cond}
	pod.Spec.Resources = &corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
	}
	got := ComputePodStatus(pod, plantest.BaseView(), model.ProbeResults{}, plantest.T0, StatusOptions{})
	i := slices.IndexFunc(got.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.DisruptionTarget })
	if i < 0 {
		t.Fatalf("conditions %+v lost DisruptionTarget", got.Conditions)
	}
	if diff := cmp.Diff(cond, got.Conditions[i]); diff != "" {
		t.Errorf("DisruptionTarget (-want +got):\n%s", diff)
	}
	if got.QOSClass != corev1.PodQOSGuaranteed {
		t.Errorf("QOSClass = %s, want Guaranteed from the pod-level resources", got.QOSClass)
	}
}

// TestEphemeralContainerStatuses: the kubelet's
// convertToAPIContainerStatuses for spec.ephemeralContainers — waiting
// until started, then the instance's state; an exited one stays
// terminated (never restarted, no back-off), and the pod's phase and
// readiness ignore it.
func TestEphemeralContainerStatuses(t *testing.T) {
	pod := plantest.BasePod()
	pod.Spec.EphemeralContainers = []corev1.EphemeralContainer{{
		EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: "busybox:1"},
		TargetContainerName:      "app",
	}}
	view := plantest.BaseView()
	got := ComputePodStatus(pod, view, model.ProbeResults{}, plantest.T0, StatusOptions{})
	if len(got.EphemeralContainerStatuses) != 1 || got.EphemeralContainerStatuses[0].State.Waiting == nil {
		t.Fatalf("before start: EphemeralContainerStatuses = %+v, want debug waiting", got.EphemeralContainerStatuses)
	}

	view.Containers = append([]model.ContainerInstance{plantest.Exited(
		plantest.Inst(pod, "debug", "c-debug", model.ContainerExited, 0, time.Minute), 1, time.Second)}, view.Containers...)
	got = ComputePodStatus(pod, view, model.ProbeResults{}, plantest.T0, StatusOptions{})
	if n := len(got.ContainerStatuses); n != 2 {
		t.Errorf("ContainerStatuses has %d entries, want the 2 regular containers only", n)
	}
	st := got.EphemeralContainerStatuses[0]
	if st.Name != "debug" || st.State.Terminated == nil || st.State.Terminated.ExitCode != 1 || st.ContainerID != "containerd://c-debug" {
		t.Errorf("exited debug status = %+v, want terminated with exit code 1 (never restarted)", st)
	}
	if got.Phase != corev1.PodRunning {
		t.Errorf("phase = %s, want Running: an ephemeral container does not decide the phase", got.Phase)
	}
	for _, c := range got.Conditions {
		if c.Type == corev1.PodReady && c.Status != corev1.ConditionTrue {
			t.Errorf("Ready = %s (%s), want True: an exited ephemeral container does not make the pod unready", c.Status, c.Message)
		}
	}

	// Never ready, running or exited 0 (an init container's readiness).
	for _, inst := range []model.ContainerInstance{
		plantest.Inst(pod, "debug", "c-debug", model.ContainerRunning, 0, time.Minute),
		plantest.Exited(plantest.Inst(pod, "debug", "c-debug", model.ContainerExited, 0, time.Minute), 0, time.Second),
	} {
		view := plantest.BaseView()
		view.Containers = append([]model.ContainerInstance{inst}, view.Containers...)
		got := ComputePodStatus(pod, view, model.ProbeResults{}, plantest.T0, StatusOptions{})
		if st := got.EphemeralContainerStatuses[0]; st.Ready {
			t.Errorf("debug %s: ready, want never ready, as the kubelet's", inst.State)
		}
	}
}
