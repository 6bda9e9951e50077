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
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"

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
	// to run; Start builds neither.
	PodsyncdBin, VKBin string
	// KubeBin holds the control plane's binaries (localkube.Build).
	KubeBin string
	// Nodes is how many podsync nodes (each a podsyncd on its own private
	// containerd) podsync-vk serves; zero means 2, or len(Runtimes).
	Nodes int
	// Runtimes, if set, are the nodes' containerds, one per node, started
	// by the caller (with DefaultRoute, for the pod network) and left
	// running by Stop; otherwise Start starts one per node.
	Runtimes []*localcri.Instance
	// PodsyncdArgs are further flags of every podsyncd, after
	// NodeArgs (a later flag wins).
	PodsyncdArgs []string
	// VKArgs are further flags of podsync-vk.
	VKArgs []string
	// APIServerArgs are further flags of kube-apiserver.
	APIServerArgs []string
	// Images are image tarballs (localcri.WriteImageArchive) imported into
	// every node's containerd before its podsyncd starts, with the names
	// each holds.
	Images []Images
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

// Node is one podsync node: its containerd and its podsyncd.
type Node struct {
	// Name is the Kubernetes Node's name, podsync-a, podsync-b, ….
	Name string
	// Runtime is the node's private containerd.
	Runtime *localcri.Instance
	// Socket is podsyncd's unix socket.
	Socket string
	// Podsyncd is the podsyncd process.
	Podsyncd *Process
}

// Cluster is a running control plane with podsync nodes behind
// podsync-vk.
type Cluster struct {
	opts  Options
	Kube  *localkube.Cluster
	Nodes []*Node
	VK    *Process
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
// podsync nodes and podsync-vk, and waits until every Node is Ready. On
// failure it stops what it started.
func Start(ctx context.Context, o Options) (_ *Cluster, err error) {
	if o.Nodes == 0 {
		o.Nodes = 2
		if len(o.Runtimes) > 0 {
			o.Nodes = len(o.Runtimes)
		}
	}
	if len(o.Runtimes) > 0 && len(o.Runtimes) != o.Nodes {
		return nil, fmt.Errorf("localcluster: %d runtimes for %d nodes", len(o.Runtimes), o.Nodes)
	}
	if o.Nodes < 1 || o.Nodes > 26 {
		return nil, fmt.Errorf("localcluster: %d nodes: want 1 to 26", o.Nodes)
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
	if o.PodsyncdBin == "" || o.VKBin == "" {
		o.PodsyncdBin, o.VKBin = filepath.Join(o.BinDir, "podsyncd"), filepath.Join(o.BinDir, "podsync-vk")
		for c, bin := range map[string]string{"podsyncd": o.PodsyncdBin, "podsync-vk": o.VKBin} {
			cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/"+c)
			cmd.Dir = o.RepoDir
			if out, err := cmd.CombinedOutput(); err != nil {
				return nil, fmt.Errorf("go build ./cmd/%s: %w\n%s", c, err, out)
			}
		}
	}
	c := &Cluster{opts: o}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Stop(context.WithoutCancel(ctx)))
		}
	}()
	o.Say("starting etcd, kube-apiserver, kube-scheduler and kube-controller-manager %s", localkube.Version)
	if c.Kube, err = localkube.Start(ctx, localkube.Options{Dir: filepath.Join(o.Dir, "kube"), BinDir: o.KubeBin, Keep: true,
		NodeMonitorGracePeriod: 20 * time.Second, APIServerArgs: o.APIServerArgs}); err != nil {
		return nil, err
	}
	if err := enableForwarding(); err != nil {
		return nil, err
	}
	vkArgs := []string{"--kubeconfig", c.Kube.Kubeconfig, "--client-ca-file", c.Kube.CAFile()}
	for i := range o.Nodes {
		name := "podsync-" + string(rune('a'+i))
		o.Say("starting node %s: a private containerd and podsyncd", name)
		// Every node's pods have a default route through their bridge, so
		// the host routes between the nodes' pod subnets: one pod network,
		// as a cluster's CNI makes it across machines.
		var inst *localcri.Instance
		if len(o.Runtimes) > 0 {
			inst = o.Runtimes[i]
		} else if inst, err = localcri.Start(ctx, localcri.Options{Logger: o.Logger, RepoDir: o.RepoDir, LogDir: o.Dir, DefaultRoute: true}); err != nil {
			return nil, fmt.Errorf("node %s: start containerd: %w", name, err)
		}
		n := &Node{Name: name, Runtime: inst}
		c.Nodes = append(c.Nodes, n)
		for _, im := range o.Images {
			if im.Tar != "" {
				if err := inst.ImportImages(ctx, im.Tar, im.Refs); err != nil {
					return nil, fmt.Errorf("node %s: import images: %w", name, err)
				}
			}
			if err := inst.ServeImages(ctx, im.Serve); err != nil {
				return nil, fmt.Errorf("node %s: serve images: %w", name, err)
			}
		}
		nd := filepath.Join(o.Dir, name)
		if err := os.MkdirAll(nd, 0o700); err != nil {
			return nil, err
		}
		n.Socket = filepath.Join(nd, "podsync.sock")
		args := append([]string{"--listen", "unix://" + n.Socket,
			"--runtime-endpoint", inst.Endpoint(), "--root-dir", filepath.Join(nd, "root"),
			"--pod-log-dir", filepath.Join(nd, "pods"), "--node-name", name, "--node-ip", "127.0.0.1",
			// Each node's pods under its instance's own cgroup root: the
			// nodes' default/web are one pod UID, and would be one pod
			// cgroup under a shared root.
			"--cgroup-root", inst.CgroupRoot(),
			"--log-format", "console", "--shutdown-timeout", "10s"}, append(slices.Clone(NodeArgs), o.PodsyncdArgs...)...)
		if n.Podsyncd, err = StartProcess(o.Dir, name, o.PodsyncdBin, args...); err != nil {
			return nil, err
		}
		ports, err := localcri.FreePorts(1)
		if err != nil {
			return nil, err
		}
		vkArgs = append(vkArgs, "--node", "name="+name+",target="+n.Socket+",port="+strconv.Itoa(ports[0]))
	}
	if err := c.serveAPIService(ctx); err != nil {
		return nil, err
	}
	o.Say("starting podsync-vk")
	if c.VK, err = StartProcess(o.Dir, "podsync-vk", o.VKBin, append(vkArgs, o.VKArgs...)...); err != nil {
		return nil, err
	}
	if err := c.WaitReady(ctx, 2*time.Minute); err != nil {
		return nil, err
	}
	return c, nil
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

// WaitReady waits until every podsync Node is Ready.
func (c *Cluster) WaitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		out, _ := c.Kubectl(ctx, "get", "nodes", "--no-headers")
		if strings.Count(string(out), " Ready ") == len(c.Nodes) {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("the %d podsync Nodes are not Ready within %s: %s (logs in %s)", len(c.Nodes), timeout, out, c.opts.Dir)
		}
		time.Sleep(time.Second)
	}
}

// Stop stops podsync-vk, the podsyncds, the containerds (tearing down
// what they ran) and the control plane; the logs stay in Dir.
func (c *Cluster) Stop(ctx context.Context) error {
	var errs []error
	if c.VK != nil {
		c.VK.Stop()
	}
	for i := len(c.Nodes) - 1; i >= 0; i-- {
		if p := c.Nodes[i].Podsyncd; p != nil {
			p.Stop()
		}
	}
	// The kubernetes Service's rules first: they name the nodes'
	// bridges, and a containerd's teardown reports whatever names its run
	// as left behind.
	errs = append(errs, c.api.close())
	if len(c.opts.Runtimes) == 0 {
		for _, n := range c.Nodes {
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
