//go:build integration

package workers_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/plan"
	"github.com/podsync/podsync/engine/store"
	"github.com/podsync/podsync/engine/syncer"
	"github.com/podsync/podsync/internal/testing/localcri/localcritest"
)

// TestKilledContainerRestartsAndBacksOff: a container stopped from
// outside is restarted with no call; the second crash waits for the
// back-off (base 3 s here) before the next restart.
func TestKilledContainerRestartsAndBacksOff(t *testing.T) {
	e := newEnv(t, func(o *engine.NodeOptions) {
		o.Backoff = plan.BackoffPolicy{Base: 3 * time.Second, Cap: 6 * time.Second}
	})
	pod := e.newPod("", localcritest.Busybox("app"))
	e.apply(pod)
	e.eventually("running", func() bool { return e.running(pod, "app") != nil })

	first := e.running(pod, "app")
	localcritest.Crictl(t, inst, "stop", "--timeout", "0", first.ID)
	e.eventually("restarted after the first stop", func() bool {
		inst := e.running(pod, "app")
		return inst != nil && inst.ID != first.ID && inst.RestartCount == 1
	})

	second := e.running(pod, "app")
	localcritest.Crictl(t, inst, "stop", "--timeout", "0", second.ID)
	e.eventually("CrashLoopBackOff in the status", func() bool {
		w := containerStatus(e.status(pod), "app").State.Waiting
		return w != nil && w.Reason == plan.ReasonCrashLoopBackOff
	})
	if inst := e.view(pod).FindContainer("app"); inst.ID != second.ID {
		t.Fatalf("restarted during the back-off: %s", inst.ID)
	}
	e.eventually("restarted after the back-off", func() bool {
		inst := e.running(pod, "app")
		return inst != nil && inst.RestartCount == 2
	})
	v := e.view(pod)
	third := v.FindContainer("app")
	var stopped *model.ContainerInstance
	for i := range v.Containers {
		if v.Containers[i].ID == second.ID {
			stopped = &v.Containers[i]
		}
	}
	if stopped == nil {
		t.Fatal("the stopped instance was removed")
	}
	if gap := third.StartedAt.Sub(stopped.FinishedAt); gap < 3*time.Second {
		t.Errorf("restarted %s after the second crash, before the 3 s back-off", gap)
	}
	if ev := e.events(pod); !slices.Contains(ev, engine.EventBackOff) {
		t.Errorf("no BackOff event in %v", ev)
	}
}

// TestNeverPodFailsAndStaysDead: under restartPolicy Never a failed
// container stays dead and the phase becomes Failed.
func TestNeverPodFailsAndStaysDead(t *testing.T) {
	e := newEnv(t)
	pod := e.newPod("", localcritest.Busybox("app", "/bin/sh", "-c", "exit 3"))
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	e.apply(pod)
	e.eventually("phase Failed", func() bool { return e.status(pod).Phase == corev1.PodFailed })
	e.eventually("sandbox stopped", func() bool {
		v := e.view(pod)
		return len(v.Sandboxes) == 1 && v.Sandboxes[0].State == model.SandboxNotReady
	})
	v := e.view(pod)
	if len(v.Containers) != 1 || v.Containers[0].ExitCode != 3 || v.Containers[0].RestartCount != 0 {
		t.Errorf("containers %+v, want one exited with 3", v.Containers)
	}
	cs := containerStatus(e.status(pod), "app")
	if cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 3 {
		t.Errorf("status %+v", cs.State)
	}
}

// execProbe is a probe running cmd every second that decides at once.
func execProbe(cmd ...string) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: cmd}},
		PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 1,
	}
}

// TestLivenessProbeRestarts: an exec liveness probe that starts failing
// restarts the container.
func TestLivenessProbeRestarts(t *testing.T) {
	e := newEnv(t)
	c := localcritest.Shell("app", "touch /tmp/healthy; while :; do sleep 1; done")
	c.LivenessProbe = execProbe("cat", "/tmp/healthy")
	pod := e.newPod("", c)
	e.apply(pod)
	e.eventually("running", func() bool { return e.running(pod, "app") != nil })
	first := e.running(pod, "app")

	localcritest.Crictl(t, inst, "exec", first.ID, "rm", "/tmp/healthy")
	e.eventually("restarted by the liveness probe", func() bool {
		inst := e.running(pod, "app")
		return inst != nil && inst.ID != first.ID && inst.RestartCount == 1
	})
	// The pass records its events when it ends.
	e.eventually("Unhealthy and Killing events", func() bool {
		ev := e.events(pod)
		return slices.Contains(ev, engine.EventUnhealthy) && slices.Contains(ev, engine.EventKilling)
	})
}

// TestReadinessProbeGatesReady: the pod is Ready only while its readiness
// probe passes, and after a restart of podsync only once it passed again.
func TestReadinessProbeGatesReady(t *testing.T) {
	e := newEnv(t)
	c := localcritest.Shell("app", "while :; do sleep 1; done")
	c.ReadinessProbe = execProbe("cat", "/tmp/ready")
	pod := e.newPod("", c)
	e.apply(pod)
	e.eventually("running", func() bool { return e.running(pod, "app") != nil })
	if st := e.status(pod); condition(st, corev1.PodReady) != corev1.ConditionFalse {
		t.Fatalf("Ready = %s before the probe passed", condition(st, corev1.PodReady))
	}
	id := e.running(pod, "app").ID
	localcritest.Crictl(t, inst, "exec", id, "touch", "/tmp/ready")
	e.eventually("Ready", func() bool {
		st := e.status(pod)
		return condition(st, corev1.PodReady) == corev1.ConditionTrue && containerStatus(st, "app").Ready
	})
	// After a restart of podsync the pod is not ready until the probe
	// passes again.
	r := e.st.Revision()
	e.stop()
	e.start()
	e.eventually("Ready again after the restart", func() bool {
		entries, err := e.st.Since(r)
		if err != nil {
			t.Fatal(err)
		}
		sawUnready := false
		for _, en := range entries {
			if en.Kind == store.KindStatus && en.Pod.UID == pod.UID && condition(*en.Status, corev1.PodReady) == corev1.ConditionFalse {
				sawUnready = true
			}
		}
		return sawUnready && condition(e.status(pod), corev1.PodReady) == corev1.ConditionTrue
	})
	localcritest.Crictl(t, inst, "exec", id, "rm", "/tmp/ready")
	e.eventually("not Ready again", func() bool { return condition(e.status(pod), corev1.PodReady) == corev1.ConditionFalse })
	if inst := e.running(pod, "app"); inst == nil || inst.ID != id {
		t.Error("a readiness failure restarted the container")
	}
}

// TestStartupProbeHoldsLivenessOff: a failing liveness probe does nothing
// while the startup probe has not passed; once it passes, liveness runs
// and restarts the container.
func TestStartupProbeHoldsLivenessOff(t *testing.T) {
	e := newEnv(t)
	c := localcritest.Shell("app", "while :; do sleep 1; done")
	c.StartupProbe = execProbe("cat", "/tmp/started")
	c.StartupProbe.FailureThreshold = 60
	c.LivenessProbe = execProbe("cat", "/tmp/alive") // never there
	pod := e.newPod("", c)
	e.apply(pod)
	e.eventually("running", func() bool { return e.running(pod, "app") != nil })
	first := e.running(pod, "app")
	// Three liveness periods with a failing liveness probe, held off.
	e.eventually("3 s of running", func() bool { return time.Since(first.StartedAt) > 3*time.Second })
	if inst := e.running(pod, "app"); inst == nil || inst.ID != first.ID {
		t.Fatal("restarted before the startup probe passed")
	}
	if cs := containerStatus(e.status(pod), "app"); cs.Started == nil || *cs.Started {
		t.Errorf("started = %v before the startup probe passed", cs.Started)
	}
	localcritest.Crictl(t, inst, "exec", first.ID, "touch", "/tmp/started")
	e.eventually("restarted by liveness once started", func() bool {
		inst := e.running(pod, "app")
		return inst != nil && inst.ID != first.ID
	})
}

// TestRestartMidwayThrough20Pods: a restart of the Node while 20 pods
// start: all converge, with exactly one ready sandbox each, no object
// without podsync's label, and no restart of a healthy container.
func TestRestartMidwayThrough20Pods(t *testing.T) {
	e := newEnv(t)
	var pods []*corev1.Pod
	for i := range 20 {
		pods = append(pods, e.newPod(fmt.Sprint(i), localcritest.Busybox("app"), localcritest.Busybox("sidecar")))
	}
	actx, cancel := context.WithCancel(e.ctx)
	var wg sync.WaitGroup
	for _, p := range pods {
		wg.Go(func() { _, _ = e.node.Apply(actx, p, nil, nil, nil) })
	}
	e.eventually("some pods running, all stored", func() bool {
		recs, _, _ := e.node.List(e.ctx, store.Filter{})
		started := 0
		for _, p := range pods {
			if e.running(p, "app") != nil {
				started++
			}
		}
		return len(recs) == len(pods) && started >= 3
	})
	e.stop()
	cancel()
	wg.Wait()
	// What ran at the restart must keep running.
	before := map[string]int32{}
	for _, p := range pods {
		for _, c := range e.view(p).Containers {
			if c.State == model.ContainerRunning {
				before[c.ID] = c.RestartCount
			}
		}
	}
	if len(before) == 0 || len(before) == 2*len(pods) {
		t.Logf("%d of %d containers ran at the restart", len(before), 2*len(pods))
	}

	e.start()
	e.eventually("all pods converged", func() bool {
		for _, p := range pods {
			if e.running(p, "app") == nil || e.running(p, "sidecar") == nil {
				return false
			}
			if e.status(p).Phase != corev1.PodRunning {
				return false
			}
		}
		return true
	})
	for _, p := range pods {
		v := e.view(p)
		ready := 0
		for _, sb := range v.Sandboxes {
			if sb.State == model.SandboxReady {
				ready++
			}
		}
		if ready != 1 {
			t.Errorf("pod %s: %d ready sandboxes", p.Name, ready)
		}
		for _, c := range v.Containers {
			if rc, ok := before[c.ID]; ok && (c.State != model.ContainerRunning || c.RestartCount != rc) {
				t.Errorf("pod %s: healthy container %s (%s) disturbed: %s, restart count %d", p.Name, c.Name, c.ID, c.State, c.RestartCount)
			}
		}
	}
	sbs, err := e.rt.ListPodSandbox(e.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctrs, err := e.rt.ListContainers(e.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range sbs {
		if !model.IsManaged(sb.GetLabels()) {
			t.Errorf("sandbox %s has no podsync label", sb.GetId())
		}
	}
	for _, c := range ctrs {
		if !model.IsManaged(c.GetLabels()) {
			t.Errorf("container %s has no podsync label", c.GetId())
		}
	}
}

// TestWatchAcrossRestart: a watch from revision R after a restart delivers
// every change after R once, in order; a compacted R fails with
// ErrCompacted.
func TestWatchAcrossRestart(t *testing.T) {
	e := newEnv(t)
	a := e.newPod("a", localcritest.Busybox("app"))
	e.apply(a)
	e.eventually("a running", func() bool { return e.status(a).Phase == corev1.PodRunning })
	r := e.st.Revision()
	b := e.newPod("b", localcritest.Busybox("app"))
	e.apply(b)

	e.stop()
	e.start()
	e.eventually("b running", func() bool { return e.status(b).Phase == corev1.PodRunning })

	w, err := e.node.Watch(e.ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	// A change after the watch started: a's deletion.
	if res, err := e.node.Delete(e.ctx, a.Namespace, a.Name, "", ptr.To[int64](0)); err != nil || !res.Found {
		t.Fatalf("Delete = %v, %v", res.Found, err)
	}
	var got []store.Entry
	for done := false; !done; {
		select {
		case en, ok := <-w.Events():
			if !ok {
				t.Fatalf("watch ended: %v", w.Err())
			}
			got = append(got, en)
			done = en.Kind == store.KindDeleted && en.Pod.UID == a.UID
		case <-e.ctx.Done():
			t.Fatal("no deletion of a")
		}
	}
	want, err := e.st.Since(r)
	if err != nil {
		t.Fatal(err)
	}
	want = want[:len(got)]
	for i := range got {
		if got[i].Revision != want[i].Revision || got[i].Kind != want[i].Kind || got[i].Pod != want[i].Pod {
			t.Fatalf("entry %d: got revision %d %s of %s, want %d %s of %s", i,
				got[i].Revision, got[i].Kind, got[i].Pod.Name, want[i].Revision, want[i].Kind, want[i].Pod.Name)
		}
		if got[i].Revision <= r || (i > 0 && got[i].Revision <= got[i-1].Revision) {
			t.Fatalf("entry %d: revision %d out of order", i, got[i].Revision)
		}
	}
	if !slices.ContainsFunc(got, func(en store.Entry) bool { return en.Pod.UID == b.UID && en.Kind == store.KindStatus }) {
		t.Error("the watch missed b's status")
	}

	if err := e.st.Compact(r + 1); err != nil {
		t.Fatal(err)
	}
	if _, err := e.node.Watch(e.ctx, r); !errors.Is(err, errdefs.ErrCompacted) {
		t.Errorf("Watch from a compacted revision = %v, want ErrCompacted", err)
	}
}

// TestGCKeepsTheNewestDeadInstance: of a crash-looping container, the
// newest dead instance stays and older ones are removed.
func TestGCKeepsTheNewestDeadInstance(t *testing.T) {
	e := newEnv(t, func(o *engine.NodeOptions) {
		// Every run of 1 s outlasts ResetAfter: no crash-loop run to keep.
		o.Backoff = plan.BackoffPolicy{Base: 100 * time.Millisecond, Cap: 200 * time.Millisecond, ResetAfter: 500 * time.Millisecond}
	})
	pod := e.newPod("", localcritest.Busybox("app", "/bin/sh", "-c", "sleep 1; exit 1"))
	e.apply(pod)
	seen := map[string]bool{}
	e.eventually("three restarts", func() bool {
		for _, c := range e.view(pod).Containers {
			seen[c.ID] = true
		}
		inst := e.view(pod).FindContainer("app")
		return inst != nil && inst.RestartCount >= 3
	})
	e.eventually("only the newest and the newest dead instance left", func() bool {
		ids := localcritest.CrictlIDs(t, inst, "ps", "-a", "--label", "io.kubernetes.pod.uid="+string(pod.UID))
		return len(ids) <= 2
	})
	v := e.view(pod)
	var dead []model.ContainerInstance
	for _, c := range v.Containers {
		if c.State == model.ContainerExited {
			dead = append(dead, c)
		}
	}
	newest := v.Containers[0]
	switch {
	case newest.State == model.ContainerExited && len(dead) != 1:
		t.Errorf("newest exited: %d dead instances kept", len(dead))
	case newest.State != model.ContainerExited && (len(dead) != 1 || dead[0].RestartCount != newest.RestartCount-1):
		t.Errorf("kept dead instances %+v beside %+v, want the newest dead one", dead, newest)
	}
	if len(seen) < 3 {
		t.Errorf("saw %d instances", len(seen))
	}
}

// TestDeleteLeavesNothing: Delete removes every sandbox and container of
// the pod (crictl pods, which lists every state, and crictl ps -a) and
// its directories.
func TestDeleteLeavesNothing(t *testing.T) {
	e := newEnv(t)
	pod := e.newPod("", localcritest.Busybox("app"), localcritest.Busybox("sidecar"))
	e.apply(pod)
	e.eventually("running", func() bool { return e.status(pod).Phase == corev1.PodRunning })
	label := "io.kubernetes.pod.uid=" + string(pod.UID)
	if len(localcritest.CrictlIDs(t, inst, "pods", "--label", label)) == 0 {
		t.Fatal("crictl shows no sandbox")
	}
	res, err := e.node.Delete(e.ctx, pod.Namespace, pod.Name, string(pod.UID), nil)
	found, steps := res.Found, res.Steps
	if err != nil || !found {
		t.Fatalf("Delete = %v, %v", found, err)
	}
	if !slices.ContainsFunc(steps, func(s syncer.StepResult) bool { return s.Action == syncer.ActionKillContainer }) {
		t.Errorf("no kill in %d steps", len(steps))
	}
	if ids := localcritest.CrictlIDs(t, inst, "pods", "--label", label); len(ids) != 0 {
		t.Errorf("crictl pods -a: %v", ids)
	}
	if ids := localcritest.CrictlIDs(t, inst, "ps", "-a", "--label", label); len(ids) != 0 {
		t.Errorf("crictl ps -a: %v", ids)
	}
	for _, d := range []string{criconfig.PodDir(pod, e.cfg), criconfig.PodLogDirectory(pod, e.cfg)} {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s not removed: %v", d, err)
		}
	}
	if _, err := e.node.Get(e.ctx, pod.Namespace, pod.Name); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Get = %v, want ErrNotFound", err)
	}
}
