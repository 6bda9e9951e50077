//go:build integration

package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/podsync/podsync/internal/testing/localcri"
	"github.com/podsync/podsync/internal/testing/localcri/localcritest"
	"github.com/podsync/podsync/internal/testing/localkube"
)

// node is one podsync node: a podsyncd on its own containerd.
type node struct {
	name   string // the Kubernetes Node's
	inst   *localcri.Instance
	dir    string
	socket string
	port   int
	d      *localcritest.Podsyncd
}

func (n *node) start(t *testing.T) {
	t.Helper()
	n.d = localcritest.StartPodsyncd(t, localcritest.PodsyncdOptions{
		Bin: podsyncdBin, Instance: n.inst, Socket: n.socket,
		RootDir: filepath.Join(n.dir, "root"), PodLogDir: filepath.Join(n.dir, "logs"),
		NodeName: n.name, ShutdownTimeout: 10 * time.Second,
		Args: []string{"--log-format=console"},
		Log:  filepath.Join(n.dir, "podsyncd.log"), Name: "podsyncd " + n.name, ExitFails: true,
	})
	conn, err := grpc.NewClient("unix://"+n.socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	n.d.AwaitServing(conn, time.Minute)
}

// sandboxes lists the pod sandboxes on the node's containerd.
func (n *node) sandboxes(t *testing.T) []*runtimeapi.PodSandbox {
	t.Helper()
	rs, err := n.inst.RuntimeService(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rs.Close(context.Background()) }()
	sbs, err := rs.ListPodSandbox(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return sbs
}

// vkProcess is podsync-vk, a child process as operators run it.
type vkProcess struct {
	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

func startVK(t *testing.T, c *localkube.Cluster, nodes []*node) *vkProcess {
	t.Helper()
	return startVKAs(t, c, c.Kubeconfig, nodes)
}

// startVKAs is startVK with the identity of kubeconfig.
func startVKAs(t *testing.T, c *localkube.Cluster, kubeconfig string, nodes []*node) *vkProcess {
	t.Helper()
	args := []string{"--kubeconfig", kubeconfig, "--listen-address", "127.0.0.1", "--client-ca-file", c.CAFile()}
	for _, n := range nodes {
		args = append(args, "--node", fmt.Sprintf("name=%s,target=%s,port=%d", n.name, n.socket, n.port))
	}
	p := &vkProcess{done: make(chan struct{}), log: filepath.Join(c.Dir(), "..", "podsync-vk.log")}
	logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(vkBin, args...)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); _ = logf.Close(); close(p.done) }()
	return p
}

// stop ends podsync-vk with SIGTERM and checks it exits 0.
func (p *vkProcess) stop(t *testing.T) {
	t.Helper()
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		if !p.cmd.ProcessState.Success() {
			t.Errorf("podsync-vk exited with %v after SIGTERM; its log ends:\n%s", p.cmd.ProcessState, tailFile(p.log, 3000))
		}
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Error("podsync-vk ignored SIGTERM for 30s")
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		ok, s := cond()
		if ok {
			return
		}
		last = s
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("%s: not within %s (last: %s)", what, timeout, last)
}

func nodeReady(kc kubernetes.Interface, name string) (corev1.ConditionStatus, error) {
	n, err := kc.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status, nil
		}
	}
	return corev1.ConditionUnknown, nil
}

func podReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func listPods(t *testing.T, kc kubernetes.Interface, selector string) []corev1.Pod {
	t.Helper()
	l, err := kc.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// containerIDs maps each pod to its container IDs.
func containerIDs(pods []corev1.Pod) map[string]string {
	out := map[string]string{}
	for _, p := range pods {
		var ids []string
		for _, cs := range p.Status.ContainerStatuses {
			ids = append(ids, cs.ContainerID)
		}
		out[p.Name] = strings.Join(ids, ",")
	}
	return out
}

func kubectl(t *testing.T, c *localkube.Cluster, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(kubeBin, "kubectl"), append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

const deployment = `apiVersion: v1
kind: ConfigMap
metadata:
  name: web-page
  namespace: default
data:
  index.html: page v1
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
spec:
  replicas: 4
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      terminationGracePeriodSeconds: 2
      containers:
      - name: web
        image: ` + localcri.BusyboxImage + `
        command: ["sh", "-c", "echo hello from $(hostname); httpd -p 8080 -h /www; exec sleep 3600"]
        ports: [{containerPort: 8080}]
        volumeMounts: [{name: page, mountPath: /www}]
      volumes:
      - name: page
        configMap: {name: web-page}
`

const hostRoot = `apiVersion: v1
kind: Pod
metadata:
  name: hostroot
  namespace: default
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: ` + localcri.BusyboxImage + `
    command: ["sleep", "3600"]
    volumeMounts: [{name: root, mountPath: /host}]
  volumes:
  - name: root
    hostPath: {path: /}
`

// startCluster starts a control plane for the test, stopped (and its
// directory dir removed, unless the test failed) when it ends, and
// returns the admin's REST config and clientset.
func startCluster(t *testing.T) (dir string, c *localkube.Cluster, cfg *rest.Config, kc kubernetes.Interface) {
	t.Helper()
	var err error
	dir, err = os.MkdirTemp("", "podsync-cluster-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs kept in %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c, err = localkube.Start(ctx, localkube.Options{Dir: filepath.Join(dir, "kube"), BinDir: kubeBin, NodeMonitorGracePeriod: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	pids := c.Pids()
	t.Cleanup(func() {
		if t.Failed() {
			for _, b := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
				t.Logf("%s log ends:\n%s", b, tailFile(c.LogPath(b), 3000))
			}
		}
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
		for _, pid := range pids {
			if syscall.Kill(pid, 0) == nil {
				t.Errorf("control-plane process %d left running after Stop", pid)
			}
		}
		if _, err := os.Stat(c.Dir()); !os.IsNotExist(err) {
			t.Errorf("control-plane directory %s left after Stop", c.Dir())
		}
	})
	cfg, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
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
	kc, err = kubernetes.NewForConfigAndClient(cfg, &http.Client{Transport: rt})
	if err != nil {
		t.Fatal(err)
	}
	return dir, c, cfg, kc
}

// TestDeploymentOverTwoPodsyncNodes is issue 23's acceptance on a real
// control plane: a Deployment spread by kube-scheduler over two podsync
// nodes, the ReplicaSet replacing a deleted pod, a podsyncd stopped and
// started again, podsync-vk restarted, the Deployment deleted, and a pod
// podsync's Pod Security level refuses.
func TestDeploymentOverTwoPodsyncNodes(t *testing.T) {
	dir, c, cfg, kc := startCluster(t)
	nodes := []*node{
		{name: "podsync-a", inst: insts[0], dir: filepath.Join(dir, "a"), port: freePort(t)},
		{name: "podsync-b", inst: insts[1], dir: filepath.Join(dir, "b"), port: freePort(t)},
	}
	for _, n := range nodes {
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
	}
	vkp := startVK(t, c, nodes)
	t.Cleanup(func() {
		vkp.stop(t)
		if t.Failed() {
			t.Logf("podsync-vk log ends:\n%s", tailFile(vkp.log, 5000))
		}
	})
	for _, n := range nodes {
		eventually(t, time.Minute, "node "+n.name+" Ready", func() (bool, string) {
			st, err := nodeReady(kc, n.name)
			return st == corev1.ConditionTrue, fmt.Sprint(st, err)
		})
	}
	// The ServiceAccount admission plugin refuses pods until the
	// controller-manager has made the namespace's default account.
	eventually(t, time.Minute, "default service account", func() (bool, string) {
		_, err := kc.CoreV1().ServiceAccounts("default").Get(context.Background(), "default", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})

	manifest := filepath.Join(dir, "web.yaml")
	if err := os.WriteFile(manifest, []byte(deployment), 0o600); err != nil {
		t.Fatal(err)
	}
	kubectl(t, c, "apply", "-f", manifest)
	allReady := func(want int) func() (bool, string) {
		return func() (bool, string) {
			pods := listPods(t, kc, "app=web")
			ready := 0
			var s []string
			for _, p := range pods {
				if podReady(&p) {
					ready++
				}
				s = append(s, fmt.Sprintf("%s@%s:%s/%s", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.Reason))
			}
			return ready == want && len(pods) == want, strings.Join(s, " ")
		}
	}
	eventually(t, 3*time.Minute, "4 pods Running and Ready", allReady(4))
	pods := listPods(t, kc, "app=web")
	perNode := map[string]int{}
	for _, p := range pods {
		perNode[p.Spec.NodeName]++
		if p.Status.PodIP == "" {
			t.Errorf("pod %s has no IP", p.Name)
		}
	}
	if perNode["podsync-a"] == 0 || perNode["podsync-b"] == 0 {
		t.Errorf("pods per node = %v, want both podsync nodes used", perNode)
	}
	t.Log(kubectl(t, c, "get", "pods", "-o", "wide"))

	// kubectl logs goes apiserver -> the node's kubelet API -> podsyncd.
	logs := kubectl(t, c, "logs", pods[0].Name)
	if !strings.Contains(logs, "hello from "+pods[0].Name) {
		t.Errorf("kubectl logs %s = %q, want the container's greeting", pods[0].Name, logs)
	}

	// kubectl exec goes apiserver -> /exec -> podsyncd's Exec.
	if out := kubectl(t, c, "exec", pods[0].Name, "--", "echo", "ok"); out != "ok\n" {
		t.Errorf("kubectl exec %s -- echo ok = %q, want ok", pods[0].Name, out)
	}
	if out := kubectl(t, c, "exec", pods[0].Name, "--", "cat", "/www/index.html"); out != "page v1" {
		t.Errorf("mounted ConfigMap file = %q, want page v1", out)
	}
	// An edit of the ConfigMap reaches the mounted file of the running
	// pod, as on a kubelet.
	kubectl(t, c, "patch", "configmap", "web-page", "-p", `{"data":{"index.html":"page v2"}}`)
	eventually(t, time.Minute, "the ConfigMap edit in the mounted file", func() (bool, string) {
		out := kubectl(t, c, "exec", pods[0].Name, "--", "cat", "/www/index.html")
		return out == "page v2", out
	})
	// kubectl port-forward goes apiserver -> /portforward -> podsyncd's
	// PortForward, to busybox httpd serving the ConfigMap.
	if page := portForwardGet(t, c, pods[0].Name, 8080); page != "page v2" {
		t.Errorf("page through kubectl port-forward = %q, want page v2", page)
	}
	// The kubelet API's /stats/summary has each node's pods, and only
	// them.
	for _, n := range nodes {
		code, raw := kubeletGet(t, cfg, n.port, "/stats/summary")
		var sum statsv1alpha1.Summary
		if err := json.Unmarshal([]byte(raw), &sum); code != http.StatusOK || err != nil {
			t.Fatalf("stats summary of %s: %d %v\n%s", n.name, code, err, raw)
		}
		var got, want []string
		for _, ps := range sum.Pods {
			got = append(got, ps.PodRef.Name)
			if ps.CPU == nil || ps.Memory == nil || ps.Memory.WorkingSetBytes == nil {
				t.Errorf("stats summary of %s: pod %s has no CPU or memory: %s", n.name, ps.PodRef.Name, raw)
			}
		}
		for _, p := range pods {
			if p.Spec.NodeName == n.name {
				want = append(want, p.Name)
			}
		}
		slices.Sort(got)
		slices.Sort(want)
		if sum.Node.NodeName != n.name || !slices.Equal(got, want) {
			t.Errorf("stats summary of %s: node %q pods %v, want pods %v", n.name, sum.Node.NodeName, got, want)
		}
		// Go's profiles, as the kubelet's enableProfilingHandler: for
		// whoever may use nodes/proxy, and no one else.
		if code, raw := kubeletGet(t, cfg, n.port, "/debug/pprof/cmdline"); code != http.StatusOK || !strings.Contains(raw, "podsync-vk") {
			t.Errorf("kubelet API /debug/pprof/cmdline of %s: %d %q, want podsync-vk's command line", n.name, code, raw)
		}
		if code, raw := kubeletGet(t, rest.AnonymousClientConfig(cfg), n.port, "/debug/pprof/cmdline"); code != http.StatusUnauthorized {
			t.Errorf("kubelet API /debug/pprof/cmdline of %s without credentials: %d %q, want 401", n.name, code, raw)
		}
	}

	// A deleted pod is replaced by the ReplicaSet.
	victim := pods[0].Name
	kubectl(t, c, "delete", "pod", victim, "--wait=true", "--timeout=60s")
	eventually(t, 2*time.Minute, "replacement of "+victim, func() (bool, string) {
		ok, s := allReady(4)()
		for _, p := range listPods(t, kc, "app=web") {
			if p.Name == victim {
				return false, s
			}
		}
		return ok, s
	})

	// Stopping podsyncd b: its Node goes NotReady, a keeps serving.
	before := containerIDs(listPods(t, kc, "app=web"))
	b := nodes[1]
	b.d.Stop()
	eventually(t, time.Minute, "node podsync-b NotReady", func() (bool, string) {
		st, err := nodeReady(kc, "podsync-b")
		return st != corev1.ConditionTrue, fmt.Sprint(st, err)
	})
	if st, err := nodeReady(kc, "podsync-a"); st != corev1.ConditionTrue {
		t.Errorf("node podsync-a = %s %v while b is down, want Ready", st, err)
	}
	b.start(t)
	eventually(t, time.Minute, "node podsync-b Ready again", func() (bool, string) {
		st, err := nodeReady(kc, "podsync-b")
		return st == corev1.ConditionTrue, fmt.Sprint(st, err)
	})
	eventually(t, time.Minute, "the same pods running with the same containers", func() (bool, string) {
		ok, s := allReady(4)()
		after := containerIDs(listPods(t, kc, "app=web"))
		return ok && fmt.Sprint(after) == fmt.Sprint(before), fmt.Sprintf("%s; before %v after %v", s, before, after)
	})

	// Restarting podsync-vk changes nothing on the nodes.
	sandboxesBefore := sandboxIDs(t, nodes)
	vkp.stop(t)
	vkp = startVK(t, c, nodes)
	time.Sleep(10 * time.Second) // the node library's start-up sweep and a resync
	eventually(t, time.Minute, "nothing changed after a restart of podsync-vk", func() (bool, string) {
		ok, s := allReady(4)()
		after := containerIDs(listPods(t, kc, "app=web"))
		return ok && fmt.Sprint(after) == fmt.Sprint(before), fmt.Sprintf("%s; before %v after %v", s, before, after)
	})
	if got := sandboxIDs(t, nodes); !slices.Equal(got, sandboxesBefore) {
		t.Errorf("sandboxes after restarting podsync-vk = %v, want %v", got, sandboxesBefore)
	}

	// Deleting the Deployment leaves no sandbox on either containerd.
	kubectl(t, c, "delete", "deployment", "web", "--wait=true", "--timeout=60s")
	eventually(t, 2*time.Minute, "no pods and no sandboxes", func() (bool, string) {
		pods := listPods(t, kc, "app=web")
		ids := sandboxIDs(t, nodes)
		return len(pods) == 0 && len(ids) == 0, fmt.Sprintf("%d pods, sandboxes %v", len(pods), ids)
	})

	// A pod the nodes' baseline level refuses is Failed with podsync's
	// reason, shown by kubectl describe.
	bad := filepath.Join(dir, "hostroot.yaml")
	if err := os.WriteFile(bad, []byte(hostRoot), 0o600); err != nil {
		t.Fatal(err)
	}
	kubectl(t, c, "apply", "-f", bad)
	var failed *corev1.Pod
	eventually(t, time.Minute, "hostroot Failed", func() (bool, string) {
		p, err := kc.CoreV1().Pods("default").Get(context.Background(), "hostroot", metav1.GetOptions{})
		if apierrors.IsNotFound(err) || err != nil {
			return false, fmt.Sprint(err)
		}
		failed = p
		return p.Status.Phase == corev1.PodFailed, fmt.Sprintf("%s %s %s", p.Status.Phase, p.Status.Reason, p.Status.Message)
	})
	if !strings.Contains(failed.Status.Message, "hostPath") || failed.Status.Reason == "" || failed.Status.Reason == "ProviderFailed" {
		t.Errorf("hostroot status = %q %q, want podsync's PodSecurity reason and a message naming hostPath", failed.Status.Reason, failed.Status.Message)
	}
	describe := kubectl(t, c, "describe", "pod", "hostroot")
	if !strings.Contains(describe, failed.Status.Reason) || !strings.Contains(describe, "hostPath") {
		t.Errorf("kubectl describe pod hostroot does not show podsync's reason %q:\n%s", failed.Status.Reason, describe)
	}
	kubectl(t, c, "delete", "pod", "hostroot", "--wait=true", "--timeout=60s")
	for _, n := range nodes {
		if got := n.sandboxes(t); len(got) != 0 {
			t.Errorf("node %s: %d sandboxes left", n.name, len(got))
		}
	}
}

func sandboxIDs(t *testing.T, nodes []*node) []string {
	t.Helper()
	var ids []string
	for _, n := range nodes {
		for _, sb := range n.sandboxes(t) {
			ids = append(ids, n.name+"/"+sb.GetId())
		}
	}
	slices.Sort(ids)
	return ids
}

func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
