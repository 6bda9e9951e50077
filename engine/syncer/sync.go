package syncer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	crierrors "k8s.io/cri-api/pkg/errors"
	"k8s.io/utils/clock"

	"github.com/podsync/podsync/engine/admit"
	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/failpoint"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/plan"
	"github.com/podsync/podsync/engine/podstatus"
	"github.com/podsync/podsync/logx"
	"github.com/podsync/podsync/validation"
)

// cleanupTimeout bounds the rollback and cleanup that run after the
// caller's context has ended.
const cleanupTimeout = 30 * time.Second

// minimumGracePeriod is the kubelet's minimumGracePeriodInSeconds: every
// container gets at least this long to stop before SIGKILL.
const minimumGracePeriod = 2

// SyncerOptions configure a Syncer.
type SyncerOptions struct {
	// Runtime is the CRI runtime; required.
	Runtime Runtime
	// Images is the CRI image service; required.
	Images ImageService
	// Clock times steps and back-offs; nil means the real clock.
	Clock clock.Clock
	// Logger receives one line per step; nil discards.
	Logger *zap.Logger
	// Backoff is the crash-loop and image-pull back-off; the zero value is
	// the kubelet's (10 s doubling to 5 min).
	Backoff plan.BackoffPolicy
	// Config are the node settings the CRI configs and pod directories
	// depend on.
	Config criconfig.Options
	// Observer, if set, is told of every pass and step (the node's
	// metrics; not the CRI calls: wrap Runtime and Images for those).
	Observer Observer
	// HostPaths are the allowed hostPath prefixes and the denied paths
	// hostPath volumes are opened against when they are mounted (only
	// AllowedHostPaths and DeniedHostPaths are read); the zero value
	// refuses every hostPath.
	HostPaths admit.Policy
	// Credentials are the node's image credentials (podsyncd's
	// --image-credentials), tried after those of a pod's image pull
	// Secrets; nil holds none.
	Credentials *Keyring
	// ImagePullVerification is how a pod's access to an image the node
	// holds already is verified (the kubelet's
	// imagePullCredentialsVerificationPolicy): the zero value is
	// NeverVerifyPreloadedImages. The records of which credentials pulled
	// each image are kept under Config.RootDir.
	ImagePullVerification ImagePullVerification
	// PodSpecKey is the node's key (store.NodeKey), with which a new
	// sandbox's record of its pod is signed (model.SignPodSpec); without
	// one no record is written, and a node that loses its store adopts
	// the pod in part.
	PodSpecKey []byte
	// TracerProvider records a span per pass (SpanPass) under the
	// caller's, with a child per step; nil records none.
	TracerProvider trace.TracerProvider
	// Mounter makes the pods' tmpfs mounts and undoes the mounts below
	// a pod's directory; nil means the kernel's. Only a hollow node
	// (internal/testing/hollow) sets another.
	Mounter Mounter
}

// Observer is told of what a Syncer does: every pass as it ends and every
// step as it finishes. Its methods are called from the pass's goroutine
// and must not block.
type Observer interface {
	// ObservePass reports a pass that ended with res and err after d;
	// canceled says whether the pass's context had ended.
	ObservePass(res SyncResult, err error, canceled bool, d time.Duration)
	// ObserveStep reports one finished step.
	ObserveStep(st StepResult)
}

// nopObserver is the Observer of a Syncer without one.
type nopObserver struct{}

func (nopObserver) ObservePass(SyncResult, error, bool, time.Duration) {}
func (nopObserver) ObserveStep(StepResult)                             {}

// SyncInput is what a pass needs besides the pod.
type SyncInput struct {
	// ConfigMaps and Secrets are the objects of the pod's namespace the pod
	// refers to: in env, envFrom, volumes and imagePullSecrets. A missing
	// one that is not optional fails the containers (or volumes) that need
	// it.
	ConfigMaps []*corev1.ConfigMap
	Secrets    []*corev1.Secret
	// Probes are the prober's last results.
	Probes model.ProbeResults
	// PullFailures are the pod's failed image pulls, as the last pass's
	// SyncResult.PullFailures has them: the runtime keeps no record of
	// them, so the caller does (the node's pod worker).
	PullFailures []model.PullFailure
	// Observed, if set, is called once the pass has read the runtime and
	// planned, before it acts: the Node publishes from it what the pass
	// found (a container that exited) before the pass restarts it, as the
	// kubelet's status manager does.
	Observed func(view model.RuntimeView, plan plan.PodActions)
	// AdmitResize, if set, is the node's admission of a resize (the
	// kubelet's allocation manager), asked when the pod requests CPU or
	// memory its running containers do not have: it returns false with
	// the kubelet's message ("Node didn't have enough resource: …") when
	// the pod's new requests do not fit. The pass then plans with the
	// allocated pod (nothing is resized) and reports the resize as
	// Deferred in SyncResult.Plan.ResizePending. Nil admits every resize.
	AdmitResize func(pod *corev1.Pod) (bool, string)
	// NothingInRuntime tells the pass that the runtime holds nothing of
	// the pod — the caller has never run it and found nothing of it when
	// it listed the runtime — so it starts from an empty view instead of
	// listing the runtime (the kubelet's first sync of a new pod plans
	// from an empty cache the same way). Set it only when sure: a pass
	// that plans from an empty view for a pod that has a sandbox creates
	// another.
	NothingInRuntime bool
	// ReadMark, if set, returns an increasing mark; the pass takes one
	// before each read of the runtime and returns the mark of the read
	// behind SyncResult.View in SyncResult.ViewMark (the node's worker
	// passes watch.ReadMark: a relist that ended before the read is
	// older than the view).
	ReadMark func() uint64
}

// Syncer runs sync passes: it reads what the runtime holds for a pod,
// plans with ComputePodActions and executes the plan through CRI in the
// kubelet's order, reporting every step as it finishes. It is safe for
// concurrent use by passes of different pods, which run in parallel; the
// passes (and RemovePod) of one pod must not overlap — the caller
// serialises them, as the node's pod workers do with one lock per pod.
// It keeps no state of a pod between passes: what the runtime does not
// record (failed pulls) goes in and out through SyncInput and SyncResult.
type Syncer struct {
	rt      Runtime
	images  ImageService
	clock   clock.Clock
	log     *zap.Logger
	backoff plan.BackoffPolicy
	cfg     criconfig.Options
	obs     Observer
	// hostPaths is SyncerOptions.HostPaths.
	hostPaths admit.Policy
	// imageVolumes is whether the runtime mounts image volumes, once its
	// version was read.
	imageVolumes struct {
		mu        sync.Mutex
		known, ok bool
		why       string
	}
	// credentials is SyncerOptions.Credentials.
	credentials *Keyring
	// podSpecKey is SyncerOptions.PodSpecKey.
	podSpecKey []byte
	// verify and pulls are SyncerOptions.ImagePullVerification and the
	// records it decides by.
	verify ImagePullVerification
	// mounts makes the tmpfs mounts (SyncerOptions.Mounter).
	mounts Mounter
	pulls  *pullRecords
	// tracer records passes and steps (SyncerOptions.TracerProvider).
	tracer trace.Tracer
	// usernsMu serialises the allocation of user namespace ranges.
	usernsMu sync.Mutex
}

// NewSyncer returns a Syncer. It fails with ErrInvalidSpec if Runtime or
// Images is missing.
func NewSyncer(opts SyncerOptions) (*Syncer, error) {
	if opts.Runtime == nil || opts.Images == nil {
		return nil, fmt.Errorf("engine: SyncerOptions need a Runtime and Images: %w", errdefs.ErrInvalidSpec)
	}
	s := &Syncer{
		rt:      opts.Runtime,
		images:  opts.Images,
		clock:   opts.Clock,
		log:     opts.Logger,
		backoff: opts.Backoff,
		cfg:     opts.Config.WithDefaults(),
		obs:     opts.Observer,
		// Only the host-path fields of the policy are read.
		hostPaths:   opts.HostPaths,
		credentials: opts.Credentials,
		podSpecKey:  opts.PodSpecKey,
		verify:      opts.ImagePullVerification,
		mounts:      opts.Mounter,
	}
	if s.mounts == nil {
		s.mounts = kernelMounter{}
	}
	if err := s.verify.Validate(); err != nil {
		return nil, fmt.Errorf("engine: %w: %w", err, errdefs.ErrInvalidSpec)
	}
	s.pulls = &pullRecords{dir: filepath.Join(s.cfg.RootDir, "image-pulls")}
	if s.clock == nil {
		s.clock = clock.RealClock{}
	}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	if s.obs == nil {
		s.obs = nopObserver{}
	}
	tp := opts.TracerProvider
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	s.tracer = tp.Tracer(tracerName)
	return s, nil
}

// PodStatus computes pod's status from a view (a SyncResult's) with the
// syncer's clock, back-off and node IPs.
func (s *Syncer) PodStatus(pod *corev1.Pod, view model.RuntimeView, probes model.ProbeResults) corev1.PodStatus {
	return podstatus.ComputePodStatus(pod, view, probes, s.clock.Now(), podstatus.StatusOptions{Backoff: s.backoff, HostIPs: s.cfg.NodeIPs})
}

// SyncPod runs one sync pass of pod, the kubelet's SyncPod: it reads the
// runtime's view of the pod, plans, and executes the plan — kill the pod
// (every container, preStop hook first, then every sandbox) or the
// containers to kill; purge init containers for a new sandbox; prepare
// volumes; create the sandbox; start init containers one at a time,
// sidecars and regular containers (image, CreateContainer, StartContainer,
// postStart hook) — and finally removes dead instances and sandboxes no
// longer needed. Each step is passed to emit (if not nil) as soon as it
// finishes; emit is never called concurrently.
//
// A failed kill aborts the pass, as does a failed sandbox and a failed
// start of a classic init container; failed starts of sidecars and regular
// containers do not stop the others. Step failures are in the result, not
// the error. pod must be defaulted as the API server defaults pods
// (convert.Default): containerd 2.x, for one, refuses containers of a
// sandbox created without the pod security context the defaults add.
//
// SyncPod returns an error wrapping ErrInvalidSpec for a pod without UID or with a name
// that cannot be a path (see validation.CheckPodPaths), the runtime's
// error if the pod's state cannot be read, and the context's error if ctx
// ended during the pass; the result holds the steps done so far.
func (s *Syncer) SyncPod(ctx context.Context, pod *corev1.Pod, in SyncInput, emit func(StepResult)) (SyncResult, error) {
	if pod == nil || pod.UID == "" {
		return SyncResult{}, fmt.Errorf("sync pod: pod has no uid: %w", errdefs.ErrInvalidSpec)
	}
	if err := errdefs.InvalidSpec(validation.CheckPodPaths(pod)...); err != nil {
		return SyncResult{}, fmt.Errorf("sync pod %s: %w", model.PodString(pod), err)
	}
	log := logx.From(ctx, s.log).With(logx.Pod(pod)...)
	ctx, span := s.startPass(ctx, pod)
	p := &pass{s: s, pod: pod, in: in, log: log, rec: &recorder{emit: emit, log: log, obs: s.obs, ctx: ctx, tracer: s.tracer},
		pulls: model.CurrentPullFailures(pod, in.PullFailures)}
	start := s.clock.Now()
	res, err := p.run(ctx)
	res.PullFailures = p.pulls
	s.obs.ObservePass(res, err, ctx.Err() != nil, s.clock.Since(start))
	endPass(span, res, err)
	return res, err
}

// RemovePod removes everything podsync holds for the pod: it stops and
// removes every sandbox and container labelled with the pod's UID (without
// grace: kill the pod with SyncPod first), its pod directory (unmounting
// its tmpfs volumes first), log directory and cgroup, and the pull
// failures remembered for it.
func (s *Syncer) RemovePod(ctx context.Context, pod *corev1.Pod) error {
	log := logx.From(ctx, s.log)
	st, err := readPodState(ctx, s.rt, pod.UID)
	if err != nil {
		return fmt.Errorf("remove pod %s: %w", model.PodString(pod), err)
	}
	var errs []error
	for _, c := range st.view.Containers {
		if err := s.rt.RemoveContainer(ctx, c.ID); err != nil && !crierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove container %s: %w", c.ID, err))
		}
	}
	for _, sb := range st.view.Sandboxes {
		if err := s.rt.StopPodSandbox(ctx, sb.ID); err != nil && !crierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("stop sandbox %s: %w", sb.ID, err))
			continue
		}
		failpoint.Inject(failpoint.MidSandboxRemoval)
		if err := s.rt.RemovePodSandbox(ctx, sb.ID); err != nil && !crierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove sandbox %s: %w", sb.ID, err))
		}
	}
	switch err := validation.CheckFileName("pod uid", string(pod.UID)); {
	case len(errs) > 0:
	case err != nil || strings.ContainsAny(pod.Namespace+pod.Name, "/\x00"):
		// Not a pod directory podsync could have made (the identity of an
		// orphan comes from CRI labels): leave the file system alone.
		log.Warn("pod identity is not a safe path: its directories are not removed", logx.Pod(pod)...)
	default:
		// Unmount first: removing through a subPath or hostPath bind
		// mount would remove the host's files, and RemoveAll would empty
		// the tmpfs volumes and leave the mounts behind.
		if err := s.mounts.UnmountBelow(criconfig.PodDir(pod, s.cfg)); err != nil {
			errs = append(errs, fmt.Errorf("unmount pod directory: %w", err))
		} else {
			errs = append(errs, os.RemoveAll(criconfig.PodDir(pod, s.cfg)))
		}
		errs = append(errs, os.RemoveAll(criconfig.PodLogDirectory(pod, s.cfg)))
		if err := removePodCgroup(pod, s.cfg); err != nil {
			// Not an error of the removal: the cgroup holds nothing
			// of the pod's, and a pod's next incarnation reuses it.
			log.Warn("pod cgroup not removed", append(logx.Pod(pod), zap.Error(err))...)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("remove pod %s: %w", model.PodString(pod), err)
	}
	log.Info("pod removed", logx.Pod(pod)...)
	return nil
}

// stepMessages are the log messages of successful steps.
var stepMessages = map[StepAction]string{
	ActionCreatePodSandbox: "sandbox created",
	ActionConfigPodSandbox: "sandbox config generated",
	ActionKillPodSandbox:   "sandbox stopped",
	ActionStartContainer:   "container started",
	ActionKillContainer:    "container killed",
	ActionPullImage:        "image pulled",
	ActionPostStartHook:    "post-start hook ran",
	ActionPreStopHook:      "pre-stop hook ran",
	ActionMountVolumes:     "volumes mounted",
	ActionRemoveContainer:  "container removed",
	ActionRemovePodSandbox: "sandbox removed",

	ActionUpdateContainerResources:  "container resized",
	ActionUpdatePodSandboxResources: "pod resources updated",
}
