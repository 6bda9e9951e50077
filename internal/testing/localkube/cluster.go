package localkube

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/podsync/podsync/internal/testing/localcri"
)

// Options say how to run the control plane.
type Options struct {
	// Dir holds everything the control plane writes (certificates, etcd's
	// data, logs, the kubeconfig). Required; Stop removes it unless Keep.
	Dir string
	// BinDir holds the binaries (see Build). Required.
	BinDir string
	// Keep leaves Dir in place after Stop (for `make run-cluster`'s logs).
	Keep bool
	// NodeMonitorGracePeriod is kube-controller-manager's
	// --node-monitor-grace-period: how long a node's lease may go
	// unrenewed before it is NotReady. Zero means 50 s, upstream's default.
	NodeMonitorGracePeriod time.Duration
	// Timeout bounds the wait for each component's readiness; zero means
	// 60 s.
	Timeout time.Duration
	// APIServerArgs are further flags of kube-apiserver, after the
	// harness's own (a later flag wins): --allow-privileged=true for the
	// conformance suite, say.
	APIServerArgs []string
}

// Cluster is a running control plane.
type Cluster struct {
	opts Options
	pki  *pki
	// URL is the apiserver's, https://127.0.0.1:PORT.
	URL string
	// Kubeconfig is the path of an admin kubeconfig (client certificate in
	// system:masters).
	Kubeconfig string
	procs      []*proc
}

// proc is one child process.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Start runs etcd, kube-apiserver, kube-scheduler and
// kube-controller-manager and returns once each reports healthy. On
// failure it stops what it started and returns the error with the end of
// the failing component's log.
func Start(ctx context.Context, o Options) (_ *Cluster, err error) {
	if o.Dir == "" || o.BinDir == "" {
		return nil, errors.New("localkube: Dir and BinDir are required")
	}
	if o.NodeMonitorGracePeriod == 0 {
		o.NodeMonitorGracePeriod = 50 * time.Second
	}
	if o.Timeout == 0 {
		o.Timeout = 60 * time.Second
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("make control-plane directory: %w", err)
	}
	c := &Cluster{opts: o}
	defer func() {
		if err != nil {
			c.stop()
		}
	}()
	if c.pki, err = newPKI(filepath.Join(o.Dir, "pki")); err != nil {
		return nil, err
	}
	ports, err := localcri.FreePorts(7)
	if err != nil {
		return nil, err
	}
	etcdClient, etcdPeer, etcdMetrics := ports[0], ports[1], ports[2]
	apiPort, schedPort, cmPort := ports[3], ports[4], ports[5]
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdClient)
	if err := c.run("etcd", "--name=localkube", "--data-dir="+filepath.Join(o.Dir, "etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls=http://127.0.0.1:"+strconv.Itoa(etcdPeer),
		"--initial-advertise-peer-urls=http://127.0.0.1:"+strconv.Itoa(etcdPeer),
		"--initial-cluster=localkube=http://127.0.0.1:"+strconv.Itoa(etcdPeer),
		"--initial-cluster-state=new",
		"--listen-metrics-urls=http://127.0.0.1:"+strconv.Itoa(etcdMetrics),
		"--log-level=warn"); err != nil {
		return nil, err
	}
	if err := c.await(ctx, "etcd", "http://127.0.0.1:"+strconv.Itoa(etcdMetrics)+"/health"); err != nil {
		return nil, err
	}
	p := c.pki.path
	c.URL = "https://127.0.0.1:" + strconv.Itoa(apiPort)
	if err := c.run("kube-apiserver", append([]string{"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port=" + strconv.Itoa(apiPort),
		"--tls-cert-file=" + p("apiserver.crt"), "--tls-private-key-file=" + p("apiserver.key"),
		"--client-ca-file=" + p("ca.crt"), "--authorization-mode=Node,RBAC",
		"--kubelet-client-certificate=" + p("apiserver-kubelet-client.crt"), "--kubelet-client-key=" + p("apiserver-kubelet-client.key"),
		// As kubeadm: nodes here have names no resolver knows.
		"--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + p("sa.pub"), "--service-account-signing-key-file=" + p("sa.key"),
		"--service-cluster-ip-range=10.250.0.0/16",
		"--cert-dir=" + filepath.Join(o.Dir, "apiserver-certs"), "--endpoint-reconciler-type=none",
		// The aggregation layer, as kubeadm sets it up (metrics-server's
		// APIService for kubectl top): the front proxy's client
		// certificate and the request-header CA aggregated API servers
		// trust; with no kube-proxy, the API server dials an APIService's
		// endpoints, not its Service's cluster IP.
		"--requestheader-client-ca-file=" + p("front-proxy-ca.crt"), "--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User", "--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + p("front-proxy-client.crt"), "--proxy-client-key-file=" + p("front-proxy-client.key"),
		"--enable-aggregator-routing=true",
		"--profiling=false", "--v=1"}, o.APIServerArgs...)...); err != nil {
		return nil, err
	}
	if err := c.await(ctx, "kube-apiserver", c.URL+"/readyz"); err != nil {
		return nil, err
	}
	c.Kubeconfig = filepath.Join(o.Dir, "kubeconfig")
	if err := c.writeKubeconfig(c.Kubeconfig); err != nil {
		return nil, err
	}
	if err := c.run("kube-scheduler", "--kubeconfig="+c.Kubeconfig, "--leader-elect=false",
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(schedPort)); err != nil {
		return nil, err
	}
	if err := c.run("kube-controller-manager", "--kubeconfig="+c.Kubeconfig, "--leader-elect=false",
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(cmPort),
		"--service-account-private-key-file="+p("sa.key"), "--root-ca-file="+p("ca.crt"),
		"--cluster-signing-cert-file="+p("ca.crt"), "--cluster-signing-key-file="+p("ca.key"),
		"--use-service-account-credentials=false",
		"--node-monitor-grace-period="+o.NodeMonitorGracePeriod.String(),
		"--node-monitor-period=2s"); err != nil {
		return nil, err
	}
	if err := c.await(ctx, "kube-scheduler", "https://127.0.0.1:"+strconv.Itoa(schedPort)+"/healthz"); err != nil {
		return nil, err
	}
	if err := c.await(ctx, "kube-controller-manager", "https://127.0.0.1:"+strconv.Itoa(cmPort)+"/healthz"); err != nil {
		return nil, err
	}
	return c, nil
}

// LogPath is the log of component name ("kube-apiserver", …).
func (c *Cluster) LogPath(name string) string { return filepath.Join(c.opts.Dir, name+".log") }

// Dir is the control plane's directory.
func (c *Cluster) Dir() string { return c.opts.Dir }

// CAFile is the cluster CA's certificate: it signs the apiserver's
// client certificate for kubelet APIs (podsync-vk's --client-ca-file).
func (c *Cluster) CAFile() string { return c.pki.path("ca.crt") }

// run starts a component in its own process group, killed if the caller
// dies (so a crashed test leaves no control plane behind).
func (c *Cluster) run(name string, args ...string) error {
	logf, err := os.Create(c.LogPath(name))
	if err != nil {
		return fmt.Errorf("create %s log: %w", name, err)
	}
	cmd := exec.Command(filepath.Join(c.opts.BinDir, name), args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	pr := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		pr.err = cmd.Wait()
		_ = logf.Close()
		close(pr.done)
	}()
	c.procs = append(c.procs, pr)
	return nil
}

// await polls url (TLS against the cluster CA, with the admin certificate)
// until it answers 200, the component exits, or the timeout passes.
func (c *Cluster) await(ctx context.Context, name, url string) error {
	hc, err := c.httpClient()
	if err != nil {
		return err
	}
	pr := c.procs[len(c.procs)-1]
	for i := len(c.procs) - 1; i >= 0; i-- {
		if c.procs[i].name == name {
			pr = c.procs[i]
		}
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	var last string
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := hc.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		select {
		case <-pr.done:
			return fmt.Errorf("%s exited (%w) before it was ready; its log, %s, ends:\n%s", name, pr.err, c.LogPath(name), tail(c.LogPath(name)))
		case <-ctx.Done():
			return fmt.Errorf("%s not ready within %s (last: %s); its log, %s, ends:\n%s", name, c.opts.Timeout, last, c.LogPath(name), tail(c.LogPath(name)))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (c *Cluster) httpClient() (*http.Client, error) {
	cert, err := tls.LoadX509KeyPair(c.pki.path("admin.crt"), c.pki.path("admin.key"))
	if err != nil {
		return nil, fmt.Errorf("load admin certificate: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(c.pki.ca)
	// kube-scheduler and kube-controller-manager serve self-signed
	// certificates of their own: their health is checked without
	// verifying them, the apiserver's against the CA.
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		Certificates: []tls.Certificate{cert},
		RootCAs:      pool,
		//nolint:gosec // only for the health of loopback components with self-signed certificates
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 || cs.PeerCertificates[0].Issuer.CommonName != c.pki.ca.Subject.CommonName {
				return nil
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: pool, DNSName: "127.0.0.1"})
			return err
		},
	}}}, nil
}

// NodeKubeconfig writes, and returns the path of, a kubeconfig with the
// identity of the node name's kubelet: a client certificate for
// system:node:NAME in group system:nodes, which the API server's Node
// authorizer holds to what a kubelet of that node may read and write.
func (c *Cluster) NodeKubeconfig(name string) (string, error) {
	return c.UserKubeconfig("node-"+name, "system:node:"+name, "system:nodes")
}

// UserKubeconfig writes, and returns the path of, a kubeconfig (file
// name FILE.kubeconfig in Dir) with the identity of a client certificate
// for user in groups: what RBAC lets it do is the caller's to bind.
func (c *Cluster) UserKubeconfig(file, user string, groups ...string) (string, error) {
	if err := c.pki.issue(file, leaf{cn: user, orgs: groups}); err != nil {
		return "", err
	}
	path := filepath.Join(c.opts.Dir, file+".kubeconfig")
	return path, c.writeKubeconfigOf(path, file)
}

// writeKubeconfig writes an admin kubeconfig with everything embedded.
func (c *Cluster) writeKubeconfig(path string) error { return c.writeKubeconfigOf(path, "admin") }

// writeKubeconfigOf writes a kubeconfig of the client certificate cert
// (cert.crt and cert.key of the PKI) with everything embedded.
func (c *Cluster) writeKubeconfigOf(path, cert string) error {
	read := func(name string) (string, error) {
		b, err := os.ReadFile(c.pki.path(name))
		return base64.StdEncoding.EncodeToString(b), err
	}
	ca, err1 := read("ca.crt")
	crt, err2 := read(cert + ".crt")
	key, err3 := read(cert + ".key")
	if err := errors.Join(err1, err2, err3); err != nil {
		return fmt.Errorf("read certificates for the kubeconfig: %w", err)
	}
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: localkube
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: admin
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: localkube
  context:
    cluster: localkube
    user: admin
current-context: localkube
`, c.URL, ca, crt, key)
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return nil
}

// Stop ends the components in reverse order (SIGTERM, then SIGKILL after
// 10 s), waits for them, and removes Dir unless Options.Keep.
func (c *Cluster) Stop() error {
	c.stop()
	if c.opts.Keep {
		return nil
	}
	if err := os.RemoveAll(c.opts.Dir); err != nil {
		return fmt.Errorf("remove control-plane directory: %w", err)
	}
	return nil
}

func (c *Cluster) stop() {
	for i := len(c.procs) - 1; i >= 0; i-- {
		pr := c.procs[i]
		_ = syscall.Kill(-pr.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-pr.done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-pr.cmd.Process.Pid, syscall.SIGKILL)
			<-pr.done
		}
	}
	c.procs = nil
}

// Pids are the process ids of the running components.
func (c *Cluster) Pids() []int {
	var pids []int
	for _, pr := range c.procs {
		pids = append(pids, pr.cmd.Process.Pid)
	}
	return pids
}

// tail returns the last 2 KiB of a file.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > 2048 {
		b = b[len(b)-2048:]
	}
	return string(b)
}
