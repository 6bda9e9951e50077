package plan

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsync/podsync/engine/model"
)

// The kubelet's back-off defaults (pkg/kubelet/kubelet.go backOffPeriod and
// MaxContainerBackOff; images.NewImageManager uses the same).
const (
	DefaultBackoffBase = 10 * time.Second
	DefaultBackoffCap  = 300 * time.Second
)

// BackoffPolicy is the crash-loop and image-pull back-off: Base doubling
// per failure up to Cap. The zero value means the kubelet's defaults.
type BackoffPolicy struct {
	// Base is the first delay; 0 means DefaultBackoffBase.
	Base time.Duration
	// Cap is the largest delay; 0 means DefaultBackoffCap.
	Cap time.Duration
	// ResetAfter is how long a container must run for its back-off to
	// start over; 0 means 2×Cap (10 minutes by default), the window after
	// which the kubelet's flowcontrol.Backoff forgets an entry.
	ResetAfter time.Duration
}

func (p BackoffPolicy) base() time.Duration {
	if p.Base > 0 {
		return p.Base
	}
	return DefaultBackoffBase
}

// MaxDelay is Cap, or DefaultBackoffCap when Cap is 0.
func (p BackoffPolicy) MaxDelay() time.Duration {
	if p.Cap > 0 {
		return p.Cap
	}
	return DefaultBackoffCap
}

func (p BackoffPolicy) resetAfter() time.Duration {
	if p.ResetAfter > 0 {
		return p.ResetAfter
	}
	return 2 * p.MaxDelay()
}

// Delay returns the delay after n consecutive failures, n ≥ 1: Base×2^(n−1),
// at most Cap. It is 0 for n ≤ 0.
func (p BackoffPolicy) Delay(n int) time.Duration {
	if n <= 0 {
		return 0
	}
	d := p.base()
	for i := 1; i < n; i++ {
		d *= 2
		if d >= p.MaxDelay() {
			return p.MaxDelay()
		}
	}
	return min(d, p.MaxDelay())
}

// BackoffKey identifies a back-off: the kubelet keys crash-loop back-off by
// pod and container hash (getStableKey), so a changed spec starts over, and
// image-pull back-off by pod and image (its image manager's
// podUID_image), shared by the pod's containers of that image.
type BackoffKey struct {
	PodUID types.UID
	// Container and SpecHash key a crash-loop back-off.
	Container string
	SpecHash  string
	// Image keys an image-pull back-off.
	Image string `json:",omitempty"`
}

// Backoff is the state of one container's back-off.
type Backoff struct {
	Key BackoffKey
	// Failures is the length of the current run of failures.
	Failures int
	// Delay is the delay the current failure imposes.
	Delay time.Duration
	// Until is when the next attempt may be made; zero if none is pending.
	Until time.Time
}

// Active reports whether an attempt at now must wait.
func (b Backoff) Active(now time.Time) bool { return now.Before(b.Until) }

// CrashLoopBackoff computes the crash-loop back-off of container c from
// the runtime view alone, as the kubelet's doBackOff with its
// flowcontrol.Backoff would have it: the kubelet restarts a container the
// first time it exits at once, then waits Base, 2×Base, … up to Cap,
// measured from the newest exited instance's FinishedAt. An instance that
// ran longer than ResetAfter starts the count over, and so does a changed
// spec hash (the key changes).
//
// The run of failures is counted from the restart-count annotations of the
// newest exited instances with the current hash, so instances removed by
// garbage collection in between still count.
func CrashLoopBackoff(pod *corev1.Pod, c *corev1.Container, view *model.RuntimeView, p BackoffPolicy) Backoff {
	hash := model.ContainerHash(pod, c)
	b := Backoff{Key: BackoffKey{PodUID: pod.UID, Container: c.Name, SpecHash: hash}}
	var insts []*model.ContainerInstance
	for i := range view.Containers {
		if view.Containers[i].Name == c.Name {
			insts = append(insts, &view.Containers[i])
		}
	}
	newest, first := crashLoopRun(insts, sameDefinition(pod, c), p)
	if newest == nil {
		return b
	}
	b.Failures = int(newest.RestartCount-first.RestartCount) + 1
	if b.Failures < 1 {
		b.Failures = 1
	}
	// The first failure of a run restarts at once.
	b.Delay = p.Delay(b.Failures - 1)
	if b.Delay > 0 {
		b.Until = newest.FinishedAt.Add(b.Delay)
	}
	return b
}

// crashLoopRun walks a container's instances, newest first, as the
// kubelet's doBackOff does: from the newest exited instance (nil if it is
// not of the same definition) back through the exited instances of it,
// stopping after one that ran longer than ResetAfter. It returns that
// newest instance and the oldest of the run. CrashLoopBackoff counts the
// run from them; the garbage collection keeps the run's first instance.
func crashLoopRun(insts []*model.ContainerInstance, same func(*model.ContainerInstance) bool, p BackoffPolicy) (newest, first *model.ContainerInstance) {
	for _, inst := range insts {
		if newest == nil {
			// doBackOff looks at the newest exited instance.
			if inst.State != model.ContainerExited {
				continue
			}
			if !same(inst) {
				return nil, nil
			}
			newest = inst
		}
		if inst.State != model.ContainerExited || !same(inst) {
			break
		}
		first = inst
		if !inst.StartedAt.IsZero() && inst.FinishedAt.Sub(inst.StartedAt) > p.resetAfter() {
			break
		}
	}
	return newest, first
}

// sameDefinition reports whether an instance was created from c's
// definition as far as the back-off goes: podsync's hash is the same, or
// differs in resources only (the kubelet's hash, of the name and image,
// leaves them out, so a resize keeps the back-off).
func sameDefinition(pod *corev1.Pod, c *corev1.Container) func(*model.ContainerInstance) bool {
	hash := model.ContainerHash(pod, c)
	var spec *model.ContainerSpec
	return func(inst *model.ContainerInstance) bool {
		if inst.Hash == hash {
			return true
		}
		if inst.Spec == nil {
			return false
		}
		if spec == nil {
			spec = model.NewContainerSpec(pod, c)
		}
		changed := model.ChangedFields(inst.Spec, spec)
		return len(changed) == 1 && changed[0] == "resources"
	}
}

// ImagePullBackoff computes the image-pull back-off of container c's
// image from the pull failures the view records: after n consecutive
// failures the next pull waits Base×2^(n−1), at most Cap, from the last
// failure, as the kubelet's image manager does with its
// flowcontrol.Backoff. Every container of the pod with the same image has
// the same back-off.
func ImagePullBackoff(pod *corev1.Pod, c *corev1.Container, view *model.RuntimeView, p BackoffPolicy) Backoff {
	return ImagePullBackoffOf(pod, c.Image, view.PullFailure(c.Image), p)
}

// ImagePullBackoffOf is ImagePullBackoff for image with its failure f (nil
// if none).
func ImagePullBackoffOf(pod *corev1.Pod, image string, f *model.PullFailure, p BackoffPolicy) Backoff {
	b := Backoff{Key: BackoffKey{PodUID: pod.UID, Image: image}}
	if f == nil || f.Failures <= 0 {
		return b
	}
	b.Failures = f.Failures
	b.Delay = p.Delay(f.Failures)
	b.Until = f.At.Add(b.Delay)
	return b
}

// CrashLoopMessage is the kubelet's doBackOff message.
func CrashLoopMessage(pod *corev1.Pod, name string, d time.Duration) string {
	return fmt.Sprintf("back-off %s restarting failed container=%s pod=%s", d, name, model.PodString(pod))
}
