//go:build integration

package faults_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/internal/testing/localcri/localcritest"
)

// runtimeState is everything the package's containerd holds.
type runtimeState struct {
	sandboxes  []*runtimeapi.PodSandbox
	containers []*runtimeapi.Container
	// pods are the pod UIDs on podsync's labels, with what is held of
	// each.
	pods map[string]string
	// unlabelled describes the objects without podsync's labels.
	unlabelled []string
	// hidden describes the tasks that run behind a sandbox or container
	// CRI does not report running.
	hidden []string
	// leaked describes the tasks left CREATED behind a container CRI
	// reports exited (containerd/containerd#11037; see
	// restartForLeakedTasks).
	leaked []string
	// startFailures counts, by pod UID and container name ("uid/name"),
	// the exited instances whose start the runtime failed (reason
	// StartError): each is a restart the runtime caused, not podsync.
	startFailures map[string]int32
	// ghosts are the IDs of the tasks containerd holds for no sandbox or
	// container CRI lists: what RemovePodSandbox leaves when the
	// sandbox's task is stuck CREATED (containerd/containerd#11037).
	// containerd brings such a sandbox back when it restarts (see
	// removeResurrected).
	ghosts []string
}

// readRuntime lists every sandbox and container of the runtime.
func readRuntime(ctx context.Context) (*runtimeState, error) {
	rs, err := inst.RuntimeService(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rs.Close(context.WithoutCancel(ctx)) }()
	st := &runtimeState{pods: map[string]string{}, startFailures: map[string]int32{}}
	if st.sandboxes, err = rs.ListPodSandbox(ctx, nil); err != nil {
		return nil, fmt.Errorf("ListPodSandbox: %w", err)
	}
	if st.containers, err = rs.ListContainers(ctx, nil); err != nil {
		return nil, fmt.Errorf("ListContainers: %w", err)
	}
	for _, sb := range st.sandboxes {
		ref := model.PodFromLabels(sb.GetLabels())
		if !model.IsManaged(sb.GetLabels()) || ref.UID == "" || ref.Name == "" || ref.Namespace == "" {
			st.unlabelled = append(st.unlabelled, fmt.Sprintf("sandbox %.12s %s", sb.GetId(), sb.GetLabels()))
			continue
		}
		st.pods[string(ref.UID)] += fmt.Sprintf(" sandbox %.12s (%s, attempt %d)", sb.GetId(), sb.GetState(), sb.GetMetadata().GetAttempt())
	}
	for _, c := range st.containers {
		info := model.ContainerInfoFromLabels(c.GetLabels())
		if !model.IsManaged(c.GetLabels()) || info.UID == "" || info.Name == "" || info.Namespace == "" || info.ContainerName == "" {
			st.unlabelled = append(st.unlabelled, fmt.Sprintf("container %.12s %s", c.GetId(), c.GetLabels()))
			continue
		}
		st.pods[string(info.UID)] += fmt.Sprintf(" container %s %.12s (%s)", info.ContainerName, c.GetId(), c.GetState())
		if c.GetState() != runtimeapi.ContainerState_CONTAINER_EXITED {
			continue
		}
		resp, err := rs.ContainerStatus(ctx, c.GetId(), false)
		if err != nil {
			return nil, fmt.Errorf("ContainerStatus %s: %w", c.GetId(), err)
		}
		if resp.GetStatus().GetReason() == "StartError" {
			st.startFailures[string(info.UID)+"/"+info.ContainerName]++
		}
	}
	// containerd's own view: a task running behind what CRI reports
	// stopped or exited is a process nobody will stop.
	cmd := inst.CtrCommand("tasks", "ls")
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("ctr tasks ls: %w", err)
	}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] != "TASK" && !slices.ContainsFunc(st.sandboxes, func(sb *runtimeapi.PodSandbox) bool { return sb.GetId() == f[0] }) &&
			!slices.ContainsFunc(st.containers, func(c *runtimeapi.Container) bool { return c.GetId() == f[0] }) {
			st.ghosts = append(st.ghosts, f[0])
		}
		if len(f) >= 3 && f[2] == "CREATED" {
			for _, c := range st.containers {
				if c.GetId() == f[0] && c.GetState() == runtimeapi.ContainerState_CONTAINER_EXITED {
					st.leaked = append(st.leaked, fmt.Sprintf("container %s %.12s of pod %s",
						c.GetMetadata().GetName(), f[0], c.GetLabels()[model.LabelPodName]))
				}
			}
		}
		if len(f) < 3 || f[2] != "RUNNING" {
			continue
		}
		for _, sb := range st.sandboxes {
			if sb.GetId() == f[0] && sb.GetState() != runtimeapi.PodSandboxState_SANDBOX_READY {
				st.hidden = append(st.hidden, fmt.Sprintf("sandbox %.12s of pod %s is %s, its task runs", f[0], sb.GetMetadata().GetName(), sb.GetState()))
			}
		}
		for _, c := range st.containers {
			if c.GetId() == f[0] && c.GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
				st.hidden = append(st.hidden, fmt.Sprintf("container %s %.12s of pod %s is %s, its task runs",
					c.GetMetadata().GetName(), f[0], c.GetLabels()[model.LabelPodName], c.GetState()))
			}
		}
	}
	return st, nil
}

// sandboxesOf returns uid's sandboxes, newest first.
func (st *runtimeState) sandboxesOf(uid string) []*runtimeapi.PodSandbox {
	var out []*runtimeapi.PodSandbox
	for _, sb := range st.sandboxes {
		if sb.GetLabels()[model.LabelPodUID] == uid {
			out = append(out, sb)
		}
	}
	slices.SortFunc(out, func(a, b *runtimeapi.PodSandbox) int {
		return int(b.GetMetadata().GetAttempt()) - int(a.GetMetadata().GetAttempt())
	})
	return out
}

// containersOf returns uid's containers named name, newest first.
func (st *runtimeState) containersOf(uid, name string) []*runtimeapi.Container {
	var out []*runtimeapi.Container
	for _, c := range st.containers {
		if c.GetLabels()[model.LabelPodUID] == uid && c.GetLabels()[model.LabelContainerName] == name {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b *runtimeapi.Container) int {
		if a.GetCreatedAt() != b.GetCreatedAt() {
			return int(b.GetCreatedAt() - a.GetCreatedAt())
		}
		return int(b.GetMetadata().GetAttempt()) - int(a.GetMetadata().GetAttempt())
	})
	return out
}

// veteran is a pod whose container restarted before the crashes: its
// restart count and running container must survive them.
type veteran struct {
	pod          *testPod
	restartCount int32
	containerID  string
}

// startVeteran runs the veteran pod and waits until its container runs
// again after its first failure (the kubelet's back-off: about 10 s).
func (n *node) startVeteran(ctx context.Context) *veteran {
	n.t.Helper()
	v := &veteran{pod: newVeteran(n.t)}
	n.runAll(ctx, []*testPod{v.pod})
	eventually(ctx, n.t, "the veteran's container runs again after its failure", func() []string {
		resp, err := n.client().GetPod(ctx, &podsyncv1.GetPodRequest{Namespace: namespace, Name: v.pod.name()})
		if err != nil {
			return []string{err.Error()}
		}
		cs := containerStatus(resp.GetPod().GetStatus().GetContainerStatuses(), "app")
		if cs.GetRestartCount() < 1 || cs.GetState().GetRunning() == nil {
			return []string{fmt.Sprintf("app: restarts %d, state %v", cs.GetRestartCount(), cs.GetState())}
		}
		v.restartCount, v.containerID = cs.GetRestartCount(), trimRuntime(cs.GetContainerId())
		return nil
	})
	return v
}

func containerStatus(css []*podsyncv1.ContainerStatus, name string) *podsyncv1.ContainerStatus {
	for _, cs := range css {
		if cs.GetName() == name {
			return cs
		}
	}
	return nil
}

// trimRuntime strips the "containerd://" of a status's container ID.
func trimRuntime(id string) string {
	if _, rest, ok := strings.Cut(id, "://"); ok {
		return rest
	}
	return id
}

// checkConverged waits until the runtime and the store agree that pods
// (and nothing else podsync owns but the veteran) run as they should:
//
//   - every object in the runtime carries podsync's labels, and no task
//     runs behind one CRI reports stopped or exited;
//   - the pods the store holds are those the runtime holds objects of;
//   - each pod runs, with exactly one READY sandbox (the one its status
//     names, if it names one) and the running containers its status
//     names;
//   - nothing is left the garbage collector removes: no not-ready sandbox
//     without containers, no created container behind a newer one, at
//     most two exited instances per container;
//   - no container of the batch restarted more often than maxRestarts,
//     the times podsyncd died or the runtime failed (a container created
//     but not started then, or whose start was cut short, is restarted),
//     and the veteran kept its container and its restart count;
//
// and then that no init container ran twice in one sandbox, but for a
// start interrupted by podsyncd's death, which containerd reports failed
// (StartError) although the process may have run.
func (n *node) checkConverged(ctx context.Context, pods []*testPod, vet *veteran, maxRestarts int32) {
	t := n.t
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var rt *runtimeState
	eventually(ctx, t, "pods converged", func() []string {
		var err error
		if rt, err = readRuntime(ctx); err != nil {
			return []string{err.Error()}
		}
		list, err := n.client().ListPods(ctx, &podsyncv1.ListPodsRequest{})
		if err != nil {
			return []string{fmt.Sprintf("ListPods: %v", err)}
		}
		return convergenceProblems(rt, list.GetPods(), pods, vet, maxRestarts)
	})
	for _, p := range pods {
		if !p.init {
			continue
		}
		sbs := rt.sandboxesOf(p.uid())
		app := rt.containersOf(p.uid(), "app")
		if len(sbs) == 0 || len(app) == 0 {
			t.Fatalf("pod %s: no sandbox or app container", p.name())
		}
		// containerd reports a start cancelled midway (podsyncd died
		// during StartContainer) as StartError, exit 128, although the
		// process may have run: such an instance may count as a run,
		// also one pruned since (n.inits remembers it).
		inits := rt.containersOf(p.uid(), "init")
		out := localcritest.Crictl(t, inst, "exec", app[0].GetId(), "cat", "/data/init-runs")
		if runs, most := strings.Count(out, "ran"), int(sbs[0].GetMetadata().GetAttempt())+1+n.inits.startErrors(ctx, t, p.uid(), inits); runs > most {
			t.Errorf("pod %s: the init container ran %d times in %d sandboxes; its instances:\n%s", p.name(), runs, most,
				describe(ctx, rt.containersOf(p.uid(), "init")))
		}
	}
}

func convergenceProblems(rt *runtimeState, stored []*podsyncv1.Pod, want []*testPod, vet *veteran, maxRestarts int32) []string {
	var problems []string
	for _, u := range rt.unlabelled {
		problems = append(problems, "not podsync's: "+u)
	}
	problems = append(problems, rt.hidden...)
	storedByUID := map[string]*podsyncv1.Pod{}
	for _, p := range stored {
		storedByUID[p.GetMetadata().GetUid()] = p
	}
	for uid, held := range rt.pods {
		if storedByUID[uid] == nil {
			problems = append(problems, fmt.Sprintf("the runtime holds pod %s the store does not:%s", uid, held))
		}
	}
	wanted := map[string]bool{}
	for _, p := range want {
		wanted[p.uid()] = true
	}
	if vet != nil {
		wanted[vet.pod.uid()] = true
	}
	for uid, p := range storedByUID {
		if !wanted[uid] {
			problems = append(problems, "stored pod not expected: "+p.GetMetadata().GetName())
		}
	}
	for _, p := range want {
		sp := storedByUID[p.uid()]
		if sp == nil {
			problems = append(problems, "not stored: "+p.name())
			continue
		}
		problems = append(problems, podProblems(rt, p, sp.GetStatus(), vet, maxRestarts)...)
	}
	return problems
}

func podProblems(rt *runtimeState, p *testPod, st *podsyncv1.PodStatus, vet *veteran, maxRestarts int32) []string {
	var problems []string
	bad := func(format string, args ...any) {
		problems = append(problems, p.name()+": "+fmt.Sprintf(format, args...))
	}
	if st.GetPhase() != "Running" {
		bad("phase %q", st.GetPhase())
	}
	sbs := rt.sandboxesOf(p.uid())
	var ready []string
	for _, sb := range sbs {
		if sb.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
			ready = append(ready, sb.GetId())
		}
	}
	if len(ready) != 1 {
		bad("%d READY sandboxes, want 1", len(ready))
	} else if id := st.GetSandboxId(); id != "" && id != ready[0] {
		bad("status names sandbox %.12s, the ready one is %.12s", id, ready[0])
	}
	for _, sb := range sbs {
		if sb.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
			continue
		}
		holds := slices.ContainsFunc(rt.containers, func(c *runtimeapi.Container) bool { return c.GetPodSandboxId() == sb.GetId() })
		if !holds {
			bad("not-ready sandbox %.12s (attempt %d) without containers left", sb.GetId(), sb.GetMetadata().GetAttempt())
		}
	}
	for _, c := range p.core.Spec.Containers {
		cs := containerStatus(st.GetContainerStatuses(), c.Name)
		insts := rt.containersOf(p.uid(), c.Name)
		switch {
		case cs.GetState().GetRunning() == nil:
			bad("container %s not running: %v", c.Name, cs.GetState())
		case len(insts) == 0 || insts[0].GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING:
			bad("container %s: the runtime runs no instance", c.Name)
		case trimRuntime(cs.GetContainerId()) != insts[0].GetId():
			bad("container %s: status names %.12s, the runtime runs %.12s", c.Name, trimRuntime(cs.GetContainerId()), insts[0].GetId())
		}
		exited := 0
		for i, inst := range insts {
			switch inst.GetState() {
			case runtimeapi.ContainerState_CONTAINER_CREATED:
				if i > 0 {
					bad("container %s: created instance %.12s left behind a newer one", c.Name, inst.GetId())
				}
			case runtimeapi.ContainerState_CONTAINER_EXITED:
				exited++
			}
		}
		if exited > 2 {
			bad("container %s: %d exited instances kept", c.Name, exited)
		}
		switch {
		case vet != nil && p.uid() == vet.pod.uid():
			if cs.GetRestartCount() != vet.restartCount || trimRuntime(cs.GetContainerId()) != vet.containerID {
				bad("veteran: restarts %d in %.12s, want %d in %.12s (it must neither restart nor lose its count)",
					cs.GetRestartCount(), trimRuntime(cs.GetContainerId()), vet.restartCount, vet.containerID)
			}
		case cs.GetRestartCount() > maxRestarts+rt.startFailures[p.uid()+"/"+c.Name]:
			bad("container %s restarted %d times, more than podsyncd died (%d) and the runtime failed to start it (%d)",
				c.Name, cs.GetRestartCount(), maxRestarts, rt.startFailures[p.uid()+"/"+c.Name])
		}
	}
	for _, c := range p.core.Spec.InitContainers {
		cs := containerStatus(st.GetInitContainerStatuses(), c.Name)
		if term := cs.GetState().GetTerminated(); term == nil || term.GetExitCode() != 0 {
			bad("init container %s: %v, want terminated with 0", c.Name, cs.GetState())
		}
	}
	return problems
}

// containerReason is the runtime's reason for an exited container; ok is
// false for a container that has not exited.
func containerReason(ctx context.Context, t *testing.T, c *runtimeapi.Container) (reason string, ok bool) {
	t.Helper()
	rs, err := inst.RuntimeService(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rs.Close(context.WithoutCancel(ctx)) }()
	resp, err := rs.ContainerStatus(ctx, c.GetId(), false)
	if err != nil {
		t.Fatalf("ContainerStatus %s: %v", c.GetId(), err)
	}
	st := resp.GetStatus()
	return st.GetReason(), st.GetState() == runtimeapi.ContainerState_CONTAINER_EXITED
}

// describe renders the runtime's statuses of containers, for a failure.
func describe(ctx context.Context, cs []*runtimeapi.Container) string {
	rs, err := inst.RuntimeService(ctx)
	if err != nil {
		return err.Error()
	}
	defer func() { _ = rs.Close(context.WithoutCancel(ctx)) }()
	var b strings.Builder
	for _, c := range cs {
		resp, err := rs.ContainerStatus(ctx, c.GetId(), false)
		if err != nil {
			fmt.Fprintf(&b, "  %.12s: %v\n", c.GetId(), err)
			continue
		}
		st := resp.GetStatus()
		fmt.Fprintf(&b, "  %.12s attempt %d %s exit %d reason %q message %q created %s started %s finished %s restartCount %s\n",
			c.GetId(), st.GetMetadata().GetAttempt(), st.GetState(), st.GetExitCode(), st.GetReason(), st.GetMessage(),
			time.Unix(0, st.GetCreatedAt()).Format(time.StampMicro), time.Unix(0, st.GetStartedAt()).Format(time.StampMicro),
			time.Unix(0, st.GetFinishedAt()).Format(time.StampMicro), st.GetAnnotations()[model.AnnotationContainerRestartCount])
	}
	return b.String()
}
