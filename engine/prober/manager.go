package prober

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// updateBuffer is the capacity of the Updates channel. Workers block when
// it is full (as the kubelet's results manager), so a consumer that falls
// behind slows probing down instead of losing a change.
const updateBuffer = 64

// eventBuffer is how many probe events wait for their consumer; more are
// dropped, as the kubelet's event broadcaster drops events when its queue
// of 1000 is full.
const eventBuffer = 1000

// Options configure a Manager. Every field is optional.
type Options struct {
	// Runtime runs exec probes. Without it, an exec probe errors and its
	// result is discarded, as any probe error.
	Runtime ExecRunner
	// Clock drives initial delays and periods. Defaults to the real clock.
	Clock clock.WithTicker
	// Logger receives result changes and probe errors. Defaults to a no-op
	// logger.
	Logger *zap.Logger
	// NodeIP is the address tcpSocket and httpGet probes of host-network
	// pods dial when they name no host: a host-network pod's IP is the
	// node's. When empty, RunningContainer.PodIP is used for them too.
	NodeIP string
	// DialContext opens the connections of tcpSocket and httpGet probes.
	// Defaults to the kubelet's probe dialer: a net.Dialer that, on Linux,
	// sets SO_LINGER to one second so that probes do not fill the node with
	// sockets in TIME_WAIT.
	DialContext func(ctx context.Context, network, address string) (net.Conn, error)
	// IsExecTimeout reports whether an ExecSync error means the command ran
	// past the probe's timeout, which fails the probe (the kubelet's
	// ExecProbeTimeout, GA). Any other error that is not an exit status is
	// a probe error, and the result is discarded. Defaults to
	// errors.Is(err, context.DeadlineExceeded). With k8s.io/cri-client,
	// whose ExecSync turns a runtime's DeadlineExceeded into
	// ErrCommandTimedOut, set it to match that error.
	IsExecTimeout func(error) bool
}

// Manager runs the probes of running containers: one worker goroutine per
// pod, container and probe type, bound to one container instance. See the
// package documentation for the semantics.
//
// A Manager is safe for concurrent use. Its zero value is not usable; call
// New.
type Manager struct {
	prober  *prober
	clock   clock.WithTicker
	log     *zap.Logger
	nodeIP  string
	start   time.Time
	updates chan Update
	events  chan Event

	// ctx is the parent of every worker's context; Stop cancels it.
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	stopOnce sync.Once
	// live counts the worker goroutines that have not ended, for tests.
	live atomic.Int64

	mu      sync.Mutex
	stopped bool
	// pods holds the probed container instances, by pod UID and container
	// name.
	pods map[types.UID]map[string]*instance
}

// New returns a Manager. It starts no goroutine until Sync has a container
// to probe.
func New(opts Options) *Manager {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.DialContext == nil {
		opts.DialContext = probeDialer().DialContext
	}
	if opts.IsExecTimeout == nil {
		opts.IsExecTimeout = func(err error) bool { return errors.Is(err, context.DeadlineExceeded) }
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Manager{
		prober: &prober{
			runtime:       opts.Runtime,
			isExecTimeout: opts.IsExecTimeout,
			dial:          opts.DialContext,
			transport:     newTransport(opts.DialContext),
		},
		clock:   opts.Clock,
		log:     opts.Logger,
		nodeIP:  opts.NodeIP,
		start:   opts.Clock.Now(),
		updates: make(chan Update, updateBuffer),
		events:  make(chan Event, eventBuffer),
		ctx:     ctx,
		cancel:  cancel,
		pods:    make(map[types.UID]map[string]*instance),
	}
}

// Sync makes the pod's probe workers match running, the pod's running
// container instances. A container instance seen for the first time gets
// fresh workers and initial results (liveness Success, readiness Failure,
// startup Unknown); an instance whose container now runs with another ID,
// or no longer runs, has its workers stopped and its results forgotten. A
// container without any probe, or not in the pod's spec, is ignored, as
// is a second instance with the same name.
//
// Sync does not wait for stopped workers to end (Stop does), and it
// reports nothing on Updates: its changes are visible in Results when it
// returns. Probe settings are read when an instance is first seen; a
// changed probe takes effect with the container's next instance. Sync
// after Stop does nothing.
func (m *Manager) Sync(pod *corev1.Pod, running []RunningContainer) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return
	}
	current := m.pods[pod.UID]
	next := make(map[string]*instance, len(running))
	for _, rc := range running {
		if _, dup := next[rc.Name]; dup {
			continue
		}
		c := probedContainer(pod, rc.Name)
		if c == nil {
			continue
		}
		if inst, ok := current[rc.Name]; ok && inst.id == rc.ID {
			inst.podIP = rc.PodIP
			next[rc.Name] = inst
			continue
		}
		next[rc.Name] = m.startInstanceLocked(pod, c, rc)
	}
	for name, inst := range current {
		if next[name] != inst {
			m.stopInstanceLocked(inst)
		}
	}
	if len(next) == 0 {
		delete(m.pods, pod.UID)
		return
	}
	m.pods[pod.UID] = next
}

// RemovePod stops the workers of every container of the pod and forgets
// their results, as Sync with no running container does, for a caller
// that no longer has the pod (one deleted while podsync was down).
func (m *Manager) RemovePod(podUID types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, inst := range m.pods[podUID] {
		m.stopInstanceLocked(inst)
	}
	delete(m.pods, podUID)
}

// Results returns the current results of the pod's probes. The maps are
// the caller's.
func (m *Manager) Results(podUID types.UID) Results {
	m.mu.Lock()
	defer m.mu.Unlock()
	var res Results
	for _, inst := range m.pods[podUID] {
		for _, t := range allTypes {
			if !inst.has[t.index()] {
				continue
			}
			dst := resultsOf(&res, t)
			if *dst == nil {
				*dst = make(map[string]Result)
			}
			(*dst)[inst.id] = inst.results[t.index()]
		}
	}
	return res
}

// resultsOf returns the address of r's map for t.
func resultsOf(r *Results, t Type) *map[string]Result {
	switch t {
	case Liveness:
		return &r.Liveness
	case Readiness:
		return &r.Readiness
	default:
		return &r.Startup
	}
}

// Updates returns the channel on which the Manager reports every change of
// a result made by a probe, after Results shows it. The consumer must keep
// receiving: a worker waits until its update is taken. Stop closes the
// channel once every worker has ended.
func (m *Manager) Updates() <-chan Update {
	return m.updates
}

// Stop stops every worker, aborting probes in flight, waits for their
// goroutines to end and closes Updates. Later calls do nothing.
func (m *Manager) Stop() {
	m.stopOnce.Do(func() {
		m.mu.Lock()
		m.stopped = true
		for uid, pod := range m.pods {
			for _, inst := range pod {
				m.stopInstanceLocked(inst)
			}
			delete(m.pods, uid)
		}
		m.mu.Unlock()
		m.cancel()
		m.wg.Wait()
		m.prober.transport.CloseIdleConnections()
		close(m.updates)
		close(m.events)
	})
}

// instance is one running container instance with at least one probe.
// Its identity and spec are fixed when Sync first sees it.
type instance struct {
	podUID       types.UID
	podNamespace string
	podName      string
	hostNetwork  bool
	container    *corev1.Container
	id           string
	startedAt    time.Time
	// adopted is set for an instance that was running before the Manager
	// was created, by an earlier podsync: its first probe is jittered.
	adopted bool

	// Guarded by Manager.mu.
	podIP   string
	has     [len(allTypes)]bool
	results [len(allTypes)]Result
	workers [len(allTypes)]*worker
	// gone is set when the instance is no longer tracked; its workers are
	// stopping and their results are dropped.
	gone bool
}

// startInstanceLocked tracks a new container instance: it records the
// initial results and starts the workers that may run now. Readiness and
// liveness wait for a startup probe to pass (startupSucceededLocked).
func (m *Manager) startInstanceLocked(pod *corev1.Pod, c *corev1.Container, rc RunningContainer) *instance {
	inst := &instance{
		podUID:       pod.UID,
		podNamespace: pod.Namespace,
		podName:      pod.Name,
		hostNetwork:  pod.Spec.HostNetwork,
		container:    c.DeepCopy(),
		id:           rc.ID,
		startedAt:    rc.StartedAt,
		adopted:      rc.StartedAt.Before(m.start),
		podIP:        rc.PodIP,
	}
	for _, t := range allTypes {
		if probeSpec(inst.container, t) != nil {
			inst.has[t.index()] = true
			inst.results[t.index()] = initialResult(t)
		}
	}
	if inst.has[Startup.index()] {
		m.startWorkerLocked(inst, Startup)
		return inst
	}
	m.startWorkerLocked(inst, Readiness)
	m.startWorkerLocked(inst, Liveness)
	return inst
}

// startupSucceededLocked starts the readiness and liveness workers that
// were waiting for inst's startup probe to pass.
func (m *Manager) startupSucceededLocked(inst *instance) {
	m.startWorkerLocked(inst, Readiness)
	m.startWorkerLocked(inst, Liveness)
}

// startWorkerLocked starts inst's worker of type t if the container has
// such a probe and the instance and the Manager are still running.
func (m *Manager) startWorkerLocked(inst *instance, t Type) {
	spec := probeSpec(inst.container, t)
	if spec == nil || inst.gone || m.stopped || inst.workers[t.index()] != nil {
		return
	}
	w := newWorker(m, inst, t, spec)
	inst.workers[t.index()] = w
	m.wg.Add(1)
	m.live.Add(1)
	go w.run()
}

// stopInstanceLocked stops tracking inst: its workers are cancelled and
// whatever they still report is dropped.
func (m *Manager) stopInstanceLocked(inst *instance) {
	inst.gone = true
	for _, w := range inst.workers {
		if w != nil {
			w.cancel()
		}
	}
}

// Events returns the events of probe runs (Event): every failure, error
// and warning, as the kubelet's prober records them. A failure that
// changes the result to Failure is reported on Updates instead (with its
// output), so that its consumer records the event before it acts on the
// change. The channel is closed by Stop. Events are dropped while the
// channel is full; no probe waits for its consumer.
func (m *Manager) Events() <-chan Event {
	return m.events
}

// event reports an event of w's probe run, or drops it when the channel is
// full.
func (m *Manager) event(w *worker, reason, message string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if w.inst.gone || m.stopped {
		return
	}
	select {
	case m.events <- Event{PodUID: w.inst.podUID, ContainerName: w.inst.container.Name, Reason: reason, Message: message}:
	default:
		w.log.Debug("probe event dropped: its consumer is behind", zap.String(logOutput, message))
	}
}

// record stores a result that passed its threshold and, when it changed
// one, reports it on Updates (and says so). A startup Success then starts
// the waiting readiness and liveness workers, so that their updates follow
// it.
func (m *Manager) record(w *worker, r Result, output string) (reported bool) {
	i := w.typ.index()
	inst := w.inst
	m.mu.Lock()
	if inst.gone {
		m.mu.Unlock()
		return false
	}
	changed := inst.results[i] != r
	inst.results[i] = r
	m.mu.Unlock()

	if changed {
		w.log.Info("probe result changed", zap.Stringer(logResult, r), zap.String(logOutput, output))
		select {
		case m.updates <- Update{
			PodUID:        inst.podUID,
			ContainerName: inst.container.Name,
			ContainerID:   inst.id,
			Type:          w.typ,
			Result:        r,
			Output:        output,
		}:
		case <-w.ctx.Done():
			return false
		}
	}
	if w.typ == Startup && r == Success {
		m.mu.Lock()
		m.startupSucceededLocked(inst)
		m.mu.Unlock()
	}
	return changed
}

// host returns the address probes of inst dial when they name no host.
func (m *Manager) host(inst *instance) string {
	if inst.hostNetwork && m.nodeIP != "" {
		return m.nodeIP
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return inst.podIP
}

// probedContainer returns the spec of the pod's container or restartable
// init container (sidecar) called name, if it has a probe.
func probedContainer(pod *corev1.Pod, name string) *corev1.Container {
	for i := range pod.Spec.Containers {
		if c := &pod.Spec.Containers[i]; c.Name == name {
			return withProbe(c)
		}
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if c.Name == name && c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			return withProbe(c)
		}
	}
	return nil
}

func withProbe(c *corev1.Container) *corev1.Container {
	if c.LivenessProbe == nil && c.ReadinessProbe == nil && c.StartupProbe == nil {
		return nil
	}
	return c
}

// probeSpec returns c's probe of type t, or nil.
func probeSpec(c *corev1.Container, t Type) *corev1.Probe {
	switch t {
	case Liveness:
		return c.LivenessProbe
	case Readiness:
		return c.ReadinessProbe
	case Startup:
		return c.StartupProbe
	default:
		return nil
	}
}
