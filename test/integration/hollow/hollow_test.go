//go:build integration

package hollow_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/client"
	"github.com/podsync/podsync/internal/testing/localcluster"
)

// startCluster starts a control plane with two hollow podsync nodes
// behind one podsync-vk, their state on /dev/shm as the scale benchmark
// keeps it, stopped when the test ends (its directory kept if the test
// failed), and returns it with the admin's clientset.
func startCluster(t *testing.T) (*localcluster.Cluster, kubernetes.Interface) {
	t.Helper()
	dir, err := os.MkdirTemp("", "podsync-hollow-")
	if err != nil {
		t.Fatal(err)
	}
	state, err := os.MkdirTemp("/dev/shm", "podsync-hollow-state-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(state) })
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	c, err := localcluster.Start(ctx, localcluster.Options{Dir: dir, RepoDir: repo, KubeBin: kubeBin,
		Hollow: true, Nodes: 2, HollowBin: hollowBin, VKBin: vkBin, StateDir: state, Say: t.Logf})
	if err != nil {
		t.Fatalf("start the cluster (logs in %s): %v", dir, err)
	}
	for _, n := range c.Nodes {
		if !strings.HasPrefix(n.Socket, state+"/") {
			t.Errorf("node %s's socket %s is not in its state directory %s", n.Name, n.Socket, state)
		}
	}
	t.Cleanup(func() {
		if err := c.Stop(context.WithoutCancel(t.Context())); err != nil {
			t.Error(err)
		}
		if left, err := os.ReadDir(state); err != nil || len(left) > 0 {
			t.Errorf("the nodes' state directory after Stop: %v, %v; want it empty", left, err)
		}
		if t.Failed() {
			t.Logf("logs kept in %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kube.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	// The test's own transport, so that its idle connections are closed
	// before goleak looks.
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { utilnet.CloseIdleConnectionsFor(rt) })
	kc, err := kubernetes.NewForConfigAndClient(cfg, &http.Client{Transport: rt})
	if err != nil {
		t.Fatal(err)
	}
	return c, kc
}

// eventually polls cond every 200 ms until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s; last: %s", what, timeout, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// readyPods lists the app=web pods: those Ready and not deleted, by
// name, with their nodes, and how many exist at all.
func readyPods(ctx context.Context, t *testing.T, kc kubernetes.Interface) (ready map[string]string, all int) {
	t.Helper()
	pods, err := kc.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	ready = map[string]string{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && podReady(&p) {
			ready[p.Name] = p.Spec.NodeName
		}
	}
	return ready, len(pods.Items)
}

// nodePods counts the pods of namespace default podsyncd holds on node n.
func nodePods(ctx context.Context, t *testing.T, n *localcluster.Node) int {
	t.Helper()
	c, err := client.New(ctx, "unix://"+n.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	resp, err := c.ListPods(ctx, &podsyncv1.ListPodsRequest{Namespace: "default"})
	if err != nil {
		t.Fatalf("ListPods on %s: %v", n.Name, err)
	}
	return len(resp.GetPods())
}

// TestDeploymentOverTwoHollowNodes: two hollow podsync nodes under one
// podsync-vk are Nodes of a real control plane: a Deployment of four
// replicas, spread by kube-scheduler, is Ready on both; scaled down to
// two, the others are removed from the API server and from the nodes; a
// pod deleted is replaced by the ReplicaSet.
func TestDeploymentOverTwoHollowNodes(t *testing.T) {
	c, kc := startCluster(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	labels := map[string]string{"app": "web"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](4),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					// A short grace period: a scaled-down pod's object goes
					// when it ends (issue 40's part 1 measures the
					// kubelet's default of 30 s).
					TerminationGracePeriodSeconds: ptr.To[int64](2),
					Containers:                    []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
					// Both nodes, whatever the scheduler's scores.
					TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelHostname,
						WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: labels}}},
				},
			},
		},
	}
	start := time.Now()
	if _, err := kc.AppsV1().Deployments("default").Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var ready map[string]string
	eventually(t, time.Minute, "four replicas Ready over both nodes", func() (bool, string) {
		ready, _ = readyPods(ctx, t, kc)
		nodes := map[string]int{}
		for _, n := range ready {
			nodes[n]++
		}
		return len(ready) == 4 && nodes[c.Nodes[0].Name] == 2 && nodes[c.Nodes[1].Name] == 2, fmt.Sprint(ready)
	})
	t.Logf("four replicas Ready %s after the create", time.Since(start).Round(time.Millisecond))
	for _, n := range c.Nodes {
		if got := nodePods(ctx, t, n); got != 2 {
			t.Errorf("podsyncd of %s holds %d pods, want 2", n.Name, got)
		}
	}

	// Scale down: two pods go from the API server and from the nodes.
	// Unconditionally, as kubectl scale without --resource-version: the
	// Deployment controller writes the object's status meanwhile, and a
	// scale carrying the version read before that is refused.
	scale := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: autoscalingv1.ScaleSpec{Replicas: 2}}
	if _, err := kc.AppsV1().Deployments("default").UpdateScale(ctx, "web", scale, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "two pods left after the scale-down, on the API server and the nodes", func() (bool, string) {
		r, all := readyPods(ctx, t, kc)
		held := nodePods(ctx, t, c.Nodes[0]) + nodePods(ctx, t, c.Nodes[1])
		return len(r) == 2 && all == 2 && held == 2, fmt.Sprintf("%d ready of %d on the API server, %d on the nodes", len(r), all, held)
	})

	// A deleted pod is replaced.
	ready, _ = readyPods(ctx, t, kc)
	var victim string
	for name := range ready {
		victim = name
	}
	if err := kc.CoreV1().Pods("default").Delete(ctx, victim, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the deleted pod replaced", func() (bool, string) {
		r, all := readyPods(ctx, t, kc)
		names := make([]string, 0, len(r))
		for n := range r {
			names = append(names, n)
		}
		return len(r) == 2 && all == 2 && !slices.Contains(names, victim), strings.Join(names, ",")
	})
	if err := kc.AppsV1().Deployments("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}
