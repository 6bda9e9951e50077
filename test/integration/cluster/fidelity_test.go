//go:build integration

package cluster_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/internal/testing/localcri"
)

// TestPodFidelityOnACluster: what node conformance asks of a node's pods,
// on a real control plane with podsync-vk under the node's identity:
// hostnameOverride is the pod's hostname for `hostname` and `hostname -f`
// ("Override hostname of Pod"); a pod for Windows fails with the kubelet's
// PodOSNotSupported (PodOSRejection); a failed container's log is its
// termination message under FallbackToLogsOnError (Container Runtime); a
// RuntimeClass's handler runs the sandbox and its overhead reaches the
// node (RuntimeClass); and a pod whose RuntimeClass was deleted after it
// was admitted waits Pending in ContainerCreating with a
// FailedCreatePodSandBox event, then runs once the RuntimeClass exists.
func TestPodFidelityOnACluster(t *testing.T) {
	dir, c, _, kc := startCluster(t)
	ctx := t.Context()
	n := &node{name: "podsync-a", inst: insts[0], dir: filepath.Join(dir, "a"), port: freePort(t)}
	if err := os.MkdirAll(filepath.Join(n.dir, "run"), 0o700); err != nil {
		t.Fatal(err)
	}
	n.socket = filepath.Join(n.dir, "run", "podsync.sock")
	eventually(t, time.Minute, "default service account", func() (bool, string) {
		_, err := kc.CoreV1().ServiceAccounts("default").Get(context.Background(), "default", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})

	pod := func(name, script string, mutate func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec: corev1.PodSpec{
				NodeName:                      n.name,
				AutomountServiceAccountToken:  ptr.To(false),
				TerminationGracePeriodSeconds: ptr.To[int64](1),
				RestartPolicy:                 corev1.RestartPolicyNever,
				Containers:                    []corev1.Container{{Name: "app", Image: localcri.BusyboxImage, Command: []string{"sh", "-c", script}}},
			},
		}
		if mutate != nil {
			mutate(p)
		}
		if _, err := kc.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create pod %s: %v", name, err)
		}
		return p
	}
	runtimeClass := func(name string) {
		rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Handler: "runc",
			Overhead: &nodev1.Overhead{PodFixed: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}}}
		if _, err := kc.NodeV1().RuntimeClasses().Create(ctx, rc, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create RuntimeClass %s: %v", name, err)
		}
		t.Cleanup(func() { _ = kc.NodeV1().RuntimeClasses().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}

	// Admitted by the API server while its RuntimeClass exists, which is
	// deleted before the node sees the pod.
	runtimeClass("podsync-late")
	pod("late", "trap 'exit 0' TERM; sleep 3600 & wait", func(p *corev1.Pod) {
		p.Spec.RuntimeClassName = ptr.To("podsync-late")
		p.Spec.RestartPolicy = corev1.RestartPolicyAlways
	})
	if err := kc.NodeV1().RuntimeClasses().Delete(ctx, "podsync-late", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	n.start(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s log ends:\n%s", n.d.Name(), tailFile(n.d.Log(), 3000))
		}
		n.d.Stop()
	})
	kubeconfig, err := c.NodeKubeconfig(n.name)
	if err != nil {
		t.Fatal(err)
	}
	vkp := startVKAs(t, c, kubeconfig, []*node{n})
	t.Cleanup(func() {
		vkp.stop(t)
		if t.Failed() {
			t.Logf("podsync-vk log ends:\n%s", tailFile(vkp.log, 5000))
		}
	})
	eventually(t, time.Minute, "node "+n.name+" Ready", func() (bool, string) {
		st, err := nodeReady(kc, n.name)
		return st == corev1.ConditionTrue, fmt.Sprint(st, err)
	})

	pod("override", "echo $(hostname)';'$(hostname -f)';'", func(p *corev1.Pod) { p.Spec.HostnameOverride = ptr.To("override.example.host") })
	pod("wrong-os", "true", func(p *corev1.Pod) { p.Spec.OS = &corev1.PodOS{Name: corev1.Windows} })
	pod("fallback", "/bin/echo -n DONE; /bin/false", func(p *corev1.Pod) {
		p.Spec.Containers[0].TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
	})
	runtimeClass("podsync-runc")
	pod("rc", "trap 'exit 0' TERM; sleep 3600 & wait", func(p *corev1.Pod) { p.Spec.RuntimeClassName = ptr.To("podsync-runc") })

	get := func(name string) *corev1.Pod {
		p, err := kc.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get pod %s: %v", name, err)
		}
		return p
	}
	phase := func(name string, want corev1.PodPhase) *corev1.Pod {
		var p *corev1.Pod
		eventually(t, 2*time.Minute, name+" "+string(want), func() (bool, string) {
			p = get(name)
			return p.Status.Phase == want, fmt.Sprintf("%s %s %s", p.Status.Phase, p.Status.Reason, p.Status.Message)
		})
		return p
	}

	phase("override", corev1.PodSucceeded)
	if got := strings.TrimSpace(kubectl(t, c, "logs", "override")); got != "override.example.host;override.example.host;" {
		t.Errorf("hostname;hostname -f of the hostnameOverride pod = %q, want override.example.host twice", got)
	}

	if p := phase("wrong-os", corev1.PodFailed); p.Status.Reason != "PodOSNotSupported" {
		t.Errorf("pod for Windows: reason %q (%s), want PodOSNotSupported", p.Status.Reason, p.Status.Message)
	}

	p := phase("fallback", corev1.PodFailed)
	if cs := p.Status.ContainerStatuses; len(cs) != 1 || cs[0].State.Terminated == nil || cs[0].State.Terminated.Message != "DONE" {
		t.Errorf("FallbackToLogsOnError: container statuses %+v, want terminated with message DONE", cs)
	}

	p = phase("rc", corev1.PodRunning)
	if cpu, mem := p.Spec.Overhead[corev1.ResourceCPU], p.Spec.Overhead[corev1.ResourceMemory]; cpu.String() != "10m" || mem.String() != "16Mi" {
		t.Errorf("the RuntimeClass's pod: overhead %v, want the API server's 10m and 16Mi", p.Spec.Overhead)
	}
	if h := sandboxHandler(t, n, p); h != "runc" {
		t.Errorf("the RuntimeClass's pod: sandbox runtime handler %q, want runc", h)
	}

	// The pod whose RuntimeClass is gone waits, as on a kubelet.
	eventually(t, time.Minute, "late waiting with FailedCreatePodSandBox", func() (bool, string) {
		p := get("late")
		cs := p.Status.ContainerStatuses
		waiting := p.Status.Phase == corev1.PodPending && len(cs) == 1 && cs[0].State.Waiting != nil && cs[0].State.Waiting.Reason == "ContainerCreating"
		ev := eventWith(t, kc, "late", "FailedCreatePodSandBox")
		return waiting && strings.Contains(ev, `runtimeclass.node.k8s.io "podsync-late" not found`), fmt.Sprintf("%s %+v; event %q", p.Status.Phase, cs, ev)
	})
	runtimeClass("podsync-late")
	if h := sandboxHandler(t, n, phase("late", corev1.PodRunning)); h != "runc" {
		t.Errorf("late: sandbox runtime handler %q, want runc", h)
	}

	if strings.Contains(func() string { b, _ := os.ReadFile(vkp.log); return string(b) }(), "is forbidden") {
		t.Errorf("podsync-vk was refused something under the node's identity:\n%s", tailFile(vkp.log, 3000))
	}
	kubectl(t, c, "delete", "pod", "override", "wrong-os", "fallback", "rc", "late", "--wait=true", "--timeout=60s")
}

// sandboxHandler is the runtime handler of the sandbox of pod p on n's
// containerd.
func sandboxHandler(t *testing.T, n *node, p *corev1.Pod) string {
	t.Helper()
	for _, sb := range n.sandboxes(t) {
		if sb.GetMetadata().GetUid() == string(p.UID) {
			return sb.GetRuntimeHandler()
		}
	}
	t.Fatalf("no sandbox of pod %s on %s", p.Name, n.name)
	return ""
}

// eventWith is the message of pod's last event of reason, or "".
func eventWith(t *testing.T, kc kubernetes.Interface, pod, reason string) string {
	t.Helper()
	sel := fields.Set{"involvedObject.name": pod, "reason": reason}.AsSelector().String()
	l, err := kc.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{FieldSelector: sel})
	if err != nil || len(l.Items) == 0 {
		return ""
	}
	return l.Items[len(l.Items)-1].Message
}
