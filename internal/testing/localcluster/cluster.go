package localcluster

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/podsync/podsync/internal/testing/localcri"
	"github.com/podsync/podsync/internal/testing/localkube"
)

// Options say what to start.
type Options struct {
	// Dir holds the logs and the state of every component; Start creates
	// it.
	Dir string
	// RepoDir is the podsync checkout; Start builds podsyncd and
	// podsync-vk from it into BinDir.
	RepoDir string
	// BinDir is where podsyncd and podsync-vk are built, unless
	// PodsyncdBin and VKBin name them built already.
	BinDir string
	// PodsyncdBin and VKBin, if both set, are the podsyncd and podsync-vk
	// to run; Start builds neither. Hollow nodes need VKBin alone.
	PodsyncdBin, VKBin string
	// KubeBin holds the control plane's binaries (localkube.Build).
	KubeBin string
	// Nodes is how many podsync nodes (each a podsyncd on its own private
	// containerd) podsync-vk serves; zero means 2, or len(Runtimes).
	Nodes int
	// Hollow makes every node a hollow podsync node (hack/hollow,
	// internal/testing/hollow): podsyncd on a simulated runtime, with no
	// containerd, no pod network and no root, named hollow-001, …; up
	// to MaxHollowNodes. Runtimes and Images do not apply.
	Hollow bool
	// HollowBin is the hollow node to run; empty: Start builds hack/hollow
	// into BinDir.
	HollowBin string
	// StateDir, if set, holds each hollow node's state — its root
	// directory (store, pod directories, volumes), pod logs and socket —
	// in a directory named after the node, instead of Dir: a tmpfs (such
	// as /dev/shm) spares a hundred hollow nodes one disk's journal, which
	// no two real nodes share. Stop removes what it holds; the nodes' own
	// logs stay in Dir.
	StateDir string
	// VKs is how many podsync-vk processes serve the nodes, each a
	// contiguous share of them (podsync-vk, podsync-vk-2, …); zero means
	// one.
	VKs int
	// VKArgs are further flags of every podsync-vk.
	VKArgs []string
	// BeforeVK, if set, runs once the control plane and the nodes are up,
	// before podsync-vk starts, and returns the kubeconfig podsync-vk runs
	// with (empty: the admin's): an identity the caller bound a role to
	// (the scale benchmark counts its requests).
	BeforeVK func(ctx context.Context, c *Cluster) (kubeconfig string, err error)
	// Runtimes, if set, are the nodes' containerds, one per node, started
	// by the caller (with DefaultRoute, for the pod network) and left
	// running by Stop; otherwise Start starts one per node.
	Runtimes []*localcri.Instance
	// PodsyncdArgs are further flags of every podsyncd, after
	// NodeArgs (a later flag wins).
	PodsyncdArgs []string
	// APIServerArgs are further flags of kube-apiserver.
	APIServerArgs []string
	// Images are image tarballs (localcri.WriteImageArchive) imported into
	// every node's containerd before its podsyncd starts, with the names
	// each holds.
	Images []Images
	// MetricsServer, if set, is a metrics-server binary (localkube's
	// BuildBinaries "metrics-server") Start runs once the nodes are Ready
	// and registers as the Metrics API, for kubectl top.
	MetricsServer string
	// Logger receives the harness's warnings; nil discards.
	Logger *zap.Logger
	// Say, if set, is told what is being started.
	Say func(format string, args ...any)
}

// NodeArgs are the flags of every podsyncd beyond its endpoints and
// directories: each node keeps podsyncd's default Pod Security ceiling,
// baseline (a namespace's own level, enforced by the API server and by
// podsyncd, may be stricter), with SYS_PTRACE allowed, which kubectl
// debug's default profile (general) gives the debug container so that it
// can trace the processes of the container it targets: kubectl debug
// POD --image=… -- sh runs as on a kubelet's node in the default
// namespace. Its other profiles beyond baseline (netadmin's NET_ADMIN and
// NET_RAW) are the node's to refuse.
var NodeArgs = []string{"--allowed-capabilities=SYS_PTRACE"}

// Images is an image tarball and the names it holds, imported into each
// node's containerd, and images each node's registry serves under their
// own names (localcri.Instance.ServeImages): those a pod pulls with
// imagePullPolicy Always.
type Images struct {
	Tar   string
	Refs  []string
	Serve []localcri.ImageSpec
}

// NodeMonitorGracePeriod is kube-controller-manager's
// --node-monitor-grace-period in the clusters Start starts (the scale
// benchmark starts kwok's control plane with it too).
const NodeMonitorGracePeriod = 20 * time.Second

// MaxHollowNodes bounds Options.Nodes of a hollow cluster.
const MaxHollowNodes = 999

// Node is one podsync node: its containerd and its podsyncd.
type Node struct {
	// Name is the Kubernetes Node's name, podsync-a, podsync-b, … (or
	// hollow-001, … for hollow nodes).
	Name string
	// Runtime is the node's private containerd (nil for a hollow node).
	Runtime *localcri.Instance
	// Socket is podsyncd's unix socket.
	Socket string
	// Podsyncd is the podsyncd process (the hollow node's, for one).
	Podsyncd *Process
	// KubeletPort is the port of the node's kubelet API (podsync-vk's).
	KubeletPort int
}

// Cluster is a running control plane with podsync nodes behind
// podsync-vk.
type Cluster struct {
	opts  Options
	Kube  *localkube.Cluster
	Nodes []*Node
	// VK is the (first) podsync-vk; VKs all of them, VKs[i] serving
	// VKNodes(i).
	VK  *Process
	VKs []*Process
	// MetricsServer is the metrics-server process (Options.MetricsServer),
	// nil without one.
	MetricsServer *Process
	// api makes the kubernetes Service reach the API server from pods.
	api *apiService
}

// Process is a child process whose output goes to a log file.
type Process struct {
	Name string
	Log  string
	cmd  *exec.Cmd
	done chan struct{}
}

// Exited is closed when the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.done }

// Pid is the process's id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Stop sends SIGTERM and waits, then SIGKILL after 30 s.
func (p *Process) Stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// StartProcess runs bin with args in its own process group, its output in
// dir/name.log, killed if this process dies.
func StartProcess(dir, name, bin string, args ...string) (*Process, error) {
	path := filepath.Join(dir, name+".log")
	logf, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{Name: name, Log: path, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); _ = logf.Close(); close(p.done) }()
	return p, nil
}

// Start builds podsyncd and podsync-vk, starts the control plane, the
// podsync nodes and podsync-vk, and waits until every Node is Ready and
// schedulable (WaitReady). On failure it stops what it started.
func Start(ctx context.Context, o Options) (_ *Cluster, err error) {
	if o.Nodes == 0 {
		o.Nodes = 2
		if len(o.Runtimes) > 0 {
			o.Nodes = len(o.Runtimes)
		}
	}
	if o.VKs == 0 {
		o.VKs = 1
	}
	switch {
	case o.Hollow && (len(o.Runtimes) > 0 || len(o.Images) > 0):
		return nil, errors.New("localcluster: hollow nodes take no Runtimes or Images")
	case !o.Hollow && o.StateDir != "":
		return nil, errors.New("localcluster: StateDir is for hollow nodes")
	case len(o.Runtimes) > 0 && len(o.Runtimes) != o.Nodes:
		return nil, fmt.Errorf("localcluster: %d runtimes for %d nodes", len(o.Runtimes), o.Nodes)
	case o.Hollow && (o.Nodes < 1 || o.Nodes > MaxHollowNodes):
		return nil, fmt.Errorf("localcluster: %d hollow nodes: want 1 to %d", o.Nodes, MaxHollowNodes)
	case !o.Hollow && (o.Nodes < 1 || o.Nodes > 26):
		return nil, fmt.Errorf("localcluster: %d nodes: want 1 to 26", o.Nodes)
	case o.VKs < 1 || o.VKs > o.Nodes:
		return nil, fmt.Errorf("localcluster: %d podsync-vk processes for %d nodes", o.VKs, o.Nodes)
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Say == nil {
		o.Say = func(string, ...any) {}
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, err
	}
	if err := o.build(ctx); err != nil {
		return nil, err
	}
	c := &Cluster{opts: o}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Stop(context.WithoutCancel(ctx)))
		}
	}()
	o.Say("starting etcd, kube-apiserver, kube-scheduler and kube-controller-manager %s", localkube.Version)
	if c.Kube, err = localkube.Start(ctx, localkube.Options{Dir: filepath.Join(o.Dir, "kube"), BinDir: o.KubeBin, Keep: true,
		NodeMonitorGracePeriod: NodeMonitorGracePeriod, APIServerArgs: o.APIServerArgs}); err != nil {
		return nil, err
	}
	if o.Hollow {
		o.Say("starting %d hollow podsync nodes", o.Nodes)
	} else if err := enableForwarding(); err != nil {
		return nil, err
	}
	ports, err := localcri.FreePorts(o.Nodes)
	if err != nil {
		return nil, err
	}
	for i := range o.Nodes {
		n := &Node{Name: "podsync-" + string(rune('a'+i)), KubeletPort: ports[i]}
		if o.Hollow {
			n.Name = fmt.Sprintf("hollow-%03d", i+1)
		}
		c.Nodes = append(c.Nodes, n)
		if err := c.startNode(ctx, i, n); err != nil {
			return nil, fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	// podsync-vk gives up on a node that does not answer at its start.
	for _, n := range c.Nodes {
		if err := awaitServing(ctx, n, 2*time.Minute); err != nil {
			return nil, err
		}
	}
	if !o.Hollow {
		if err := c.serveAPIService(ctx); err != nil {
			return nil, err
		}
	}
	kubeconfig := c.Kube.Kubeconfig
	if o.BeforeVK != nil {
		k, err := o.BeforeVK(ctx, c)
		if err != nil {
			return nil, err
		}
		if k != "" {
			kubeconfig = k
		}
	}
	for i := range o.VKs {
		name := "podsync-vk"
		if i > 0 {
			name = fmt.Sprintf("podsync-vk-%d", i+1)
		}
		o.Say("starting %s for %d nodes", name, len(c.VKNodes(i)))
		args := append([]string{"--kubeconfig", kubeconfig, "--client-ca-file", c.Kube.CAFile()}, o.VKArgs...)
		for _, n := range c.VKNodes(i) {
			args = append(args, "--node", "name="+n.Name+",target="+n.Socket+",port="+strconv.Itoa(n.KubeletPort))
		}
		p, err := StartProcess(o.Dir, name, o.VKBin, args...)
		if err != nil {
			return nil, err
		}
		c.VKs = append(c.VKs, p)
	}
	c.VK = c.VKs[0]
	// Two minutes, and a second a node beyond 30: a hundred hollow
	// nodes register on a busy 2-core machine.
	if err := c.WaitReady(ctx, 2*time.Minute+time.Duration(max(0, o.Nodes-30))*time.Second); err != nil {
		return nil, err
	}
	if o.MetricsServer != "" {
		o.Say("starting metrics-server")
		if err := c.startMetricsServer(ctx, o.MetricsServer); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// build builds what Options do not name: podsyncd (or the hollow node)
// and podsync-vk, into BinDir.
func (o *Options) build(ctx context.Context) error {
	type target struct {
		bin *string
		pkg string
	}
	var targets []target
	switch {
	case o.Hollow:
		if o.VKBin == "" {
			o.VKBin = filepath.Join(o.BinDir, "podsync-vk")
			targets = append(targets, target{&o.VKBin, "./cmd/podsync-vk"})
		}
		if o.HollowBin == "" {
			o.HollowBin = filepath.Join(o.BinDir, "podsyncd-hollow")
			targets = append(targets, target{&o.HollowBin, "./hack/hollow"})
		}
	case o.PodsyncdBin == "" || o.VKBin == "":
		o.PodsyncdBin, o.VKBin = filepath.Join(o.BinDir, "podsyncd"), filepath.Join(o.BinDir, "podsync-vk")
		targets = append(targets, target{&o.PodsyncdBin, "./cmd/podsyncd"}, target{&o.VKBin, "./cmd/podsync-vk"})
	}
	for _, t := range targets {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", *t.bin, t.pkg)
		cmd.Dir = o.RepoDir
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %w\n%s", t.pkg, err, out)
		}
	}
	return nil
}

// startNode starts node i: a private containerd (or the caller's) and
// podsyncd, or a hollow node.
func (c *Cluster) startNode(ctx context.Context, i int, n *Node) error {
	o := c.opts
	nd := filepath.Join(o.Dir, n.Name)
	if o.Hollow && o.StateDir != "" {
		nd = filepath.Join(o.StateDir, n.Name)
	}
	if err := os.MkdirAll(nd, 0o700); err != nil {
		return err
	}
	n.Socket = filepath.Join(nd, "podsync.sock")
	args := []string{"--listen", "unix://" + n.Socket, "--root-dir", filepath.Join(nd, "root"),
		"--pod-log-dir", filepath.Join(nd, "pods"), "--node-name", n.Name, "--node-ip", "127.0.0.1",
		"--log-format", "console", "--shutdown-timeout", "10s"}
	if o.Hollow {
		// A cgroup root of its own: locked in the node's directory.
		args = append(args, "--cgroup-root", "/"+n.Name)
		p, err := StartProcess(o.Dir, n.Name, o.HollowBin, append(args, o.PodsyncdArgs...)...)
		n.Podsyncd = p
		return err
	}
	o.Say("starting node %s: a private containerd and podsyncd", n.Name)
	// Every node's pods have a default route through their bridge, so
	// the host routes between the nodes' pod subnets: one pod network,
	// as a cluster's CNI makes it across machines.
	if len(o.Runtimes) > 0 {
		n.Runtime = o.Runtimes[i]
	} else {
		inst, err := localcri.Start(ctx, localcri.Options{Logger: o.Logger, RepoDir: o.RepoDir, LogDir: o.Dir, DefaultRoute: true})
		if err != nil {
			return fmt.Errorf("start containerd: %w", err)
		}
		n.Runtime = inst
	}
	for _, im := range o.Images {
		if im.Tar != "" {
			if err := n.Runtime.ImportImages(ctx, im.Tar, im.Refs); err != nil {
				return fmt.Errorf("import images: %w", err)
			}
		}
		if err := n.Runtime.ServeImages(ctx, im.Serve); err != nil {
			return fmt.Errorf("serve images: %w", err)
		}
	}
	// Each node's pods under its instance's own cgroup root: the nodes'
	// default/web are one pod UID, and would be one pod cgroup under a
	// shared root.
	args = append(args, "--runtime-endpoint", n.Runtime.Endpoint(), "--cgroup-root", n.Runtime.CgroupRoot())
	args = append(append(args, NodeArgs...), o.PodsyncdArgs...)
	p, err := StartProcess(o.Dir, n.Name, o.PodsyncdBin, args...)
	n.Podsyncd = p
	return err
}

// awaitServing waits until node n's podsyncd reports SERVING (it is
// connected to its runtime), or its process exits, or timeout passes.
func awaitServing(ctx context.Context, n *Node, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+n.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	defer func() { _ = conn.Close() }()
	hc := healthpb.NewHealthClient(conn)
	var last error
	for {
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := hc.Check(cctx, &healthpb.HealthCheckRequest{})
		ccancel()
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return nil
		}
		last = err
		if err == nil {
			last = fmt.Errorf("health %s", resp.GetStatus())
		}
		select {
		case <-n.Podsyncd.Exited():
			return fmt.Errorf("node %s: podsyncd exited before it served (its log: %s)", n.Name, n.Podsyncd.Log)
		case <-ctx.Done():
			return fmt.Errorf("node %s: not serving within %s (last: %w; its log: %s)", n.Name, timeout, last, n.Podsyncd.Log)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// VKNodes are the nodes podsync-vk i serves: the i-th of Options.VKs
// contiguous shares.
func (c *Cluster) VKNodes(i int) []*Node {
	vks := max(c.opts.VKs, 1)
	per := (len(c.Nodes) + vks - 1) / vks
	lo, hi := min(i*per, len(c.Nodes)), min((i+1)*per, len(c.Nodes))
	return c.Nodes[lo:hi]
}

// Podsyncds are the nodes' podsyncd processes.
func (c *Cluster) Podsyncds() []*Process {
	var out []*Process
	for _, n := range c.Nodes {
		if n.Podsyncd != nil {
			out = append(out, n.Podsyncd)
		}
	}
	return out
}

// Kubectl runs kubectl on the cluster with args and returns its combined
// output.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(c.opts.KubeBin, "kubectl"), append([]string{"--kubeconfig", c.Kube.Kubeconfig}, args...)...)
	return cmd.CombinedOutput()
}

// Stop stops podsync-vk, the podsyncds, the containerds (tearing down
// what they ran) and the control plane; the logs stay in Dir.
func (c *Cluster) Stop(ctx context.Context) error {
	var errs []error
	if c.MetricsServer != nil {
		c.MetricsServer.Stop()
	}
	for _, vk := range c.VKs {
		vk.Stop()
	}
	// The nodes at once: a hundred hollow ones stop in the time of one.
	var wg sync.WaitGroup
	for _, n := range c.Nodes {
		if p := n.Podsyncd; p != nil {
			wg.Go(p.Stop)
		}
	}
	wg.Wait()
	if c.opts.Hollow && c.opts.StateDir != "" {
		for _, n := range c.Nodes {
			errs = append(errs, os.RemoveAll(filepath.Join(c.opts.StateDir, n.Name)))
		}
	}
	// The kubernetes Service's rules first: they name the nodes'
	// bridges, and a containerd's teardown reports whatever names its run
	// as left behind.
	errs = append(errs, c.api.close())
	if len(c.opts.Runtimes) == 0 {
		for _, n := range c.Nodes {
			if n.Runtime == nil {
				continue
			}
			tctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			errs = append(errs, n.Runtime.Teardown(tctx))
			cancel()
		}
	}
	if c.Kube != nil {
		errs = append(errs, c.Kube.Stop())
	}
	return errors.Join(errs...)
}

// serveAPIService makes the kubernetes Service's address reach the API
// server from every node's pods (apiService): in-cluster clients (a
// pod's service-account token and KUBERNETES_SERVICE_HOST) work.
func (c *Cluster) serveAPIService(ctx context.Context) error {
	var ip string
	for range 60 {
		out, err := c.Kubectl(ctx, "get", "service", "kubernetes", "-n", "default", "-o", "jsonpath={.spec.clusterIP}")
		if err == nil && len(out) > 0 {
			ip = string(out)
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return fmt.Errorf("the kubernetes Service's address %q: %w", ip, err)
	}
	bridges := map[string]netip.Addr{}
	for _, n := range c.Nodes {
		bridges[n.Runtime.Bridge()] = n.Runtime.Subnet().Addr().Next()
	}
	u, err := url.Parse(c.Kube.URL)
	if err != nil {
		return err
	}
	if err := localcri.EnsureFile(ctx, c.opts.Logger, "/usr/sbin/iptables", "iptables"); err != nil {
		return err
	}
	c.api, err = startAPIService(ctx, c.opts.Logger, addr, 443, u.Host, bridges)
	return err
}

// enableForwarding turns on IPv4 forwarding, so that the host routes
// between the nodes' pod bridges.
func enableForwarding() error {
	const path = "/proc/sys/net/ipv4/ip_forward"
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if strings.TrimSpace(string(b)) == "1" {
		return nil
	}
	if err := os.WriteFile(path, []byte("1\n"), 0o644); err != nil {
		return fmt.Errorf("turn on IPv4 forwarding for the pod network (%s): %w", path, err)
	}
	return nil
}
