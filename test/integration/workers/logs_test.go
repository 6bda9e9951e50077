//go:build integration

package workers_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/logs"
	"github.com/podsync/podsync/internal/testing/localcri/localcritest"
)

// follower collects the lines a following ContainerLogs call emits.
type follower struct {
	mu    sync.Mutex
	lines []string
	done  chan error
	stop  context.CancelFunc
}

func (e *env) follow(pod *corev1.Pod, container string) *follower {
	ctx, cancel := context.WithCancel(e.ctx)
	f := &follower{done: make(chan error, 1), stop: cancel}
	go func() {
		f.done <- e.node.Logs().ContainerLogs(ctx, engine.LogsRequest{
			Namespace: pod.Namespace, Name: pod.Name, Container: container,
			Options: logs.Options{Follow: true, PollInterval: 20 * time.Millisecond},
		}, func(l logs.Line) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.lines = append(f.lines, string(l.Content))
			return nil
		})
	}()
	return f
}

func (f *follower) snapshot() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.lines...)
}

func (f *follower) end(t *testing.T) []string {
	t.Helper()
	f.stop()
	if err := <-f.done; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("follow ended with %v", err)
	}
	return f.snapshot()
}

func (e *env) read(pod *corev1.Pod, req engine.LogsRequest) []logs.Line {
	e.t.Helper()
	req.Namespace, req.Name = pod.Namespace, pod.Name
	var out []logs.Line
	if err := e.node.Logs().ContainerLogs(e.ctx, req, func(l logs.Line) error { out = append(out, l); return nil }); err != nil {
		e.t.Fatalf("ContainerLogs: %v", err)
	}
	return out
}

func contents(ls []logs.Line) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = string(l.Content)
	}
	return out
}

// TestLogsFollowAcrossRestarts: following a crash-looping container gives
// every instance's lines, exactly once and in order; previous reads the
// instance before the newest.
func TestLogsFollowAcrossRestarts(t *testing.T) {
	e := newEnv(t)
	script := `n=$(cat /data/n 2>/dev/null || echo 0); n=$((n+1)); echo $n > /data/n; ` +
		`for i in 1 2 3; do echo run$n-line$i; done; sleep 0.3; exit 1`
	c := localcritest.Shell("app", script)
	c.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	pod := e.newPod("", c)
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	e.apply(pod)
	f := e.follow(pod, "app")
	var want []string
	for n := 1; n <= 3; n++ {
		for i := 1; i <= 3; i++ {
			want = append(want, fmt.Sprintf("run%d-line%d", n, i))
		}
	}
	e.eventually("three instances' lines", func() bool { return len(f.snapshot()) >= len(want) })
	got := f.end(t)
	if diff := cmp.Diff(want, got[:len(want)]); diff != "" {
		t.Errorf("followed lines (-want +got):\n%s", diff)
	}
	for _, l := range got[len(want):] {
		if !strings.HasPrefix(l, "run4-") && !strings.HasPrefix(l, "run5-") {
			t.Errorf("unexpected line after the third instance: %q", l)
		}
	}

	prev := contents(e.read(pod, engine.LogsRequest{Container: "app", Previous: true}))
	cur := contents(e.read(pod, engine.LogsRequest{Container: "app"}))
	if len(prev) != 3 || len(cur) == 0 || prev[0][:4] == cur[0][:4] {
		t.Errorf("previous %v and current %v, want two different instances' lines", prev, cur)
	}
}

// TestLogsTailAndSince: tail and since select exactly the lines written.
func TestLogsTailAndSince(t *testing.T) {
	e := newEnv(t)
	pod := e.newPod("", localcritest.Busybox("app", "/bin/sh", "-c", "for i in 0 1 2 3 4 5 6 7 8 9; do echo line-$i; sleep 0.05; done"))
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	e.apply(pod)
	e.eventually("the pod succeeds", func() bool { return e.status(pod).Phase == corev1.PodSucceeded })

	all := e.read(pod, engine.LogsRequest{})
	var want []string
	for i := range 10 {
		want = append(want, fmt.Sprintf("line-%d", i))
	}
	if diff := cmp.Diff(want, contents(all)); diff != "" {
		t.Fatalf("all lines (-want +got):\n%s", diff)
	}
	tail := e.read(pod, engine.LogsRequest{Options: logs.Options{TailLines: ptr.To[int64](3)}})
	if diff := cmp.Diff(want[7:], contents(tail)); diff != "" {
		t.Errorf("tail 3 (-want +got):\n%s", diff)
	}
	since := e.read(pod, engine.LogsRequest{Options: logs.Options{SinceTime: all[6].Time}})
	if diff := cmp.Diff(want[6:], contents(since)); diff != "" {
		t.Errorf("since line 6 (-want +got):\n%s", diff)
	}
	// A finished pod's follow returns once its output is read.
	f := e.follow(pod, "")
	e.eventually("follow of a finished pod ends", func() bool {
		select {
		case err := <-f.done:
			f.done <- err
			return true
		default:
			return false
		}
	})
	if diff := cmp.Diff(want, f.end(t)); diff != "" {
		t.Errorf("follow of a finished pod (-want +got):\n%s", diff)
	}
}

// TestLogsFollowAcrossRotation: a follower sees every line once, in order,
// while the Node rotates the file underneath it.
func TestLogsFollowAcrossRotation(t *testing.T) {
	e := newEnv(t, func(o *engine.NodeOptions) {
		o.LogRotation = engine.LogRotation{MaxSize: 300, MaxFiles: 5, Period: 100 * time.Millisecond}
	})
	pod := e.newPod("", localcritest.Shell("app", "i=0; while :; do i=$((i+1)); echo tick-$i; sleep 0.02; done"))
	e.apply(pod)
	f := e.follow(pod, "app")
	rotated := func() bool {
		m, _ := filepath.Glob(filepath.Join(criconfig.PodLogDirectory(pod, e.cfg), "app", "0.log.*"))
		return len(m) >= 2
	}
	e.eventually("two rotations", rotated)
	e.eventually("lines after the rotations", func() bool { return len(f.snapshot()) >= 80 })
	got := f.end(t)
	for i, l := range got {
		if want := fmt.Sprintf("tick-%d", i+1); l != want {
			t.Fatalf("line %d = %q, want %q (lines %v)", i, l, want, got)
		}
	}
}
