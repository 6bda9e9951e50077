package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"time"

	"go.uber.org/zap"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Bounds of a run's waits, on a loaded 2-core machine.
const (
	// clusterReadyMax is the wait for every pod Ready beyond a second
	// per pod.
	clusterReadyMax = 3 * time.Minute
	// clusterDeleteMax bounds the wait for a deleted pod's replacement and
	// its object gone: its grace period (30 s) and then some.
	clusterDeleteMax = 2 * time.Minute
	// clusterGoneMax is the wait for every pod object gone after a scale
	// to 0, beyond the grace period and a second per pod.
	clusterGoneMax = 2 * time.Minute
)

// workload runs r on node's Deployment: scaled 0 → r.pods until every
// pod is Ready, one pod deleted until its replacement is Ready and its
// object gone, kubectl logs and kubectl exec on a pod samples times each,
// and the Deployment scaled back to 0 until every pod object is gone. A
// watch of the Deployment's pods times each step on the benchmark's
// clock.
func (e *clusterEnv) workload(ctx context.Context, log *zap.Logger, node clusterNode, samples int, r *clusterRun) error {
	name := deploymentName(node)
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	pw, err := watchPods(wctx, e.kc, clusterNamespace, "app="+name)
	if err != nil {
		return fmt.Errorf("watch pods: %w", err)
	}
	cpu0 := e.cpuSnapshot(node)
	start := time.Now()
	if err := e.scale(ctx, name, r.pods); err != nil {
		return err
	}
	readyMax := clusterReadyMax + time.Duration(r.pods)*time.Second
	var last time.Time
	if err := waitUntil(ctx, readyMax, func() (bool, error) {
		n, t, err := pw.readySince(start)
		last = t
		if err != nil || n >= r.pods {
			return true, err
		}
		return false, fmt.Errorf("%d of %d pods Ready", n, r.pods)
	}); err != nil {
		return fmt.Errorf("scale to %d: %w", r.pods, err)
	}
	r.allReady, r.latencies = msOf(last.Sub(start)), pw.readyLatencies()
	r.noteCPU(&r.upCPU, cpu0, e.cpuSnapshot(node))
	log.Info("all pods ready", zap.Int("pods", r.pods), zap.Duration("took", last.Sub(start).Round(time.Millisecond)))

	if err := e.deleteOne(ctx, pw, r); err != nil {
		return err
	}
	pod, err := pw.aReadyPod()
	if err != nil {
		return err
	}
	for _, c := range []struct {
		out  *[]float64
		args []string
	}{{&r.logs, []string{"logs", pod}}, {&r.exec, []string{"exec", pod, "--", "true"}}} {
		for range samples {
			ms, err := e.kubectl(ctx, c.args...)
			if err != nil {
				return err
			}
			*c.out = append(*c.out, ms)
		}
	}

	cpu0 = e.cpuSnapshot(node)
	down := time.Now()
	if err := e.scale(ctx, name, 0); err != nil {
		return err
	}
	goneMax := clusterGoneMax + 30*time.Second + time.Duration(r.pods)*time.Second
	if err := waitUntil(ctx, goneMax, func() (bool, error) {
		left, t, err := pw.present()
		last = t
		if err != nil || left == 0 {
			return true, err
		}
		return false, fmt.Errorf("%d pod objects left", left)
	}); err != nil {
		return fmt.Errorf("scale to 0: %w", err)
	}
	r.scaleDownGone = msOf(last.Sub(down))
	r.noteCPU(&r.downCPU, cpu0, e.cpuSnapshot(node))
	// The node's own clean-up of what it ran (sandboxes, cgroups) is not
	// the next run's.
	time.Sleep(settle)
	return nil
}

// reset scales node's Deployment to 0 after a failed run and waits until
// none of its pods is left, so that the next run starts from none.
func (e *clusterEnv) reset(ctx context.Context, node clusterNode) error {
	name := deploymentName(node)
	if err := e.scale(ctx, name, 0); err != nil {
		return err
	}
	return waitUntil(ctx, clusterGoneMax+30*time.Second+clusterMaxPods*time.Second, func() (bool, error) {
		list, err := e.kc.CoreV1().Pods(clusterNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return false, err
		}
		if n := len(list.Items); n > 0 {
			return false, fmt.Errorf("%d pods of %s left", n, name)
		}
		return true, nil
	})
}

// deleteOne deletes one Ready pod (with its grace period, as kubectl
// delete pod) and waits until its replacement is Ready and its object is
// gone.
func (e *clusterEnv) deleteOne(ctx context.Context, pw *podWatch, r *clusterRun) error {
	uid, name, err := pw.aReadyPodUID()
	if err != nil {
		return err
	}
	del := time.Now()
	if err := e.kc.CoreV1().Pods(clusterNamespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("delete pod %s: %w", name, err)
	}
	var replaced, gone time.Time
	if err := waitUntil(ctx, clusterDeleteMax, func() (bool, error) {
		var werr error
		pw.locked(func() {
			werr = pw.err
			gone = pw.gone[uid]
			for u, t := range pw.ready {
				if pw.added[u].After(del) && (replaced.IsZero() || t.Before(replaced)) {
					replaced = t
				}
			}
		})
		switch {
		case werr != nil:
			return true, werr
		case replaced.IsZero():
			return false, errors.New("no replacement Ready")
		case gone.IsZero():
			return false, fmt.Errorf("the object of pod %s not gone", name)
		}
		return true, nil
	}); err != nil {
		return fmt.Errorf("one pod deleted: %w", err)
	}
	r.replacement, r.deletedGone = msOf(replaced.Sub(del)), msOf(gone.Sub(del))
	return nil
}

// scale sets the replicas of Deployment name.
func (e *clusterEnv) scale(ctx context.Context, name string, n int) error {
	s := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: clusterNamespace},
		Spec: autoscalingv1.ScaleSpec{Replicas: int32(n)}}
	if _, err := e.kc.AppsV1().Deployments(clusterNamespace).UpdateScale(ctx, name, s, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("scale deployment %s to %d: %w", name, n, err)
	}
	return nil
}

// kubectl runs kubectl with the admin's kubeconfig and returns its wall
// time in ms: the round trip a user sees, the process's start included.
func (e *clusterEnv) kubectl(ctx context.Context, args ...string) (float64, error) {
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, e.kubectlBin, append([]string{"--kubeconfig", e.cluster.Kube.Kubeconfig, "-n", clusterNamespace}, args...)...)
	t := time.Now()
	out, err := cmd.CombinedOutput()
	ms := msOf(time.Since(t))
	if err != nil {
		return 0, fmt.Errorf("kubectl %v: %w: %s", args, err, tailString(string(out), 500))
	}
	return ms, nil
}

// waitUntil polls cond every 100 ms until it is done, ctx ends or
// timeout passes; the error then names cond's last answer.
func waitUntil(ctx context.Context, timeout time.Duration, cond func() (done bool, err error)) error {
	deadline := time.Now().Add(timeout)
	for {
		done, err := cond()
		if done {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s: %w", timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// locked runs f with w's lock held.
func (w *podWatch) locked(f func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f()
}

// readySince returns how many pods first seen after start are Ready, the
// last time one became so, and the watch's error.
func (w *podWatch) readySince(start time.Time) (n int, last time.Time, err error) {
	w.locked(func() {
		for uid, t := range w.ready {
			if w.added[uid].Before(start) {
				continue
			}
			n++
			if t.After(last) {
				last = t
			}
		}
		err = w.err
	})
	return n, last, err
}

// readyLatencies are each Ready pod's first sight → Ready, in ms.
func (w *podWatch) readyLatencies() []float64 {
	var out []float64
	w.locked(func() {
		for uid, t := range w.ready {
			out = append(out, msOf(t.Sub(w.added[uid])))
		}
	})
	return out
}

// aReadyPodUID is a Ready pod whose object is not gone.
func (w *podWatch) aReadyPodUID() (types.UID, string, error) {
	var uid types.UID
	var name string
	w.locked(func() {
		for u := range w.ready {
			if _, gone := w.gone[u]; !gone {
				uid, name = u, w.names[u]
				return
			}
		}
	})
	if uid == "" {
		return "", "", errors.New("no Ready pod")
	}
	return uid, name, nil
}

func (w *podWatch) aReadyPod() (string, error) {
	_, name, err := w.aReadyPodUID()
	return name, err
}

// present returns how many pods seen are not gone, the last time one
// went, and the watch's error.
func (w *podWatch) present() (left int, last time.Time, err error) {
	w.locked(func() {
		for uid := range w.added {
			t, gone := w.gone[uid]
			if !gone {
				left++
			} else if t.After(last) {
				last = t
			}
		}
		err = w.err
	})
	return left, last, err
}
