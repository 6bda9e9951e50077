package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/syncer"
	"github.com/podsync/podsync/internal/testing/localcri"
)

// Settings podsyncd runs with; the raw baseline builds its CRI configs
// with the same criconfig.Options.
const (
	benchNode      = "podsync-bench"
	benchNodeIP    = "127.0.0.1"
	benchNamespace = "bench"
	benchMaxPods   = 300
)

// env is one flavour's private containerd with a podsyncd on it.
type env struct {
	log      *zap.Logger
	flavour  localcri.Flavour
	inst     *localcri.Instance
	rt       *syncer.RemoteRuntime
	crictl   []string // crictl --config <instance's>
	dir      string   // .tmp/bench/<run id>: podsyncd's root and logs, raw pods' dirs
	version  string   // "containerd v2.4.2"
	imageRef string   // the busybox image's ID, as podsync creates containers with it
	rawOpts  criconfig.Options
	d        *podsyncd

	mu   sync.Mutex
	uids map[types.UID]bool // pods created, whose cgroups are removed
}

// startEnv starts a private containerd of flavour and a podsyncd (binary
// bin) on it.
func startEnv(ctx context.Context, log *zap.Logger, repo string, flavour localcri.Flavour, bin string) (_ *env, err error) {
	logDir := benchLogDir(repo)
	sctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	inst, err := localcri.Start(sctx, localcri.Options{Flavour: flavour, Logger: log.Named("localcri"), LogDir: logDir})
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", flavour, err)
	}
	e := &env{log: log, flavour: flavour, inst: inst, uids: map[types.UID]bool{},
		dir: filepath.Join(repo, ".tmp", "bench", inst.ID())}
	defer func() {
		if err != nil {
			e.close(context.WithoutCancel(ctx))
		}
	}()
	if _, err := localcri.EnsureCrictl(sctx, inst.ToolsDir()); err != nil {
		return nil, err
	}
	e.crictl = strings.Fields(inst.CrictlHint())
	if e.rt, err = syncer.DialRuntime(sctx, inst.Endpoint(), 0); err != nil {
		return nil, err
	}
	v, err := e.rt.Version(sctx, "v1")
	if err != nil {
		return nil, fmt.Errorf("cri version: %w", err)
	}
	e.version = v.GetRuntimeName() + " " + v.GetRuntimeVersion()
	img, err := e.rt.ImageStatus(sctx, &runtimeapi.ImageSpec{Image: localcri.BusyboxImage}, false)
	if err != nil {
		return nil, fmt.Errorf("busybox image status: %w", err)
	}
	if img.GetImage() == nil {
		return nil, fmt.Errorf("image %s missing", localcri.BusyboxImage)
	}
	e.imageRef = img.GetImage().GetId()
	if err := os.MkdirAll(e.dir, 0o755); err != nil {
		return nil, err
	}
	e.rawOpts = criconfig.Options{
		RootDir:        filepath.Join(e.dir, "raw", "root"),
		PodLogDir:      filepath.Join(e.dir, "raw", "logs"),
		ClusterDomain:  "cluster.local",
		CgroupDriver:   "cgroupfs",
		CgroupRoot:     inst.CgroupRoot(),
		NodeName:       benchNode,
		NodeIPs:        []string{benchNodeIP},
		MemoryCapacity: memTotal(),
		// As podsyncd's default --seccomp-default.
		SeccompDefault: true,
	}
	if e.d, err = startPodsyncd(sctx, log, bin, e.dir, filepath.Join(logDir, "podsyncd-"+inst.ID()+".log"), inst); err != nil {
		return nil, err
	}
	log.Info("environment ready", zap.String("flavour", string(flavour)), zap.String("containerd", e.version),
		zap.String("run_id", inst.ID()), zap.Int("podsyncd_pid", e.d.PID))
	return e, nil
}

// ensurePodsyncd restarts podsyncd if it exited (a crash is reported by
// the run it broke; the next rounds get a fresh one on the same state).
func (e *env) ensurePodsyncd(ctx context.Context) error {
	select {
	case <-e.d.Done():
	default:
		return nil
	}
	e.log.Error("podsyncd exited; restarting it", zap.String("log", e.d.logPath))
	d, err := startPodsyncd(ctx, e.log, e.d.bin, e.dir, e.d.logPath, e.inst)
	if err != nil {
		return fmt.Errorf("podsyncd exited and did not restart: %w", err)
	}
	e.d = d
	if err := e.cleanAll(ctx); err != nil {
		return fmt.Errorf("clean after restarting podsyncd: %w", err)
	}
	return nil
}

// noteUIDs remembers pods whose cgroups must go after the run.
func (e *env) noteUIDs(uids ...types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, u := range uids {
		e.uids[u] = true
	}
}

// removeCgroups removes the pod cgroups (kubepods/…/pod<uid> under the
// instance's cgroup root) of the pods the run created, in every
// hierarchy; the runtime leaves them once the pods' containers are gone.
// The teardown removes the root.
func (e *env) removeCgroups() {
	e.mu.Lock()
	uids := make([]types.UID, 0, len(e.uids))
	for u := range e.uids {
		uids = append(uids, u)
	}
	e.mu.Unlock()
	hierarchies, _ := filepath.Glob("/sys/fs/cgroup/*")
	var removed []types.UID
	for _, u := range uids {
		gone := true
		for _, h := range hierarchies {
			for _, qos := range []string{"besteffort", "burstable", ""} {
				d := filepath.Join(h, e.inst.CgroupRoot(), "kubepods", qos, "pod"+string(u))
				if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
					gone = false
				}
			}
		}
		if gone {
			removed = append(removed, u)
		}
	}
	e.mu.Lock()
	for _, u := range removed {
		delete(e.uids, u)
	}
	e.mu.Unlock()
}

// close stops podsyncd, removes every pod and tears the instance down.
func (e *env) close(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if e.d != nil {
		if err := e.cleanAll(ctx); err != nil {
			e.log.Warn("clean before teardown", zap.Error(err))
		}
		e.d.stop()
	}
	if e.rt != nil {
		_ = e.rt.Close(ctx)
	}
	if e.inst != nil {
		if err := e.inst.Teardown(ctx); err != nil {
			e.log.Error("teardown", zap.Error(err))
		}
	}
	e.removeCgroups()
	if e.dir != "" {
		_ = os.RemoveAll(e.dir)
	}
}

// podsyncd is a podsyncd process and a client of it.
type podsyncd struct {
	localcri.Agent
	log     *zap.Logger
	bin     string
	sock    string
	metrics string // host:port of /metrics and /debug/pprof
	logPath string
	// logFrom is where this process's output starts in logPath: a
	// podsyncd restarted (around the kubelet's runs) appends to the log
	// of the one before.
	logFrom int64
	conn    *grpc.ClientConn
	api     podsyncv1.PodSyncServiceClient
}

// startPodsyncd starts podsyncd on inst with its state under dir, its log
// in logPath and its socket under /run (unix socket paths are short), and
// waits until it serves.
func startPodsyncd(ctx context.Context, log *zap.Logger, bin, dir, logPath string, inst *localcri.Instance) (_ *podsyncd, err error) {
	sockDir, err := os.MkdirTemp("/run", "psbench-")
	if err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "podsyncd.yaml")
	// Rate limits would throttle the deletions between runs, and the API
	// load's back-to-back reads.
	if err := os.WriteFile(cfg, []byte("security:\n  roles:\n    admin: [\"uid:0\"]\n  rateLimit:\n    perSecond: -1\n    read: {perSecond: -1}\n"), 0o644); err != nil {
		return nil, err
	}
	d := &podsyncd{log: log, bin: bin, sock: filepath.Join(sockDir, "podsync.sock"), logPath: logPath}
	if err := d.start(cfg, dir, inst); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			d.stop()
			err = fmt.Errorf("%w; podsyncd log:\n%s", err, tailFile(d.logPath, 20))
		}
	}()
	if err := d.waitServing(ctx); err != nil {
		return nil, err
	}
	return d, nil
}

// start starts the podsyncd binary, in its own process group, with the
// config file cfg, its state under dir, the runtime of inst and its pods'
// cgroups under inst's cgroup root, appending its output to d.logPath;
// d.done is closed when it exits.
func (d *podsyncd) start(cfg, dir string, inst *localcri.Instance) error {
	logf, err := os.OpenFile(d.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if fi, err := logf.Stat(); err == nil {
		d.logFrom = fi.Size()
	}
	cmd := exec.Command(d.bin,
		"--config", cfg,
		"--runtime-endpoint", inst.Endpoint(),
		"--cgroup-root", inst.CgroupRoot(),
		"--listen", "unix://"+d.sock,
		"--root-dir", filepath.Join(dir, "root"),
		"--pod-log-dir", filepath.Join(dir, "logs"),
		"--node-name", benchNode,
		"--node-ip", benchNodeIP,
		"--resolv-conf=",
		fmt.Sprintf("--max-pods=%d", benchMaxPods),
		"--metrics-address", "127.0.0.1:0",
		"--enable-profiling",
		"--shutdown-timeout", "10s",
	)
	defer func() { _ = logf.Close() }()
	if err := d.Start(cmd, logf); err != nil {
		return fmt.Errorf("start podsyncd: %w", err)
	}
	return nil
}

// waitServing connects to podsyncd and waits, for two minutes at most,
// until its health check says SERVING and then a ListPods succeeds; in
// between it reads the metrics address from the log. It fails at once if
// podsyncd exits before it is healthy.
func (d *podsyncd) waitServing(ctx context.Context) error {
	var err error
	d.conn, err = grpc.NewClient("unix://"+d.sock, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20)))
	if err != nil {
		return err
	}
	d.api = podsyncv1.NewPodSyncServiceClient(d.conn)
	hc := healthpb.NewHealthClient(d.conn)
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		select {
		case <-d.Done():
			return errors.New("podsyncd exited during start")
		default:
		}
		cctx, ccancel := context.WithTimeout(wctx, 2*time.Second)
		resp, err := hc.Check(cctx, &healthpb.HealthCheckRequest{Service: "podsync.v1.PodSyncService"})
		ccancel()
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			break
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("podsyncd not serving: %w (last: %w)", wctx.Err(), errors.Join(err, errors.New(resp.GetStatus().String())))
		case <-time.After(50 * time.Millisecond):
		}
	}
	if d.metrics, err = logAddress(d.logPath, d.logFrom, "serving metrics"); err != nil {
		return err
	}
	// The first call after health may still meet a node that is starting.
	for {
		_, err := d.api.ListPods(wctx, &podsyncv1.ListPodsRequest{})
		if err == nil {
			return nil
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("podsyncd ListPods: %w", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stop stops podsyncd: SIGTERM, then SIGKILL after 20 s.
func (d *podsyncd) stop() {
	if d.conn != nil {
		_ = d.conn.Close()
	}
	if !d.Started() {
		return
	}
	d.Stop(20 * time.Second)
	_ = os.RemoveAll(filepath.Dir(d.sock))
}

// logAddress finds the "address" of the first JSON log line of podsyncd, at or past offset from,
// whose message is msg.
func logAddress(path string, from int64, msg string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return "", err
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var line struct {
			Msg     string `json:"msg"`
			Address string `json:"address"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == msg && line.Address != "" {
			return line.Address, nil
		}
	}
	return "", fmt.Errorf("no %q line in %s", msg, path)
}

// profile fetches a CPU profile of seconds from podsyncd into path.
func (d *podsyncd) profile(ctx context.Context, kind string, seconds int, path string) error {
	url := fmt.Sprintf("http://%s/debug/pprof/%s", d.metrics, kind)
	if seconds > 0 {
		url += fmt.Sprintf("?seconds=%d", seconds)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("fetch %s profile: %w", kind, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("fetch %s profile: %s", kind, resp.Status)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// tailFile returns the last n lines of a file.
func tailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// memTotal returns the machine's memory in bytes, 0 if unknown.
func memTotal() int64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			var kb int64
			if _, err := fmt.Sscan(rest, &kb); err == nil {
				return kb << 10
			}
		}
	}
	return 0
}

// scrapeCounts reads podsyncd's /metrics and returns, per CRI method, how
// many calls it made ("cri/<method>"), and how many sync passes it ran
// ("passes") and for how long in all ("pass_seconds"). Metrics podsyncd
// does not have are absent.
func (d *podsyncd) scrapeCounts(ctx context.Context) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+d.metrics+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape metrics: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	out := map[string]float64{}
	err = metricLines(resp.Body, func(name, labels string, v float64) {
		switch name {
		case "podsync_cri_request_duration_seconds_count":
			out["cri/"+labelValue(labels, "method")] += v
		case "podsync_sync_pass_duration_seconds_count":
			out["passes"] += v
		case "podsync_sync_pass_duration_seconds_sum":
			out["pass_seconds"] += v
		case "podsync_store_writes_total":
			out["store/writes"] += v
		case "podsync_store_commits_total":
			out["store/commits"] += v
		case "podsync_store_syncs_total":
			out["store/syncs"] += v
		}
	})
	return out, err
}

// metricLines calls fn with each sample of a Prometheus text exposition:
// the metric's name, its labels as written (without the braces) and its
// value; comments and lines it cannot read are skipped.
func metricLines(r io.Reader, fn func(name, labels string, v float64)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		name, rest, ok := strings.Cut(line, "{")
		if !ok {
			name, rest, _ = strings.Cut(line, " ")
			rest = "} " + rest
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(strings.TrimSpace(value), &v); err != nil {
			continue
		}
		fn(name, labels, v)
	}
	return sc.Err()
}

// labelValue returns the value of label name in a Prometheus label list.
func labelValue(labels, name string) string {
	for _, kv := range strings.Split(labels, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if ok && k == name {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}
