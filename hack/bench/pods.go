package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/durationpb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/convert"
	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/internal/testing/localcri"
)

// workloadScript is the benchmark container's command: busybox sleep,
// under a shell that exits at once on SIGTERM (busybox sleep as PID 1
// would ignore it and make every stop wait its grace period).
const workloadScript = "trap 'exit 0' TERM; sleep 3600 & wait"

// seq numbers the runs so that every pod name (and so every UID) is new.
var seq atomic.Int64

// newPods returns n defaulted single-container busybox pods named
// <prefix>-<seq>-<i>, each with a random UID: the UID names the pod's
// cgroup, and a derived one would be the same in two bench processes on
// one host.
func newPods(prefix string, n int) []*corev1.Pod {
	run := seq.Add(1)
	pods := make([]*corev1.Pod, n)
	for i := range pods {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name:      fmt.Sprintf("%s-%d-%03d", prefix, run, i),
				Namespace: benchNamespace,
				UID:       types.UID(uuid.NewString()),
				Labels:    map[string]string{"app": "podsync-bench"},
			},
			Spec: corev1.PodSpec{
				Containers: []corev1.Container{{
					Name:    "main",
					Image:   localcri.BusyboxImage,
					Command: []string{"/bin/sh", "-c", workloadScript},
				}},
			},
		}
		convert.Default(pod)
		pods[i] = pod
	}
	return pods
}

func uidsOf(pods []*corev1.Pod) []types.UID {
	out := make([]types.UID, len(pods))
	for i, p := range pods {
		out[i] = p.UID
	}
	return out
}

// runTimeout bounds one run of n pods: generous (a loaded 2-core machine
// took 30 s for 30 pods), yet a run that hangs does not eat the budget of
// the whole report.
func runTimeout(n int) time.Duration { return time.Minute + time.Duration(n)*2*time.Second }

// --- podsync through podsyncd ---

// runPodsRequest converts pods for RunPods (outside any timing).
func runPodsRequest(pods []*corev1.Pod) (*podsyncv1.RunPodsRequest, error) {
	req := &podsyncv1.RunPodsRequest{WaitFor: podsyncv1.WaitFor_WAIT_FOR_RUNNING, Timeout: durationpb.New(runTimeout(len(pods)))}
	for _, p := range pods {
		pb, err := convert.PodToProto(p)
		if err != nil {
			return nil, err
		}
		req.Pods = append(req.Pods, pb)
	}
	return req, nil
}

// runPods sends req and reads the stream until the summary, which must
// say every pod reached its target. It returns when the summary arrived.
func (d *podsyncd) runPods(ctx context.Context, req *podsyncv1.RunPodsRequest) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, runTimeout(len(req.GetPods()))+10*time.Second)
	defer cancel()
	stream, err := d.api.RunPods(ctx, req)
	if err != nil {
		return time.Time{}, fmt.Errorf("RunPods: %w", err)
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			return time.Time{}, fmt.Errorf("RunPods stream: %w", err)
		}
		sum := resp.GetSummary()
		if sum == nil {
			continue
		}
		at := time.Now()
		if int(sum.GetReachedTarget()) != len(req.GetPods()) {
			for _, r := range sum.GetResults() {
				if r.GetOutcome() != podsyncv1.PodOutcome_POD_OUTCOME_REACHED_TARGET {
					return at, fmt.Errorf("RunPods: %d of %d pods reached Running; %s: %s %s: %s",
						sum.GetReachedTarget(), len(req.GetPods()), r.GetPod().GetName(), r.GetOutcome(), r.GetReason(), r.GetMessage())
				}
			}
			return at, fmt.Errorf("RunPods: %d of %d pods reached Running", sum.GetReachedTarget(), len(req.GetPods()))
		}
		return at, nil
	}
}

// deleteAll deletes every pod podsyncd holds, 8 at a time, at once (grace
// period 0).
func (d *podsyncd) deleteAll(ctx context.Context) error {
	list, err := d.api.ListPods(ctx, &podsyncv1.ListPodsRequest{})
	if err != nil {
		return fmt.Errorf("ListPods: %w", err)
	}
	return parallel(ctx, 8, len(list.GetPods()), func(ctx context.Context, i int) error {
		m := list.GetPods()[i].GetMetadata()
		_, err := d.api.DeletePod(ctx, &podsyncv1.DeletePodRequest{Namespace: m.GetNamespace(), Name: m.GetName(),
			GracePeriodSeconds: ptr.To[int64](0)})
		if err != nil {
			return fmt.Errorf("DeletePod %s: %w", m.GetName(), err)
		}
		return nil
	})
}

// parallel runs f(0..n-1) with at most conc at once and returns the
// errors joined.
func parallel(ctx context.Context, conc, n int, f func(ctx context.Context, i int) error) error {
	sem := make(chan struct{}, conc)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for i := range n {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return errors.Join(append(errs, ctx.Err())...)
		}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := f(ctx, i); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// cleanAll deletes every podsync pod through the API, removes every other
// sandbox through CRI, waits until the runtime holds nothing and removes
// the pods' cgroups and the raw pods' directories. It is never timed.
func (e *env) cleanAll(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	var errs []error
	if err := e.d.deleteAll(ctx); err != nil {
		errs = append(errs, err)
	}
	sbs, err := e.rt.ListPodSandbox(ctx, nil)
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("list sandboxes: %w", err))...)
	}
	var raw []*runtimeapi.PodSandbox
	for _, sb := range sbs {
		if !model.IsManaged(sb.GetLabels()) {
			raw = append(raw, sb)
		}
	}
	errs = append(errs, parallel(ctx, 4, len(raw), func(ctx context.Context, i int) error {
		id := raw[i].GetId()
		if err := e.rt.StopPodSandbox(ctx, id); err != nil {
			return fmt.Errorf("stop sandbox %s: %w", id, err)
		}
		if err := e.rt.RemovePodSandbox(ctx, id); err != nil {
			return fmt.Errorf("remove sandbox %s: %w", id, err)
		}
		return nil
	}))
	// Wait until nothing is left.
	if err := e.waitEmpty(ctx); err != nil {
		errs = append(errs, err)
	}
	_ = os.RemoveAll(filepath.Join(e.dir, "raw"))
	_ = os.RemoveAll(filepath.Join(e.dir, "crictl"))
	e.removeCgroups()
	return errors.Join(errs...)
}

// waitEmpty waits until the runtime holds no sandbox and no container.
func (e *env) waitEmpty(ctx context.Context) error {
	for {
		sbs, err1 := e.rt.ListPodSandbox(ctx, nil)
		ctrs, err2 := e.rt.ListContainers(ctx, nil)
		if err := errors.Join(err1, err2); err != nil {
			return err
		}
		if len(sbs) == 0 && len(ctrs) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("runtime still holds %d sandboxes and %d containers: %w", len(sbs), len(ctrs), ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitRunning waits until the runtime reports a running container for
// every pod of uids (by the io.kubernetes.pod.uid label the configs
// carry), whatever else it holds.
func (e *env) waitRunning(ctx context.Context, uids []types.UID) error {
	want := make([]string, len(uids))
	for i, u := range uids {
		want[i] = string(u)
	}
	return e.waitRunningBy(ctx, want, func(c *runtimeapi.Container) string { return c.GetLabels()[model.LabelPodUID] })
}

// waitRunningBy waits, for a minute at most, until the running
// containers' keys (key: a pod UID label, a container id) hold every one
// of want.
func (e *env) waitRunningBy(ctx context.Context, want []string, key func(*runtimeapi.Container) string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	filter := &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}
	for {
		ctrs, err := e.rt.ListContainers(ctx, filter)
		if err != nil {
			return fmt.Errorf("list running containers: %w", err)
		}
		running := map[string]bool{}
		for _, c := range ctrs {
			running[key(c)] = true
		}
		n := 0
		for _, k := range want {
			if running[k] {
				n++
			}
		}
		if n == len(want) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d containers running: %w", n, len(want), ctx.Err())
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// --- the raw CRI baseline ---

// rawPod is a pod as the raw baseline and the crictl loop create it.
type rawPod struct {
	uid       types.UID
	sandbox   *runtimeapi.PodSandboxConfig
	container *runtimeapi.ContainerConfig
}

func rawUIDs(pods []rawPod) []types.UID {
	out := make([]types.UID, len(pods))
	for i, p := range pods {
		out[i] = p.uid
	}
	return out
}

// rawPods builds the CRI configs of pods exactly as the engine does
// (criconfig.SandboxConfig and criconfig.ContainerConfig with podsyncd's node
// settings and the image ID podsync resolves, and the sandbox's
// podsync.io/pod-spec annotation the syncer adds), without the
// podsync.io/managed label so podsyncd leaves them alone, and creates
// what they mount (the /etc/hosts file, the termination message file) and
// the log directory, as the executor would before creating a container.
func (e *env) rawPods(pods []*corev1.Pod) ([]rawPod, error) {
	e.noteUIDs(uidsOf(pods)...)
	out := make([]rawPod, len(pods))
	for i, pod := range pods {
		sb, err := criconfig.SandboxConfig(pod, 0, e.rawOpts)
		if err != nil {
			return nil, err
		}
		c := &pod.Spec.Containers[0]
		// A pod IP is not known before the sandbox runs; any address
		// gives the same /etc/hosts mount.
		cc, err := criconfig.ContainerConfig(criconfig.ContainerConfigInput{Pod: pod, Container: c, ImageRef: e.imageRef,
			PodIPs: []string{"10.255.255.254"}}, e.rawOpts)
		if err != nil {
			return nil, err
		}
		delete(sb.Labels, model.LabelManaged)
		delete(cc.Labels, model.LabelManaged)
		// The syncer adds the pod's spec to the sandbox it creates
		// (for adoption after a lost store): so does the floor.
		if spec, ok := model.EncodePodSpec(pod); ok {
			if sb.Annotations == nil {
				sb.Annotations = map[string]string{}
			}
			sb.Annotations[model.AnnotationPodSpec] = spec
		}
		if err := os.MkdirAll(filepath.Join(sb.GetLogDirectory(), c.Name), 0o755); err != nil {
			return nil, err
		}
		for _, m := range cc.GetMounts() {
			if err := os.MkdirAll(filepath.Dir(m.GetHostPath()), 0o755); err != nil {
				return nil, err
			}
			if err := os.WriteFile(m.GetHostPath(), []byte("127.0.0.1\tlocalhost\n"), 0o644); err != nil {
				return nil, err
			}
		}
		out[i] = rawPod{uid: pod.UID, sandbox: sb, container: cc}
	}
	return out, nil
}

// runRaw runs pods through CRI, conc at a time: RunPodSandbox,
// CreateContainer, StartContainer per pod, then waits until every
// container is running. It returns when they all are, with the pods'
// sandbox IDs.
func (e *env) runRaw(ctx context.Context, pods []rawPod, conc int) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, runTimeout(len(pods)))
	defer cancel()
	ids := make([]string, len(pods))
	sandboxes := make([]string, len(pods))
	err := parallel(ctx, conc, len(pods), func(ctx context.Context, i int) error {
		p := pods[i]
		sb, err := e.rt.RunPodSandbox(ctx, p.sandbox, "")
		if err != nil {
			return fmt.Errorf("RunPodSandbox: %w", err)
		}
		sandboxes[i] = sb
		id, err := e.rt.CreateContainer(ctx, sb, p.container, p.sandbox)
		if err != nil {
			return fmt.Errorf("CreateContainer: %w", err)
		}
		if err := e.rt.StartContainer(ctx, id); err != nil {
			return fmt.Errorf("StartContainer: %w", err)
		}
		ids[i] = id
		return nil
	})
	if err != nil {
		return nil, err
	}
	return sandboxes, e.waitRunningIDs(ctx, ids)
}

// waitRunningIDs waits until the runtime reports every container of ids
// running, with the same list as waitRunning (the minimal floor's
// containers carry no labels).
func (e *env) waitRunningIDs(ctx context.Context, ids []string) error {
	return e.waitRunningBy(ctx, ids, (*runtimeapi.Container).GetId)
}

// --- the crictl loop ---

// crictlFiles writes each pod's sandbox and container config as crictl
// reads them (JSON of the CRI messages) and returns their paths.
func (e *env) crictlFiles(pods []rawPod) ([][2]string, error) {
	dir := filepath.Join(e.dir, "crictl", fmt.Sprint(seq.Load()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	out := make([][2]string, len(pods))
	for i, p := range pods {
		sb, err := jsonOf(p.sandbox)
		if err != nil {
			return nil, err
		}
		c, err := jsonOf(p.container)
		if err != nil {
			return nil, err
		}
		out[i] = [2]string{filepath.Join(dir, fmt.Sprintf("%d-sandbox.json", i)), filepath.Join(dir, fmt.Sprintf("%d-container.json", i))}
		if err := os.WriteFile(out[i][0], sb, 0o644); err != nil {
			return nil, err
		}
		if err := os.WriteFile(out[i][1], c, 0o644); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// runCrictl runs, for each pod in turn, crictl runp, crictl create and
// crictl start, as a shell script would, then waits until every container
// is running.
func (e *env) runCrictl(ctx context.Context, pods []rawPod, files [][2]string) error {
	ctx, cancel := context.WithTimeout(ctx, runTimeout(len(files)))
	defer cancel()
	for _, f := range files {
		sb, err := e.crictlRun(ctx, "runp", f[0])
		if err != nil {
			return err
		}
		id, err := e.crictlRun(ctx, "create", sb, f[1], f[0])
		if err != nil {
			return err
		}
		if _, err := e.crictlRun(ctx, "start", id); err != nil {
			return err
		}
	}
	return e.waitRunning(ctx, rawUIDs(pods))
}

func (e *env) crictlRun(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, e.crictl[0], append(e.crictl[1:], args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("crictl %s: %w: %s", args[0], err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// jsonOf is the JSON crictl reads a CRI message from: encoding/json of
// the generated struct, whose tags are the proto field names.
func jsonOf(v any) ([]byte, error) {
	return json.MarshalIndent(v, "", "  ")
}
