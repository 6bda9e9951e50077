package admit

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/utils/ptr"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func pod(name string, reqs corev1.ResourceList) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "c", Image: "i", Resources: corev1.ResourceRequirements{Requests: reqs},
		}}},
	}
}

func withHostPort(p *corev1.Pod, port int32, ip string, proto corev1.Protocol) *corev1.Pod {
	p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{ContainerPort: 80, HostPort: port, HostIP: ip, Protocol: proto})
	return p
}

var node = Node{Allocatable: rl("cpu", "2", "memory", "1Gi", "pods", "5")}

// denyingPolicy allows all of /var but denies podsync's root below it.
var denyingPolicy = Policy{
	AllowedHostPaths: []HostPathPrefix{{Path: "/var"}},
	DeniedHostPaths:  []DeniedHostPath{{Path: "/var/lib/podsync", Why: "podsync's root directory (--root-dir)"}},
}

var openPolicy = Policy{Level: psapi.LevelPrivileged}

func TestAdmit(t *testing.T) {
	tests := []struct {
		name       string
		pod        *corev1.Pod
		others     []*corev1.Pod
		node       Node
		wantReason string
	}{
		{"fits an empty node", pod("a", rl("cpu", "1", "memory", "512Mi")), nil, node, ""},
		{"exactly the allocatable fits", pod("a", rl("cpu", "2", "memory", "1Gi")), nil, node, ""},
		{"more cpu than allocatable is OutOfcpu", pod("a", rl("cpu", "2001m")), nil, node, ReasonOutOfCPU},
		{"more memory than allocatable is OutOfmemory", pod("a", rl("memory", "2Gi")), nil, node, ReasonOutOfMemory},
		{"cpu used by others counts", pod("a", rl("cpu", "1")), []*corev1.Pod{pod("b", rl("cpu", "1500m"))}, node, ReasonOutOfCPU},
		{"cpu is checked before memory", pod("a", rl("cpu", "3", "memory", "2Gi")), nil, node, ReasonOutOfCPU},
		{"an extended resource the node lacks is OutOf<resource>", pod("a", rl("example.com/foo", "1")), nil, node, "OutOfexample.com/foo"},
		{"an extended resource within the declared capacity fits", pod("a", rl("example.com/foo", "2")),
			[]*corev1.Pod{pod("b", rl("example.com/foo", "2"))}, Node{Allocatable: rl("example.com/foo", "4")}, ""},
		{"an extended resource used by others counts", pod("a", rl("example.com/foo", "3")),
			[]*corev1.Pod{pod("b", rl("example.com/foo", "2"))}, Node{Allocatable: rl("example.com/foo", "4")}, "OutOfexample.com/foo"},
		{"pod-level requests replace the containers'", func() *corev1.Pod {
			p := pod("a", rl("cpu", "100m"))
			p.Spec.Resources = &corev1.ResourceRequirements{Requests: rl("cpu", "3")}
			return p
		}(), nil, node, ReasonOutOfCPU},
		{"pod-level requests below the containers' sum fit", func() *corev1.Pod {
			p := pod("a", rl("cpu", "1"))
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "d", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "1500m")}})
			p.Spec.Resources = &corev1.ResourceRequirements{Requests: rl("cpu", "2")}
			return p
		}(), nil, node, ""},
		{"hostUsers false without runtime support is refused", func() *corev1.Pod {
			p := pod("a", nil)
			p.Spec.HostUsers = ptr.To(false)
			return p
		}(), nil, node, ReasonUserNamespacesUnsupported},
		{"hostUsers false with runtime support fits", func() *corev1.Pod {
			p := pod("a", nil)
			p.Spec.HostUsers = ptr.To(false)
			return p
		}(), nil, Node{Allocatable: node.Allocatable, UserNamespaces: true}, ""},
		{"hostUsers true needs no support", func() *corev1.Pod {
			p := pod("a", nil)
			p.Spec.HostUsers = ptr.To(true)
			return p
		}(), nil, node, ""},
		{"an unknown priority class is refused", func() *corev1.Pod {
			p := pod("a", nil)
			p.Spec.PriorityClassName = "high"
			return p
		}(), nil, node, ReasonPriorityClass},
		{"pod count is checked first", pod("a", rl("cpu", "3")), []*corev1.Pod{pod("b", nil), pod("c", nil), pod("d", nil), pod("e", nil), pod("f", nil)}, node, ReasonOutOfPods},
		{"pod count below the limit fits", pod("a", nil), []*corev1.Pod{pod("b", nil), pod("c", nil), pod("d", nil), pod("e", nil)}, node, ""},
		{"default max pods is 110", pod("a", nil), func() []*corev1.Pod {
			var ps []*corev1.Pod
			for i := range 110 {
				ps = append(ps, pod(fmt.Sprint(i), nil))
			}
			return ps
		}(), Node{}, ReasonOutOfPods},
		{"the pod's own earlier instance does not count", pod("a", rl("cpu", "2")), []*corev1.Pod{pod("a", rl("cpu", "2"))}, node, ""},
		{"terminal pods do not count", pod("a", rl("cpu", "2")), []*corev1.Pod{func() *corev1.Pod {
			p := pod("b", rl("cpu", "2"))
			p.Status.Phase = corev1.PodSucceeded
			return p
		}(), func() *corev1.Pod {
			p := pod("c", rl("cpu", "2"))
			p.Status.Phase = corev1.PodFailed
			return p
		}()}, node, ""},
		{"best-effort pod fits a full node", pod("a", nil), []*corev1.Pod{pod("b", rl("cpu", "2", "memory", "1Gi"))}, node, ""},
		{"unlimited resource is not checked", pod("a", rl("ephemeral-storage", "100Gi")), nil, node, ""},
		{"ephemeral storage is checked when allocatable", pod("a", rl("ephemeral-storage", "2Gi")), nil, Node{Allocatable: rl("ephemeral-storage", "1Gi")}, ReasonOutOfEphemeralStorage},
		{"same host port and protocol conflicts", withHostPort(pod("a", nil), 8080, "", ""), []*corev1.Pod{withHostPort(pod("b", nil), 8080, "", "TCP")}, node, ReasonNodePorts},
		{"same host port over UDP does not conflict", withHostPort(pod("a", nil), 8080, "", "UDP"), []*corev1.Pod{withHostPort(pod("b", nil), 8080, "", "TCP")}, node, ""},
		{"different host IPs do not conflict", withHostPort(pod("a", nil), 8080, "127.0.0.1", "TCP"), []*corev1.Pod{withHostPort(pod("b", nil), 8080, "127.0.0.2", "TCP")}, node, ""},
		{"a specific IP conflicts with all addresses", withHostPort(pod("a", nil), 8080, "127.0.0.1", "TCP"), []*corev1.Pod{withHostPort(pod("b", nil), 8080, "0.0.0.0", "TCP")}, node, ReasonNodePorts},
		{"all addresses conflict with a specific IP", withHostPort(pod("a", nil), 8080, "", "TCP"), []*corev1.Pod{withHostPort(pod("b", nil), 8080, "10.0.0.1", "TCP")}, node, ReasonNodePorts},
		{"container ports without host port never conflict", func() *corev1.Pod {
			p := pod("a", nil)
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8080}}
			return p
		}(), []*corev1.Pod{withHostPort(pod("b", nil), 8080, "", "TCP")}, node, ""},
		{"init containers' host ports are not counted, as in the kubelet", func() *corev1.Pod {
			p := pod("a", nil)
			p.Spec.InitContainers = []corev1.Container{{Name: "i", Ports: []corev1.ContainerPort{{ContainerPort: 1, HostPort: 8080}}}}
			return p
		}(), []*corev1.Pod{withHostPort(pod("b", nil), 8080, "", "TCP")}, node, ""},
		{"resources are checked before ports", withHostPort(pod("a", rl("cpu", "3")), 8080, "", ""), []*corev1.Pod{withHostPort(pod("b", nil), 8080, "", "TCP")}, node, ReasonOutOfCPU},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Admit(tt.pod, tt.others, tt.node, openPolicy)
			if got.Reason != tt.wantReason || got.Admit != (tt.wantReason == "") {
				t.Errorf("Admit = %+v, want reason %q", got, tt.wantReason)
			}
			if !got.Admit && got.Message == "" {
				t.Error("a rejection has no message")
			}
		})
	}
}

func TestAdmitMessagesAreTheKubelets(t *testing.T) {
	got := Admit(pod("a", rl("cpu", "3")), []*corev1.Pod{pod("b", rl("cpu", "500m"))}, node, openPolicy)
	want := "Node didn't have enough resource: cpu, requested: 3000, used: 500, capacity: 2000"
	if got.Message != want {
		t.Errorf("message = %q, want %q", got.Message, want)
	}
}

func TestPodRequests(t *testing.T) {
	always := ptr.To(corev1.ContainerRestartPolicyAlways)
	c := func(name, cpu string, restart *corev1.ContainerRestartPolicy) corev1.Container {
		return corev1.Container{Name: name, RestartPolicy: restart, Resources: corev1.ResourceRequirements{Requests: rl("cpu", cpu)}}
	}
	tests := []struct {
		name    string
		init    []corev1.Container
		regular []corev1.Container
		wantCPU string
	}{
		{"sum of regular containers", nil, []corev1.Container{c("a", "100m", nil), c("b", "200m", nil)}, "300m"},
		{"a larger init container wins", []corev1.Container{c("i", "1", nil)}, []corev1.Container{c("a", "300m", nil)}, "1"},
		{"a smaller init container does not add", []corev1.Container{c("i", "100m", nil)}, []corev1.Container{c("a", "300m", nil)}, "300m"},
		{"sidecars add to the regular containers", []corev1.Container{c("s", "200m", always)}, []corev1.Container{c("a", "300m", nil)}, "500m"},
		{"an init container after a sidecar runs beside it", []corev1.Container{c("s", "200m", always), c("i", "1", nil)}, []corev1.Container{c("a", "100m", nil)}, "1200m"},
		{"an init container before a sidecar does not", []corev1.Container{c("i", "1", nil), c("s", "200m", always)}, []corev1.Container{c("a", "100m", nil)}, "1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &corev1.Pod{Spec: corev1.PodSpec{InitContainers: tt.init, Containers: tt.regular}}
			got := podRequests(p)[corev1.ResourceCPU]
			if want := resource.MustParse(tt.wantCPU); got.Cmp(want) != 0 {
				t.Errorf("cpu = %s, want %s", got.String(), want.String())
			}
		})
	}
}

func TestAllocatable(t *testing.T) {
	got := Allocatable(rl("cpu", "4", "memory", "8Gi", "pods", "110"), rl("cpu", "500m", "memory", "9Gi"))
	want := map[string]string{"cpu": "3500m", "memory": "0", "pods": "110"}
	gotS := map[string]string{}
	for k, v := range got {
		gotS[string(k)] = v.String()
	}
	if diff := cmp.Diff(want, gotS); diff != "" {
		t.Errorf("Allocatable (-want +got):\n%s", diff)
	}
}

// TestBatch is RunPods' scenario: ten pods, one asking for more CPU than
// the node has and one for a host port another pod of the batch holds.
func TestBatch(t *testing.T) {
	n := Node{Allocatable: rl("cpu", "4", "memory", "4Gi", "pods", "110")}
	var pods []*corev1.Pod
	for i := range 10 {
		pods = append(pods, pod(fmt.Sprintf("p%d", i), rl("cpu", "100m", "memory", "64Mi")))
	}
	pods[2] = withHostPort(pods[2], 9000, "", "TCP")
	pods[4] = pod("p4", rl("cpu", "8"))
	pods[7] = withHostPort(pods[7], 9000, "", "TCP")

	reasons := func(rs []Result) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.Reason)
		}
		return out
	}
	got := Batch(pods, nil, n, openPolicy, false)
	want := []string{"", "", "", "", ReasonOutOfCPU, "", "", ReasonNodePorts, "", ""}
	if diff := cmp.Diff(want, reasons(got)); diff != "" {
		t.Errorf("best effort (-want +got):\n%s", diff)
	}

	got = Batch(pods, nil, n, openPolicy, true)
	want = []string{ReasonNotRunAllOrNothing, ReasonNotRunAllOrNothing, ReasonNotRunAllOrNothing, ReasonNotRunAllOrNothing, ReasonOutOfCPU,
		ReasonNotRunAllOrNothing, ReasonNotRunAllOrNothing, ReasonNodePorts, ReasonNotRunAllOrNothing, ReasonNotRunAllOrNothing}
	if diff := cmp.Diff(want, reasons(got)); diff != "" {
		t.Errorf("all or nothing (-want +got):\n%s", diff)
	}
	for i, r := range got {
		if r.Admit {
			t.Errorf("pod %d admitted under ALL_OR_NOTHING with rejections", i)
		}
	}

	// Pods already running count against the batch.
	running := []*corev1.Pod{pod("old", rl("cpu", "3900m"))}
	got = Batch(pods[:2], running, n, openPolicy, false)
	if diff := cmp.Diff([]string{"", ReasonOutOfCPU}, reasons(got)); diff != "" {
		t.Errorf("against running pods (-want +got):\n%s", diff)
	}
}

// TestAdmitKnown: a new spec of a known pod gets every check a new pod
// gets, the same code in the same order (an update to hostUsers false on
// a runtime without user namespaces ran the pod as root, unchecked), but
// the fit of CPU and memory, which is a resize's.
func TestAdmitKnown(t *testing.T) {
	userns := func(p *corev1.Pod) *corev1.Pod {
		p.Spec.HostUsers = new(false)
		p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: new(int64(0))}
		return p
	}
	tests := []struct {
		name       string
		pod        *corev1.Pod
		others     []*corev1.Pod
		node       Node
		wantReason string
	}{
		{"hostUsers false on a runtime without user namespaces", userns(pod("a", nil)), nil, node, ReasonUserNamespacesUnsupported},
		{"hostUsers false on a runtime with them", userns(pod("a", nil)), nil, Node{Allocatable: node.Allocatable, UserNamespaces: true}, ""},
		{"a host port another pod holds", withHostPort(pod("a", nil), 8080, "", corev1.ProtocolTCP),
			[]*corev1.Pod{withHostPort(pod("b", nil), 8080, "", corev1.ProtocolTCP)}, node, ReasonNodePorts},
		{"a privileged container", func() *corev1.Pod {
			p := pod("a", nil)
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: new(true)}
			return p
		}(), nil, node, ReasonPodSecurity},
		{"more ephemeral storage than the node has", pod("a", rl("ephemeral-storage", "1Ti")), nil,
			Node{Allocatable: rl("ephemeral-storage", "10Gi")}, ReasonOutOfEphemeralStorage},
		{"more cpu than allocatable: a resize, not refused here", pod("a", rl("cpu", "3")), nil, node, ""},
		{"more memory than allocatable: a resize, not refused here", pod("a", rl("memory", "4Gi")), nil, node, ""},
	}
	policy := Policy{AllowedHostPorts: []PortRange{{From: 8080, To: 8080}}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := AdmitKnown(tt.pod, tt.others, tt.node, policy); got.Reason != tt.wantReason || got.Admit != (tt.wantReason == "") {
				t.Errorf("AdmitKnown = %+v, want reason %q", got, tt.wantReason)
			}
			if tt.wantReason != "" {
				// The same refusal as for a new pod.
				if got := Admit(tt.pod, tt.others, tt.node, policy); got.Reason != tt.wantReason {
					t.Errorf("Admit = %+v, want the same reason %q", got, tt.wantReason)
				}
			}
		})
	}
}

// TestAdmitCountsTheOverhead: a pod's requests at admission include its
// spec.overhead, as the kubelet's (resource.PodRequests without
// ExcludeOverhead), beside others' with theirs.
func TestAdmitCountsTheOverhead(t *testing.T) {
	p := pod("p", rl("cpu", "1500m"))
	if r := Admit(p, nil, node, Policy{}); !r.Admit {
		t.Fatalf("without overhead: %+v, want admitted", r)
	}
	p.Spec.Overhead = rl("cpu", "600m")
	r := Admit(p, nil, node, Policy{})
	if r.Admit || r.Reason != ReasonOutOfCPU || !strings.Contains(r.Message, "requested: 2100") {
		t.Errorf("with 600m overhead on 2 cpus: %+v, want OutOfcpu for 2100m", r)
	}
	other := pod("other", rl("cpu", "100m"))
	other.Spec.Overhead = rl("cpu", "400m")
	if r := Admit(pod("q", rl("cpu", "1600m")), []*corev1.Pod{other}, node, Policy{}); r.Admit || !strings.Contains(r.Message, "used: 500") {
		t.Errorf("beside a pod using 100m and 400m overhead: %+v, want OutOfcpu with 500m used", r)
	}
}
