package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/internal/testing/localcri"
)

// The kubelet the bench compares with: its version (hack/kube/build.sh
// builds it) and the node name its static pods get as a name suffix.
const (
	kubeletVersion  = "v1.37.2"
	kubeletNode     = "podsync-bench-kubelet"
	benchTokenKey   = "podsync.io/bench-token"
	kubeletReadyMax = 2 * time.Minute
	// kubeletHousekeeping is the kubelet's housekeeping period
	// (pkg/kubelet housekeepingPeriod): the first round runs that long
	// after the sync loop starts.
	kubeletHousekeeping = 2 * time.Second
	// kubeletSettle is how long after its first housekeeping the
	// kubelet is left before a measurement: its start-up work (the first
	// stats of the runtime and filesystems, the image and container GC
	// scans) would otherwise land in the first run's CPU.
	kubeletSettle = 5 * time.Second
)

// findKubelet returns the kubelet binary: -kubelet, or the one
// hack/kube/build.sh builds (once; it is kept in .tmp/kube). It checks
// that the binary runs and is the version compared.
func (b *bench) findKubelet(ctx context.Context) (bin, version string, err error) {
	bin = b.cfg.kubelet
	if bin == "" {
		b.log.Info("building the kubelet (hack/kube/build.sh kubelet; kept once built, the first build takes about 10 minutes)")
		cmd := exec.CommandContext(ctx, filepath.Join(b.repo, "hack", "kube", "build.sh"), "kubelet")
		cmd.Dir = b.repo
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", "", fmt.Errorf("build the kubelet with hack/kube/build.sh kubelet: %w: %s", err, tailLines(string(out), 10))
		}
		bin = filepath.Join(b.repo, ".tmp", "kube", kubeletVersion, "bin", "kubelet")
	}
	out, err := exec.CommandContext(ctx, bin, "--version").CombinedOutput()
	if err != nil {
		if o := strings.TrimSpace(string(out)); o != "" {
			err = fmt.Errorf("%w: %s", err, tailLines(o, 5))
		}
		return "", "", fmt.Errorf("kubelet %s does not run: %w (give a kubelet %s with -kubelet PATH, or build it with hack/kube/build.sh kubelet)",
			bin, err, kubeletVersion)
	}
	version = strings.TrimSpace(string(out))
	if !strings.HasSuffix(version, " "+kubeletVersion) {
		b.log.Warn("the kubelet is not the version hack/kube/build.sh builds", zap.String("version", version), zap.String("want", kubeletVersion))
	}
	return bin, version, nil
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// kubeletSettings is what differs between two kubelet runs.
type kubeletSettings struct {
	dir         string // the run's directory: root, static pods, logs, plugins
	cgroupRoot  string // "/podsync-bench-<token>"
	endpoint    string // the private containerd
	port        int
	healthzPort int
	// node is the kubelet's node name (--hostname-override); empty means
	// kubeletNode.
	node string
	// kubeconfig, when set, registers the kubelet with an API server (the
	// cluster benchmark): a client certificate of system:node:<node>.
	// clientCA then authenticates the API server's requests to the
	// kubelet (logs, exec), which a SubjectAccessReview authorizes, as on
	// a kubeadm node; nodeIP is its Node's address (a loopback one is
	// refused by the kubelet), on which it also serves.
	kubeconfig, clientCA, nodeIP string
}

func (s kubeletSettings) nodeName() string {
	if s.node == "" {
		return kubeletNode
	}
	return s.node
}

// registered reports whether the kubelet runs with an API server.
func (s kubeletSettings) registered() bool { return s.kubeconfig != "" }

func (s kubeletSettings) rootDir() string   { return filepath.Join(s.dir, "root") }
func (s kubeletSettings) staticDir() string { return filepath.Join(s.dir, "manifests") }
func (s kubeletSettings) stageDir() string  { return filepath.Join(s.dir, "staging") }

// kubeletConfig renders the KubeletConfiguration of a run: the
// kubelet's defaults (cgroupsPerQOS, PLEG relist every second, no evented
// PLEG) with what a standalone kubelet on a shared host needs —
// static pods and no API server, its own directories, ports and cgroup
// root, no iptables chains, cgroup v1 accepted — and two settings that
// keep it from reclaiming the host's shared disk (eviction and image GC
// thresholds on disk: this machine's disk is fuller than the defaults
// allow, and the kubelet would evict the pods measured and delete the
// runtime's images). seccompDefault is on as it is in podsyncd, so the
// containers the two create are the same. A registered kubelet
// (s.registered) serves on its node IP and takes only the API server's
// requests: client certificates of the cluster's CA, authorized by the
// API server (webhook), anonymous requests refused.
func kubeletConfig(s kubeletSettings) ([]byte, error) {
	cfg := kubeletv1beta1.KubeletConfiguration{
		TypeMeta:                 metav1.TypeMeta{APIVersion: "kubelet.config.k8s.io/v1beta1", Kind: "KubeletConfiguration"},
		StaticPodPath:            s.staticDir(),
		ContainerRuntimeEndpoint: s.endpoint,
		CgroupDriver:             "cgroupfs",
		CgroupRoot:               s.cgroupRoot,
		FailSwapOn:               ptr.To(false),
		FailCgroupV1:             ptr.To(false),
		PodLogsDir:               filepath.Join(s.dir, "pod-logs"),
		VolumePluginDir:          filepath.Join(s.dir, "volume-plugins"),
		Address:                  "127.0.0.1",
		Port:                     int32(s.port),
		ReadOnlyPort:             0,
		HealthzBindAddress:       "127.0.0.1",
		HealthzPort:              ptr.To(int32(s.healthzPort)),
		MakeIPTablesUtilChains:   ptr.To(false),
		ResolverConfig:           ptr.To(""),
		SeccompDefault:           ptr.To(true),
		Authentication: kubeletv1beta1.KubeletAuthentication{
			Anonymous: kubeletv1beta1.KubeletAnonymousAuthentication{Enabled: ptr.To(true)},
			Webhook:   kubeletv1beta1.KubeletWebhookAuthentication{Enabled: ptr.To(false)},
		},
		Authorization:               kubeletv1beta1.KubeletAuthorization{Mode: kubeletv1beta1.KubeletAuthorizationModeAlwaysAllow},
		EvictionHard:                map[string]string{"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
		ImageGCHighThresholdPercent: ptr.To(int32(100)),
		ImageGCLowThresholdPercent:  ptr.To(int32(99)),
	}
	if s.registered() {
		cfg.Address = s.nodeIP
		cfg.Authentication = kubeletv1beta1.KubeletAuthentication{
			X509:      kubeletv1beta1.KubeletX509Authentication{ClientCAFile: s.clientCA},
			Anonymous: kubeletv1beta1.KubeletAnonymousAuthentication{Enabled: ptr.To(false)},
			Webhook:   kubeletv1beta1.KubeletWebhookAuthentication{Enabled: ptr.To(true)},
		}
		cfg.Authorization = kubeletv1beta1.KubeletAuthorization{Mode: kubeletv1beta1.KubeletAuthorizationModeWebhook}
	}
	return yaml.Marshal(&cfg)
}

// staticPodManifest renders pod as a static pod manifest: the pod of
// newPods (same image, command and defaults) with its random UID kept
// (the kubelet uses a manifest's uid as is, and derives one from the
// manifest and node name only when it has none) and the run's token as
// an annotation.
func staticPodManifest(pod *corev1.Pod, token string) ([]byte, error) {
	p := pod.DeepCopy()
	p.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[benchTokenKey] = token
	return yaml.Marshal(p)
}

// kubelet is one kubelet process, standalone on the bench's containerd.
type kubelet struct {
	localcri.Agent
	log     *zap.Logger
	s       kubeletSettings
	token   string
	logPath string
	http    *http.Client
}

// newToken returns 8 random hex digits.
func newToken() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// startKubelet stops podsyncd (each would remove the other's pods),
// starts the kubelet binary bin on e's containerd in a private mount
// namespace, with a cgroup root, directories and ports of its own, and
// waits until it is ready: healthz ok, its sync loop started, a PLEG
// relist done and its first housekeeping due. The runtime must be empty.
func (b *bench) startKubelet(ctx context.Context, e *env) (*kubelet, error) {
	if b.kubeletBin == "" {
		return nil, errors.New("no kubelet binary")
	}
	e.stopPodsyncd()
	token := newToken()
	s := kubeletSettings{dir: filepath.Join(e.dir, "kubelet-"+token), cgroupRoot: "/podsync-bench-" + token, endpoint: e.inst.Endpoint()}
	logPath := filepath.Join(benchLogDir(b.repo), "kubelet-"+e.inst.ID()+"-"+token+".log")
	return launchKubelet(ctx, b.log, b.kubeletBin, s, token, logPath)
}

// launchKubelet runs the kubelet bin with settings s (its ports are
// chosen here) and waits until it is ready (waitReady). On failure it
// stops it and removes its cgroups and files, and the error ends with
// the end of its log.
func launchKubelet(ctx context.Context, log *zap.Logger, bin string, s kubeletSettings, token, logPath string) (_ *kubelet, err error) {
	k := &kubelet{log: log.Named("kubelet"), token: token, logPath: logPath, s: s,
		http: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			// The kubelet serves a self-signed certificate of its own.
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}} //nolint:gosec // the kubelet's own self-signed cert on 127.0.0.1
	ports, err := localcri.FreePorts(2)
	if err != nil {
		return nil, err
	}
	k.s.port, k.s.healthzPort = ports[0], ports[1]
	defer func() {
		if err != nil {
			k.stop()
			// Nothing ran yet: its cgroups and files go now.
			err = errors.Join(err, k.removeState())
			err = fmt.Errorf("kubelet %s: %w; kubelet log (%s):\n%s", kubeletVersion, err, k.logPath, tailFile(k.logPath, 15))
		}
	}()
	if err := k.prepare(); err != nil {
		return nil, err
	}
	if err := k.start(bin); err != nil {
		return nil, err
	}
	if err := k.waitReady(ctx); err != nil {
		return nil, err
	}
	k.log.Info("kubelet ready", zap.Int("pid", k.PID), zap.String("cgroup_root", k.s.cgroupRoot), zap.String("log", k.logPath))
	return k, nil
}

// prepare writes the configuration, the files that stand in for the
// sysctls, and the cgroup root in every hierarchy (the kubelet checks
// that it exists).
func (k *kubelet) prepare() error {
	for _, d := range []string{k.s.rootDir(), k.s.staticDir(), k.s.stageDir(), filepath.Join(k.s.dir, "sysctl"),
		filepath.Join(k.s.dir, "var-log-containers"), filepath.Join(k.s.dir, "pki"), "/var/log/containers"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	cfg, err := kubeletConfig(k.s)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(k.s.dir, "config.yaml"), cfg, 0o644); err != nil {
		return err
	}
	for _, sc := range localcri.KubeletSysctls {
		v, err := os.ReadFile(filepath.Join("/proc/sys", sc))
		if err != nil {
			return fmt.Errorf("read sysctl %s: %w", sc, err)
		}
		if err := os.WriteFile(k.sysctlFile(sc), v, 0o644); err != nil {
			return err
		}
	}
	return localcri.MakeCgroupRoot(k.s.cgroupRoot)
}

func (k *kubelet) sysctlFile(sc string) string {
	return filepath.Join(k.s.dir, "sysctl", strings.ReplaceAll(sc, "/", "."))
}

// kubeletScript is the shell run by unshare in the kubelet's new mount
// namespace (propagation slave: nothing mounted in it reaches the host):
// it bind-mounts the files holding the sysctls' values over them and the
// run's own directory over /var/log/containers (hard-coded in the
// kubelet), then execs the kubelet, which keeps unshare's PID.
func kubeletScript(k kubeletSettings, sysctlFile func(string) string) string {
	var sb strings.Builder
	sb.WriteString("set -e\n")
	for _, sc := range localcri.KubeletSysctls {
		fmt.Fprintf(&sb, "mount --bind %s /proc/sys/%s\n", sysctlFile(sc), sc)
	}
	fmt.Fprintf(&sb, "mount --bind %s /var/log/containers\n", filepath.Join(k.dir, "var-log-containers"))
	sb.WriteString("exec \"$@\"\n")
	return sb.String()
}

func (k *kubelet) start(bin string) error {
	logf, err := os.OpenFile(k.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer func() { _ = logf.Close() }()
	args := []string{"-m", "--propagation", "slave", "/bin/sh", "-c", kubeletScript(k.s, k.sysctlFile), "kubelet",
		bin,
		"--config", filepath.Join(k.s.dir, "config.yaml"),
		"--root-dir", k.s.rootDir(),
		"--cert-dir", filepath.Join(k.s.dir, "pki"),
		// No --node-ip when standalone: the kubelet refuses a loopback
		// node IP (an error a status update) and takes the host's
		// address.
		"--hostname-override", k.s.nodeName(),
	}
	if k.s.registered() {
		args = append(args, "--kubeconfig", k.s.kubeconfig, "--node-ip", k.s.nodeIP)
	}
	if err := k.Start(exec.Command("unshare", args...), logf); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	return nil
}

// waitReady waits until healthz answers ok, the log says the sync loop
// started, the PLEG relisted at least once (its metric; not read from a
// registered kubelet, which serves its metrics to the API server's
// identities only: its caller waits for its Node to be Ready instead)
// and the first housekeeping is due.
func (k *kubelet) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, kubeletReadyMax)
	defer cancel()
	var last error
	var loopAt time.Time
	for {
		select {
		case <-k.Done():
			return errors.New("the kubelet exited during start")
		case <-ctx.Done():
			return fmt.Errorf("not ready: %w (last: %w)", ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
		if err := k.healthz(ctx); err != nil {
			last = err
			continue
		}
		if loopAt.IsZero() {
			if !fileContains(k.logPath, "Starting kubelet main sync loop") {
				last = errors.New("sync loop not started")
				continue
			}
			loopAt = time.Now()
		}
		if k.s.registered() {
			return nil
		}
		relists, err := k.metric(ctx, "kubelet_pleg_relist_duration_seconds_count")
		if err != nil || relists < 1 {
			last = errors.Join(err, errors.New("no PLEG relist yet"))
			continue
		}
		if time.Since(loopAt) < kubeletHousekeeping+kubeletSettle {
			continue
		}
		return nil
	}
}

func (k *kubelet) healthz(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/healthz", k.s.healthzPort), nil)
	if err != nil {
		return err
	}
	resp, err := k.http.Do(req)
	if err != nil {
		return fmt.Errorf("healthz: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthz: %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// metric sums the samples of a metric of the kubelet's /metrics.
func (k *kubelet) metric(ctx context.Context, name string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/metrics", k.s.port), nil)
	if err != nil {
		return 0, err
	}
	resp, err := k.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("metrics: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("metrics: %s", resp.Status)
	}
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		if !strings.HasPrefix(rest, " ") && !strings.HasPrefix(rest, "{") {
			continue
		}
		f := strings.Fields(rest)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			sum += v
		}
	}
	return sum, sc.Err()
}

func fileContains(path, s string) bool {
	data, err := os.ReadFile(path)
	return err == nil && strings.Contains(string(data), s)
}

// stop stops the kubelet (SIGTERM, SIGKILL after 30 s) and removes its
// static pod manifests; the pods it ran stay for the caller's cleanup.
func (k *kubelet) stop() {
	k.Stop(30 * time.Second)
	_ = os.RemoveAll(k.s.staticDir())
	_ = os.RemoveAll(k.s.stageDir())
}

// removeState removes the kubelet's cgroup root (its QoS and pod
// cgroups, bottom up) in every hierarchy and its directory, once the
// runtime holds none of its pods: cgroups still in use stay, and are
// reported.
func (k *kubelet) removeState() error {
	err := localcri.RemoveCgroupRoot(k.s.cgroupRoot)
	// The kubelet's mounts were in its own namespace, gone with it.
	_ = os.RemoveAll(k.s.dir)
	return err
}

// stopPodsyncd stops podsyncd for a kubelet run; restartPodsyncd
// starts it again on the same state.
func (e *env) stopPodsyncd() {
	if e.d != nil {
		e.d.stop()
	}
}

func (e *env) restartPodsyncd(ctx context.Context) error {
	d, err := startPodsyncd(ctx, e.log, e.d.bin, e.dir, e.d.logPath, e.inst)
	if err != nil {
		return fmt.Errorf("restart podsyncd after the kubelet: %w", err)
	}
	e.d = d
	return nil
}

// endKubelet stops k, restarts podsyncd, removes every pod from the
// runtime and then the kubelet's cgroups and files. The kubelet's pods
// go through the runtime whether or not podsyncd came back, so that its
// cgroups can go too: a failed restart must not leave them on the host.
func (b *bench) endKubelet(ctx context.Context, e *env, k *kubelet) error {
	k.stop()
	restarted := e.restartPodsyncd(ctx)
	errs := []error{restarted, e.removeSandboxes(ctx)}
	if restarted == nil {
		errs = append(errs, e.cleanAll(ctx))
		// As the kubelet's 5 s settle: the first RunPods of a fresh
		// podsyncd pays its process's one-time costs (lazy protobuf and
		// gRPC set-up, heap growth), which a node agent pays once.
		b.warmPodsyncd(ctx, e)
	}
	errs = append(errs, k.removeState())
	return errors.Join(errs...)
}

// removeSandboxes stops and removes every sandbox podsync does not
// manage (the kubelet's) and waits until none is left, with room for a
// hundred pods on a loaded machine: cleanAll's bound is for a round's
// tens.
func (e *env) removeSandboxes(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	sbs, err := e.rt.ListPodSandbox(ctx, nil)
	if err != nil {
		return fmt.Errorf("list sandboxes: %w", err)
	}
	var ids []string
	for _, sb := range sbs {
		if !model.IsManaged(sb.GetLabels()) {
			ids = append(ids, sb.GetId())
		}
	}
	return parallel(ctx, 4, len(ids), func(ctx context.Context, i int) error {
		if err := e.rt.StopPodSandbox(ctx, ids[i]); err != nil {
			return fmt.Errorf("stop sandbox %s: %w", ids[i], err)
		}
		if err := e.rt.RemovePodSandbox(ctx, ids[i]); err != nil {
			return fmt.Errorf("remove sandbox %s: %w", ids[i], err)
		}
		return nil
	})
}
