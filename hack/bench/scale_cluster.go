package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"go.uber.org/zap"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/internal/testing/localcluster"
	"github.com/podsync/podsync/internal/testing/localcri"
	"github.com/podsync/podsync/internal/testing/localkube"
)

// agentUser is the identity podsync-vk and kwok run with: bound to
// cluster-admin, and in a flow schema of its own on the exempt priority
// level, so that the API server counts its requests
// (apiserver_flowcontrol_dispatched_requests_total) and never queues
// them, as it never queues the admin's.
const agentUser = "podsync-bench-agent"

// kwokAnnotation marks the Nodes kwok manages.
const kwokAnnotation = "kwok.x-k8s.io/node"

// settle is how long a cluster idles after its nodes are Ready, before
// the workload: what the agents do at their start is not the workload's.
const settle = 5 * time.Second

// goBuild builds pkg of repo into out.
func goBuild(ctx context.Context, repo, out, pkg string) error {
	cmd := exec.CommandContext(ctx, goCmd(), "build", "-o", out, pkg)
	cmd.Dir = repo
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w: %s", pkg, err, msg)
	}
	return nil
}

// buildKwok installs kwok version from the Go module proxy into
// .tmp/kwok/<version> (once) and writes the stages it runs with — the
// fast node and pod stages and the lease heartbeat, as kwokctl's
// defaults — from the module's kustomize/stage directory. It returns the
// binary and the stages file.
func buildKwok(ctx context.Context, repo, version string) (bin, stages string, err error) {
	dir := filepath.Join(repo, ".tmp", "kwok", version)
	bin = filepath.Join(dir, "kwok")
	env := append(os.Environ(), "GOBIN="+dir, "GOFLAGS=-mod=mod")
	if _, err := os.Stat(bin); err != nil {
		cmd := exec.CommandContext(ctx, goCmd(), "install", "sigs.k8s.io/kwok/cmd/kwok@"+version)
		cmd.Dir, cmd.Env = os.TempDir(), env
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", "", fmt.Errorf("go install sigs.k8s.io/kwok/cmd/kwok@%s: %w: %s", version, err, tailString(string(out), 1500))
		}
	}
	cmd := exec.CommandContext(ctx, goCmd(), "mod", "download", "-json", "sigs.k8s.io/kwok@"+version)
	cmd.Dir, cmd.Env = os.TempDir(), env
	out, err := cmd.Output()
	if err != nil {
		return "", "", fmt.Errorf("go mod download sigs.k8s.io/kwok@%s: %w", version, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		return "", "", fmt.Errorf("go mod download sigs.k8s.io/kwok@%s: no module directory in %q", version, out)
	}
	var all bytes.Buffer
	for _, f := range []string{"node/fast/node-initialize.yaml", "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
		"pod/fast/pod-ready.yaml", "pod/fast/pod-complete.yaml", "pod/fast/pod-delete.yaml"} {
		data, err := os.ReadFile(filepath.Join(mod.Dir, "kustomize", "stage", f))
		if err != nil {
			return "", "", fmt.Errorf("kwok %s stages: %w", version, err)
		}
		all.WriteString("---\n")
		all.Write(data)
	}
	stages = filepath.Join(dir, "stages.yaml")
	if err := os.WriteFile(stages, all.Bytes(), 0o644); err != nil {
		return "", "", err
	}
	return bin, stages, nil
}

// adminClient returns a clientset of the admin kubeconfig, with room for
// the benchmark's bursts of creates.
func adminClient(kubeconfig string) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 200, 400
	return kubernetes.NewForConfig(cfg)
}

// setupAgent issues agentUser's kubeconfig, binds it to cluster-admin and
// gives it its flow schema.
func setupAgent(ctx context.Context, kube *localkube.Cluster, kc kubernetes.Interface) (string, error) {
	kubeconfig, err := kube.UserKubeconfig("bench-agent", agentUser)
	if err != nil {
		return "", err
	}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: agentUser},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: agentUser}}}
	if _, err := kc.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("bind %s to cluster-admin: %w", agentUser, err)
	}
	for _, fs := range agentFlowSchemas() {
		if _, err := kc.FlowcontrolV1().FlowSchemas().Create(ctx, fs, metav1.CreateOptions{}); err != nil {
			return "", fmt.Errorf("flow schema %s of %s: %w", fs.Name, agentUser, err)
		}
	}
	return kubeconfig, nil
}

// apiCounts are the API server's counters the benchmark reads.
type apiCounts struct {
	requests float64 // apiserver_request_total, every request
	// agent are the agent's requests by kind, dispatched in agentUser's
	// flow schemas.
	agent   requestCounts
	watches float64 // apiserver_longrunning_requests of verb WATCH
}

// scrapeAPI reads the API server's /metrics.
func scrapeAPI(ctx context.Context, kc kubernetes.Interface) (apiCounts, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	body, err := kc.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return apiCounts{}, fmt.Errorf("scrape the API server's metrics: %w", err)
	}
	return parseAPICounts(bytes.NewReader(body))
}

// parseAPICounts reads the counters from the API server's metrics text.
func parseAPICounts(r io.Reader) (apiCounts, error) {
	var c apiCounts
	err := metricLines(r, func(name, labels string, v float64) {
		switch name {
		case "apiserver_request_total":
			c.requests += v
		case "apiserver_flowcontrol_dispatched_requests_total":
			if k, ok := requestKindOf(labelValue(labels, "flow_schema")); ok {
				c.agent[k] += v
			}
		case "apiserver_longrunning_requests":
			if labelValue(labels, "verb") == "WATCH" {
				c.watches += v
			}
		}
	})
	return c, err
}

// procUsage is the summed CPU (ms) and RSS (bytes) of processes.
type procUsage struct {
	cpuMS float64
	rss   int64
}

func usageOf(pids []int) (procUsage, error) {
	var u procUsage
	for _, pid := range pids {
		t, err := localcri.ProcCPU(pid)
		if err != nil {
			return u, err
		}
		rss, _, err := procMemory(pid)
		if err != nil {
			return u, err
		}
		u.cpuMS += ticksToMS(t.Self + t.Children)
		u.rss += rss
	}
	return u, nil
}

// workload is one run's measured part: the Deployments created, each
// pod's creation → Running and the time to all Running, with the agent's
// and the API server's counters around it.
type workload struct {
	kc       kubernetes.Interface
	nodes    []string
	pods     int // per node
	spread   bool
	agent    func() []int // the agent's processes
	hollow   func() []int // the hollow nodes' (nil for kwok)
	watchesB float64      // WATCH requests before the agent started
	// idle is how long the agents are measured idle, before the pods and
	// once they run (0: not measured).
	idle time.Duration
	// profile, if set, profiles the agent for d (-profile): from the
	// first Deployment's creation ("create") and over the idle window
	// with the pods running ("idle"); it returns where the profile is.
	profile func(ctx context.Context, what string, d time.Duration) (string, error)
	// timeline is where each pod's creation, binding and Running are
	// written once all run (podWatch.writeTimeline).
	timeline string
}

// run creates a Deployment of w.pods replicas per node and waits until
// every pod is Running, filling r.
func (w workload) run(ctx context.Context, log *zap.Logger, r *scaleRun) error {
	time.Sleep(settle)
	if w.idle > 0 {
		var err error
		if r.idle.empty, r.nodeIdle.empty, err = w.idleWindow(ctx, log, false); err != nil {
			return err
		}
	}
	agentB, err := usageOf(w.agent())
	if err != nil {
		return fmt.Errorf("agent usage: %w", err)
	}
	var nodesB procUsage
	if w.hollow != nil {
		if nodesB, err = usageOf(w.hollow()); err != nil {
			return fmt.Errorf("hollow nodes' usage: %w", err)
		}
	}
	apiB, err := scrapeAPI(ctx, w.kc)
	if err != nil {
		return err
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	pw, err := watchPods(wctx, w.kc, "default", "")
	if err != nil {
		return fmt.Errorf("watch pods: %w", err)
	}
	var profiled chan error
	if w.profile != nil {
		profiled = make(chan error, 1)
		go func() {
			path, err := w.profile(wctx, "create", agentProfileWindow)
			if err == nil {
				log.Info("podsync-vk profiled", zap.String("profile", path))
			}
			profiled <- err
		}()
	}
	start := time.Now()
	for i, node := range w.nodes {
		if _, err := w.kc.AppsV1().Deployments("default").Create(ctx, deployment(i, node, w.pods, w.spread), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create deployment %d: %w", i, err)
		}
	}
	want := len(w.nodes) * w.pods
	timeout := 5*time.Minute + time.Duration(want)*50*time.Millisecond
	deadline := time.Now().Add(timeout)
	var last time.Time
	for {
		n, t, werr := pw.state()
		last = t
		if werr != nil {
			return werr
		}
		if n >= want {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: %d of %d within %s", errNotAllRunning, n, want, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	r.allRunning = msOf(last.Sub(start))
	r.latencies = pw.latencies()
	r.scheduled, r.started = pw.split()
	if err := pw.writeTimeline(w.timeline, start); err != nil {
		return fmt.Errorf("the pods' timeline: %w", err)
	}
	log.Info("all pods running", zap.Int("pods", want), zap.Duration("took", last.Sub(start).Round(time.Millisecond)))
	agentA, err := usageOf(w.agent())
	if err != nil {
		return fmt.Errorf("agent usage: %w", err)
	}
	r.agentCPU, r.agentRSSBefore, r.agentRSSAfter = agentA.cpuMS-agentB.cpuMS, agentB.rss, agentA.rss
	if w.hollow != nil {
		nodesA, err := usageOf(w.hollow())
		if err != nil {
			return fmt.Errorf("hollow nodes' usage: %w", err)
		}
		r.nodeCPU, r.nodeRSS = nodesA.cpuMS-nodesB.cpuMS, nodesA.rss
	}
	apiA, err := scrapeAPI(ctx, w.kc)
	if err != nil {
		return err
	}
	r.allRequests = apiA.requests - apiB.requests
	for k := range apiA.agent {
		r.agentByKind[k] = apiA.agent[k] - apiB.agent[k]
	}
	r.watches = apiA.watches - w.watchesB
	if profiled != nil {
		if err := <-profiled; err != nil {
			return err
		}
	}
	if w.idle > 0 {
		// The last pods' Ready conditions and events trail their Running.
		time.Sleep(settle)
		if r.idle.loaded, r.nodeIdle.loaded, err = w.idleWindow(ctx, log, true); err != nil {
			return err
		}
		r.idle.ok, r.nodeIdle.ok = true, w.hollow != nil
	}
	return nil
}

// deployment is the i-th Deployment: pods replicas of a pause container,
// pinned to node unless spread.
func deployment(i int, node string, pods int, spread bool) *appsv1.Deployment {
	labels := map[string]string{"app": fmt.Sprintf("scale-%03d", i)}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: labels["app"], Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(pods)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](1),
					Containers: []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("1m"), corev1.ResourceMemory: resource.MustParse("1Mi")}}}},
				},
			},
		},
	}
	if !spread {
		d.Spec.Template.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
	}
	return d
}

// timelineFile is each run's pods, one a line (podWatch.writeTimeline), in
// its log directory.
const timelineFile = "pods.tsv"

// runPodsync runs r on hollow podsync nodes behind podsync-vk.
func (b *scaleBench) runPodsync(ctx context.Context, r *scaleRun) (err error) {
	sc := b.cfg.scale
	dir := filepath.Join(b.dir, fmt.Sprintf("podsync-%d", r.nodes))
	_ = os.RemoveAll(dir)
	var kc kubernetes.Interface
	var watchesB float64
	var stateDir string
	if sc.nodeState != "" {
		if stateDir, err = os.MkdirTemp(sc.nodeState, "podsync-scale-"); err != nil {
			return fmt.Errorf("the hollow nodes' state directory: %w", err)
		}
		defer func() { err = errors.Join(err, os.RemoveAll(stateDir)) }()
	}
	c, err := localcluster.Start(ctx, localcluster.Options{Dir: dir, RepoDir: b.repo, KubeBin: b.kubeBin,
		Hollow: true, Nodes: r.nodes, HollowBin: b.hollowBin, VKBin: b.vkBin, VKs: sc.vks, StateDir: stateDir,
		// The nodes' own logs: warnings only, a hundred of them share the disk.
		PodsyncdArgs: []string{"--log-level=warn"},
		Say:          func(f string, a ...any) { b.log.Info(fmt.Sprintf(f, a...)) },
		BeforeVK: func(ctx context.Context, c *localcluster.Cluster) (string, error) {
			var err error
			if kc, err = adminClient(c.Kube.Kubeconfig); err != nil {
				return "", err
			}
			before, err := scrapeAPI(ctx, kc)
			if err != nil {
				return "", err
			}
			watchesB = before.watches
			return setupAgent(ctx, c.Kube, kc)
		}})
	if err != nil {
		return fmt.Errorf("start the cluster (logs in %s): %w", dir, err)
	}
	defer func() { err = errors.Join(err, c.Stop(context.WithoutCancel(ctx))) }()
	nodes := make([]string, 0, len(c.Nodes))
	for _, n := range c.Nodes {
		nodes = append(nodes, n.Name)
	}
	w := workload{kc: kc, nodes: nodes, pods: sc.pods, spread: sc.spread, watchesB: watchesB, idle: sc.idle,
		timeline: filepath.Join(dir, timelineFile),
		agent: func() []int {
			var pids []int
			for _, p := range c.VKs {
				pids = append(pids, p.Pid())
			}
			return pids
		},
		hollow: func() []int {
			var pids []int
			for _, n := range c.Nodes {
				pids = append(pids, n.Podsyncd.Pid())
			}
			return pids
		}}
	if dir := b.cfg.profileDir; dir != "" {
		w.profile = func(ctx context.Context, what string, d time.Duration) (string, error) {
			return profileAgent(ctx, c.Kube.Kubeconfig, c.Nodes[0].KubeletPort, d, dir, fmt.Sprintf("%dnodes-%s", r.nodes, what))
		}
	}
	if err := w.run(ctx, b.log, r); err != nil {
		return err
	}
	logs := make([]string, 0, len(c.Nodes))
	for _, n := range c.Nodes {
		logs = append(logs, n.Podsyncd.Log)
	}
	r.refused, err = countRefused(logs)
	return err
}

// runKwok runs r on kwok's simulated nodes.
func (b *scaleBench) runKwok(ctx context.Context, r *scaleRun) (err error) {
	sc := b.cfg.scale
	dir := filepath.Join(b.dir, fmt.Sprintf("kwok-%d", r.nodes))
	_ = os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	// The control plane as localcluster starts it for the hollow nodes.
	kube, err := localkube.Start(ctx, localkube.Options{Dir: filepath.Join(dir, "kube"), BinDir: b.kubeBin, Keep: true,
		NodeMonitorGracePeriod: localcluster.NodeMonitorGracePeriod})
	if err != nil {
		return fmt.Errorf("start the control plane (logs in %s): %w", dir, err)
	}
	defer func() { err = errors.Join(err, kube.Stop()) }()
	kc, err := adminClient(kube.Kubeconfig)
	if err != nil {
		return err
	}
	before, err := scrapeAPI(ctx, kc)
	if err != nil {
		return err
	}
	kubeconfig, err := setupAgent(ctx, kube, kc)
	if err != nil {
		return err
	}
	nodes := make([]string, 0, r.nodes)
	for i := range r.nodes {
		name := fmt.Sprintf("kwok-%03d", i+1)
		nodes = append(nodes, name)
		if _, err := kc.CoreV1().Nodes().Create(ctx, kwokNode(name), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create node %s: %w", name, err)
		}
	}
	ports, err := localcri.FreePorts(1)
	if err != nil {
		return err
	}
	p, err := localcluster.StartProcess(dir, "kwok", b.kwokBin, "--kubeconfig", kubeconfig, "--config", b.kwokStages,
		"--manage-all-nodes=false", "--manage-nodes-with-annotation-selector", kwokAnnotation+"=fake",
		"--server-address", "127.0.0.1:"+strconv.Itoa(ports[0]), "--node-ip", "127.0.0.1",
		"--node-lease-duration-seconds", "40")
	if err != nil {
		return err
	}
	defer p.Stop()
	if err := waitNodesReady(ctx, kc, r.nodes, 2*time.Minute, p); err != nil {
		return fmt.Errorf("%w (kwok's log: %s)", err, p.Log)
	}
	w := workload{kc: kc, nodes: nodes, pods: sc.pods, spread: sc.spread, watchesB: before.watches, idle: sc.idle,
		timeline: filepath.Join(dir, timelineFile),
		agent:    func() []int { return []int{p.Pid()} }}
	return w.run(ctx, b.log, r)
}

// kwokNode is a Node kwok manages, with a kubelet's default capacity.
func kwokNode(name string) *corev1.Node {
	capacity := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods: resource.MustParse("110")}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name, "type": "kwok"},
			Annotations: map[string]string{kwokAnnotation: "fake"}},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
}

// waitNodesReady waits until n Nodes are Ready and schedulable, or p exits.
func waitNodesReady(ctx context.Context, kc kubernetes.Interface, n int, timeout time.Duration, p *localcluster.Process) error {
	deadline := time.Now().Add(timeout)
	for {
		list, err := kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		ready := 0
		if err == nil {
			for i := range list.Items {
				// Untainted too, as the hollow nodes (localcluster.WaitReady).
				if ok, _ := localcluster.Schedulable(&list.Items[i]); ok {
					ready++
				}
			}
		}
		if ready >= n {
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("%d of %d Nodes Ready and schedulable within %s: %w", ready, n, timeout, err)
			}
			return fmt.Errorf("%d of %d Nodes Ready and schedulable within %s", ready, n, timeout)
		}
		select {
		case <-p.Exited():
			return fmt.Errorf("%s exited with %d of %d Nodes Ready and schedulable", p.Name, ready, n)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}
