package engine

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cri "k8s.io/cri-api/pkg/apis"
	criclient "k8s.io/cri-client/pkg"
	"k8s.io/utils/clock"

	"github.com/podsync/podsync/engine/admit"
	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/plan"
	"github.com/podsync/podsync/engine/podstatus"
	"github.com/podsync/podsync/engine/prober"
	"github.com/podsync/podsync/engine/store"
	"github.com/podsync/podsync/engine/syncer"
	"github.com/podsync/podsync/engine/watch"
	"github.com/podsync/podsync/logx"
)

// Defaults of NodeOptions.
const (
	// DefaultGCPeriod is how often the node looks for CRI objects of pods
	// the store no longer holds.
	DefaultGCPeriod = time.Minute
	// DefaultLogMaxSize and DefaultLogMaxFiles are the kubelet's
	// containerLogMaxSize and containerLogMaxFiles.
	DefaultLogMaxSize  = 10 << 20
	DefaultLogMaxFiles = 5
	// DefaultLogRotationPeriod is how often container logs are checked
	// against LogRotation.MaxSize (the kubelet's monitor period).
	DefaultLogRotationPeriod = 10 * time.Second
)

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

// LogRotation configures the rotation of container logs by size, as the
// kubelet's container log manager (without compression).
type LogRotation struct {
	// MaxSize is the size above which a running container's log is
	// rotated; zero means DefaultLogMaxSize.
	MaxSize int64
	// MaxFiles is how many files a container's log may span, the live one
	// included; zero means DefaultLogMaxFiles. At least 2.
	MaxFiles int
	// Period is how often logs are checked; zero means
	// DefaultLogRotationPeriod.
	Period time.Duration
}

func (r LogRotation) withDefaults() LogRotation {
	if r.MaxSize <= 0 {
		r.MaxSize = DefaultLogMaxSize
	}
	if r.MaxFiles <= 0 {
		r.MaxFiles = DefaultLogMaxFiles
	}
	r.MaxFiles = max(r.MaxFiles, 2)
	if r.Period <= 0 {
		r.Period = DefaultLogRotationPeriod
	}
	return r
}

// AdmitFunc decides whether a pod the node does not hold yet may run
// beside others, the pods it holds that are neither terminal nor being
// deleted. It returns an error wrapping ErrAdmission to refuse the pod.
// The others are shared with the node's store: an AdmitFunc must not
// change them.
type AdmitFunc func(pod *corev1.Pod, others []*corev1.Pod) error

// PodSyncer runs the sync passes of the pod workers: syncer.Syncer
// implements it against CRI. A Node never runs two calls for one pod at a
// time: each pod's worker holds its one lock across a call.
type PodSyncer interface {
	// SyncPod runs one pass of pod (see syncer.Syncer.SyncPod).
	SyncPod(ctx context.Context, pod *corev1.Pod, in syncer.SyncInput, emit func(syncer.StepResult)) (syncer.SyncResult, error)
	// RemovePod removes everything the runtime and the node's directories
	// hold for pod (see syncer.Syncer.RemovePod).
	RemovePod(ctx context.Context, pod *corev1.Pod) error
	// ReadView reads the runtime's view of the pod with uid.
	ReadView(ctx context.Context, uid types.UID) (model.RuntimeView, error)
}

var _ PodSyncer = (*syncer.Syncer)(nil)

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
	// Admit, if set, is asked about every pod Apply is given that the node
	// does not hold yet, before it is stored. Nil admits every pod.
	Admit AdmitFunc
	// Policy, if set, checks every apply of a pod the node already holds
	// (Admit checks new pods); see Admission.
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
	// Metrics, if set, record the node's sync passes and steps, and
	// describe its pods and back-offs while Run runs. CRI calls are
	// recorded only if Runtime and Images are wrapped with
	// Metrics.InstrumentRuntime and InstrumentImages.
	Metrics *Metrics
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
	// Config and Metrics (tests drive the workers with a scripted one).
	Syncer PodSyncer
	// Stats, if set, serves the CRI stats of GetPodStats and ListPodStats
	// (the runtime's client); without it they are ErrRuntimeUnavailable.
	Stats cri.ContainerStatsManager
	// RuntimeUnavailable, if set, reports whether the error of a CRI call
	// means that the runtime did not answer (podsyncd: gRPC UNAVAILABLE);
	// Apply, Plan and Delete then return an error wrapping
	// ErrRuntimeUnavailable. Nil classifies no error so.
	RuntimeUnavailable func(error) bool
}

// Node keeps the pods it is given converged: it stores each desired pod
// before it touches the runtime, runs one logical worker per pod that
// syncs the pod whenever it may have changed (an Apply or Delete, a hint
// from the runtime watcher, a back-off or retry timer, a probe result),
// probes containers, records status changes and events in the store's
// revision log, collects garbage and rotates container logs. It survives
// its own restart: Run adopts what the runtime holds for the stored pods.
//
// Build it with NewNode and call Run once; Apply, Plan, Get, List, Delete
// and Watch are safe for concurrent use while Run runs.
type Node struct {
	rt      syncer.Runtime
	store   *store.Store
	syncer  PodSyncer
	watcher *watch.Watcher
	prober  *prober.Manager
	clock   clock.WithTicker
	log     *zap.Logger
	backoff plan.BackoffPolicy
	cfg     criconfig.Options
	gc      GCPolicy
	rot     LogRotation
	// rotMu guards logPaths, the log path of each running container
	// RotateLogs has seen (a container's log path never changes).
	rotMu    sync.Mutex
	logPaths map[string]string
	// evictPolicy is NodeOptions.Eviction with defaults; storeDir the
	// store file's directory, whose file system it keeps from filling.
	evictPolicy EvictionPolicy
	storeDir    string
	admit       AdmitFunc
	policy      PolicyFunc
	metrics     *Metrics
	// removeOrphans and adoptRuntime are NodeOptions.RemoveOrphans and
	// AdoptRuntime.
	removeOrphans, adoptRuntime bool
	// orphanMu guards orphans, the pods the runtime holds that the store
	// does not, kept running (see orphans.go).
	orphanMu sync.Mutex
	orphans  map[types.UID]model.PodRef
	// startOrphans are the orphans found when the node started (nil
	// until then): only those are kept; an unstored pod that appears
	// later is the node's own leftover.
	startOrphans map[types.UID]bool
	// unavailable is NodeOptions.RuntimeUnavailable.
	unavailable func(error) bool
	// stats is NodeOptions.Stats; samples the last CPU sample of each
	// container and pod, for rates.
	stats   cri.ContainerStatsManager
	samples cpuSamples
	// mayHoldMu guards mayHold, the pods the runtime may hold objects of:
	// those it held or the store held when the node started, and every
	// pod a pass has run for since (nil until recovery). Only the node's
	// passes create objects of a pod, so the first pass of any other pod
	// plans from an empty view without listing (claimNew).
	// specMu serialises the read, change and store of a pod's spec
	// (Apply, AddEphemeralContainer): an update read before a debug
	// container was added would otherwise store the spec without it.
	specMu    sync.Mutex
	mayHoldMu sync.Mutex
	mayHold   map[types.UID]bool

	// ready is closed when Run has recovered and started the workers.
	ready chan struct{}
	// wg counts the goroutines Run waits for: worker loops and helpers.
	wg sync.WaitGroup

	mu       sync.Mutex
	started  bool
	loopsOn  bool // worker loops may start
	stopping bool // Run is ending: no new goroutine
	runCtx   context.Context
	workers  map[types.UID]*worker

	obsMu     sync.Mutex
	observers map[types.UID][]*stepObserver

	// resizes are the pods whose last pass left a resize pending.
	resizes pendingResizes

	// usage is the last measurement of the pods' local storage, in bytes.
	usageMu sync.Mutex
	usage   map[types.UID]int64

	// admitMu serialises the admission of new pods; admitting holds the
	// pods admitted and not stored yet.
	admitMu   sync.Mutex
	admitting map[types.UID]*reservation
}

// stepObserver is one ObserveSteps registration.
type stepObserver struct{ fn func(syncer.StepResult) }

// ObserveSteps calls fn with each step of the passes the node runs of the
// pod with uid on its own, after Apply: restarts, back-offs, the next init
// container, probes' kills. (The steps of a pass run for Apply or Delete go
// to that caller's emit.) fn is called from the pod's worker and must not
// block. The returned func ends the observation.
func (n *Node) ObserveSteps(uid types.UID, fn func(syncer.StepResult)) (stop func()) {
	o := &stepObserver{fn: fn}
	n.obsMu.Lock()
	if n.observers == nil {
		n.observers = map[types.UID][]*stepObserver{}
	}
	n.observers[uid] = append(n.observers[uid], o)
	n.obsMu.Unlock()
	return func() {
		n.obsMu.Lock()
		defer n.obsMu.Unlock()
		list := slices.DeleteFunc(n.observers[uid], func(x *stepObserver) bool { return x == o })
		if len(list) == 0 {
			delete(n.observers, uid)
		} else {
			n.observers[uid] = list
		}
	}
}

// observe hands a step of a pass the node runs on its own to the pod's
// observers.
func (n *Node) observe(uid types.UID, st syncer.StepResult) {
	n.obsMu.Lock()
	list := slices.Clone(n.observers[uid])
	n.obsMu.Unlock()
	for _, o := range list {
		o.fn(st)
	}
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
	ps := opts.Syncer
	if ps == nil {
		sopts := syncer.SyncerOptions{Runtime: opts.Runtime, Images: opts.Images, Clock: opts.Clock,
			Logger: opts.Logger, Backoff: opts.Backoff, Config: opts.Config, HostPaths: opts.HostPaths, Credentials: opts.Credentials}
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
	gc := opts.GC
	if gc.Period <= 0 {
		gc.Period = DefaultGCPeriod
	}
	return &Node{
		rt: opts.Runtime, store: opts.Store, syncer: ps, watcher: watcher, prober: pm,
		clock: opts.Clock, log: opts.Logger, backoff: opts.Backoff, cfg: opts.Config.WithDefaults(),
		gc: gc, rot: opts.LogRotation.withDefaults(), evictPolicy: opts.Eviction.withDefaults(), storeDir: filepath.Dir(opts.Store.Path()), admit: opts.Admit, policy: opts.Policy, metrics: opts.Metrics,
		unavailable: opts.RuntimeUnavailable, stats: opts.Stats, removeOrphans: opts.RemoveOrphans, adoptRuntime: opts.AdoptRuntime, ready: make(chan struct{}), workers: map[types.UID]*worker{},
		admitting: map[types.UID]*reservation{}, orphans: map[types.UID]model.PodRef{},
	}, nil
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
	n.mu.Lock()
	if n.started {
		n.mu.Unlock()
		return errors.New("engine: Node.Run called twice")
	}
	n.started = true
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	n.runCtx = ctx
	n.mu.Unlock()

	probesDone := make(chan struct{})
	go func() {
		defer close(probesDone)
		n.consumeProbes()
	}()
	defer func() {
		n.metrics.detach(n)
		n.mu.Lock()
		n.stopping = true
		for _, w := range n.workers {
			w.cancel()
		}
		n.mu.Unlock()
		n.wg.Wait()
		n.prober.Stop()
		<-probesDone
	}()

	if err := n.recover(ctx); err != nil {
		return err
	}
	n.metrics.attach(n)
	n.checkReserve()
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		if err := n.watcher.Run(ctx); err != nil {
			n.log.Warn("runtime watcher ended", zap.Error(err))
		}
	}()
	hints := n.watcher.SubscribeHints(ctx)
	n.wg.Add(4)
	go n.dispatchHints(hints)
	go n.every(ctx, n.gc.Period, n.collectOrphans)
	go n.every(ctx, n.rot.Period, n.RotateLogs)
	go n.every(ctx, n.evictPolicy.Period, n.checkLocalStorage)

	n.mu.Lock()
	n.loopsOn = true
	for _, w := range n.workers {
		n.startLoopLocked(w)
		w.kickSelf()
	}
	n.mu.Unlock()
	close(n.ready)
	n.log.Info("node running", zap.Int(logx.Pods, len(n.snapshotWorkers())))

	<-ctx.Done()
	n.log.Info("node stopping")
	return nil
}

// waitReady waits until Run has recovered; it returns ErrRuntimeUnavailable
// once Run has ended.
func (n *Node) waitReady(ctx context.Context) error {
	select {
	case <-n.ready:
	case <-ctx.Done():
		return fmt.Errorf("wait for the node to start: %w", context.Cause(ctx))
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopping {
		return fmt.Errorf("node stopped: %w", errdefs.ErrRuntimeUnavailable)
	}
	return nil
}

// runtimeError adds ErrRuntimeUnavailable to err if it is the error of a
// runtime that did not answer (NodeOptions.RuntimeUnavailable).
func (n *Node) runtimeError(err error) error {
	if err == nil || n.unavailable == nil || errors.Is(err, errdefs.ErrRuntimeUnavailable) || !n.unavailable(err) {
		return err
	}
	return fmt.Errorf("%w: %w", errdefs.ErrRuntimeUnavailable, err)
}

// seedMayHold records the pods the runtime or the store held when the
// node started.
func (n *Node) seedMayHold(inRuntime map[types.UID]model.PodRef, recs []*store.PodRecord) {
	m := make(map[types.UID]bool, len(inRuntime)+len(recs))
	for uid := range inRuntime {
		m[uid] = true
	}
	for _, r := range recs {
		m[r.Pod.UID] = true
	}
	n.mayHoldMu.Lock()
	n.mayHold = m
	n.mayHoldMu.Unlock()
}

// claimNew reports whether the runtime holds nothing of the pod with uid:
// no pass has run for it and it held nothing of it when the node
// started. From then on the pod may hold objects.
func (n *Node) claimNew(uid types.UID) bool {
	n.mayHoldMu.Lock()
	defer n.mayHoldMu.Unlock()
	if n.mayHold == nil || n.mayHold[uid] {
		return false
	}
	n.mayHold[uid] = true
	return true
}

func isTerminal(p corev1.PodPhase) bool {
	return p == corev1.PodSucceeded || p == corev1.PodFailed
}

// probeResults converts the prober's results of a pod.
func (n *Node) probeResults(uid types.UID) model.ProbeResults {
	return n.prober.Results(uid)
}

func (n *Node) statusOptions(reasons map[string]corev1.ContainerStateWaiting) podstatus.StatusOptions {
	return podstatus.StatusOptions{Backoff: n.backoff, HostIPs: n.cfg.NodeIPs, StartFailures: reasons}
}

// consumeProbes turns probe result changes into passes of their pods and
// Unhealthy events, until the prober stops.
func (n *Node) consumeProbes() {
	for u := range n.prober.Updates() {
		w := n.workerFor(u.PodUID)
		// The event first, as the kubelet's prober records it: the
		// pass the kick starts may kill the container (Killing).
		if ref, ok := w.podRef(); ok && u.Result == prober.Failure {
			ev := store.Event{Type: corev1.EventTypeWarning, Reason: "Unhealthy", Container: u.ContainerName,
				Message: fmt.Sprintf("%s probe failed: %s", u.Type, u.Output)}
			if _, err := n.store.Append(store.EventChange(ref, ev)); err != nil && !errors.Is(err, errdefs.ErrPodNotFound) {
				n.log.Warn("record probe event", zap.String(logx.PodUID, string(u.PodUID)), zap.Error(err))
			}
		}
		w.kickSelf()
	}
}

// dispatchHints passes every hint of the runtime watcher to the worker of
// its pod; a pod the node does not hold gets a worker that removes what
// the runtime holds for it.
func (n *Node) dispatchHints(hints <-chan watch.Hint) {
	defer n.wg.Done()
	for h := range hints {
		n.workerFor(h.UID).hint(h)
	}
}

func (n *Node) snapshotWorkers() []*worker {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]*worker, 0, len(n.workers))
	for _, w := range n.workers {
		out = append(out, w)
	}
	return out
}
