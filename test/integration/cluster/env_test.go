//go:build integration

package cluster_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/internal/testing/localcri"
)

// TestEnvReferencesUnderTheNodeIdentity: podsync-vk runs with the node's
// own identity (system:node:podsync-a), which the API server's Node
// authorizer holds to the objects of the node's pods — it listed and
// watched every Secret of the cluster, which that refuses — and a pod's
// env reaches podsyncd as references: its Secret and ConfigMap keys,
// status.podIP, status.hostIP(s) and resourceFieldRef are resolved by
// podsyncd (the node library resolved them: status.podIP left the pod
// Pending, resourceFieldRef arrived empty, and the Secret's value was
// stored in podsyncd's spec, its read API and the CRI annotations);
// resourceFieldRef values are the kubelet's, divisor and rounding up
// included, an unset limit the pod-level one, else the Node's
// allocatable. The
// Secret's value is in the container's environment and nowhere else: not
// in podsyncd's pod, the sandbox's and containers' annotations, the logs
// of podsyncd and podsync-vk, nor the pod's events.
func TestEnvReferencesUnderTheNodeIdentity(t *testing.T) {
	dir, c, _, kc := startCluster(t)
	n := &node{name: "podsync-a", inst: insts[0], dir: filepath.Join(dir, "a"), port: freePort(t)}
	if err := os.MkdirAll(filepath.Join(n.dir, "run"), 0o700); err != nil {
		t.Fatal(err)
	}
	n.socket = filepath.Join(n.dir, "run", "podsync.sock")
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
	eventually(t, time.Minute, "default service account", func() (bool, string) {
		_, err := kc.CoreV1().ServiceAccounts("default").Get(context.Background(), "default", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})

	ctx := t.Context()
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	password := "pw-" + hex.EncodeToString(b)
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db"}, StringData: map[string]string{"password": password}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "unrelated"}, StringData: map[string]string{"x": "y"}},
	} {
		if _, err := kc.CoreV1().Secrets("default").Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := kc.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "settings"},
		Data: map[string]string{"mode": "fast"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "envpod"},
		Spec: corev1.PodSpec{
			NodeName:                      n.name,
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name: "app", Image: localcri.BusyboxImage, Command: []string{"sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
				},
				Env: []corev1.EnvVar{
					{Name: "PW", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
						LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password"}}},
					{Name: "MODE", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
						LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Key: "mode"}}},
					{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
					{Name: "HOST_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.hostIP"}}},
					{Name: "HOST_IPS", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.hostIPs"}}},
					{Name: "CPU_LIMIT", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}}},
					{Name: "MEMORY_REQUEST", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "requests.memory"}}},
					{Name: "MEMORY_LIMIT", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory"}}},
					{Name: "MEMORY_LIMIT_MI", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{
						Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}},
					{Name: "MEMORY_LIMIT_M", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{
						Resource: "limits.memory", Divisor: resource.MustParse("1M")}}},
					{Name: "DSN", Value: "db://$(PW)@$(POD_IP)"},
				},
			}},
		},
	}
	if _, err := kc.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var running *corev1.Pod
	eventually(t, 2*time.Minute, "envpod Running", func() (bool, string) {
		p, err := kc.CoreV1().Pods("default").Get(context.Background(), "envpod", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		running = p
		return podReady(p), fmt.Sprintf("%s %s %s", p.Status.Phase, p.Status.Reason, p.Status.Message)
	})

	env := map[string]string{}
	for _, l := range strings.Split(kubectl(t, c, "exec", "envpod", "--", "env"), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			env[k] = v
		}
	}
	for _, w := range []struct{ name, want string }{
		{"PW", password}, {"MODE", "fast"}, {"POD_IP", running.Status.PodIP}, {"HOST_IP", "127.0.0.1"}, {"HOST_IPS", "127.0.0.1"},
		{"CPU_LIMIT", "1"}, {"MEMORY_REQUEST", "33554432"}, {"DSN", "db://" + password + "@" + running.Status.PodIP},
		// The kubelet's ExtractContainerResourceValue: divided by the
		// divisor and rounded up (64Mi is 67.1 M).
		{"MEMORY_LIMIT", "67108864"}, {"MEMORY_LIMIT_MI", "64"}, {"MEMORY_LIMIT_M", "68"},
		{"KUBERNETES_SERVICE_HOST", "10.250.0.1"},
	} {
		if env[w.name] != w.want || w.want == "" {
			t.Errorf("the container's %s = %q, want %q", w.name, env[w.name], w.want)
		}
	}

	// A container without limits: the pod-level cpu limit (1.5 cores
	// above the Node's allocatable, so that it cannot be mistaken for
	// it), memory the Node's allocatable (as the e2e Downward API tests
	// for pod level resources check them).
	nodeObj, err := kc.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	allocCPU, alloc := nodeObj.Status.Allocatable.Cpu().MilliValue(), nodeObj.Status.Allocatable.Memory().Value()
	if allocCPU <= 0 || alloc <= 0 {
		t.Fatalf("node %s reports no allocatable cpu or memory: %v", n.name, nodeObj.Status.Allocatable)
	}
	podCPU := allocCPU + 1500
	defaults := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "envdefaults"},
		Spec: corev1.PodSpec{
			NodeName:                      n.name,
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Resources: &corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(podCPU, resource.DecimalSI)},
			},
			Containers: []corev1.Container{{
				Name: "app", Image: localcri.BusyboxImage, Command: []string{"sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"},
				Env: []corev1.EnvVar{
					{Name: "CPU_LIMIT", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}}},
					{Name: "MEMORY_LIMIT", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory"}}},
					{Name: "MEMORY_LIMIT_MI", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{
						Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}},
				},
			}},
		},
	}
	if _, err := kc.CoreV1().Pods("default").Create(ctx, defaults, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "envdefaults Running", func() (bool, string) {
		p, err := kc.CoreV1().Pods("default").Get(context.Background(), "envdefaults", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return podReady(p), fmt.Sprintf("%s %s %s", p.Status.Phase, p.Status.Reason, p.Status.Message)
	})
	env = map[string]string{}
	for _, l := range strings.Split(kubectl(t, c, "exec", "envdefaults", "--", "env"), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			env[k] = v
		}
	}
	for _, w := range []struct{ name, want string }{
		{"CPU_LIMIT", fmt.Sprint((podCPU + 999) / 1000)}, {"MEMORY_LIMIT", fmt.Sprint(alloc)}, {"MEMORY_LIMIT_MI", fmt.Sprint((alloc + 1<<20 - 1) >> 20)},
	} {
		if env[w.name] != w.want {
			t.Errorf("the container without limits: %s = %q, want %q", w.name, env[w.name], w.want)
		}
	}

	// The value is nowhere but in the container.
	conn, err := grpc.NewClient("unix://"+n.socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	got, err := podsyncv1.NewPodSyncServiceClient(conn).GetPod(ctx, &podsyncv1.GetPodRequest{Namespace: "default", Name: "envpod"})
	if err != nil {
		t.Fatal(err)
	}
	places := map[string]string{"podsyncd's GetPod": protojson.Format(got)}
	rs, err := n.inst.RuntimeService(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rs.Close(context.Background()) }()
	sbs, err := rs.ListPodSandbox(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range sbs {
		places["sandbox "+sb.GetId()+" annotations"] = fmt.Sprint(sb.GetAnnotations(), sb.GetLabels())
	}
	ctrs, err := rs.ListContainers(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, ctr := range ctrs {
		places["container "+ctr.GetId()+" annotations"] = fmt.Sprint(ctr.GetAnnotations(), ctr.GetLabels())
	}
	for what, path := range map[string]string{"podsyncd's log": n.d.Log(), "podsync-vk's log": vkp.log} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		places[what] = string(b)
	}
	events, err := kc.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	places["events"] = fmt.Sprint(events.Items)
	for what, text := range places {
		if strings.Contains(text, password) {
			t.Errorf("the Secret's value is in %s", what)
		}
	}
	if strings.Contains(places["podsync-vk's log"], "is forbidden") {
		t.Errorf("podsync-vk was refused something under the node's identity:\n%s", tailFile(vkp.log, 3000))
	}
	kubectl(t, c, "delete", "pod", "envpod", "envdefaults", "--wait=true", "--timeout=60s")
}
