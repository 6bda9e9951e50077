package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// podWatch records, per pod, when a watch of the pods first saw it, first
// saw it bound to a node, first saw it Running, first saw it Ready and saw
// it deleted.
type podWatch struct {
	mu      sync.Mutex
	added   map[types.UID]time.Time
	bound   map[types.UID]time.Time
	node    map[types.UID]string
	running map[types.UID]time.Time
	ready   map[types.UID]time.Time
	gone    map[types.UID]time.Time
	names   map[types.UID]string
	err     error
}

func newPodWatch() *podWatch {
	return &podWatch{added: map[types.UID]time.Time{}, bound: map[types.UID]time.Time{}, node: map[types.UID]string{}, running: map[types.UID]time.Time{}, ready: map[types.UID]time.Time{},
		gone: map[types.UID]time.Time{}, names: map[types.UID]string{}}
}

// watchPods watches namespace's pods (those selector matches; every one
// when it is empty) from now until ctx ends, starting again from the
// last resource version when the API server ends a watch.
func watchPods(ctx context.Context, kc kubernetes.Interface, namespace, selector string) (*podWatch, error) {
	list, err := kc.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	w := newPodWatch()
	rv := list.ResourceVersion
	go func() {
		for ctx.Err() == nil {
			wi, err := kc.CoreV1().Pods(namespace).Watch(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: rv, AllowWatchBookmarks: true})
			if err != nil {
				w.fail(err)
				return
			}
			for ev := range wi.ResultChan() {
				now := time.Now()
				pod, ok := ev.Object.(*corev1.Pod)
				if !ok {
					if ev.Type == watch.Error {
						w.fail(fmt.Errorf("pod watch: %v", ev.Object))
					}
					continue
				}
				rv = pod.ResourceVersion
				if ev.Type == watch.Bookmark {
					continue
				}
				w.see(pod, now)
				if ev.Type == watch.Deleted {
					w.deleted(pod, now)
				}
			}
			wi.Stop()
		}
	}()
	return w, nil
}

func (w *podWatch) see(pod *corev1.Pod, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.added[pod.UID]; !ok {
		w.added[pod.UID] = now
	}
	if _, ok := w.bound[pod.UID]; !ok && pod.Spec.NodeName != "" {
		w.bound[pod.UID], w.node[pod.UID] = now, pod.Spec.NodeName
	}
	if _, ok := w.running[pod.UID]; !ok && pod.Status.Phase == corev1.PodRunning {
		w.running[pod.UID] = now
	}
	if _, ok := w.ready[pod.UID]; !ok && podReady(pod) {
		w.ready[pod.UID] = now
	}
	w.names[pod.UID] = pod.Name
}

func (w *podWatch) deleted(pod *corev1.Pod, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.gone[pod.UID]; !ok {
		w.gone[pod.UID] = now
	}
}

// podReady reports whether pod's Ready condition is True.
func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (w *podWatch) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
	}
}

// state returns how many pods were seen Running, the last time one was,
// and the watch's error.
func (w *podWatch) state() (int, time.Time, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var last time.Time
	for _, t := range w.running {
		if t.After(last) {
			last = t
		}
	}
	return len(w.running), last, w.err
}

// latencies are each Running pod's creation → Running as watched, in ms.
func (w *podWatch) latencies() []float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]float64, 0, len(w.running))
	for uid, t := range w.running {
		out = append(out, msOf(t.Sub(w.added[uid])))
	}
	return out
}

// split is each Running pod's startup in two, in ms, as watched:
// creation → bound to its node (the scheduler's share) and bound →
// Running (the node agent's). A pod seen Running before bound counts its
// whole startup as the scheduler's.
func (w *podWatch) split() (scheduled, started []float64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	scheduled, started = make([]float64, 0, len(w.running)), make([]float64, 0, len(w.running))
	for uid, t := range w.running {
		b, ok := w.bound[uid]
		if !ok || b.After(t) {
			b = t
		}
		scheduled, started = append(scheduled, msOf(b.Sub(w.added[uid]))), append(started, msOf(t.Sub(b)))
	}
	return scheduled, started
}

// writeTimeline writes each pod's line to path, in the order the pods were
// created: its name, node, the pod's rank on its node (1 for the first
// bound there) and its creation, binding and Running as watched, in ms
// since start (-1 when not seen): what a tail is made of.
func (w *podWatch) writeTimeline(path string, start time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	uids := make([]types.UID, 0, len(w.added))
	for uid := range w.added {
		uids = append(uids, uid)
	}
	at := func(m map[types.UID]time.Time, uid types.UID) float64 {
		if t, ok := m[uid]; ok {
			return msOf(t.Sub(start))
		}
		return -1
	}
	slices.SortFunc(uids, func(a, b types.UID) int { return w.added[a].Compare(w.added[b]) })
	byBinding := slices.Clone(uids)
	slices.SortStableFunc(byBinding, func(a, b types.UID) int { return cmp.Compare(at(w.bound, a), at(w.bound, b)) })
	rank, seen := map[types.UID]int{}, map[string]int{}
	for _, uid := range byBinding {
		if n, ok := w.node[uid]; ok {
			seen[n]++
			rank[uid] = seen[n]
		}
	}
	var b strings.Builder
	b.WriteString("pod\tnode\trank\tcreated_ms\tbound_ms\trunning_ms\n")
	for _, uid := range uids {
		fmt.Fprintf(&b, "%s\t%s\t%d\t%.1f\t%.1f\t%.1f\n", w.names[uid], w.node[uid], rank[uid],
			at(w.added, uid), at(w.bound, uid), at(w.running, uid))
	}
	return os.WriteFile(path, []byte(b.String()), 0o600)
}
