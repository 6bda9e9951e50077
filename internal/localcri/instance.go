package localcri

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// criNamespace is the containerd namespace the CRI plugin uses.
const criNamespace = "k8s.io"

// Options configure Start. The zero value is ready to use.
type Options struct {
	// Flavour selects the containerd. Empty means FlavourFromEnv.
	Flavour Flavour
	// Logger receives progress and stage timings. Nil discards them.
	Logger *zap.Logger
	// RepoDir is the podsync checkout, holding internal/localcri/pause.
	// Empty means RepoDir().
	RepoDir string
	// ToolsDir caches the containerd build, crictl and the image tarballs.
	// Empty means <RepoDir>/.tmp.
	ToolsDir string
	// LogDir, when set, receives containerd's log as containerd-<id>.log,
	// which then outlives Teardown. Empty keeps the log in the instance
	// directory, removed with it.
	LogDir string
}

// Instance is one private containerd serving CRI. Create it with Start and
// end it with Teardown. Its methods are safe for concurrent use.
type Instance struct {
	log    *zap.Logger
	rec    record
	bins   binaries
	stages Stages
	images *Images
	reg    *Registry

	mu       sync.Mutex
	proc     *os.Process   // the running containerd, nil when stopped
	procDone chan struct{} // closed when proc has exited (children only)
	torn     bool
	started  bool // containerd was started at least once
	// Recorded by Teardown for Leftovers: pod and container ids, network
	// namespace names and bridge ports the instance had.
	seen, netns, veths []string
}

// record is what is known of an instance on disk (instance.json in its
// directory), so that another process can tear it down.
type record struct {
	ID            string  `json:"id"`
	Flavour       Flavour `json:"flavour"`
	Dir           string  `json:"dir"`
	Socket        string  `json:"socket"`
	ConfigPath    string  `json:"configPath"`
	LogPath       string  `json:"logPath"`
	Bridge        string  `json:"bridge"`
	Network       string  `json:"network"`
	Subnet        string  `json:"subnet"`
	ContainerdPID int     `json:"containerdPid"`
	OwnerPID      int     `json:"ownerPid"`
	RegistryAddr  string  `json:"registryAddr"`
	ToolsDir      string  `json:"toolsDir"`
}

// Start starts a private containerd and returns when it serves CRI with the
// local images imported and its pod network ready. It installs what is
// missing first (see the package documentation). On failure nothing of the
// instance is left behind.
func Start(ctx context.Context, opts Options) (_ *Instance, err error) {
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	if opts.Flavour == "" {
		if opts.Flavour, err = FlavourFromEnv(); err != nil {
			return nil, err
		}
	}
	if _, err := ParseFlavour(string(opts.Flavour)); err != nil {
		return nil, err
	}
	if opts.RepoDir == "" {
		if opts.RepoDir, err = RepoDir(); err != nil {
			return nil, err
		}
	}
	if opts.ToolsDir == "" {
		opts.ToolsDir = filepath.Join(opts.RepoDir, ".tmp")
	}
	sw := newStopwatch()
	log = log.With(zap.String("flavour", string(opts.Flavour)))

	if err := ensurePackages(ctx, log, opts.Flavour); err != nil {
		return nil, err
	}
	sw.lap("packages")
	if os.Geteuid() != 0 {
		return nil, errors.New("running containerd needs root: run as root (e.g. sudo -E go test …)")
	}
	if opts.Flavour == Containerd2 {
		if err := ensureContainerd2(ctx, log, opts.ToolsDir); err != nil {
			return nil, err
		}
	}
	sw.lap("containerd binaries")
	imgs, err := BuildImages(ctx, log, opts.RepoDir, opts.ToolsDir)
	if err != nil {
		return nil, err
	}
	if imgs.Cached {
		sw.lap("images (cached)")
	} else {
		sw.lap("images (built)")
	}

	id, dir, err := newInstanceDir()
	if err != nil {
		return nil, err
	}
	inst := &Instance{
		log:    log.With(zap.String("run_id", id)),
		bins:   flavourBinaries(opts.Flavour, opts.ToolsDir),
		images: imgs,
		rec: record{
			ID:         id,
			Flavour:    opts.Flavour,
			Dir:        dir,
			Socket:     filepath.Join(dir, "containerd.sock"),
			ConfigPath: filepath.Join(dir, "config.toml"),
			LogPath:    filepath.Join(dir, "containerd.log"),
			Bridge:     "lcri-" + id,
			Network:    "localcri-" + id,
			OwnerPID:   os.Getpid(),
			ToolsDir:   opts.ToolsDir,
		},
	}
	if opts.LogDir != "" {
		if err := os.MkdirAll(opts.LogDir, 0o755); err != nil {
			return nil, fmt.Errorf("create log dir: %w", err)
		}
		inst.rec.LogPath = filepath.Join(opts.LogDir, "containerd-"+id+".log")
	}
	defer func() {
		if err == nil {
			return
		}
		logTail := inst.logTail()
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		if terr := inst.Teardown(cctx); terr != nil {
			err = errors.Join(err, fmt.Errorf("tear down after failed start: %w", terr))
		}
		if logTail != "" {
			err = fmt.Errorf("%w\ncontainerd log (last lines):\n%s", err, logTail)
		}
	}()
	if err := inst.writeRecord(); err != nil {
		return nil, err
	}
	subnet, err := claimSubnet(ctx, id)
	if err != nil {
		return nil, err
	}
	inst.rec.Subnet = subnet.String()
	sw.lap("allocate")

	inst.reg, err = StartRegistry(ctx, inst.log)
	if err != nil {
		return nil, err
	}
	inst.rec.RegistryAddr = inst.reg.Addr()
	if err := inst.pushImages(ctx); err != nil {
		return nil, err
	}
	sw.lap("registry")

	if err := inst.writeConfig(ctx, subnet); err != nil {
		return nil, err
	}
	sw.lap("config")
	if err := inst.startContainerd(ctx); err != nil {
		return nil, err
	}
	sw.lap("containerd ready")
	if err := inst.importImages(ctx); err != nil {
		return nil, err
	}
	sw.lap("import images")
	inst.stages = sw.stages
	inst.log.Info("containerd instance ready",
		zap.String("endpoint", inst.Endpoint()),
		zap.String("subnet", inst.rec.Subnet),
		zap.String("registry", inst.rec.RegistryAddr),
		zap.String("stages", inst.stages.String()))
	return inst, nil
}

// newInstanceDir creates /run/localcri/<id> for a fresh random id.
func newInstanceDir() (string, string, error) {
	if err := os.MkdirAll(machineDir, 0o755); err != nil {
		return "", "", fmt.Errorf("create %s: %w", machineDir, err)
	}
	for range 10 {
		b := make([]byte, 3)
		if _, err := rand.Read(b); err != nil {
			return "", "", fmt.Errorf("make run id: %w", err)
		}
		id := hex.EncodeToString(b)
		dir := filepath.Join(machineDir, id)
		err := os.Mkdir(dir, 0o711)
		if err == nil {
			return id, dir, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return "", "", fmt.Errorf("create instance dir: %w", err)
		}
	}
	return "", "", errors.New("no free run id after 10 tries")
}

// ID returns the run id, six hex digits found in every name the instance
// uses (directories, bridge, CNI network).
func (i *Instance) ID() string { return i.rec.ID }

// Flavour returns the containerd flavour.
func (i *Instance) Flavour() Flavour { return i.rec.Flavour }

// Dir returns the instance directory, /run/localcri/<id>.
func (i *Instance) Dir() string { return i.rec.Dir }

// Socket returns the path of containerd's (and CRI's) unix socket.
func (i *Instance) Socket() string { return i.rec.Socket }

// Endpoint returns the CRI endpoint, "unix://" + Socket().
func (i *Instance) Endpoint() string { return "unix://" + i.rec.Socket }

// Bridge returns the name of the instance's CNI bridge.
func (i *Instance) Bridge() string { return i.rec.Bridge }

// Network returns the name of the instance's CNI network.
func (i *Instance) Network() string { return i.rec.Network }

// Subnet returns the pod subnet; pods get addresses from it.
func (i *Instance) Subnet() netip.Prefix {
	p, _ := netip.ParsePrefix(i.rec.Subnet)
	return p
}

// LogPath returns the path of containerd's log.
func (i *Instance) LogPath() string { return i.rec.LogPath }

// ToolsDir returns the tools directory that caches binaries and images,
// <repo>/.tmp by default.
func (i *Instance) ToolsDir() string { return i.rec.ToolsDir }

// Stages returns how long each step of Start took.
func (i *Instance) Stages() Stages { return i.stages }

// Images returns the image set imported into the instance.
func (i *Instance) Images() *Images { return i.images }

// Registry returns the instance's local registry, which holds PauseImage and
// BusyboxImage as Registry().Ref("pause:local") and
// Registry().Ref("busybox:local"). containerd pulls from it over plain HTTP,
// both by those 127.0.0.1 references and for registry.local/... names.
// It is nil for an instance attached with Cleanup.
func (i *Instance) Registry() *Registry { return i.reg }

// PID returns containerd's process id, or 0 when it is stopped.
func (i *Instance) PID() int {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.proc == nil {
		return 0
	}
	return i.proc.Pid
}

// CtrCommand returns a ctr command bound to the instance's socket and the
// CRI namespace, e.g. CtrCommand("containers", "ls"). The caller runs it.
func (i *Instance) CtrCommand(args ...string) *exec.Cmd {
	return exec.Command(i.bins.ctr, append([]string{"-a", i.rec.Socket, "-n", criNamespace}, args...)...)
}

// CrictlHint returns a crictl command line (without subcommand) that talks
// to the instance: "crictl --config /run/localcri/<id>/crictl.yaml", whose
// config names the instance's endpoint for runtime and images. It names
// <tools>/bin/crictl when EnsureCrictl installed it.
func (i *Instance) CrictlHint() string {
	crictl := "crictl"
	if p := filepath.Join(i.rec.ToolsDir, "bin", "crictl"); fileExists(p) {
		crictl = p
	}
	return fmt.Sprintf("%s --config %s", crictl, i.path("crictl.yaml"))
}

// HostPort hands out a free TCP port on the host for a pod's hostPort. No
// other instance on the machine hands out the same port while this one
// lives.
func (i *Instance) HostPort(ctx context.Context) (int, error) {
	return claimHostPort(ctx, i.rec.ID)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// writeRecord stores the record as instance.json in the instance directory.
func (i *Instance) writeRecord() error {
	i.mu.Lock()
	rec := i.rec
	i.mu.Unlock()
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return fmt.Errorf("encode instance record: %w", err)
	}
	tmp := filepath.Join(i.rec.Dir, "instance.json.tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("write instance record: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(i.rec.Dir, "instance.json")); err != nil {
		return fmt.Errorf("write instance record: %w", err)
	}
	return nil
}

// path returns a path inside the instance directory.
func (i *Instance) path(elem ...string) string {
	return filepath.Join(append([]string{i.rec.Dir}, elem...)...)
}

// writeConfig writes config.toml, the CNI conflist and the registry hosts
// files.
func (i *Instance) writeConfig(ctx context.Context, subnet netip.Prefix) error {
	for _, d := range []string{"root", "state", "tmp", "opt", "runc", "s", "cni/net.d", "cni/ipam", "certs.d"} {
		if err := os.MkdirAll(i.path(d), 0o711); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	defaults, err := runCommand(ctx, nil, "", i.bins.containerd, "config", "default")
	if err != nil {
		return fmt.Errorf("containerd config default: %w", err)
	}
	cfg, err := patchConfig(defaults, configParams{
		root:          i.path("root"),
		state:         i.path("state"),
		temp:          i.path("tmp"),
		socket:        i.rec.Socket,
		ttrpcSocket:   i.rec.Socket + ".ttrpc",
		runcRoot:      i.path("runc"),
		shimSocketDir: i.path("s"),
		cniConfDir:    i.path("cni", "net.d"),
		certsDir:      i.path("certs.d"),
		optDir:        i.path("opt"),
		sandboxImage:  PauseImage,
	})
	if err != nil {
		return err
	}
	if err := os.WriteFile(i.rec.ConfigPath, cfg, 0o644); err != nil {
		return fmt.Errorf("write containerd config: %w", err)
	}
	crictl := fmt.Sprintf("runtime-endpoint: %s\nimage-endpoint: %s\ntimeout: 60\n", i.Endpoint(), i.Endpoint())
	if err := os.WriteFile(i.path("crictl.yaml"), []byte(crictl), 0o644); err != nil {
		return fmt.Errorf("write crictl config: %w", err)
	}
	conflist, err := cniConfList(i.rec.Network, i.rec.Bridge, i.path("cni", "ipam"), subnet)
	if err != nil {
		return err
	}
	if err := os.WriteFile(i.path("cni", "net.d", "10-localcri.conflist"), conflist, 0o644); err != nil {
		return fmt.Errorf("write cni config: %w", err)
	}
	for _, host := range []string{i.rec.RegistryAddr, "registry.local"} {
		d := i.path("certs.d", host)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create hosts dir: %w", err)
		}
		if err := os.WriteFile(filepath.Join(d, "hosts.toml"), hostsTOML(i.rec.RegistryAddr), 0o644); err != nil {
			return fmt.Errorf("write hosts.toml: %w", err)
		}
	}
	return nil
}

// pushImages stores the local images in the registry.
func (i *Instance) pushImages(ctx context.Context) error {
	imgs, err := LayoutImages(i.images.Layout)
	if err != nil {
		return err
	}
	for ref, img := range imgs {
		if err := i.reg.Push(ctx, strings.TrimPrefix(ref, "registry.local/"), img); err != nil {
			return err
		}
	}
	return nil
}

// importImages imports the image tarball with ctr and waits until CRI
// lists every image.
func (i *Instance) importImages(ctx context.Context) error {
	cmd := i.CtrCommand("images", "import", i.images.Tar)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ctr images import: %w: %s", err, tail(out.String(), 2000))
	}
	conn, err := dialCRI(i.rec.Socket)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	is := runtimeapi.NewImageServiceClient(conn)
	return poll(ctx, 50*time.Millisecond, func() (bool, error) {
		for _, ref := range i.images.Refs {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			resp, err := is.ImageStatus(cctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
			cancel()
			if err != nil || resp.GetImage() == nil {
				return false, nil
			}
		}
		return true, nil
	})
}

// dialCRI opens a gRPC client connection to a CRI socket.
func dialCRI(socket string) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", socket, err)
	}
	return conn, nil
}

// poll calls cond every interval until it returns true or an error, or ctx
// is done.
func poll(ctx context.Context, interval time.Duration, cond func() (bool, error)) error {
	return wait.PollUntilContextCancel(ctx, interval, true, func(context.Context) (bool, error) { return cond() })
}

// containerdEnv is containerd's environment: the flavour's shim first on PATH.
func containerdEnv(shimDir string) []string {
	env := make([]string, 0, len(os.Environ())+1)
	path := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	for _, kv := range os.Environ() {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v + ":" + path
			continue
		}
		env = append(env, kv)
	}
	return append(env, "PATH="+shimDir+":"+path)
}

// startContainerd starts containerd as a child process and waits until CRI
// answers Version and reports the runtime and the network ready.
func (i *Instance) startContainerd(ctx context.Context) error {
	if i.running() {
		return errors.New("containerd is running already")
	}
	i.mu.Lock()
	logf, err := os.OpenFile(i.rec.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		i.mu.Unlock()
		return fmt.Errorf("open containerd log: %w", err)
	}
	cmd := exec.Command(i.bins.containerd, "--config", i.rec.ConfigPath)
	cmd.Env = containerdEnv(i.bins.shimDir)
	cmd.Dir = i.rec.Dir
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group: a ^C meant for the test binary does not reach it,
	// so that teardown still finds it running.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	_ = logf.Close()
	if err != nil {
		i.mu.Unlock()
		return fmt.Errorf("start containerd: %w", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	i.proc, i.procDone = cmd.Process, done
	i.started = true
	i.rec.ContainerdPID = cmd.Process.Pid
	i.mu.Unlock()
	if err := i.writeRecord(); err != nil {
		return err
	}
	return i.waitReady(ctx, done)
}

// waitReady waits until CRI answers Version and Status says the runtime and
// the network are ready; it fails early if containerd exits.
func (i *Instance) waitReady(ctx context.Context, done <-chan struct{}) error {
	conn, err := dialCRI(i.rec.Socket)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	rs := runtimeapi.NewRuntimeServiceClient(conn)
	var last error
	err = poll(ctx, 50*time.Millisecond, func() (bool, error) {
		select {
		case <-done:
			return false, errors.New("containerd exited during start")
		default:
		}
		if !fileExists(i.rec.Socket) {
			return false, nil
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if _, err := rs.Version(cctx, &runtimeapi.VersionRequest{}); err != nil {
			last = err
			return false, nil
		}
		st, err := rs.Status(cctx, &runtimeapi.StatusRequest{})
		if err != nil {
			last = err
			return false, nil
		}
		for _, c := range st.GetStatus().GetConditions() {
			// Other conditions, such as containerd 2.x's deprecation warnings
			// (cgroup v1 here), do not keep pods from running.
			if (c.Type == runtimeapi.RuntimeReady || c.Type == runtimeapi.NetworkReady) && !c.Status {
				last = fmt.Errorf("condition %s: %s %s", c.Type, c.Reason, c.Message)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("wait for cri: %w (last: %w)", err, last)
	}
	if err != nil {
		return fmt.Errorf("wait for cri: %w", err)
	}
	return nil
}

// Stop stops containerd (SIGTERM, then SIGKILL after 15 s or when ctx is
// done) and keeps all its state: pods and containers keep running under
// their shims, and Start brings containerd back to them.
func (i *Instance) Stop(ctx context.Context) error {
	i.mu.Lock()
	p, done := i.proc, i.procDone
	i.mu.Unlock()
	if p == nil {
		return nil
	}
	err := stopProcess(ctx, p.Pid, done, 15*time.Second)
	i.mu.Lock()
	i.proc, i.procDone = nil, nil
	i.rec.ContainerdPID = 0
	i.mu.Unlock()
	if werr := i.writeRecord(); werr != nil && err == nil {
		err = werr
	}
	if err != nil {
		return fmt.Errorf("stop containerd: %w", err)
	}
	return nil
}

// Start starts containerd again after Stop, with the same configuration
// and state, and waits until CRI is ready.
func (i *Instance) Start(ctx context.Context) error {
	i.mu.Lock()
	torn := i.torn
	i.mu.Unlock()
	if torn {
		return errors.New("instance was torn down")
	}
	return i.startContainerd(ctx)
}

// stopProcess sends SIGTERM to pid and waits for it to exit; after grace, or
// when ctx is done, it sends SIGKILL and waits again. done, if not nil, is
// closed when the process is reaped; otherwise /proc is polled.
func stopProcess(ctx context.Context, pid int, done <-chan struct{}, grace time.Duration) error {
	exited := func() bool {
		if done != nil {
			select {
			case <-done:
				return true
			default:
				return false
			}
		}
		return !Alive(pid)
	}
	waitExit := func(ctx context.Context) error {
		return poll(ctx, 20*time.Millisecond, func() (bool, error) { return exited(), nil })
	}
	if exited() {
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	gctx, cancel := context.WithTimeout(ctx, grace)
	err := waitExit(gctx)
	cancel()
	if err == nil {
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := waitExit(kctx); err != nil {
		return fmt.Errorf("process %d survived SIGKILL: %w", pid, err)
	}
	return nil
}

// logTail returns the last lines of containerd's log.
func (i *Instance) logTail() string {
	b, err := os.ReadFile(i.rec.LogPath)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return strings.Join(lines, "\n")
}
