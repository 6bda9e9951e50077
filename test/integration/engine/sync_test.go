//go:build integration

package engine_test

import (
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/plan"
	"github.com/podsync/podsync/engine/syncer"
	"github.com/podsync/podsync/internal/testing/localcri/localcritest"
)

func TestNewPodRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pod := e.newPod("app")
	c := &pod.Spec.Containers[0]
	c.Env = []corev1.EnvVar{{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}}
	c.VolumeMounts = []corev1.VolumeMount{{Name: "conf", MountPath: "/etc/conf"}, {Name: "scratch", MountPath: "/scratch"}}
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "conf"}}}},
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	e.in.ConfigMaps = []*corev1.ConfigMap{{ObjectMeta: metav1.ObjectMeta{Name: "conf", Namespace: namespace}, Data: map[string]string{"greeting": "hello"}}}

	res := e.sync(pod)
	if got := steps(res.Steps); len(got) != 3 || got[0] != "CreatePodSandbox "+pod.Name+"_"+namespace+"("+string(pod.UID)+") NoSandbox" {
		t.Errorf("first pass steps %v", got)
	}
	res = e.until(pod, "running", e.running(pod))
	st := e.status(pod, res)
	if st.Phase != corev1.PodRunning || st.PodIP == "" || !inst.Subnet().Contains(mustAddr(t, st.PodIP)) {
		t.Fatalf("status phase %s pod IP %q, want Running with an IP in %s", st.Phase, st.PodIP, inst.Subnet())
	}
	// containerd names the image by one of its references (the local image
	// is also the registry's).
	if cs := st.ContainerStatuses[0]; cs.ImageID == "" || !strings.HasPrefix(cs.ContainerID, "containerd://") || cs.Image == "" {
		t.Errorf("container status %+v, want image, image ID and container ID", cs)
	}

	// crictl, the oracle, shows the pod's name and namespace.
	pods := localcritest.Crictl(t, inst, "pods", "--id", res.SandboxID)
	if !strings.Contains(pods, pod.Name) || !strings.Contains(pods, namespace) || !strings.Contains(pods, "Ready") {
		t.Errorf("crictl pods lacks the ready pod's name and namespace:\n%s", pods)
	}
	if ps := localcritest.Crictl(t, inst, "ps", "--pod", res.SandboxID); !strings.Contains(ps, "app") || !strings.Contains(ps, "Running") {
		t.Errorf("crictl ps lacks the running container:\n%s", ps)
	}

	// The container sees its hosts file, env, config map and emptyDir.
	id := newest(t, res, "app").ID
	for cmd, want := range map[string]string{
		"cat /etc/hosts":                        st.PodIP + "\t" + pod.Name,
		"echo $POD_IP":                          st.PodIP,
		"cat /etc/conf/greeting":                "hello",
		"echo x > /scratch/x && cat /scratch/x": "x",
	} {
		out, stderr, err := e.rt.ExecSync(e.ctx, id, []string{"/bin/sh", "-c", cmd}, 10*time.Second)
		if err != nil || !strings.Contains(string(out), want) {
			t.Errorf("%s: %q %q %v, want %q", cmd, out, stderr, err, want)
		}
	}
	if data, err := os.ReadFile(filepath.Join(criconfig.VolumeDir(pod, criconfig.VolumePluginEmptyDir, "scratch", e.cfg), "x")); err != nil || string(data) != "x\n" {
		t.Errorf("emptyDir on the host: %q, %v", data, err)
	}
	if again := e.sync(pod); len(again.Steps) != 0 {
		t.Errorf("a pass on a running pod did %v", steps(again.Steps))
	}
}

// stop stops a container from outside, as an operator would with crictl,
// and waits until the engine sees it exited.
func (e *env) stop(pod *corev1.Pod, res syncer.SyncResult, name string, timeout int) syncer.SyncResult {
	e.t.Helper()
	id := newest(e.t, res, name).ID
	localcritest.Crictl(e.t, inst, "stop", "--timeout", strconv.Itoa(timeout), id)
	var out syncer.SyncResult
	e.syncUntil(pod, name+" stopped", func(r syncer.SyncResult) bool {
		out = r
		for _, c := range r.View.Containers {
			if c.ID == id {
				return c.State == model.ContainerExited
			}
		}
		return false
	})
	return out
}

func TestOutsideStopUnderRestartPolicies(t *testing.T) {
	t.Parallel()
	t.Run("Always", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		pod := e.newPod("app")
		res := e.until(pod, "running", e.running(pod))
		old := newest(t, res, "app")
		localcritest.Crictl(t, inst, "stop", old.ID)
		all := e.syncUntil(pod, "restarted", func(r syncer.SyncResult) bool { return newest(t, r, "app").ID != old.ID })
		res = all[len(all)-1]
		if !hasStep(res, syncer.ActionStartContainer, "app", plan.ReasonExited) {
			t.Errorf("restart steps %v, want a start for Exited", steps(res.Steps))
		}
		if n := newest(t, res, "app"); n.RestartCount != 1 || n.State != model.ContainerRunning {
			t.Errorf("app = %+v, want running with restart count 1", n)
		}
		if cs := e.status(pod, res).ContainerStatuses[0]; cs.RestartCount != 1 || cs.LastTerminationState.Terminated == nil {
			t.Errorf("status %+v, want restart count 1 and the last termination", cs)
		}
		if ps := localcritest.Crictl(t, inst, "ps", "--pod", res.SandboxID, "--name", "app"); !strings.Contains(ps, "Running") {
			t.Errorf("crictl ps:\n%s", ps)
		}
	})
	t.Run("Never", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		pod := e.newPod("app")
		pod.Spec.RestartPolicy = corev1.RestartPolicyNever
		res := e.until(pod, "running", e.running(pod))
		e.stop(pod, res, "app", 2)
		res = e.sync(pod)
		if n := newest(t, res, "app"); n.RestartCount != 0 || n.State != model.ContainerExited {
			t.Errorf("app = %+v, want exited, not restarted", n)
		}
		for _, r := range []syncer.SyncResult{res, e.sync(pod)} {
			for _, s := range r.Steps {
				if s.Action == syncer.ActionStartContainer || s.Action == syncer.ActionCreatePodSandbox {
					t.Errorf("pass after the stop did %v", steps(r.Steps))
				}
			}
		}
		if st := e.status(pod, res); st.Phase != corev1.PodSucceeded {
			t.Errorf("phase = %s, want Succeeded (exit 0 after SIGTERM)", st.Phase)
		}
	})
	t.Run("OnFailure", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		pod := e.newPod("clean", "killed")
		pod.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
		res := e.until(pod, "running", e.running(pod))
		// SIGTERM: the default command exits 0, not restarted.
		e.stop(pod, res, "clean", 5)
		res = e.sync(pod)
		if n := newest(t, res, "clean"); n.State != model.ContainerExited || n.ExitCode != 0 || n.RestartCount != 0 {
			t.Errorf("clean = %+v, want exited 0 and not restarted", n)
		}
		// SIGKILL (timeout 0): exit 137, restarted.
		killed := newest(t, res, "killed")
		localcritest.Crictl(t, inst, "stop", "--timeout", "0", killed.ID)
		all := e.syncUntil(pod, "killed restarted", func(r syncer.SyncResult) bool { return newest(t, r, "killed").ID != killed.ID })
		res = all[len(all)-1]
		if n := newest(t, res, "killed"); n.RestartCount != 1 {
			t.Errorf("killed = %+v, want restart count 1", n)
		}
		if n := newest(t, res, "clean"); n.RestartCount != 0 {
			t.Errorf("clean restarted: %+v", n)
		}
		for _, r := range all {
			for _, s := range r.Steps {
				if s.Action == syncer.ActionStartContainer && s.Target == "killed" && s.Err == nil {
					if prev := lastExit(r, "killed"); prev != 137 {
						t.Errorf("killed exited %d before its restart, want 137", prev)
					}
				}
			}
		}
	})
}

// lastExit returns the exit code of the newest exited instance.
func lastExit(res syncer.SyncResult, name string) int32 {
	for _, c := range res.View.Containers {
		if c.Name == name && c.State == model.ContainerExited {
			return c.ExitCode
		}
	}
	return -1
}

// crashLoop crashes the app container of a running pod (crictl stop)
// twice and checks the second restart waits the back-off base from the
// second crash.
func crashLoop(t *testing.T, e *env, base time.Duration, crashes int) {
	pod := e.newPod("app")
	res := e.until(pod, "running", e.running(pod))
	for i := 1; i <= crashes; i++ {
		old := newest(t, res, "app")
		localcritest.Crictl(t, inst, "stop", "--timeout", "0", old.ID)
		var crashed model.ContainerInstance
		backedOff, waiting := false, false
		all := e.syncUntil(pod, "restart", func(r syncer.SyncResult) bool {
			for _, s := range r.Steps {
				if s.Target == "app" && s.Reason == plan.ReasonCrashLoopBackOff {
					backedOff = true
					if w := e.status(pod, r).ContainerStatuses[0].State.Waiting; w != nil && w.Reason == plan.ReasonCrashLoopBackOff {
						waiting = true
					}
				}
			}
			n := newest(t, r, "app")
			return n.ID != old.ID && n.State == model.ContainerRunning
		})
		res = all[len(all)-1]
		for _, c := range res.View.Containers {
			if c.ID == old.ID {
				crashed = c
			}
		}
		n := newest(t, res, "app")
		if n.RestartCount != int32(i) {
			t.Fatalf("crash %d: restart count %d, want %d", i, n.RestartCount, i)
		}
		// The kubelet's shape: the first crash restarts at once, then the
		// delay doubles from the base.
		want := time.Duration(0)
		if i > 1 {
			want = base << (i - 2)
		}
		waited := n.StartedAt.Sub(crashed.FinishedAt)
		if waited < want {
			t.Errorf("crash %d: restarted %s after it, want at least %s", i, waited, want)
		}
		if want > 0 && !backedOff {
			t.Errorf("crash %d: no CrashLoopBackOff step before the restart", i)
		}
		if want == 0 && (backedOff || waited > 5*time.Second) {
			t.Errorf("crash %d: back-off (%v) or a slow restart (%s) for the first crash", i, backedOff, waited)
		}
		if want > 0 && !waiting {
			t.Errorf("crash %d: the status never showed waiting in CrashLoopBackOff", i)
		}
	}
}

// TestCrashLoopBackOffDefault proves the kubelet's default back-off: the
// second crash restarts after 10 s.
func TestCrashLoopBackOffDefault(t *testing.T) {
	t.Parallel()
	crashLoop(t, newEnv(t), plan.DefaultBackoffBase, 2)
}

// TestCrashLoopBackOffDoubles proves the shape with a short base: at once,
// base, 2×base.
func TestCrashLoopBackOffDoubles(t *testing.T) {
	t.Parallel()
	const base = 2 * time.Second
	crashLoop(t, newEnv(t, func(o *syncer.SyncerOptions) { o.Backoff = plan.BackoffPolicy{Base: base} }), base, 3)
}

func TestChangedSpecRecreates(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pod := e.newPod("app")
	res := e.until(pod, "running", e.running(pod))
	first := newest(t, res, "app")

	pod.Spec.Containers[0].Command = []string{"/bin/sh", "-c", `trap "exit 0" TERM; echo changed; while :; do sleep 1 & wait; done`}
	res = e.until(pod, "command changed", e.running(pod))
	second := newest(t, res, "app")
	if second.ID == first.ID || second.RestartCount != 1 {
		t.Fatalf("after a command change app = %+v, want a new instance with restart count 1", second)
	}
	if !hasStep(res, syncer.ActionKillContainer, "app", plan.ReasonDefinitionChanged) {
		t.Errorf("steps %v, want a kill for DefinitionChanged", steps(res.Steps))
	}
	if old := findInstance(res, first.ID); old == nil || old.State != model.ContainerExited {
		t.Errorf("first instance %+v, want exited", old)
	}

	// A changed image (the same busybox, from the local registry).
	ref := inst.Registry().Ref("busybox:local")
	pod.Spec.Containers[0].Image = ref
	res = e.until(pod, "image changed", e.running(pod))
	third := newest(t, res, "app")
	if third.ID == second.ID || third.Image != ref || third.RestartCount != 2 {
		t.Errorf("after an image change app = %+v, want a new instance of %s with restart count 2", third, ref)
	}
	if cs := e.status(pod, res).ContainerStatuses[0]; cs.Image != ref || cs.ImageID == "" {
		t.Errorf("status image %q id %q", cs.Image, cs.ImageID)
	}
}

func findInstance(res syncer.SyncResult, id string) *model.ContainerInstance {
	for i := range res.View.Containers {
		if res.View.Containers[i].ID == id {
			return &res.View.Containers[i]
		}
	}
	return nil
}

func TestSandboxStoppedFromOutside(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pod := e.newPod("app")
	res := e.until(pod, "running", e.running(pod))
	old := res.SandboxID
	localcritest.Crictl(t, inst, "stopp", old)
	res = e.until(pod, "new sandbox", func(r syncer.SyncResult) bool { return r.SandboxID != "" && r.SandboxID != old })
	if !hasStep(res, syncer.ActionCreatePodSandbox, pod.Name+"_"+namespace+"("+string(pod.UID)+")", plan.SandboxReasonNotReady) {
		t.Errorf("steps %v, want a new sandbox for SandboxNotReady", steps(res.Steps))
	}
	if sb := res.View.Sandboxes[0]; sb.Attempt != 1 || len(sb.IPs) == 0 {
		t.Errorf("new sandbox %+v, want attempt 1 with an IP", sb)
	}
	res = e.until(pod, "running again", e.running(pod))
	if n := newest(t, res, "app"); n.RestartCount != 1 {
		t.Errorf("app restart count %d, want 1", n.RestartCount)
	}
	if pods := localcritest.Crictl(t, inst, "pods", "--id", res.SandboxID); !strings.Contains(pods, pod.Name) {
		t.Errorf("crictl pods:\n%s", pods)
	}
	// crictl inspectp shows the new attempt.
	if out := localcritest.Crictl(t, inst, "inspectp", "-o", "go-template", "--template", "{{.status.metadata.attempt}}", res.SandboxID); strings.TrimSpace(out) != "1" {
		t.Errorf("crictl inspectp attempt = %q, want 1", out)
	}
}

func TestFailedInitContainerUnderNever(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pod := e.newPod("main")
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	pod.Spec.InitContainers = []corev1.Container{localcritest.Busybox("init", "/bin/sh", "-c", "echo failing; exit 3")}
	all := e.syncUntil(pod, "phase Failed", func(r syncer.SyncResult) bool { return e.status(pod, r).Phase == corev1.PodFailed })
	res := all[len(all)-1]
	for _, r := range append(all, e.sync(pod), e.sync(pod)) {
		for _, s := range r.Steps {
			if s.Target == "main" {
				t.Errorf("main container touched: %v", steps(r.Steps))
			}
		}
	}
	if inst := res.View.FindContainer("main"); inst != nil {
		t.Errorf("main container exists: %+v", inst)
	}
	if n := newest(t, res, "init"); n.ExitCode != 3 || n.RestartCount != 0 {
		t.Errorf("init = %+v, want exit 3 and no restart", n)
	}
	if ps := localcritest.Crictl(t, inst, "ps", "-a", "--label", model.LabelPodUID+"="+string(pod.UID)); strings.Contains(ps, "main") || !strings.Contains(ps, "init") {
		t.Errorf("crictl ps -a:\n%s", ps)
	}
	if sb := res.View.Sandboxes[0]; sb.State != model.SandboxNotReady {
		t.Errorf("sandbox %+v, want stopped", sb)
	}
}

func TestSidecarsStartBeforeRegularContainers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pod := e.newPod("main")
	sidecar := localcritest.Busybox("proxy")
	sidecar.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
	pod.Spec.InitContainers = []corev1.Container{localcritest.Busybox("setup", "/bin/sh", "-c", "exit 0"), sidecar}
	all := e.syncUntil(pod, "running", e.running(pod))
	res := all[len(all)-1]
	setup, proxy, main := newest(t, res, "setup"), newest(t, res, "proxy"), newest(t, res, "main")
	if proxy.State != model.ContainerRunning || !setup.FinishedAt.Before(proxy.StartedAt) || !proxy.StartedAt.Before(main.StartedAt) {
		t.Errorf("setup finished %s, proxy started %s (%s), main started %s: want that order with proxy running",
			setup.FinishedAt, proxy.StartedAt, proxy.State, main.StartedAt)
	}
	var order []string
	for _, r := range all {
		for _, s := range r.Steps {
			if s.Action == syncer.ActionStartContainer && s.Err == nil && !s.BackedOff() {
				order = append(order, s.Target+"/"+string(s.ContainerType))
			}
		}
	}
	if got := strings.Join(order, " "); got != "setup/init proxy/sidecar main/regular" {
		t.Errorf("start order %q", got)
	}

	// Deletion stops main before the sidecar, then the sandbox.
	pod.DeletionTimestamp = ptr.To(metav1.Now())
	res = e.sync(pod)
	if got := strings.Join(steps(res.Steps), ", "); got != "KillContainer main PodKilled, KillContainer proxy PodKilled, KillPodSandbox "+string(pod.UID)+" PodDeleted" {
		t.Errorf("kill steps: %s", got)
	}
	if m, p := newest(t, res, "main"), newest(t, res, "proxy"); !m.FinishedAt.Before(p.FinishedAt) {
		t.Errorf("main finished %s, proxy %s: want main first", m.FinishedAt, p.FinishedAt)
	}
}

// TestLeftoversAreFinishedOrRemoved: a pass that created the next
// instance of an exited container and never started it (podsync crashed)
// leaves it; the next pass starts a new instance and removes it.
func TestLeftoversAreFinishedOrRemoved(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pod := e.newPod("app")
	res := e.until(pod, "running", e.running(pod))
	localcritest.Crictl(t, inst, "stop", "--timeout", "2", newest(t, res, "app").ID)
	// What an interrupted pass leaves: the next instance, created only.
	cfg, err := criconfig.ContainerConfig(criconfig.ContainerConfigInput{Pod: pod, Container: &pod.Spec.Containers[0], RestartCount: 1, PodIPs: res.PodIPs}, e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	sbCfg, err := criconfig.SandboxConfig(pod, 0, e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	leftover, err := e.rt.CreateContainer(e.ctx, res.SandboxID, cfg, sbCfg)
	if err != nil {
		t.Fatal(err)
	}
	res = e.until(pod, "running", e.running(pod))
	if !hasStep(res, syncer.ActionStartContainer, "app", plan.ReasonCreated) || !hasStep(res, syncer.ActionRemoveContainer, "app", syncer.ReasonGarbageCollected) {
		t.Errorf("steps %v, want a start for the created instance and its removal", steps(res.Steps))
	}
	if n := newest(t, res, "app"); n.RestartCount != 2 {
		t.Errorf("app restart count %d, want 2", n.RestartCount)
	}
	if _, err := e.rt.ContainerStatus(e.ctx, leftover, false); err == nil {
		t.Error("the created leftover is still there")
	}
	if ps := localcritest.Crictl(t, inst, "ps", "-a", "--state", "created"); strings.Contains(ps, pod.Name) {
		t.Errorf("created containers left:\n%s", ps)
	}

	// RemovePod leaves nothing.
	if err := e.s.RemovePod(e.ctx, pod); err != nil {
		t.Fatal(err)
	}
	ctrs, _ := e.rt.ListContainers(e.ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{model.LabelPodUID: string(pod.UID)}})
	sbs, _ := e.rt.ListPodSandbox(e.ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{model.LabelPodUID: string(pod.UID)}})
	if len(ctrs)+len(sbs) != 0 {
		t.Errorf("RemovePod left %d containers and %d sandboxes", len(ctrs), len(sbs))
	}
}

func mustAddr(t *testing.T, s string) netip.Addr {
	t.Helper()
	a, err := netip.ParseAddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
