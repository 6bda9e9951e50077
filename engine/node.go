package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	criclient "k8s.io/cri-client/pkg"
	"k8s.io/utils/clock"

	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/plan"
	"github.com/podsync/podsync/engine/podstatus"
	"github.com/podsync/podsync/engine/prober"
	"github.com/podsync/podsync/engine/store"
	"github.com/podsync/podsync/engine/syncer"
	"github.com/podsync/podsync/engine/watch"
	"github.com/podsync/podsync/internal/failpoint"
	"github.com/podsync/podsync/logx"
	"github.com/podsync/podsync/validation"
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
	ReadView(ctx context.Context, uid types.UID) (plan.RuntimeView, error)
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
	// GC configures the node-wide garbage collection.
	GC GCPolicy
	// LogRotation configures container log rotation.
	LogRotation LogRotation
	// Admit, if set, is asked about every pod Apply is given that the node
	// does not hold yet, before it is stored. Nil admits every pod.
	Admit AdmitFunc
	// Policy, if set, checks every apply of a pod the node already holds
	// (Admit checks new pods); see Admission.
	Policy PolicyFunc
	// Metrics, if set, record the node's sync passes and steps, and
	// describe its pods and back-offs while Run runs. CRI calls are
	// recorded only if Runtime and Images are wrapped with
	// Metrics.InstrumentRuntime and InstrumentImages.
	Metrics *Metrics
	// Syncer, if set, runs the pod workers' passes in place of a
	// syncer.Syncer built from Runtime, Images, Clock, Logger, Backoff,
	// Config and Metrics (tests drive the workers with a scripted one).
	Syncer PodSyncer
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
	admit   AdmitFunc
	policy  PolicyFunc
	metrics *Metrics
	// unavailable is NodeOptions.RuntimeUnavailable.
	unavailable func(error) bool

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

// ApplyResult is what Apply did.
type ApplyResult struct {
	// Created is true when the node did not hold the pod before.
	Created bool
	// Status is the pod's status after the pass.
	Status corev1.PodStatus
	// Steps are the steps of the pass, in the order they finished.
	Steps []syncer.StepResult
	// NextSync is when the pod's worker will sync the pod again on its
	// own (a back-off ending, a retry); zero if only a change will.
	NextSync time.Time
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
			Logger: opts.Logger, Backoff: opts.Backoff, Config: opts.Config}
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
		RelistPeriod: opts.RelistPeriod, EventedRelistPeriod: opts.EventedRelistPeriod})
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
		gc: gc, rot: opts.LogRotation.withDefaults(), admit: opts.Admit, policy: opts.Policy, metrics: opts.Metrics,
		unavailable: opts.RuntimeUnavailable, ready: make(chan struct{}), workers: map[types.UID]*worker{},
	}, nil
}

// Run recovers and then keeps the node's pods converged until ctx ends.
// Recovery loads the store and lists the runtime: podsync's sandboxes and
// containers of pods the store does not hold are removed, stored pods are
// adopted as the runtime holds them (nothing healthy restarts; restart
// counts and back-off continue from the runtime's annotations and times),
// and pods marked deleting finish their deletion. Then the runtime
// watcher, the prober and one worker per pod run, with the garbage
// collector and the log rotation.
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
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		if err := n.watcher.Run(ctx); err != nil {
			n.log.Warn("runtime watcher ended", zap.Error(err))
		}
	}()
	hints := n.watcher.SubscribeHints(ctx)
	n.wg.Add(3)
	go n.dispatchHints(hints)
	go n.every(ctx, n.gc.Period, n.collectOrphans)
	go n.every(ctx, n.rot.Period, n.RotateLogs)

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

// Apply stores pod (defaulted, with a UID: convert.Default derives one
// from namespace/name when empty) and the ConfigMaps and Secrets it refers
// to as the pod's desired state, then runs one sync pass of it now, in
// the pod's turn: a pass of the pod already running (its worker's, another
// caller's) is waited for while ctx allows. Each step of the pass is
// passed to emit (if not nil) as it finishes. The pod's worker keeps it
// converged afterwards.
//
// A pod the node does not hold yet is first given to NodeOptions.Admit, a
// known one to NodeOptions.Policy.
// Apply returns an error wrapping ErrInvalidSpec for a pod without name,
// namespace or UID or with a name that cannot be a path
// (validation.CheckPodPaths), ErrAlreadyExists if namespace/name is held by a pod
// with another UID, ErrTerminating if the pod is being deleted, Admit's error,
// the context's error if ctx ends before or during the pass (the worker
// then finishes the work), ErrNotFound if the pod was deleted meanwhile,
// and the runtime's error if the pod's state cannot be read. Failed steps
// are in the result, not the error.
func (n *Node) Apply(ctx context.Context, pod *corev1.Pod, configMaps []*corev1.ConfigMap, secrets []*corev1.Secret, emit func(syncer.StepResult)) (ApplyResult, error) {
	if pod == nil || pod.UID == "" || pod.Name == "" || pod.Namespace == "" {
		return ApplyResult{}, fmt.Errorf("apply pod: pod needs a namespace, name and uid: %w", errdefs.ErrInvalidSpec)
	}
	if err := errdefs.InvalidSpec(validation.CheckPodPaths(pod)...); err != nil {
		return ApplyResult{}, fmt.Errorf("apply pod %s: %w", plan.PodString(pod), err)
	}
	if err := n.waitReady(ctx); err != nil {
		return ApplyResult{}, err
	}
	var res ApplyResult
	existing, err := n.store.GetByName(pod.Namespace, pod.Name)
	switch {
	case errors.Is(err, errdefs.ErrPodNotFound):
		res.Created = true
	case err != nil:
		return res, fmt.Errorf("apply pod %s: %w", plan.PodString(pod), err)
	case existing.Pod.UID != pod.UID:
		return res, fmt.Errorf("apply pod %s: %s/%s has uid %s: %w", plan.PodString(pod), pod.Namespace, pod.Name, existing.Pod.UID, errdefs.ErrAlreadyExists)
	case existing.Deleting:
		return res, fmt.Errorf("apply pod %s: %w", plan.PodString(pod), errdefs.ErrTerminating)
	}
	if !res.Created && n.policy != nil {
		if err := n.policy(pod); err != nil {
			return res, fmt.Errorf("apply pod %s: %w", plan.PodString(pod), err)
		}
	}
	if res.Created && n.admit != nil {
		others, err := n.activePods()
		if err != nil {
			return res, fmt.Errorf("apply pod %s: %w", plan.PodString(pod), err)
		}
		if err := n.admit(pod, others); err != nil {
			return res, fmt.Errorf("admit pod %s: %w", plan.PodString(pod), err)
		}
	}
	failpoint.Inject(failpoint.BeforeStorePut)
	rec, err := n.store.Put(store.PodRecord{Pod: pod, ConfigMaps: configMaps, Secrets: secrets})
	if err != nil {
		return res, fmt.Errorf("store pod %s: %w", plan.PodString(pod), err)
	}
	failpoint.Inject(failpoint.AfterStorePut)
	if res.Created {
		logx.From(ctx, n.log).Info("pod stored", logx.Pod(pod)...)
	} else if rec.ModRevision != existing.ModRevision {
		logx.From(ctx, n.log).Info("pod updated", append(logx.Pod(pod), zap.Int64(logx.Generation, rec.Generation))...)
	}

	w, err := n.lockWorker(ctx, pod.UID)
	if err != nil {
		return res, fmt.Errorf("apply pod %s: wait for the pod's turn: %w", plan.PodString(pod), err)
	}
	out, err := w.pass(ctx, false, emit)
	w.release()
	if ctx.Err() != nil {
		w.kickSelf()
	}
	res.Status, res.Steps, res.NextSync = out.status, out.steps, out.next
	if err == nil && out.gone {
		err = fmt.Errorf("apply pod %s: pod was deleted: %w", plan.PodString(pod), errdefs.ErrNotFound)
	}
	return res, n.runtimeError(err)
}

// Plan returns what a pass of pod would do now and the status the pod has
// now, without side effects: known says whether the node holds the pod
// (then its stored status is the previous status). pod must be defaulted.
// The ConfigMaps and Secrets do not change a plan (a missing one fails a
// start, not the plan); they are accepted so Plan mirrors Apply.
// Plan returns the runtime's error if the pod's state cannot be read.
func (n *Node) Plan(ctx context.Context, pod *corev1.Pod, _ []*corev1.ConfigMap, _ []*corev1.Secret) (plan.PodActions, corev1.PodStatus, bool, error) {
	if pod == nil || pod.UID == "" {
		return plan.PodActions{}, corev1.PodStatus{}, false, fmt.Errorf("plan pod: pod has no uid: %w", errdefs.ErrInvalidSpec)
	}
	pod = pod.DeepCopy()
	known := false
	rec, err := n.store.Get(pod.UID)
	switch {
	case err == nil:
		known = true
		pod.Status = rec.Pod.Status
	case !errors.Is(err, errdefs.ErrPodNotFound):
		return plan.PodActions{}, corev1.PodStatus{}, false, fmt.Errorf("plan pod %s: %w", plan.PodString(pod), err)
	default:
		pod.Status = corev1.PodStatus{}
	}
	view, err := n.syncer.ReadView(ctx, pod.UID)
	if err != nil {
		return plan.PodActions{}, corev1.PodStatus{}, known, fmt.Errorf("plan pod %s: %w", plan.PodString(pod), n.runtimeError(err))
	}
	n.mu.Lock()
	w := n.workers[pod.UID]
	n.mu.Unlock()
	if w != nil {
		view.PullFailures = plan.CurrentPullFailures(pod, w.pullFailures())
	}
	probes := n.probeResults(pod.UID)
	now := n.clock.Now()
	plan := plan.ComputePodActions(pod, view, probes, now, n.backoff)
	var st corev1.PodStatus
	if known {
		st = pod.Status
	} else {
		st = podstatus.ComputePodStatus(pod, view, probes, now, n.statusOptions(nil))
	}
	return plan, st, known, nil
}

// Get returns the stored pod namespace/name with its current status (in
// Pod.Status) and revision (ModRevision), its secrets redacted, or an
// error wrapping ErrNotFound.
func (n *Node) Get(_ context.Context, namespace, name string) (*store.PodRecord, error) {
	rec, err := n.store.GetByName(namespace, name)
	if err != nil {
		return nil, err // the store's error names the pod
	}
	return rec, nil
}

// GetShared is Get for callers that only read the record (GetPod): it is
// shared with the store's cache and other callers and must not be changed,
// which spares a copy of the pod. While the pod's stored bytes are
// unchanged every call returns the same record; any write (a status, a
// spec, a deletion mark) makes a new one.
func (n *Node) GetShared(_ context.Context, namespace, name string) (*store.PodRecord, error) {
	rec, err := n.store.GetByNameShared(namespace, name)
	if err != nil {
		return nil, err // the store's error names the pod
	}
	return rec, nil
}

// List returns the stored pods f selects, ordered by namespace and name,
// with their current status and their secrets redacted, and the revision
// of the snapshot: Watch from it misses nothing.
func (n *Node) List(_ context.Context, f store.Filter) ([]*store.PodRecord, int64, error) {
	recs, rev, err := n.store.List(f)
	if err != nil {
		return nil, 0, fmt.Errorf("list pods: %w", err)
	}
	return recs, rev, nil
}

// ListShared is List for callers that only read the records (ListPods,
// WatchPods): they are shared with the store's cache and must not be
// changed, which spares a copy of every pod.
func (n *Node) ListShared(_ context.Context, f store.Filter) ([]*store.PodRecord, int64, error) {
	recs, rev, err := n.store.ListShared(f)
	if err != nil {
		return nil, 0, fmt.Errorf("list pods: %w", err)
	}
	return recs, rev, nil
}

// Watch follows the revision log from after revision since: status
// changes, events and deletions, each once and in order. It returns an
// error wrapping errdefs.ErrCompacted (a *errdefs.CompactedError) if since is
// older than the compaction point; see store.Watch.
func (n *Node) Watch(ctx context.Context, since int64) (*store.Watcher, error) {
	return n.store.Watch(ctx, since)
}

// Delete deletes the pod namespace/name (and uid, if not empty): it marks
// the pod deleting in the store, kills it (preStop hooks, then stop, within
// grace seconds, or the pod's terminationGracePeriodSeconds when nil),
// removes its containers, sandboxes, pod directory and log directory, and
// removes it from the store, which records the deletion in the revision
// log. A sync pass of the pod that is running is cancelled (an Apply
// waiting for it fails with ErrConflict). found is false, with no error,
// if no such pod is stored. If ctx
// ends first, Delete returns the context's error and the pod's worker
// finishes the deletion; a deleted pod stays deleted.
func (n *Node) Delete(ctx context.Context, namespace, name, uid string, grace *int64) (bool, []syncer.StepResult, error) {
	if err := n.waitReady(ctx); err != nil {
		return false, nil, err
	}
	rec, err := n.store.GetByName(namespace, name)
	if errors.Is(err, errdefs.ErrPodNotFound) || (err == nil && uid != "" && string(rec.Pod.UID) != uid) {
		return false, nil, nil
	}
	if err != nil {
		return false, nil, fmt.Errorf("delete pod %s/%s: %w", namespace, name, err)
	}
	pod := rec.Pod
	dw := n.workerFor(pod.UID)
	dw.deleters.Add(1)
	defer func() {
		if dw.deleters.Add(-1) == 0 {
			// Whatever this call left undone is the worker's.
			n.workerFor(pod.UID).kickSelf()
		}
	}()
	if _, err := n.store.MarkDeleting(pod.UID, grace); err != nil {
		if errors.Is(err, errdefs.ErrPodNotFound) {
			return false, nil, nil
		}
		return false, nil, fmt.Errorf("delete pod %s: %w", plan.PodString(pod), err)
	}
	logx.From(ctx, n.log).Info("pod deletion requested", logx.Pod(pod)...)
	// The pass running, if any, would only delay the kill.
	dw.cancelPass(fmt.Errorf("pod %s: %w", plan.PodString(pod), errdefs.ErrTerminating))
	w, err := n.lockWorker(ctx, pod.UID)
	if err != nil {
		return true, nil, fmt.Errorf("delete pod %s: wait for the pod's turn: %w", plan.PodString(pod), err)
	}
	var steps []syncer.StepResult
	_, err = w.pass(ctx, false, func(s syncer.StepResult) { steps = append(steps, s) })
	w.release()
	if err != nil {
		return true, steps, fmt.Errorf("delete pod %s: %w", plan.PodString(pod), n.runtimeError(err))
	}
	return true, steps, nil
}

// activePods returns the stored pods that are neither terminal nor being
// deleted, for admission.
func (n *Node) activePods() ([]*corev1.Pod, error) {
	// Admission only reads the pods: shared records spare a copy of
	// every stored pod per admitted pod.
	recs, _, err := n.store.ListShared(store.Filter{})
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	var out []*corev1.Pod
	for _, r := range recs {
		if r.Deleting || isTerminal(r.Pod.Status.Phase) {
			continue
		}
		out = append(out, r.Pod)
	}
	return out, nil
}

// runtimeError adds ErrRuntimeUnavailable to err if it is the error of a
// runtime that did not answer (NodeOptions.RuntimeUnavailable).
func (n *Node) runtimeError(err error) error {
	if err == nil || n.unavailable == nil || errors.Is(err, errdefs.ErrRuntimeUnavailable) || !n.unavailable(err) {
		return err
	}
	return fmt.Errorf("%w: %w", errdefs.ErrRuntimeUnavailable, err)
}


func isTerminal(p corev1.PodPhase) bool {
	return p == corev1.PodSucceeded || p == corev1.PodFailed
}

// probeResults converts the prober's results of a pod.
func (n *Node) probeResults(uid types.UID) plan.ProbeResults {
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
