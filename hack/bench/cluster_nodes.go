package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/internal/testing/localcluster"
	"github.com/podsync/podsync/internal/testing/localcri"
	"github.com/podsync/podsync/internal/testing/localkube"
)

// clusterEnv is the running cluster: the control plane, the podsync node
// (podsyncd on its containerd, behind podsync-vk) and the kubelet node
// (the kubelet on its own containerd), each with a Deployment of its own.
type clusterEnv struct {
	cluster *localcluster.Cluster
	kc      kubernetes.Interface
	// podsyncRT and kubeletRT are the two nodes' containerds.
	podsyncRT, kubeletRT *localcri.Instance
	kubelet              *kubelet
	kubectlBin           string
}

// clusterNamespace holds the benchmark's Deployments.
const clusterNamespace = "default"

// clusterTeardownMax bounds the teardown of each containerd, which stops
// and removes every pod left (15 minutes, as the single-node bench's
// removal of the kubelet's hundred pods).
const clusterTeardownMax = 15 * time.Minute

// clusterNodeReadyMax bounds the wait for the kubelet's Node to be Ready.
const clusterNodeReadyMax = 2 * time.Minute

// setup builds what the run needs and starts the cluster: both
// containerds (the flavour of PODSYNC_CONTAINERD, default 2.x), the
// control plane with the podsync node and podsync-vk
// (internal/testing/localcluster, as make run-cluster), then the
// kubelet, registered as kubelet-a. A kubelet that cannot be built or
// started is recorded in res, not fatal: the podsync runs go on and the
// report says why the kubelet's columns are empty. The env returned,
// even with an error, is to be closed.
func (b *clusterBench) setup(ctx context.Context, res *clusterResults) (_ *clusterEnv, err error) {
	_ = os.RemoveAll(b.dir)
	if err := os.MkdirAll(b.dir, 0o755); err != nil {
		return nil, err
	}
	kubeBin, err := localkube.Build(ctx, b.repo, os.Stderr)
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(b.dir, "bin")
	podsyncdBin, vkBin := filepath.Join(bin, "podsyncd"), filepath.Join(bin, "podsync-vk")
	for pkg, out := range map[string]string{"./cmd/podsyncd": podsyncdBin, "./cmd/podsync-vk": vkBin} {
		if err := goBuild(ctx, b.repo, out, pkg); err != nil {
			return nil, err
		}
	}
	kubeletBin, kv, kerr := (&bench{log: b.log, cfg: b.cfg, repo: b.repo}).findKubelet(ctx)
	if kerr != nil {
		res.kubeletErr = kerr.Error()
		b.log.Error("kubelet", zap.Error(kerr))
	}
	res.kubeletVersion = kv
	flavour, err := localcri.FlavourFromEnv()
	if err != nil {
		return nil, err
	}
	e := &clusterEnv{kubectlBin: filepath.Join(kubeBin, "kubectl")}
	b.log.Info("starting the two nodes' containerds", zap.String("flavour", string(flavour)))
	for _, rt := range []**localcri.Instance{&e.podsyncRT, &e.kubeletRT} {
		// A default route through the bridge: the pod network of a
		// cluster, as localcluster starts its nodes' containerds.
		inst, err := localcri.Start(ctx, localcri.Options{Flavour: flavour, Logger: b.log.Named("localcri"), RepoDir: b.repo,
			LogDir: b.dir, DefaultRoute: true})
		if err != nil {
			return e, fmt.Errorf("start containerd: %w", err)
		}
		*rt = inst
	}
	if res.runtime, err = runtimeVersion(ctx, e.podsyncRT); err != nil {
		return e, err
	}
	say := func(f string, a ...any) { b.log.Info(fmt.Sprintf(f, a...)) }
	var podsyncdArgs []string
	if !b.cfg.cluster.rateLimit {
		cfg := filepath.Join(b.dir, "podsyncd.yaml")
		if err := os.WriteFile(cfg, []byte(podsyncdNoRateLimit), 0o644); err != nil {
			return e, err
		}
		podsyncdArgs = []string{"--config", cfg}
	}
	e.cluster, err = localcluster.Start(ctx, localcluster.Options{Dir: filepath.Join(b.dir, "cluster"), RepoDir: b.repo, KubeBin: kubeBin,
		PodsyncdBin: podsyncdBin, VKBin: vkBin, Nodes: 1, Runtimes: []*localcri.Instance{e.podsyncRT},
		PodsyncdArgs: podsyncdArgs, Logger: b.log.Named("localcluster"), Say: say})
	if err != nil {
		return e, fmt.Errorf("start the control plane and the podsync node (logs in %s): %w", b.dir, err)
	}
	if e.kc, err = adminClient(e.cluster.Kube.Kubeconfig); err != nil {
		return e, err
	}
	if e.cluster.Nodes[0].Name != podsyncNodeName {
		return e, fmt.Errorf("the podsync node is %s, want %s", e.cluster.Nodes[0].Name, podsyncNodeName)
	}
	if res.kubeletErr == "" {
		if err := e.startKubelet(ctx, b.log, kubeletBin, b.dir); err != nil {
			res.kubeletErr = err.Error()
			b.log.Error("kubelet node", zap.Error(err))
		}
	}
	for _, node := range []clusterNode{nodePodsync, nodeKubelet} {
		if _, err := e.kc.AppsV1().Deployments(clusterNamespace).Create(ctx, clusterDeployment(node), metav1.CreateOptions{}); err != nil {
			return e, fmt.Errorf("create the %s node's deployment: %w", node, err)
		}
	}
	// What the nodes do at their start is not the workload's.
	time.Sleep(settle)
	return e, nil
}

// podsyncdNoRateLimit is the podsync node's configuration without
// -cluster-rate-limit: podsync-vk (root, admin) unthrottled, as the
// single-node bench runs podsyncd. With podsyncd's default limit (20
// mutating calls a second per identity, burst 40) podsync-vk's two or
// three calls per pod (its objects, its token, SyncPod) are refused
// RATE_LIMITED past a few dozen pods at once.
const podsyncdNoRateLimit = "security:\n  roles:\n    admin: [\"uid:0\"]\n  rateLimit:\n    perSecond: -1\n    read: {perSecond: -1}\n"

// runtimeVersion is what inst's CRI says it is.
func runtimeVersion(ctx context.Context, inst *localcri.Instance) (string, error) {
	v, err := localcri.ProbeVersion(ctx, inst.Endpoint())
	if err != nil {
		return "", fmt.Errorf("cri version: %w", err)
	}
	return v.GetRuntimeName() + " " + v.GetRuntimeVersion(), nil
}

// startKubelet starts the kubelet on its containerd, registered with the
// API server as kubelet-a (a client certificate of system:node:kubelet-a
// in system:nodes from the cluster's CA, which the API server's Node
// authorizer holds to that node's objects), its pods under its
// containerd's own cgroup root, and waits until its Node is Ready.
func (e *clusterEnv) startKubelet(ctx context.Context, log *zap.Logger, bin, dir string) error {
	kubeconfig, err := e.cluster.Kube.NodeKubeconfig(kubeletNodeName)
	if err != nil {
		return err
	}
	ip, err := utilnet.ChooseHostInterface()
	if err != nil {
		return fmt.Errorf("the kubelet's node IP (the kubelet refuses a loopback one): %w", err)
	}
	s := kubeletSettings{dir: filepath.Join(dir, "kubelet"), cgroupRoot: e.kubeletRT.CgroupRoot(), endpoint: e.kubeletRT.Endpoint(),
		node: kubeletNodeName, kubeconfig: kubeconfig, clientCA: e.cluster.Kube.CAFile(), nodeIP: ip.String()}
	k, err := launchKubelet(ctx, log, bin, s, newToken(), filepath.Join(dir, "kubelet.log"))
	if err != nil {
		return err
	}
	e.kubelet = k
	if err := waitNodeReady(ctx, e.kc, kubeletNodeName, clusterNodeReadyMax, k.Done()); err != nil {
		return fmt.Errorf("%w; kubelet log (%s):\n%s", err, k.logPath, tailFile(k.logPath, 15))
	}
	return nil
}

// waitNodeReady waits until Node name is Ready and schedulable (untainted
// by the node-lifecycle controller, as the podsync Nodes:
// localcluster.WaitReady), or exited is closed.
func waitNodeReady(ctx context.Context, kc kubernetes.Interface, name string, timeout time.Duration, exited <-chan struct{}) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		node, err := kc.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			ok, why := localcluster.Schedulable(node)
			if ok {
				return nil
			}
			last = fmt.Errorf("node %s: %s", name, why)
		} else {
			last = err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s not Ready within %s: %w", name, timeout, last)
		}
		select {
		case <-exited:
			return fmt.Errorf("the kubelet exited before node %s was Ready (last: %w)", name, last)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// close stops the kubelet, the cluster (podsync-vk, podsyncd, the control
// plane) and both containerds, which remove every pod left, and then the
// kubelet's cgroups and files.
func (e *clusterEnv) close(ctx context.Context) error {
	var errs []error
	if e.kubelet != nil {
		e.kubelet.stop()
	}
	if e.cluster != nil {
		errs = append(errs, e.cluster.Stop(ctx))
	}
	for _, rt := range []*localcri.Instance{e.kubeletRT, e.podsyncRT} {
		if rt != nil {
			// A hundred pods on a loaded machine: a teardown cut short
			// leaves their processes, links and cgroups on the host.
			tctx, cancel := context.WithTimeout(ctx, clusterTeardownMax)
			errs = append(errs, rt.Teardown(tctx))
			cancel()
		}
	}
	if e.kubelet != nil {
		errs = append(errs, e.kubelet.removeState())
	}
	return errors.Join(errs...)
}

// deploymentName is the name (and app label) of node's Deployment.
func deploymentName(node clusterNode) string { return "bench-" + string(node) }

// nodeName is node's Kubernetes Node.
func nodeName(node clusterNode) string {
	if node == nodeKubelet {
		return kubeletNodeName
	}
	return podsyncNodeName
}

// clusterDeployment is node's Deployment: no replicas yet, pinned to the
// node by a nodeSelector on its hostname, of busybox's default command
// (which exits at once on SIGTERM) from the image every localcri
// containerd holds, taken as present; the default grace period (30 s)
// and service-account token, as `kubectl create deployment` makes them.
func clusterDeployment(node clusterNode) *appsv1.Deployment {
	labels := map[string]string{"app": deploymentName(node)}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: deploymentName(node), Namespace: clusterNamespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(0)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{corev1.LabelHostname: nodeName(node)},
					Containers: []corev1.Container{{Name: "main", Image: localcri.BusyboxImage,
						ImagePullPolicy: corev1.PullIfNotPresent}},
				},
			},
		},
	}
}
