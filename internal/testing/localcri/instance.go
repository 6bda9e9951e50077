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
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"go.uber.org/zap"
)

// criNamespace is the containerd namespace the CRI plugin uses.
const criNamespace = "k8s.io"

// Options configure Start. The zero value is ready to use.
type Options struct {
	// Flavour selects the containerd. Empty means FlavourFromEnv.
	Flavour Flavour
	// Logger receives progress and stage timings. Nil discards them.
	Logger *zap.Logger
	// RepoDir is the podsync checkout, holding internal/testing/localcri/pause.
	// Empty means RepoDir().
	RepoDir string
	// ToolsDir caches the containerd build, crictl and the image tarballs.
	// Empty means <RepoDir>/.tmp.
	ToolsDir string
	// LogDir, when set, receives containerd's log as containerd-<id>.log,
	// which then outlives Teardown. Empty keeps the log in the instance
	// directory, removed with it.
	LogDir string
	// StatsCollectPeriod is containerd 2.x's CRI stats_collect_period: how
	// often its CRI plugin reads the CPU stats of every container and pod
	// cgroup in the background (docs/runtime-cost.md). Empty means
	// DefaultStatsCollectPeriod; ContainerdStatsCollectPeriod keeps
	// containerd's own default (1s). Containerd 1.6 has no such reader and
	// ignores it.
	StatsCollectPeriod string
	// DefaultRoute gives pods a default route through their bridge's
	// gateway, the host: what a cluster's pod network needs, so that pods
	// of one instance reach those of another (routed by the host between
	// the bridges) and Service addresses the host translates. Without it
	// pods reach only their own subnet.
	DefaultRoute bool
}

// DefaultStatsCollectPeriod is the stats_collect_period of an instance:
// the kubelet's cAdvisor housekeeping interval. containerd 2.x's default
// of one second reads every pod cgroup's stats once a second, which costs
// more CPU on an idle node than everything else it does
// (docs/runtime-cost.md).
const DefaultStatsCollectPeriod = "10s"

// ContainerdStatsCollectPeriod as Options.StatsCollectPeriod leaves
// stats_collect_period unset: containerd's own default of one second.
const ContainerdStatsCollectPeriod = "containerd"

// Instance is one private containerd serving CRI. Create it with Start and
// end it with Teardown. Its methods are safe for concurrent use.
type Instance struct {
	log    *zap.Logger
	rec    record
	bins   binaries
	stages Stages
	images *Images
	reg    *Registry
	// statsPeriod is Options.StatsCollectPeriod, with its default.
	statsPeriod string
	// defaultRoute is Options.DefaultRoute.
	defaultRoute bool

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
	if opts, err = opts.withDefaults(); err != nil {
		return nil, err
	}
	sw := newStopwatch()
	log = log.With(zap.String("flavour", string(opts.Flavour)))
	imgs, err := prepareHost(ctx, log, opts, sw)
	if err != nil {
		return nil, err
	}
	inst, err := newInstance(log, opts, imgs)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = inst.abortStart(ctx, err)
		}
	}()
	if err := inst.bringUp(ctx, sw); err != nil {
		return nil, err
	}
	inst.stages = sw.stages
	inst.log.Info("containerd instance ready",
		zap.String("endpoint", inst.Endpoint()),
		zap.String("subnet", inst.rec.Subnet),
		zap.String("registry", inst.rec.RegistryAddr),
		zap.String("stages", inst.stages.String()))
	return inst, nil
}

// withDefaults returns o with its empty fields filled in (see Options),
// and checks its flavour.
func (o Options) withDefaults() (Options, error) {
	var err error
	if o.Flavour == "" {
		if o.Flavour, err = FlavourFromEnv(); err != nil {
			return o, err
		}
	}
	if _, err := ParseFlavour(string(o.Flavour)); err != nil {
		return o, err
	}
	if o.RepoDir == "" {
		if o.RepoDir, err = RepoDir(); err != nil {
			return o, err
		}
	}
	if o.ToolsDir == "" {
		o.ToolsDir = filepath.Join(o.RepoDir, ".tmp")
	}
	switch o.StatsCollectPeriod {
	case "":
		o.StatsCollectPeriod = DefaultStatsCollectPeriod
	case ContainerdStatsCollectPeriod:
	default:
		if d, err := time.ParseDuration(o.StatsCollectPeriod); err != nil || d <= 0 {
			return o, fmt.Errorf("stats collect period %q: want a positive duration such as 10s, or %q", o.StatsCollectPeriod, ContainerdStatsCollectPeriod)
		}
	}
	return o, nil
}

// prepareHost makes the machine ready for an instance of opts.Flavour: it
// installs the missing packages, checks that it runs as root, builds
// containerd 2.x when that is the flavour, and builds the local images
// (or finds them cached). Each step is a lap of sw.
func prepareHost(ctx context.Context, log *zap.Logger, opts Options, sw *stopwatch) (*Images, error) {
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
	return imgs, nil
}

// newInstance creates the directory of a fresh run id and returns the
// instance that will live in it, with every name and path derived from
// the id. Nothing is started yet.
func newInstance(log *zap.Logger, opts Options, imgs *Images) (*Instance, error) {
	id, dir, err := newInstanceDir()
	if err != nil {
		return nil, err
	}
	inst := &Instance{
		log:         log.With(zap.String("run_id", id)),
		bins:        flavourBinaries(opts.Flavour, opts.ToolsDir),
		images:      imgs,
		statsPeriod: opts.StatsCollectPeriod, defaultRoute: opts.DefaultRoute,
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
	return inst, nil
}

// bringUp brings a new instance to life, each step a lap of sw: it records
// the instance on disk, claims a pod subnet, starts the registry with the
// local images, writes the configuration, starts containerd and imports
// the images into it.
func (i *Instance) bringUp(ctx context.Context, sw *stopwatch) error {
	if err := i.writeRecord(); err != nil {
		return err
	}
	subnet, err := claimSubnet(ctx, i.rec.ID)
	if err != nil {
		return err
	}
	i.rec.Subnet = subnet.String()
	sw.lap("allocate")

	i.reg, err = StartRegistry(ctx, i.log)
	if err != nil {
		return err
	}
	i.rec.RegistryAddr = i.reg.Addr()
	if err := i.pushImages(ctx); err != nil {
		return err
	}
	sw.lap("registry")

	if err := i.writeConfig(ctx, subnet); err != nil {
		return err
	}
	sw.lap("config")
	if err := i.startContainerd(ctx); err != nil {
		return err
	}
	sw.lap("containerd ready")
	if err := i.importImages(ctx); err != nil {
		return err
	}
	sw.lap("import images")
	return nil
}

// abortStart tears down an instance whose start failed with err, under a
// fresh two-minute context, and returns err with the teardown's error and
// the end of containerd's log added.
func (i *Instance) abortStart(ctx context.Context, err error) error {
	logTail := i.logTail()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	if terr := i.Teardown(cctx); terr != nil {
		err = errors.Join(err, fmt.Errorf("tear down after failed start: %w", terr))
	}
	if logTail != "" {
		err = fmt.Errorf("%w\ncontainerd log (last lines):\n%s", err, logTail)
	}
	return err
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

// CgroupRoot returns the cgroup root (--cgroup-root) of the agent that
// runs pods on the instance, a name of its own on the host: the pod
// cgroups below a shared root are named by pod UID alone, so two agents'
// pods of one namespace and name (their UIDs derived from both) would share
// one, and each agent would remove the other's. Teardown removes it.
func (i *Instance) CgroupRoot() string { return "/localcri-" + i.rec.ID }

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

// poll calls cond every interval until it returns true or an error, or ctx
// is done.
func poll(ctx context.Context, interval time.Duration, cond func() (bool, error)) error {
	return wait.PollUntilContextCancel(ctx, interval, true, func(context.Context) (bool, error) { return cond() })
}
