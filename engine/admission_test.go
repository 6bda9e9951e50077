package engine_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/engine/admit"
	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/store"
)

// TestConcurrentAppliesCannotOverrunAdmission: new pods applied at once
// are admitted one at a time, as the kubelet admits them, so together
// they cannot exceed the node's pod count or take one host port twice;
// the refused ones leave nothing in the store or the runtime, and
// concurrent applies of one new pod are one pod.
func TestConcurrentAppliesCannotOverrunAdmission(t *testing.T) {
	for _, tc := range []struct {
		name    string
		maxPods int64
		mutate  func(*corev1.Pod)
		pods    int
		want    int
	}{
		{name: "max pods", maxPods: 3, pods: 10, want: 3},
		{name: "one host port", maxPods: 110, pods: 6, want: 1, mutate: func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080, Protocol: corev1.ProtocolTCP}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			admitFn, policyFn := engine.Admission(admit.Node{Allocatable: corev1.ResourceList{
				corev1.ResourcePods: *resource.NewQuantity(tc.maxPods, resource.DecimalSI)}}, admit.Policy{AllowedHostPorts: []admit.PortRange{{From: 8080, To: 8080}}})
			h := newNodeHarness(t, func(o *engine.NodeOptions) { o.Admit, o.Policy = admitFn, policyFn })
			var admitted, refused atomic.Int32
			var wg sync.WaitGroup
			for i := range tc.pods {
				pod := enginetest.Pod()
				pod.Name, pod.UID = fmt.Sprintf("web-%d", i), types.UID(fmt.Sprintf("uid-%d", i))
				pod.Spec.Containers = pod.Spec.Containers[:1]
				if tc.mutate != nil {
					tc.mutate(pod)
				}
				// Each pod twice at once: a retried apply of a new pod.
				for range 2 {
					wg.Go(func() {
						_, err := h.node.Apply(h.ctx, pod.DeepCopy(), nil, nil, nil)
						switch {
						case err == nil:
							admitted.Add(1)
						case errors.Is(err, errdefs.ErrAdmission):
							refused.Add(1)
						default:
							t.Errorf("Apply %s: %v", pod.Name, err)
						}
					})
				}
			}
			wg.Wait()
			recs, _, err := h.st.List(store.Filter{})
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != tc.want {
				t.Errorf("%d pods stored, want %d", len(recs), tc.want)
			}
			// Both applies of an admitted pod succeed; both of a refused
			// one are refused.
			if int(admitted.Load()) != 2*tc.want || int(refused.Load()) != 2*(tc.pods-tc.want) {
				t.Errorf("%d applies admitted and %d refused, want %d and %d", admitted.Load(), refused.Load(), 2*tc.want, 2*(tc.pods-tc.want))
			}
			sbs, err := h.rt.ListPodSandbox(h.ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(sbs) != tc.want {
				t.Errorf("%d sandboxes in the runtime, want %d", len(sbs), tc.want)
			}
		})
	}
}

// TestRestartReadmitsStoredPods: a node started with a stricter policy
// than the one its pods were admitted under rejects the pods that no
// longer pass, as the kubelet re-admits pods when it starts — phase
// Failed with the Pod Security reason and message, a warning event, and
// their containers stopped — and keeps the others running.
func TestRestartReadmitsStoredPods(t *testing.T) {
	privileged := admit.Policy{Level: psapi.LevelPrivileged}
	admitFn, policyFn := engine.Admission(admit.Node{}, privileged)
	h := newNodeHarness(t, func(o *engine.NodeOptions) { o.Admit, o.Policy = admitFn, policyFn })
	adder := enginetest.Pod()
	adder.Name, adder.UID = "adder", "uid-adder"
	adder.Spec.Containers = adder.Spec.Containers[:1]
	adder.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}}
	plain := enginetest.Pod()
	plain.Spec.Containers = plain.Spec.Containers[:1]
	h.apply(adder)
	h.apply(plain)
	h.stop()

	h.opts.Admit, h.opts.Policy = engine.Admission(admit.Node{}, admit.Policy{})
	h.start()
	h.eventually("the rejected pod's containers stopped", func() bool {
		for _, c := range h.view(adder).Containers {
			if c.State == model.ContainerRunning {
				return false
			}
		}
		return true
	})
	st := h.storedStatus(adder)
	if st.Phase != corev1.PodFailed || st.Reason != admit.ReasonPodSecurity ||
		!strings.Contains(st.Message, `violates PodSecurity "baseline:latest"`) || !strings.Contains(st.Message, "SYS_ADMIN") {
		t.Errorf("rejected pod's status = %s %s %q, want Failed PodSecurity naming the level and SYS_ADMIN", st.Phase, st.Reason, st.Message)
	}
	if evs := h.events(adder); !slices.Contains(evs, admit.ReasonPodSecurity) {
		t.Errorf("events %v, want a %s event", evs, admit.ReasonPodSecurity)
	}
	if st := h.storedStatus(plain); st.Phase != corev1.PodRunning {
		t.Errorf("the plain pod is %s, want Running", st.Phase)
	}
	for _, c := range h.view(plain).Containers {
		if c.State != model.ContainerRunning {
			t.Errorf("plain pod's container %s is %s, want running", c.Name, c.State)
		}
	}
	// An apply of the rejected spec is refused like a new pod's.
	if _, err := h.node.Apply(h.ctx, adder, nil, nil, nil); !errors.Is(err, errdefs.ErrAdmission) {
		t.Errorf("Apply of the rejected pod = %v, want ErrAdmission", err)
	}
}

// TestUpdateIsAdmittedAsANewPod: an update of a running pod gets every
// check a new pod gets (it got only the policy's): on a runtime without
// user namespaces an update to hostUsers false is refused
// (UserNamespacesUnsupported), as is one that takes another pod's host
// port (NodePorts); the pod keeps running its stored spec. A change of
// CPU alone, beyond the node, is a resize, not refused here.
func TestUpdateIsAdmittedAsANewPod(t *testing.T) {
	policy := admit.Policy{Level: psapi.LevelPrivileged}
	admitFn, policyFn := engine.Admission(admit.Node{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}, policy)
	h := newNodeHarness(t, func(o *engine.NodeOptions) { o.Admit, o.Policy = admitFn, policyFn })
	app := enginetest.Pod()
	app.Name, app.UID = "app", "uid-app"
	app.Spec.Containers = app.Spec.Containers[:1]
	holder := enginetest.Pod()
	holder.Spec.Containers = holder.Spec.Containers[:1]
	holder.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080, Protocol: corev1.ProtocolTCP}}
	h.apply(app)
	h.apply(holder)

	for _, tt := range []struct {
		name   string
		update func(*corev1.Pod)
		reason string
	}{
		{"hostUsers false", func(p *corev1.Pod) {
			p.Spec.HostUsers = ptr.To(false)
			p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](0)}
		}, admit.ReasonUserNamespacesUnsupported},
		{"another pod's host port", func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080, Protocol: corev1.ProtocolTCP}}
		}, admit.ReasonNodePorts},
	} {
		update := app.DeepCopy()
		tt.update(update)
		_, err := h.node.Apply(h.ctx, update, nil, nil, nil)
		var ae *engine.AdmissionError
		if !errors.As(err, &ae) || ae.Reason() != tt.reason {
			t.Errorf("update to %s: %v, want ErrAdmission %s", tt.name, err, tt.reason)
		}
	}
	rec, err := h.node.Get(h.ctx, "shop", "app")
	if err != nil || rec.Pod.Spec.HostUsers != nil || len(rec.Pod.Spec.Containers[0].Ports) != 0 {
		t.Errorf("stored pod after the refused updates: %v %v, want its first spec", rec, err)
	}
	bigger := app.DeepCopy()
	bigger.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}
	if _, err := h.node.Apply(h.ctx, bigger, nil, nil, nil); errors.Is(err, errdefs.ErrAdmission) {
		t.Errorf("a CPU change beyond the node was refused at apply: %v; it is a resize's to admit", err)
	}
}

// TestPlanRefusesWhatApplyWould: PlanPod, the dry run, refuses a pod the
// node's policy or resources would refuse, new or known, and creates and
// stores nothing.
func TestPlanRefusesWhatApplyWould(t *testing.T) {
	admitFn, policyFn := engine.Admission(admit.Node{Allocatable: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}}, admit.Policy{})
	h := newNodeHarness(t, func(o *engine.NodeOptions) { o.Admit, o.Policy = admitFn, policyFn })
	adder := enginetest.Pod()
	adder.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}}
	if _, _, _, err := h.node.Plan(h.ctx, adder, nil, nil); !errors.Is(err, errdefs.ErrAdmission) || !strings.Contains(err.Error(), "SYS_ADMIN") {
		t.Errorf("Plan of a new SYS_ADMIN pod = %v, want the PodSecurity refusal", err)
	}
	pod := enginetest.Pod()
	if _, _, known, err := h.node.Plan(h.ctx, pod, nil, nil); err != nil || known {
		t.Fatalf("Plan of a new plain pod = known %v, %v", known, err)
	}
	h.apply(pod)
	if _, _, known, err := h.node.Plan(h.ctx, adder, nil, nil); !errors.Is(err, errdefs.ErrAdmission) || !known {
		t.Errorf("Plan of the stored pod adding SYS_ADMIN = known %v, %v; want the PodSecurity refusal", known, err)
	}
	other := enginetest.Pod()
	other.Name, other.UID = "other", "uid-other"
	var ae *engine.AdmissionError
	if _, _, _, err := h.node.Plan(h.ctx, other, nil, nil); !errors.As(err, &ae) || ae.Reason() != admit.ReasonOutOfPods {
		t.Errorf("Plan of a second pod on a one-pod node = %v, want OutOfpods", err)
	}
	if recs, _, _ := h.st.List(store.Filter{}); len(recs) != 1 {
		t.Errorf("%d pods stored, want the one applied", len(recs))
	}
	if sbs, _ := h.rt.ListPodSandbox(h.ctx, nil); len(sbs) != 1 {
		t.Errorf("%d sandboxes, want the applied pod's", len(sbs))
	}
}

// TestNodeSchedulingFieldsRefuseBeforeAnythingIsCreated: a pod whose
// nodeSelector names a label the node lacks, or that does not tolerate
// the node's NoExecute taint, is refused with the kubelet's reason and
// leaves nothing in the store or the runtime; once it matches, it runs.
func TestNodeSchedulingFieldsRefuseBeforeAnythingIsCreated(t *testing.T) {
	node := admit.Node{
		Name:   "node-1",
		Labels: admit.NodeLabels("node-1", "linux", "amd64", map[string]string{"disk": "ssd"}),
		Taints: []corev1.Taint{{Key: "maintenance", Effect: corev1.TaintEffectNoExecute}},
	}
	admitFn, policyFn := engine.Admission(node, admit.Policy{})
	h := newNodeHarness(t, func(o *engine.NodeOptions) { o.Admit, o.Policy = admitFn, policyFn })
	tolerant := []corev1.Toleration{{Key: "maintenance", Operator: corev1.TolerationOpExists}}
	for _, tc := range []struct {
		name   string
		mutate func(*corev1.Pod)
		reason string
	}{
		{name: "nodeSelector for a label the node lacks", reason: admit.ReasonNodeAffinity, mutate: func(p *corev1.Pod) {
			p.Spec.NodeSelector = map[string]string{"gpu": "true"}
			p.Spec.Tolerations = tolerant
		}},
		{name: "NoExecute taint not tolerated", reason: admit.ReasonTaintToleration, mutate: func(p *corev1.Pod) {
			p.Spec.NodeSelector = map[string]string{"disk": "ssd"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := enginetest.Pod()
			tc.mutate(pod)
			var ae *engine.AdmissionError
			if _, err := h.node.Apply(h.ctx, pod, nil, nil, nil); !errors.As(err, &ae) || ae.Reason() != tc.reason {
				t.Fatalf("Apply = %v, want reason %s", err, tc.reason)
			}
			if recs, _, _ := h.st.List(store.Filter{}); len(recs) != 0 {
				t.Errorf("%d pods stored, want none", len(recs))
			}
			if sbs, _ := h.rt.ListPodSandbox(h.ctx, nil); len(sbs) != 0 {
				t.Errorf("%d sandboxes, want none", len(sbs))
			}
		})
	}
	pod := enginetest.Pod()
	pod.Spec.NodeSelector = map[string]string{"disk": "ssd", corev1.LabelOSStable: "linux"}
	pod.Spec.Tolerations = tolerant
	h.apply(pod)
	if sbs, _ := h.rt.ListPodSandbox(h.ctx, nil); len(sbs) != 1 {
		t.Errorf("%d sandboxes, want the matching pod's", len(sbs))
	}
}

// TestCriticalPodPreemptsOnAFullNode: on a node whose pod count is
// reached, a system-node-critical pod preempts the best-effort pod, as
// the kubelet's CriticalPodAdmissionHandler does — the victim Failed with
// reason Preempting, its message, a DisruptionTarget condition and an
// event, its containers stopped — and runs; a pod that is not critical is
// refused with OutOfpods and preempts nothing.
func TestCriticalPodPreemptsOnAFullNode(t *testing.T) {
	admitFn, policyFn := engine.Admission(admit.Node{Allocatable: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("2")}}, admit.Policy{})
	h := newNodeHarness(t, func(o *engine.NodeOptions) { o.Admit, o.Policy = admitFn, policyFn })
	newPod := func(name string, reqs corev1.ResourceList) *corev1.Pod {
		p := enginetest.Pod()
		p.Name, p.UID = name, types.UID("uid-"+name)
		p.Spec.Containers = p.Spec.Containers[:1]
		p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: reqs}
		return p
	}
	burstable := newPod("burstable", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")})
	bestEffort := newPod("best-effort", nil)
	h.apply(burstable)
	h.apply(bestEffort)

	plain := newPod("plain", nil)
	var ae *engine.AdmissionError
	if _, err := h.node.Apply(h.ctx, plain, nil, nil, nil); !errors.As(err, &ae) || ae.Reason() != admit.ReasonOutOfPods {
		t.Fatalf("Apply of a third pod that is not critical = %v, want OutOfpods", err)
	}
	if st := h.storedStatus(bestEffort); st.Phase == corev1.PodFailed {
		t.Fatalf("a pod that is not critical preempted %s", bestEffort.Name)
	}

	critical := newPod("critical", nil)
	critical.Spec.PriorityClassName = admit.SystemNodeCritical
	if _, err := h.node.Apply(h.ctx, critical, nil, nil, nil); err != nil {
		t.Fatalf("Apply of the critical pod: %v", err)
	}
	st := h.storedStatus(bestEffort)
	if st.Phase != corev1.PodFailed || st.Reason != admit.ReasonPreempting || st.Message != admit.MessagePreempted {
		t.Errorf("victim's status = %s %s %q, want Failed %s %q", st.Phase, st.Reason, st.Message, admit.ReasonPreempting, admit.MessagePreempted)
	}
	if i := slices.IndexFunc(st.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.DisruptionTarget }); i < 0 ||
		st.Conditions[i].Reason != corev1.PodReasonTerminationByKubelet {
		t.Errorf("victim's conditions %+v, want DisruptionTarget TerminationByKubelet", st.Conditions)
	}
	if evs := h.events(bestEffort); !slices.Contains(evs, admit.ReasonPreempting) {
		t.Errorf("victim's events %v, want %s", evs, admit.ReasonPreempting)
	}
	h.eventually("the victim's containers stopped", func() bool {
		for _, c := range h.view(bestEffort).Containers {
			if c.State == model.ContainerRunning {
				return false
			}
		}
		return true
	})
	if st := h.storedStatus(burstable); st.Phase != corev1.PodRunning {
		t.Errorf("the burstable pod is %s, want Running: the best-effort one is preempted first", st.Phase)
	}
	rec, err := h.st.Get(critical.UID)
	if err != nil {
		t.Fatal(err)
	}
	if p := rec.Pod.Spec.Priority; p == nil || *p != admit.SystemNodeCriticalPriority {
		t.Errorf("stored critical pod's priority = %v, want %d from its class", p, admit.SystemNodeCriticalPriority)
	}
}
