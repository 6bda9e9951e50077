package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/podsync/podsync/engine/admit"
	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/plan"
	"github.com/podsync/podsync/engine/store"
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

// evictionSignals are the values of podsync_evictions_total's signal
// label.
var evictionSignals = []string{SignalEmptyDirFsLimit, SignalEphemeralPodFsLimit, SignalEphemeralContainerFsLimit, SignalNodeFsAvailable}

// DefaultStoreMinAvailablePercent is StorageThreshold's default: the
// store's file system keeps 5% free (the kubelet's nodefs.available
// default is 10%).
const DefaultStoreMinAvailablePercent = 5

// EvictionPolicy configures the node's local storage eviction, the
// kubelet eviction manager's localStorageEviction and its nodefs.available
// threshold.
type EvictionPolicy struct {
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

func (p EvictionPolicy) withDefaults() EvictionPolicy {
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
}

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

// checkLocalStorage measures the local storage of every pod that is
// neither terminal nor being deleted and evicts those over a limit, as the
// kubelet's eviction manager; if none is, and the store's file system is
// below its threshold, it evicts the pod using the most there. A pod whose
// measurement fails is not evicted (the failure is logged). Run calls it
// every EvictionPolicy.Period.
func (n *Node) checkLocalStorage(ctx context.Context) {
	pods, err := n.activePods()
	if err != nil {
		n.log.Warn("local storage: list pods", zap.Error(err))
		return
	}
	// One list of the running containers serves every pod's measurement;
	// without it no pod is measured (nor evicted) this round.
	var running map[types.UID]map[string]string
	var layers map[string]int64
	if len(pods) > 0 {
		running, err = n.runningContainers(ctx)
		if err == nil {
			// One call for every container's writable layer, as the
			// kubelet's stats provider, not one per container.
			layers, err = n.writableLayers(ctx)
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			n.log.Warn("local storage: measurement failed; no pod is evicted", zap.Error(err))
			pods = nil
		}
	}
	usage := make(map[types.UID]int64, len(pods))
	var candidates []storeFsCandidate
	evicted := false
	storeDev, devErr := deviceOf(n.storeDir)
	for _, pod := range pods {
		if ctx.Err() != nil {
			return
		}
		u, err := n.measurePod(ctx, pod, running[pod.UID], layers)
		if err != nil {
			if ctx.Err() == nil {
				n.log.Warn("local storage: measurement failed; the pod is not evicted", append(logx.Pod(pod), zap.Error(err))...)
			}
			continue
		}
		usage[pod.UID] = u.Total
		if signal, msg := localStorageEviction(pod, u); signal != "" {
			n.evict(ctx, pod, signal, msg)
			evicted = true
			continue
		}
		if devErr == nil {
			if dev, err := deviceOf(criconfig.PodDir(pod, n.cfg)); err == nil && dev == storeDev {
				candidates = append(candidates, storeFsCandidate{pod: pod, used: u.Total})
			}
		}
	}
	n.noteStorageUsage(usage)
	if evicted {
		// As the kubelet: limit evictions first; the threshold is
		// checked again once they have freed their space.
		return
	}
	if devErr != nil {
		n.log.Warn("local storage: stat the store's file system", zap.Error(devErr))
		return
	}
	available, capacity, err := fsSpace(n.storeDir)
	if err != nil {
		n.log.Warn("local storage: stat the store's file system", zap.Error(err))
		return
	}
	n.ensureReserve(available, capacity)
	if pod, msg := storeFsEviction(n.evictPolicy.StoreMinAvailable, available, capacity, candidates); pod != nil {
		n.evict(ctx, pod, SignalNodeFsAvailable, msg)
	}
}

// evict fails the pod with the kubelet's eviction status — phase Failed,
// reason Evicted, msg — and event, under its worker's lock, and kicks its
// worker, whose pass then kills its containers (a terminal pod is not
// runnable). A pod deleted, terminal or gone meanwhile is left alone.
func (n *Node) evict(ctx context.Context, pod *corev1.Pod, signal, msg string) {
	log := n.log.With(logx.Pod(pod)...)
	if !n.failByNode(ctx, pod, ReasonEvicted, msg, nil, n.evictPolicy.Period) {
		return
	}
	n.metrics.observeEviction(signal)
	log.Info("pod evicted", zap.String(logx.Signal, signal), zap.String(logx.Reason, msg))
}

// preempt fails victim as the kubelet's CriticalPodAdmissionHandler does
// to admit a critical pod: phase Failed, reason Preempting, its message,
// and a DisruptionTarget condition (TerminationByKubelet); its worker
// then kills its containers.
func (n *Node) preempt(ctx context.Context, victim, critical *corev1.Pod) {
	cond := &corev1.PodCondition{
		Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason:  corev1.PodReasonTerminationByKubelet,
		Message: "Pod was preempted by Kubelet to accommodate a critical pod.",
	}
	if n.failByNode(ctx, victim, admit.ReasonPreempting, admit.MessagePreempted, cond, n.evictPolicy.Period) {
		n.log.Info("pod preempted", append(logx.Pod(victim), zap.String("preemptor", critical.Namespace+"/"+critical.Name))...)
	}
}

// failByNode fails the pod with reason and msg (and cond, if not nil) and
// a warning event, under its worker's lock, waited for at most wait, and
// kicks its worker. It reports whether it did: a pod deleted, terminal or
// gone meanwhile is left alone.
func (n *Node) failByNode(ctx context.Context, pod *corev1.Pod, reason, msg string, cond *corev1.PodCondition, wait time.Duration) bool {
	log := n.log.With(logx.Pod(pod)...)
	// A long pass (an image pull) holds the pod's lock: the caller tries
	// again later rather than hold up the others.
	lctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	w, err := n.lockWorker(lctx, pod.UID)
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("fail pod: its pass runs on", zap.String(logx.Reason, reason))
		}
		return false
	}
	done := func() bool {
		defer w.release()
		rec, err := n.store.Get(pod.UID)
		if errors.Is(err, errdefs.ErrPodNotFound) {
			return false
		}
		if err != nil {
			log.Warn("fail pod: read the store", zap.Error(err))
			return false
		}
		if rec.Deleting || isTerminal(rec.Pod.Status.Phase) {
			return false
		}
		status, c, ev := failPod(rec.Pod, reason, msg)
		if cond != nil {
			cond.LastTransitionTime = metav1.NewTime(n.clock.Now())
			status.Conditions = append(slices.DeleteFunc(status.Conditions, func(c corev1.PodCondition) bool { return c.Type == cond.Type }), *cond)
			c = store.StatusChange(store.RefOf(rec.Pod), status)
		}
		c.Sandbox = storedSandbox(w.lastSandbox())
		if err := n.appendReleasing(c, ev); err != nil {
			log.Warn("fail pod: record the status", zap.Error(err))
			return false
		}
		w.noteStatus(status)
		return true
	}()
	if done {
		w.kickSelf()
	}
	return done
}

// noteStorageUsage keeps the last measurement for the metrics.
func (n *Node) noteStorageUsage(usage map[types.UID]int64) {
	n.usageMu.Lock()
	n.usage = usage
	n.usageMu.Unlock()
}

// podUsage is one pod's last measured local storage.
type podUsage struct {
	ref   store.PodRef
	bytes int64
}

// storageUsages returns the last measurement of the pods the node still
// holds.
func (n *Node) storageUsages() []podUsage {
	n.usageMu.Lock()
	usage := n.usage
	n.usageMu.Unlock()
	out := make([]podUsage, 0, len(usage))
	for uid, b := range usage {
		n.mu.Lock()
		w := n.workers[uid]
		n.mu.Unlock()
		if w == nil {
			continue
		}
		if ref, ok := w.podRef(); ok {
			out = append(out, podUsage{ref: ref, bytes: b})
		}
	}
	return out
}

// volumeTearer is the optional capability of a PodSyncer to tear down the
// volumes of a pod that no longer runs (syncer.Syncer has it).
type volumeTearer interface {
	TearDownVolumes(pod *corev1.Pod) error
}

// tearDownEvicted removes the volumes of an evicted pod once nothing of it
// runs, as the kubelet tears down the volumes of a terminated pod: the
// space its emptyDir volumes held is freed, its tmpfs volumes unmounted.
// Its record, status and logs stay until it is deleted. The caller holds
// the pod's worker lock.
func (n *Node) tearDownEvicted(ctx context.Context, pod *corev1.Pod) {
	t, ok := n.syncer.(volumeTearer)
	if !ok || !plan.IsEvicted(pod) {
		return
	}
	if err := t.TearDownVolumes(pod); err != nil {
		logx.From(ctx, n.log).Warn("tear down the volumes of an evicted pod", append(logx.Pod(pod), zap.Error(err))...)
	}
}
