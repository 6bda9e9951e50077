package metrics

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	crierrors "k8s.io/cri-api/pkg/errors"

	"github.com/podsync/podsync/engine/eviction"
	"github.com/podsync/podsync/engine/plan"
	"github.com/podsync/podsync/engine/podstatus"
	"github.com/podsync/podsync/engine/syncer"
	"github.com/podsync/podsync/engine/watch"
)

// Names of the engine's metrics; docs/metrics.md describes each.
const (
	MetricSyncPassDuration   = "podsync_sync_pass_duration_seconds"
	MetricSyncSteps          = "podsync_sync_steps_total"
	MetricPods               = "podsync_pods"
	MetricBackoffsActive     = "podsync_backoffs_active"
	MetricCRIRequestDuration = "podsync_cri_request_duration_seconds"
	MetricSyncPassesSkipped  = "podsync_sync_passes_skipped_total"
	MetricRuntimeHints       = "podsync_runtime_hints_total"
	MetricOrphanedPods       = "podsync_orphaned_pods"
	MetricEvictions          = "podsync_evictions_total"
	MetricPodEphemeralUsage  = "podsync_pod_ephemeral_storage_bytes"
)

// Outcomes of a sync pass, the outcome label of
// podsync_sync_pass_duration_seconds.
const (
	// PassSuccess: the pass ran to its end and no step failed (a back-off
	// is not a failure).
	PassSuccess = "success"
	// PassStepFailed: the pass ran to its end, or as far as a failed kill,
	// sandbox or init container let it, and a step failed.
	PassStepFailed = "step_failed"
	// PassError: the pass failed as a whole; the runtime's state of the
	// pod could not be read.
	PassError = "error"
	// PassCanceled: the pass's context ended (a Delete, a shutdown, a
	// caller's deadline).
	PassCanceled = "canceled"
)

// Results of a step, the result label of podsync_sync_steps_total.
const (
	StepSuccess = "success"
	StepFailure = "failure"
	// StepBackoff: a start that waits for a crash-loop or image-pull
	// back-off.
	StepBackoff = "backoff"
)

// ReasonOther is the reason label of a step whose reason is not one of the
// engine's; it keeps the label's values a bounded set.
const ReasonOther = "Other"

// CodeOK is the code label of a CRI call that succeeded.
const CodeOK = "OK"

// passBuckets reach minutes: a pass pulls images and waits for kills
// within grace periods.
var passBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// criBuckets start below a millisecond (status and list calls) and reach
// minutes (PullImage, StopContainer with a grace period).
var criBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// stepReasons are the reasons a step can carry: the planner's, the
// executor's and the kubelet's failure reasons. Anything else is counted
// as ReasonOther.
var stepReasons = map[string]bool{
	"": true,
	// Sandbox decisions.
	plan.SandboxReasonNone: true, plan.SandboxReasonMultipleReady: true, plan.SandboxReasonNotReady: true,
	plan.SandboxReasonNetworkChanged: true, plan.SandboxReasonNoIP: true, plan.SandboxReasonReady: true,
	plan.SandboxReasonNotRecreated: true, plan.SandboxReasonPodNotRunnable: true, plan.SandboxReasonInitializedDone: true,
	// Pod kills.
	plan.KillReasonSandboxChanged: true, plan.KillReasonInitContainerFailed: true, plan.KillReasonAllContainersDone: true,
	plan.KillReasonPodDeleted: true, plan.KillReasonPodTerminal: true, plan.KillReasonDeadlineExceeded: true,
	plan.KillReasonBackoffLimitExceeded: true,
	// Container starts and kills (ReasonInitFailed is
	// KillReasonInitContainerFailed).
	plan.ReasonNotStarted: true, plan.ReasonExited: true, plan.ReasonCreated: true, plan.ReasonUnknownState: true,
	plan.ReasonDefinitionChanged: true, plan.ReasonLivenessProbe: true, plan.ReasonStartupProbe: true, plan.ReasonNewSandbox: true,
	plan.ReasonNextInitContainer: true, plan.ReasonSidecarExited: true, plan.ReasonSidecarMissing: true,
	plan.ReasonPodKilled: true, plan.ReasonNotInSpec: true, plan.ReasonCrashLoopBackOff: true, plan.ReasonImagePullBackOff: true,
	"FailedPostStartHook": true,
	// In-place resizes.
	plan.ReasonResizeRestart: true, syncer.ReasonResize: true, syncer.ReasonResizePodInPlaceError: true,
	// Failures.
	podstatus.ReasonErrImagePull: true, syncer.ReasonCreatePodSandboxError: true, syncer.ReasonConfigPodSandboxError: true,
	syncer.ReasonKillPodSandboxError: true, syncer.ReasonKillContainerError: true, syncer.ReasonCreateContainerConfigErr: true,
	syncer.ReasonCreateContainerError: true, syncer.ReasonRunContainerError: true, syncer.ReasonPostStartHookError: true,
	syncer.ReasonPreStopHookError: true, syncer.ReasonErrImageNeverPull: true, syncer.ReasonImageInspectError: true,
	syncer.ReasonInvalidImageName: true, syncer.ReasonRegistryUnavailable: true, syncer.ReasonSignatureValidation: true,
	syncer.ReasonFailedMount: true, syncer.ReasonRemoveContainerError: true, syncer.ReasonRemovePodSandboxError: true,
	// Removals.
	syncer.ReasonInitContainersPurged: true, syncer.ReasonGarbageCollected: true,
}

// podPhases are the values of podsync_pods' phase label.
var podPhases = []corev1.PodPhase{corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed, corev1.PodUnknown}

// Options configure Metrics.
type Options struct {
	// ErrorCode names the gRPC code of a failed CRI call ("NotFound",
	// "Unavailable", …), the code label of
	// podsync_cri_request_duration_seconds. k8s.io/cri-client returns gRPC
	// status errors and the engine does not import gRPC, so whoever dials
	// the runtime supplies it: status.Code(err).String(). It is never
	// called with nil. Nil tells only NotFound (crierrors.IsNotFound),
	// Canceled and DeadlineExceeded (context errors) apart and names the
	// rest "Unknown". Optional.
	ErrorCode func(error) string
}

// Metrics are the engine's Prometheus metrics: sync passes and their steps
// (recorded by a Syncer or Node given them in their options), pods by
// phase and containers in back-off (of the Node running with them), and
// CRI calls (of a Runtime and ImageService wrapped by InstrumentRuntime
// and InstrumentImages). A nil *Metrics records nothing.
//
// Build them with NewMetrics, once per registry; they are safe for
// concurrent use and may outlive Nodes (podsyncd runs a new Node on each
// connection to the runtime).
type Metrics struct {
	passes    *prometheus.HistogramVec
	skipped   prometheus.Counter
	hints     *prometheus.CounterVec
	steps     *prometheus.CounterVec
	cri       *prometheus.HistogramVec
	evictions *prometheus.CounterVec
	errorCode func(error) string
	node      *nodeCollector
}

// New returns the engine's metrics, registered on reg. It fails if reg
// holds metrics of the same names.
func New(reg prometheus.Registerer, opts Options) (*Metrics, error) {
	m := &Metrics{
		passes: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    MetricSyncPassDuration,
			Help:    "Duration of sync passes of pods, by outcome (success, step_failed, error, canceled).",
			Buckets: passBuckets,
		}, []string{"outcome"}),
		skipped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricSyncPassesSkipped,
			Help: "Passes the runtime's change hints asked for and a pod's worker skipped: its last pass had seen the change.",
		}),
		hints: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricRuntimeHints,
			Help: "Passes of pods' workers the runtime's change hints woke, by source (cri_events, containerd_events, relist); a pass woken by hints of two sources counts for each.",
		}, []string{"source"}),
		steps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricSyncSteps,
			Help: "Steps of sync passes, by action, result (success, failure, backoff) and reason.",
		}, []string{"action", "result", "reason"}),
		cri: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    MetricCRIRequestDuration,
			Help:    "Duration of CRI calls, by method and gRPC code (OK on success); GetContainerEvents until its stream is established.",
			Buckets: criBuckets,
		}, []string{"method", "code"}),
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricEvictions,
			Help: "Pods evicted for their local storage, by the kubelet's eviction signal.",
		}, []string{"signal"}),
		errorCode: opts.ErrorCode,
		node: &nodeCollector{
			usage: prometheus.NewDesc(MetricPodEphemeralUsage,
				"Local ephemeral storage of a pod at its last measurement (disk-backed emptyDir and configMap volumes, hosts file, containers' writable layers and logs); present while a node runs.",
				[]string{"namespace", "pod"}, nil),
			pods: prometheus.NewDesc(MetricPods,
				"Pods the node holds, by the phase of their last status; present while a node runs.", []string{"phase"}, nil),
			backoffs: prometheus.NewDesc(MetricBackoffsActive,
				"Containers waiting in CrashLoopBackOff or ImagePullBackOff; present while a node runs.", nil, nil),
			orphans: prometheus.NewDesc(MetricOrphanedPods,
				"Pods the runtime holds under podsync's labels that the store does not hold and the node keeps running "+
					"(removed only with --remove-orphans); present while a node runs.", nil, nil),
		},
	}
	if m.errorCode == nil {
		m.errorCode = defaultErrorCode
	}
	// Every outcome is exported from the start, so rates need no absent().
	for _, o := range []string{PassSuccess, PassStepFailed, PassError, PassCanceled} {
		m.passes.WithLabelValues(o)
	}
	for _, sig := range eviction.Signals() {
		m.evictions.WithLabelValues(sig)
	}
	for _, src := range watch.SourceNames() {
		m.hints.WithLabelValues(src)
	}
	for _, c := range []prometheus.Collector{m.passes, m.skipped, m.hints, m.steps, m.cri, m.evictions, m.node} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register engine metrics: %w", err)
		}
	}
	return m, nil
}

// defaultErrorCode is ErrorCode without gRPC: the codes the engine can
// tell apart, "Unknown" otherwise.
func defaultErrorCode(err error) string {
	switch {
	case crierrors.IsNotFound(err):
		return "NotFound"
	case errors.Is(err, context.Canceled):
		return "Canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "DeadlineExceeded"
	}
	return "Unknown"
}

// ObserveSkippedPass counts a pass a pod worker skipped.
func (m *Metrics) ObserveSkippedPass() {
	if m != nil {
		m.skipped.Inc()
	}
}

// ObserveHintPass counts a pass the runtime's hints of sources woke.
func (m *Metrics) ObserveHintPass(sources watch.Source) {
	if m == nil {
		return
	}
	for _, name := range sources.Names() {
		m.hints.WithLabelValues(name).Inc()
	}
}

// ObservePass records one sync pass that took d; ended says whether the
// pass's context had ended (whatever its cause).
func (m *Metrics) ObservePass(res syncer.SyncResult, err error, ended bool, d time.Duration) {
	if m == nil {
		return
	}
	outcome := PassSuccess
	switch {
	case err != nil && ended:
		outcome = PassCanceled
	case err != nil:
		outcome = PassError
	case res.Err() != nil:
		outcome = PassStepFailed
	}
	m.passes.WithLabelValues(outcome).Observe(d.Seconds())
}

// ObserveStep counts one step.
func (m *Metrics) ObserveStep(st syncer.StepResult) {
	if m == nil {
		return
	}
	result := StepSuccess
	switch {
	case st.Err != nil:
		result = StepFailure
	case st.BackedOff():
		result = StepBackoff
	}
	reason := st.Reason
	if !stepReasons[reason] {
		reason = ReasonOther
	}
	m.steps.WithLabelValues(string(st.Action), result, reason).Inc()
}

// ObserveEviction counts one eviction for signal (the kubelet's
// eviction signal, eviction.Signal*).
func (m *Metrics) ObserveEviction(signal string) {
	if m != nil {
		m.evictions.WithLabelValues(signal).Inc()
	}
}

// observeCRI records one CRI call that began at start.
func (m *Metrics) observeCRI(method string, start time.Time, err error) {
	code := CodeOK
	if err != nil {
		code = m.errorCode(err)
	}
	m.cri.WithLabelValues(method, code).Observe(time.Since(start).Seconds())
}

// NodeState is what podsync_pods, podsync_backoffs_active,
// podsync_orphaned_pods and podsync_pod_ephemeral_storage_bytes describe
// of a running node, read at scrape time.
type NodeState interface {
	// PodCounts counts the node's pods by the phase of their last status
	// (Pending before the first) and the containers waiting in
	// CrashLoopBackOff or ImagePullBackOff.
	PodCounts() (phases map[corev1.PodPhase]int, backoffs int)
	// OrphanCount is how many orphans the node keeps running.
	OrphanCount() int
	// StorageUsages is the last measurement of the local storage of the
	// pods the node still holds.
	StorageUsages() []PodUsage
}

// PodUsage is one pod's last measured local ephemeral storage.
type PodUsage struct {
	Namespace, Name string
	Bytes           int64
}

// Attach makes n the node the node metrics describe; the last to attach
// wins.
func (m *Metrics) Attach(n NodeState) {
	if m != nil {
		m.node.cur.Store(&n)
	}
}

// Detach stops describing n, unless another node has attached since.
func (m *Metrics) Detach(n NodeState) {
	if m == nil {
		return
	}
	if cur := m.node.cur.Load(); cur != nil && *cur == n {
		m.node.cur.CompareAndSwap(cur, nil)
	}
}

// nodeCollector computes the node metrics at scrape time from what the
// attached node last saw.
type nodeCollector struct {
	pods, backoffs, orphans, usage *prometheus.Desc
	cur                            atomic.Pointer[NodeState]
}

func (c *nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.pods
	ch <- c.backoffs
	ch <- c.orphans
	ch <- c.usage
}

func (c *nodeCollector) Collect(ch chan<- prometheus.Metric) {
	cur := c.cur.Load()
	if cur == nil {
		return
	}
	n := *cur
	phases, backoffs := n.PodCounts()
	for _, p := range podPhases {
		ch <- prometheus.MustNewConstMetric(c.pods, prometheus.GaugeValue, float64(phases[p]), string(p))
	}
	ch <- prometheus.MustNewConstMetric(c.backoffs, prometheus.GaugeValue, float64(backoffs))
	ch <- prometheus.MustNewConstMetric(c.orphans, prometheus.GaugeValue, float64(n.OrphanCount()))
	for _, u := range n.StorageUsages() {
		ch <- prometheus.MustNewConstMetric(c.usage, prometheus.GaugeValue, float64(u.Bytes), u.Namespace, u.Name)
	}
}
