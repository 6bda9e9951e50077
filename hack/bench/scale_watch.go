package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// podWatch records, per pod, when a watch of the pods first saw it, first
// saw it Running, first saw it Ready and saw it deleted.
type podWatch struct {
	mu      sync.Mutex
	added   map[types.UID]time.Time
	running map[types.UID]time.Time
	ready   map[types.UID]time.Time
	gone    map[types.UID]time.Time
	names   map[types.UID]string
	err     error
}

func newPodWatch() *podWatch {
	return &podWatch{added: map[types.UID]time.Time{}, running: map[types.UID]time.Time{}, ready: map[types.UID]time.Time{},
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
