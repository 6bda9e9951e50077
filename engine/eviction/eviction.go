package eviction

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/podsync/podsync/engine/admit"
	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/plan"
	"github.com/podsync/podsync/engine/podworkers"
	"github.com/podsync/podsync/engine/store"
	"github.com/podsync/podsync/engine/syncer"
	"github.com/podsync/podsync/logx"
)

// DefaultHousekeepingInterval is how often the node measures the local
// storage of its pods (the kubelet's --housekeeping-interval, whose
// measurements its eviction manager reads every 10 s).
const DefaultHousekeepingInterval = 10 * time.Second

// The kubelet's eviction reason and messages (pkg/kubelet/eviction
// helpers.go).
const (
	// ReasonEvicted is the reason of an evicted pod's status and event.
	ReasonEvicted                       = plan.ReasonEvicted
	emptyDirMessageFmt                  = "Usage of EmptyDir volume %q exceeds the limit %q. "
	containerEphemeralStorageMessageFmt = "Container %s exceeded its local ephemeral storage limit %q. "
	podEphemeralStorageMessageFmt       = "Pod ephemeral local storage usage exceeds the total limit of containers %s. "
	nodeLowMessageFmt                   = "The node was low on resource: %v. "
	thresholdMetMessageFmt              = "Threshold quantity: %v, available: %v. "
)

// Eviction signals, the signal label of podsync_evictions_total: the
// kubelet's names.
const (
	SignalEmptyDirFsLimit           = "emptydirfs.limit"
	SignalEphemeralPodFsLimit       = "ephemeralpodfs.limit"
	SignalEphemeralContainerFsLimit = "ephemeralcontainerfs.limit"
	SignalNodeFsAvailable           = "nodefs.available"
)

// Signals are the eviction signals, the values of
// podsync_evictions_total's signal label.
func Signals() []string {
	return []string{SignalEmptyDirFsLimit, SignalEphemeralPodFsLimit, SignalEphemeralContainerFsLimit, SignalNodeFsAvailable}
}

// DefaultStoreMinAvailablePercent is StorageThreshold's default: the
// store's file system keeps 5% free (the kubelet's nodefs.available
// default is 10%).
const DefaultStoreMinAvailablePercent = 5

// Policy configures the node's local storage eviction, the kubelet
// eviction manager's localStorageEviction and its nodefs.available
// threshold.
type Policy struct {
	// Period is how often the local storage of every pod that is neither
	// terminal nor being deleted is measured; zero means
	// DefaultHousekeepingInterval.
	Period time.Duration
	// StoreMinAvailable is what must stay free on the file system of the
	// store: below it, the pod that uses the most local storage on that
	// file system is evicted, one per period, so that a pod filling the
	// disk does not make the store unwritable. The zero value means
	// DefaultStoreMinAvailablePercent; Disabled turns the check off.
	StoreMinAvailable StorageThreshold
	// StoreReserve is the size of a preallocated file next to the store
	// (<store>.reserve), released when recording an eviction finds the
	// file system full (ENOSPC) so that the eviction that frees the space
	// can be stored, and made again once there is room above
	// StoreMinAvailable; zero means DefaultStoreReserve, negative none.
	// There is none while StoreMinAvailable is Disabled.
	StoreReserve int64
}

// StorageThreshold is an amount of free space: Bytes, or Percent of the
// file system's size, whichever is larger.
type StorageThreshold struct {
	Bytes    int64
	Percent  float64
	Disabled bool
}

// bytesOf returns the threshold on a file system of capacity bytes.
func (t StorageThreshold) bytesOf(capacity int64) int64 {
	return max(t.Bytes, int64(t.Percent/100*float64(capacity)))
}

func (p Policy) withDefaults() Policy {
	if p.Period <= 0 {
		p.Period = DefaultHousekeepingInterval
	}
	if t := p.StoreMinAvailable; !t.Disabled && t.Bytes <= 0 && t.Percent <= 0 {
		p.StoreMinAvailable.Percent = DefaultStoreMinAvailablePercent
	}
	if p.StoreReserve == 0 {
		p.StoreReserve = DefaultStoreReserve
	}
	return p
}

// Pods lists the node's active pods (neither terminal nor being
// deleted), for measurement.
type Pods interface {
	ActivePods() ([]*corev1.Pod, error)
}

// Failer fails a pod the node evicts, in its worker's turn
// (podworkers.Workers).
type Failer interface {
	FailPod(ctx context.Context, pod *corev1.Pod, f podworkers.Failure) bool
}

// Observer counts evictions (metrics.Metrics).
type Observer interface {
	ObserveEviction(signal string)
}

// Options configure a Manager.
type Options struct {
	// Policy is the eviction policy; zero fields take their defaults.
	Policy Policy
	// Store is the node's store: the file system it is on is kept from
	// filling, and its reserve file lies beside it. Required.
	Store *store.Store
	// Pods lists the pods to measure; required.
	Pods Pods
	// Runtime lists the running containers and, where it can
	// (syncer.ContainerStatsLister, syncer.ContainerStatser), their
	// writable layers; required.
	Runtime syncer.Runtime
	// Failer fails the pods evicted; required.
	Failer Failer
	// Config are the node's directories.
	Config criconfig.Options
	// Metrics, if set, count the evictions.
	Metrics Observer
	// Logger receives the manager's logs; nil discards.
	Logger *zap.Logger
}

// Manager is the kubelet's eviction manager for local storage: every
// Policy.Period the node calls Check, which measures the pods and evicts
// those over a limit, or the largest user of the store's file system when
// it runs low; Append records a change on a full disk by releasing the
// store's reserve.
type Manager struct {
	policy   Policy
	store    *store.Store
	storeDir string
	pods     Pods
	rt       syncer.Runtime
	failer   Failer
	cfg      criconfig.Options
	metrics  Observer
	log      *zap.Logger

	// usage is the last measurement of the pods' local storage, in bytes.
	usageMu sync.Mutex
	usage   map[types.UID]int64
}

// New returns a Manager.
func New(o Options) *Manager {
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Metrics == nil {
		o.Metrics = noObserver{}
	}
	return &Manager{policy: o.Policy.withDefaults(), store: o.Store, storeDir: filepath.Dir(o.Store.Path()), pods: o.Pods, rt: o.Runtime,
		failer: o.Failer, cfg: o.Config, metrics: o.Metrics, log: o.Logger}
}

// Period is how often the node calls Check.
func (m *Manager) Period() time.Duration { return m.policy.Period }

type noObserver struct{}

func (noObserver) ObserveEviction(string) {}

// podStorageUsage is what one measurement found of a pod's local
// storage, in bytes of disk in use.
type podStorageUsage struct {
	// Volumes are the pod's disk-backed emptyDir volumes by name.
	Volumes map[string]int64
	// Containers are the running containers by name: the writable layer
	// (CRI ContainerStats) and the container's log files, as the kubelet
	// counts a container's ephemeral storage.
	Containers map[string]int64
	// Total is the pod's ephemeral storage: its containers, its disk-backed
	// emptyDir and configMap volumes and its hosts file (the kubelet's
	// calcEphemeralStorage).
	Total int64
	// Claims are the bytes of the named volumes (persistentVolumeClaim) the
	// pod mounts read-write, each counted whole for every pod that writes
	// it: not ephemeral storage (its limits do not count them), but what
	// the pod can write to the node's disk, which the store's file system
	// eviction ranks it by and the pod's local storage reports.
	Claims int64
}

// local is all the local storage the pod can fill: its ephemeral storage
// and the named volumes it writes.
func (u podStorageUsage) local() int64 { return u.Total + u.Claims }

// localStorageEviction is the kubelet's localStorageEviction for one pod:
// the emptyDir limits first (emptyDirLimitEviction), then the pod's total
// (podEphemeralStorageLimitEviction), then each container's limit
// (containerEphemeralStorageLimitEviction). It returns the signal and the
// kubelet's message of the first limit exceeded, or "" if none is. Memory
// emptyDir volumes are not measured: the kernel bounds their tmpfs. It is
// pure.
func localStorageEviction(pod *corev1.Pod, u podStorageUsage) (signal, message string) {
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if v.EmptyDir == nil || v.EmptyDir.Medium == corev1.StorageMediumMemory {
			continue
		}
		size := v.EmptyDir.SizeLimit
		used, ok := u.Volumes[v.Name]
		if ok && size != nil && size.Sign() == 1 && used > size.Value() {
			return SignalEmptyDirFsLimit, fmt.Sprintf(emptyDirMessageFmt, v.Name, size.String())
		}
	}
	if lim, ok := criconfig.PodLimits(pod)[corev1.ResourceEphemeralStorage]; ok && u.Total > lim.Value() {
		return SignalEphemeralPodFsLimit, fmt.Sprintf(podEphemeralStorageMessageFmt, lim.String())
	}
	// The regular containers' and the sidecars' limits.
	limits := map[string]*resource.Quantity{}
	for _, list := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range list {
			c := &list[i]
			if isInit(pod, c.Name) && !model.IsRestartableInitContainer(c) {
				continue
			}
			if q := c.Resources.Limits.StorageEphemeral(); !q.IsZero() {
				limits[c.Name] = q
			}
		}
	}
	for _, list := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range list {
			name := list[i].Name
			used, ok := u.Containers[name]
			if lim := limits[name]; ok && lim != nil && used > lim.Value() {
				return SignalEphemeralContainerFsLimit, fmt.Sprintf(containerEphemeralStorageMessageFmt, name, lim.String())
			}
		}
	}
	return "", ""
}

// isInit reports whether name is one of pod's init containers.
func isInit(pod *corev1.Pod, name string) bool {
	return slices.ContainsFunc(pod.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == name })
}

// storeFsCandidate is a pod that uses local storage on the store's file
// system.
type storeFsCandidate struct {
	pod  *corev1.Pod
	used int64
}

// storeFsEviction is the kubelet's nodefs.available threshold for the
// store's file system: with available bytes free of capacity, below the
// threshold, it returns the pod to evict, ranked as the kubelet ranks
// them under disk pressure (over its ephemeral-storage request first, then
// the lowest priority, then the one using the most, ties broken by
// namespace and name) and the kubelet's message; nil if the
// threshold is not met or no pod uses any space there. It is pure.
func storeFsEviction(t StorageThreshold, available, capacity int64, pods []storeFsCandidate) (*corev1.Pod, string) {
	if t.Disabled {
		return nil, ""
	}
	threshold := t.bytesOf(capacity)
	if available >= threshold {
		return nil, ""
	}
	pods = slices.DeleteFunc(slices.Clone(pods), func(c storeFsCandidate) bool { return c.used <= 0 })
	if len(pods) == 0 {
		return nil, ""
	}
	// The kubelet's rankDiskPressureFunc: the pods using more than they
	// request first, then the lower priority, then the larger use.
	exceeds := func(c storeFsCandidate) int {
		req := resourcehelper.PodRequests(c.pod, resourcehelper.PodResourcesOptions{})[corev1.ResourceEphemeralStorage]
		if c.used > req.Value() {
			return 0
		}
		return 1
	}
	slices.SortFunc(pods, func(a, b storeFsCandidate) int {
		return cmp.Or(cmp.Compare(exceeds(a), exceeds(b)), cmp.Compare(admit.PodPriority(a.pod), admit.PodPriority(b.pod)),
			cmp.Compare(b.used, a.used), cmp.Compare(a.pod.Namespace, b.pod.Namespace), cmp.Compare(a.pod.Name, b.pod.Name))
	})
	msg := fmt.Sprintf(nodeLowMessageFmt, corev1.ResourceEphemeralStorage) +
		fmt.Sprintf(thresholdMetMessageFmt, resource.NewQuantity(threshold, resource.BinarySI), resource.NewQuantity(available, resource.BinarySI))
	return pods[0].pod, msg
}

// Check measures the local storage of every pod that is neither terminal
// nor being deleted and evicts those over a limit, as the kubelet's
// eviction manager; if none is, and the store's file system is below its
// threshold, it evicts the pod using the most there. A pod whose
// measurement fails is not evicted (the failure is logged). The node calls
// it every Policy.Period.
func (m *Manager) Check(ctx context.Context) {
	pods, err := m.pods.ActivePods()
	if err != nil {
		m.log.Warn("local storage: list pods", zap.Error(err))
		return
	}
	// One list of the running containers serves every pod's measurement;
	// without it no pod is measured (nor evicted) this round.
	var running map[types.UID]map[string]string
	var layers map[string]int64
	if len(pods) > 0 {
		running, err = m.runningContainers(ctx)
		if err == nil {
			// One call for every container's writable layer, as the
			// kubelet's stats provider, not one per container.
			layers, err = m.writableLayers(ctx)
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			m.log.Warn("local storage: measurement failed; no pod is evicted", zap.Error(err))
			pods = nil
		}
	}
	usage := make(map[types.UID]int64, len(pods))
	var candidates []storeFsCandidate
	evicted := false
	storeDev, devErr := deviceOf(m.storeDir)
	for _, pod := range pods {
		if ctx.Err() != nil {
			return
		}
		u, err := m.measurePod(ctx, pod, running[pod.UID], layers)
		if err != nil {
			if ctx.Err() == nil {
				m.log.Warn("local storage: measurement failed; the pod is not evicted", append(logx.Pod(pod), zap.Error(err))...)
			}
			continue
		}
		usage[pod.UID] = u.local()
		if signal, msg := localStorageEviction(pod, u); signal != "" {
			m.evict(ctx, pod, signal, msg)
			evicted = true
			continue
		}
		if devErr == nil {
			if dev, err := deviceOf(criconfig.PodDir(pod, m.cfg)); err == nil && dev == storeDev {
				candidates = append(candidates, storeFsCandidate{pod: pod, used: u.local()})
			}
		}
	}
	m.noteStorageUsage(usage)
	if evicted {
		// As the kubelet: limit evictions first; the threshold is
		// checked again once they have freed their space.
		return
	}
	if devErr != nil {
		m.log.Warn("local storage: stat the store's file system", zap.Error(devErr))
		return
	}
	available, capacity, err := fsSpace(m.storeDir)
	if err != nil {
		m.log.Warn("local storage: stat the store's file system", zap.Error(err))
		return
	}
	m.ensureReserve(available, capacity)
	if pod, msg := storeFsEviction(m.policy.StoreMinAvailable, available, capacity, candidates); pod != nil {
		m.evict(ctx, pod, SignalNodeFsAvailable, msg)
	}
}

// evict fails the pod with the kubelet's eviction status — phase Failed,
// reason Evicted, msg — and event, under its worker's lock, and kicks its
// worker, whose pass then kills its containers (a terminal pod is not
// runnable). A pod deleted, terminal or gone meanwhile is left alone.
func (m *Manager) evict(ctx context.Context, pod *corev1.Pod, signal, msg string) {
	log := m.log.With(logx.Pod(pod)...)
	if !m.failer.FailPod(ctx, pod, podworkers.Failure{Reason: ReasonEvicted, Message: msg, Wait: m.policy.Period, Record: m.Append}) {
		return
	}
	m.metrics.ObserveEviction(signal)
	log.Info("pod evicted", zap.String(logx.Signal, signal), zap.String(logx.Reason, msg))
}

// noteStorageUsage keeps the last measurement for the metrics.
func (m *Manager) noteStorageUsage(usage map[types.UID]int64) {
	m.usageMu.Lock()
	m.usage = usage
	m.usageMu.Unlock()
}

// Usage returns the last measurement of the pods' local storage, in bytes,
// by pod UID.
func (m *Manager) Usage() map[types.UID]int64 {
	m.usageMu.Lock()
	defer m.usageMu.Unlock()
	return m.usage
}
