package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cri "k8s.io/cri-api/pkg/apis"
	criclient "k8s.io/cri-client/pkg"
	"k8s.io/utils/clock"

	"github.com/podsync/podsync/engine/admit"
	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/eviction"
	"github.com/podsync/podsync/engine/logs"
	"github.com/podsync/podsync/engine/metrics"
	"github.com/podsync/podsync/engine/plan"
	"github.com/podsync/podsync/engine/podworkers"
	"github.com/podsync/podsync/engine/prober"
	"github.com/podsync/podsync/engine/sessions"
	"github.com/podsync/podsync/engine/stats"
	"github.com/podsync/podsync/engine/store"
	"github.com/podsync/podsync/engine/syncer"
	"github.com/podsync/podsync/engine/watch"
	"github.com/podsync/podsync/logx"
)

// DefaultGCPeriod is how often the node looks for CRI objects of pods the
// store no longer holds (GCPolicy.Period).
const DefaultGCPeriod = time.Minute

// GCPolicy configures the node-wide garbage collection. Within a pod, the
// executor keeps what the kubelet's default policy keeps (MaxPerPodContainer
// 1: the newest dead instance of each container, plus what status and
// back-off need) at the end of every pass; see SyncPod.
type GCPolicy struct {
	// Period is how often the runtime is searched for podsync's sandboxes
	// and containers of pods the store does not hold (a deletion
	// interrupted midway), which are then removed; zero means
	// DefaultGCPeriod.
	Period time.Duration
}

// NodeOptions configure a Node.
type NodeOptions struct {
	// Runtime is the CRI runtime; required. Probes run their exec
	// commands through it.
	Runtime syncer.Runtime
	// Images is the CRI image service; required.
	Images syncer.ImageService
	// Store holds the desired pods and the revision log; required. The
	// Node does not close it.
	Store *store.Store
	// Clock paces workers, probes, relists and rotation; nil means the
	// real clock.
	Clock clock.WithTicker
	// Logger receives the node's, the workers' and the probers' logs; nil
	// discards.
	Logger *zap.Logger
	// Backoff is the crash-loop and image-pull back-off; the zero value is
	// the kubelet's.
	Backoff plan.BackoffPolicy
	// Config are the node settings (root and log directories, node name
	// and IPs, DNS, cgroups). Probes of host-network pods dial
	// Config.NodeIPs[0].
	Config criconfig.Options
	// RelistPeriod is the relist period of the runtime watcher while no
	// event stream is open (always on containerd 1.6); zero means
	// DefaultRelistPeriod (1 s). EventedRelistPeriod is the period while
	// one is; zero means DefaultEventedRelistPeriod.
	RelistPeriod        time.Duration
	EventedRelistPeriod time.Duration
	// RuntimeEvents, if set, is the runtime's own event stream, which the
	// watcher follows for hints where the runtime offers no CRI container
	// events (containerd 1.6: its event service, internal/ctrdevents);
	// the relist stays the authority. Optional.
	RuntimeEvents watch.RuntimeEvents
	// GC configures the node-wide garbage collection.
	GC GCPolicy
	// LogRotation configures container log rotation.
	LogRotation LogRotation
	// Eviction configures the eviction of pods over their local storage
	// limits and of the largest user of the store's file system when it
	// runs low.
	Eviction EvictionPolicy
	// Admission, if set, is what the node admits pods against — the
	// node's resources, labels, taints and runtime features, and the
	// operator's policy — for Apply, Plan, RunPods and resizes alike, and
	// the hostPath policy the syncer opens hostPath volumes against. It
	// sets Admit, Policy and HostPaths (Admission); nil leaves them as
	// they are.
	Admission *AdmissionConfig
	// SystemInfo is what the node says of its machine, kernel and
	// runtime (Info, GetNode); the node only reports it.
	SystemInfo SystemInfo
	// Admit, if set, is asked about every pod the node does not hold yet
	// (and every pod of a RunPods batch), before it is stored. Nil admits
	// every pod.
	Admit AdmitFunc
	// Policy, if set, checks every apply of a pod the node already holds,
	// and every stored pod when the node starts (Admit checks new pods);
	// see Admission.
	Policy PolicyFunc
	// HostPaths are the allowed hostPath prefixes and the denied paths
	// the syncer opens hostPath volumes against when it mounts them
	// (syncer.SyncerOptions.HostPaths); the zero value refuses every
	// hostPath. Admission checks the same policy by its Admit and Policy.
	HostPaths admit.Policy
	// Credentials are the node's image credentials
	// (syncer.SyncerOptions.Credentials: podsyncd's --image-credentials);
	// nil holds none.
	Credentials *syncer.Keyring
	// ImagePulls is how a pod's access to an image the node holds is
	// verified (syncer.SyncerOptions.ImagePullVerification: podsyncd's
	// --image-pull-credentials-verification-policy).
	ImagePulls syncer.ImagePullVerification
	// Metrics, if set, record the node's sync passes and steps, and
	// describe its pods and back-offs while Run runs. CRI calls are
	// recorded only if Runtime and Images are wrapped with
	// Metrics.InstrumentRuntime and InstrumentImages.
	Metrics *metrics.Metrics
	// RemoveOrphans lets Run remove podsync's pods on the runtime when the
	// store has no history at all (it is new, was emptied or replaced):
	// without it Run refuses to start, with an error wrapping
	// ErrStoreLost, and touches nothing, so that a lost store never takes
	// the running pods with it (podsyncd --remove-orphans).
	RemoveOrphans bool
	// AdoptRuntime lets Run start on a store with no history while the
	// runtime holds podsync's pods by storing a record of each, rebuilt
	// from the sandboxes' and containers' labels and annotations, without
	// touching the runtime (podsyncd --adopt-runtime); it wins over
	// RemoveOrphans. Their ConfigMaps and Secrets are not in the runtime:
	// a start that needs them fails until the pod is applied again.
	AdoptRuntime bool
	// Syncer, if set, runs the pod workers' passes in place of a
	// syncer.Syncer built from Runtime, Images, Clock, Logger, Backoff,
	// Config, Metrics and Mounter (tests drive the workers with a
	// scripted one).
	Syncer PodSyncer
	// Mounter, if set, makes the pods' tmpfs mounts in place of the
	// kernel (syncer.SyncerOptions.Mounter): a hollow node's keeps plain
	// directories.
	Mounter syncer.Mounter
	// Stats, if set, serves the CRI stats of GetPodStats and ListPodStats
	// (the runtime's client); without it they are ErrRuntimeUnavailable.
	Stats cri.ContainerStatsManager
	// RuntimeUnavailable, if set, reports whether the error of a CRI call
	// means that the runtime did not answer (podsyncd: gRPC UNAVAILABLE);
	// Apply, Plan and Delete then return an error wrapping
	// ErrRuntimeUnavailable. Nil classifies no error so.
	RuntimeUnavailable func(error) bool
	// TracerProvider records a span per sync pass, with a child per step
	// (syncer.SyncerOptions.TracerProvider), under the span of the call
	// that asked for the pass; nil records none.
	TracerProvider trace.TracerProvider
}

// Node keeps the pods it is given converged: it stores each desired pod
// before it touches the runtime, runs one logical worker per pod that
// syncs the pod whenever it may have changed (an Apply or Delete, a hint
// from the runtime watcher, a back-off or retry timer, a probe result),
// probes containers, records status changes and events in the store's
// revision log, collects garbage and rotates container logs. It survives
// its own restart: Run adopts what the runtime holds for the stored pods.
//
// The Node is a facade: it wires the rooms that do the work — the pod
// workers (engine/podworkers), the runtime watcher, the prober, the
// admission gate and the orphans (this package), the eviction manager,
// and the sessions, stats and logs rooms Sessions, Stats and Logs return —
// and answers the API.
//
// Build it with NewNode and call Run once; the other methods are safe for
// concurrent use while Run runs.
type Node struct {
	cfg       nodeConfig
	store     *store.Store
	syncer    PodSyncer
	workers   *podworkers.Workers
	watcher   *watch.Watcher
	prober    *prober.Manager
	admission *admission
	orphans   *orphans
	evictor   evictor
	sessions  *sessions.Sessions
	stats     *stats.Collector
	logs      *logs.Manager
	metrics   *metrics.Metrics
	// specs serialise the read, change and store of a pod's spec
	// (Apply, AddEphemeralContainer) by namespace/name: an update read
	// before a debug container was added would otherwise store the spec
	// without it. Different pods do not wait for each other, so the
	// stores of a batch's pods share commits (the store's group commit)
	// instead of paying for one each in turn.
	specs specLocks
	life  runState
}

// nodeConfig are the node's settings, NodeOptions with defaults.
type nodeConfig struct {
	// info is NodeOptions.Admission's Node.
	info        NodeInfo
	log         *zap.Logger
	clock       clock.WithTicker
	node        criconfig.Options
	backoff     plan.BackoffPolicy
	gcPeriod    time.Duration
	unavailable func(error) bool
}

// runState is where Run is: started, recovered (ready), ended.
type runState struct {
	started atomic.Bool
	ended   atomic.Bool
	// ready is closed when Run has recovered and started the workers.
	ready chan struct{}
}

// NewNode returns a Node. It fails with ErrInvalidSpec if Runtime, Images
// or Store is missing.
func NewNode(opts NodeOptions) (*Node, error) {
	if opts.Store == nil {
		return nil, fmt.Errorf("engine: NodeOptions need a Store: %w", errdefs.ErrInvalidSpec)
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if a := opts.Admission; a != nil {
		opts.Admit, opts.Policy = Admission(a.Node, a.Policy)
		opts.HostPaths = a.Policy
	}
	ps := opts.Syncer
	if ps == nil {
		sopts := syncer.SyncerOptions{Runtime: opts.Runtime, Images: opts.Images, Clock: opts.Clock,
			Logger: opts.Logger, Backoff: opts.Backoff, Config: opts.Config, HostPaths: opts.HostPaths, Credentials: opts.Credentials,
			PodSpecKey: opts.Store.NodeKey(), ImagePullVerification: opts.ImagePulls,
			TracerProvider: opts.TracerProvider, Mounter: opts.Mounter}
		if opts.Metrics != nil {
			sopts.Observer = opts.Metrics
		}
		s, err := syncer.NewSyncer(sopts)
		if err != nil {
			return nil, err
		}
		ps = s
	}
	watcher, err := watch.NewWatcher(watch.WatcherOptions{Runtime: opts.Runtime, Clock: opts.Clock, Logger: opts.Logger,
		RelistPeriod: opts.RelistPeriod, EventedRelistPeriod: opts.EventedRelistPeriod, RuntimeEvents: opts.RuntimeEvents})
	if err != nil {
		return nil, err
	}
	var nodeIP string
	if len(opts.Config.NodeIPs) > 0 {
		nodeIP = opts.Config.NodeIPs[0]
	}
	pm := prober.New(prober.Options{
		Runtime: opts.Runtime, Clock: opts.Clock, Logger: opts.Logger, NodeIP: nodeIP,
		IsExecTimeout: func(err error) bool {
			return errors.Is(err, criclient.ErrCommandTimedOut) || errors.Is(err, context.DeadlineExceeded)
		},
	})
	cfg := nodeConfig{log: opts.Logger, clock: opts.Clock, node: opts.Config.WithDefaults(), backoff: opts.Backoff,
		gcPeriod: opts.GC.Period, unavailable: opts.RuntimeUnavailable,
		info: NodeInfo{System: opts.SystemInfo}}
	if cfg.gcPeriod <= 0 {
		cfg.gcPeriod = DefaultGCPeriod
	}
	if opts.Admission != nil {
		cfg.info.Node = opts.Admission.Node
	}
	n := &Node{cfg: cfg, store: opts.Store, syncer: ps, watcher: watcher, prober: pm, metrics: opts.Metrics,
		specs: newSpecLocks(), life: runState{ready: make(chan struct{})}}
	n.orphans = newOrphans(opts.Store, opts.Runtime, opts.Logger, opts.RemoveOrphans, opts.AdoptRuntime)
	n.admission = newAdmission(opts.Store, opts.Admit, opts.Policy, opts.Logger)
	var wm podworkers.Metrics
	if opts.Metrics != nil {
		wm = opts.Metrics
	}
	n.workers, err = podworkers.New(podworkers.Options{Store: opts.Store, Syncer: ps, Prober: pm, Clock: opts.Clock,
		Logger: opts.Logger, Backoff: opts.Backoff, Config: cfg.node, Metrics: wm, Admission: n.admission, Unstored: n.orphans})
	if err != nil {
		return nil, err
	}
	var em eviction.Observer
	if opts.Metrics != nil {
		em = opts.Metrics
	}
	n.evictor = eviction.New(eviction.Options{Policy: opts.Eviction, Store: opts.Store, Pods: n.admission, Runtime: opts.Runtime,
		Failer: n.workers, Config: cfg.node, Metrics: em, Logger: opts.Logger})
	n.admission.failWith(n.workers, n.evictor)
	n.sessions = sessions.New(sessions.Options{Runtime: opts.Runtime, Pods: opts.Store, Views: ps, RuntimeUnavailable: opts.RuntimeUnavailable})
	n.stats = stats.New(stats.Options{Pods: opts.Store, Views: ps, Stats: opts.Stats, Runtime: opts.Runtime, Config: cfg.node,
		Clock: opts.Clock, RuntimeUnavailable: opts.RuntimeUnavailable})
	n.logs = logs.NewManager(logs.ManagerOptions{Pods: opts.Store, Runtime: opts.Runtime, Config: cfg.node, Rotation: opts.LogRotation,
		Clock: opts.Clock, Logger: opts.Logger})
	return n, nil
}

// Run recovers and then keeps the node's pods converged until ctx ends.
// Recovery loads the store and lists the runtime: podsync's sandboxes and
// containers of pods the store does not hold are removed, stored pods are
// adopted as the runtime holds them (nothing healthy restarts; restart
// counts and back-off continue from the runtime's annotations and times),
// and pods marked deleting finish their deletion. Then the runtime
// watcher, the prober and one worker per pod run, with the garbage
// collector, the log rotation and the local storage eviction.
//
// Run returns nil once ctx has ended and every goroutine it started has
// stopped, or an error if the store or the runtime cannot be read at the
// start. It runs once: a second call returns an error.
func (n *Node) Run(ctx context.Context) error {
	if n.life.started.Swap(true) {
		return errors.New("engine: Node.Run called twice")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// helpers are the goroutines Run waits for besides the worker loops.
	var helpers sync.WaitGroup
	probesDone, probeEventsDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(probesDone)
		n.workers.ConsumeProbes(n.prober.Updates())
	}()
	go func() {
		defer close(probeEventsDone)
		n.workers.ConsumeProbeEvents(n.prober.Events())
	}()
	state := nodeState{workers: n.workers, orphans: n.orphans, evictor: n.evictor}
	defer func() {
		n.metrics.Detach(state)
		n.life.ended.Store(true)
		n.workers.Stop()
		cancel()
		helpers.Wait()
		n.prober.Stop()
		<-probesDone
		<-probeEventsDone
	}()

	if err := n.recover(ctx); err != nil {
		return err
	}
	n.metrics.Attach(state)
	n.evictor.CheckReserve()
	helpers.Go(func() {
		if err := n.watcher.Run(ctx); err != nil {
			n.cfg.log.Warn("runtime watcher ended", zap.Error(err))
		}
	})
	hints := n.watcher.SubscribeHints(ctx)
	helpers.Go(func() { n.workers.DispatchHints(hints) })
	helpers.Go(func() { n.every(ctx, n.cfg.gcPeriod, n.orphans.collect(n.workers)) })
	helpers.Go(func() { n.every(ctx, n.logs.RotationPeriod(), n.logs.Rotate) })
	helpers.Go(func() { n.every(ctx, n.evictor.Period(), n.evictor.Check) })

	n.workers.Start(ctx)
	close(n.life.ready)
	n.cfg.log.Info("node running", zap.Int(logx.Pods, n.workers.Len()))

	<-ctx.Done()
	n.cfg.log.Info("node stopping")
	return nil
}

// every calls fn each period until ctx ends.
func (n *Node) every(ctx context.Context, period time.Duration, fn func(context.Context)) {
	t := n.cfg.clock.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		fn(ctx)
	}
}

// waitReady waits until Run has recovered; it returns ErrRuntimeUnavailable
// once Run has ended.
func (n *Node) waitReady(ctx context.Context) error {
	select {
	case <-n.life.ready:
	case <-ctx.Done():
		return fmt.Errorf("wait for the node to start: %w", context.Cause(ctx))
	}
	if n.life.ended.Load() {
		return fmt.Errorf("node stopped: %w", errdefs.ErrRuntimeUnavailable)
	}
	return nil
}

// runtimeError adds ErrRuntimeUnavailable to err if it is the error of a
// runtime that did not answer (NodeOptions.RuntimeUnavailable).
func (n *Node) runtimeError(err error) error {
	return errdefs.RuntimeUnavailable(err, n.cfg.unavailable)
}

// ObserveSteps calls fn with each step of the passes the node runs of the
// pod with uid on its own, after Apply: restarts, back-offs, the next init
// container, probes' kills. (The steps of a pass run for Apply or Delete go
// to that caller's emit.) fn is called from the pod's worker and must not
// block. The returned func ends the observation.
func (n *Node) ObserveSteps(uid types.UID, fn func(StepResult)) (stop func()) {
	return n.workers.ObserveSteps(uid, fn)
}

// PodSandbox returns the sandbox the pod with uid ran its containers in
// after its last pass: its CRI id and attempt. ok is false if no pass has
// given the pod a sandbox since podsyncd started (or since it lost it).
func (n *Node) PodSandbox(uid types.UID) (id string, attempt uint32, ok bool) {
	return n.workers.PodSandbox(uid)
}

// Info is what admission knows of the node (NodeOptions.Admission's
// Node; the zero value without admission) and what it says of its machine
// (NodeOptions.SystemInfo).
func (n *Node) Info() NodeInfo { return n.cfg.info }

// Sessions are the node's exec, attach and port-forward sessions and
// ExecSync.
func (n *Node) Sessions() *sessions.Sessions { return n.sessions }

// Stats reads the usage of the node's pods.
func (n *Node) Stats() *stats.Collector { return n.stats }

// Logs reads the containers' logs and rotates them.
func (n *Node) Logs() *logs.Manager { return n.logs }

// evictor is what the node needs of its eviction manager
// (eviction.Manager): the housekeeping round and its period, the store's
// reserve, appends that may release it (a preemption's), and the last
// measurement of the pods' local storage.
type evictor interface {
	Check(ctx context.Context)
	CheckReserve()
	Period() time.Duration
	Append(changes ...store.Change) error
	Usage() map[types.UID]int64
}

var _ evictor = (*eviction.Manager)(nil)

// nodeState is what the node metrics describe of a running node
// (metrics.NodeState): the workers' pods, the orphans and the eviction
// manager's last measurement.
type nodeState struct {
	workers *podworkers.Workers
	orphans *orphans
	evictor evictor
}

func (s nodeState) PodCounts() (map[corev1.PodPhase]int, int) { return s.workers.PodCounts() }

func (s nodeState) OrphanCount() int { return s.orphans.Count() }

// StorageUsages returns the last measurement of the pods the node still
// holds.
func (s nodeState) StorageUsages() []metrics.PodUsage {
	usage := s.evictor.Usage()
	out := make([]metrics.PodUsage, 0, len(usage))
	for uid, b := range usage {
		if ref, ok := s.workers.Ref(uid); ok {
			out = append(out, metrics.PodUsage{Namespace: ref.Namespace, Name: ref.Name, Bytes: b})
		}
	}
	return out
}
