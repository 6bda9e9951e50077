package syncer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	crierrors "k8s.io/cri-api/pkg/errors"
	crilogs "k8s.io/cri-client/pkg/logs"
	"k8s.io/klog/v2"
	"k8s.io/utils/buffer"

	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/model"
)

// The kubelet's limits on termination messages
// (pkg/kubelet/container/runtime.go).
const (
	maxTerminationMessageLength        = 4 * 1024
	maxTerminationMessageLogLen        = 2 * 1024
	maxTerminationMessageLogLine int64 = 80
)

// PodSelector selects the CRI objects podsync created for the pod uid.
func PodSelector(uid types.UID) map[string]string {
	return map[string]string{model.LabelManaged: "true", model.LabelPodUID: string(uid)}
}

// podState is a RuntimeView with what the executor needs beside it.
type podState struct {
	view model.RuntimeView
	// sandboxOf maps a container ID to its sandbox ID.
	sandboxOf map[string]string
	// logPath maps a container ID to its log file.
	logPath map[string]string
}

// ReadView lists the sandboxes and containers podsync created for the pod
// with uid (by their podsync.io/managed and io.kubernetes.pod.uid labels)
// and decodes their CRI statuses into a RuntimeView, newest first. Objects
// removed while they are read are left out. The view has no termination
// messages and no pull failures: SyncPod's result carries both.
func ReadView(ctx context.Context, rt Runtime, uid types.UID) (model.RuntimeView, error) {
	st, err := readPodState(ctx, rt, uid)
	return st.view, err
}

// ReadView is the package's ReadView on the Syncer's runtime.
func (s *Syncer) ReadView(ctx context.Context, uid types.UID) (model.RuntimeView, error) {
	return ReadView(ctx, s.rt, uid)
}

func readPodState(ctx context.Context, rt Runtime, uid types.UID) (podState, error) {
	sel := PodSelector(uid)
	sbs, err := rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel})
	if err != nil {
		return podState{}, fmt.Errorf("list sandboxes: %w", err)
	}
	ctrs, err := rt.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: sel})
	if err != nil {
		return podState{}, fmt.Errorf("list containers: %w", err)
	}
	objs := podObjects{sandboxOf: make(map[string]string, len(ctrs))}
	for _, sb := range sbs {
		objs.sandboxes = append(objs.sandboxes, sb.GetId())
	}
	for _, c := range ctrs {
		objs.containers = append(objs.containers, c.GetId())
		objs.sandboxOf[c.GetId()] = c.GetPodSandboxId()
	}
	return readObjects(ctx, rt, uid, objs, nil)
}

// podObjects are the ids of a pod's sandboxes and containers, and each
// container's sandbox.
type podObjects struct {
	sandboxes, containers []string
	sandboxOf             map[string]string
}

// readObjects reads the statuses of the pod's objects into a podState,
// leaving out those that no longer exist. known holds sandbox statuses
// read already, still current.
func readObjects(ctx context.Context, rt Runtime, uid types.UID, objs podObjects, known map[string]*runtimeapi.PodSandboxStatus) (podState, error) {
	var sbStatuses []*runtimeapi.PodSandboxStatus
	for _, id := range objs.sandboxes {
		if s := known[id]; s != nil {
			sbStatuses = append(sbStatuses, s)
			continue
		}
		resp, err := rt.PodSandboxStatus(ctx, id, false)
		if crierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return podState{}, fmt.Errorf("status of sandbox %s: %w", id, err)
		}
		if s := resp.GetStatus(); s != nil {
			sbStatuses = append(sbStatuses, s)
		}
	}
	st := podState{sandboxOf: map[string]string{}, logPath: map[string]string{}}
	var statuses []*runtimeapi.ContainerStatus
	for _, id := range objs.containers {
		resp, err := rt.ContainerStatus(ctx, id, false)
		if crierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return podState{}, fmt.Errorf("status of container %s: %w", id, err)
		}
		s := resp.GetStatus()
		if s == nil {
			continue
		}
		statuses = append(statuses, s)
		st.sandboxOf[s.GetId()] = objs.sandboxOf[id]
		st.logPath[s.GetId()] = s.GetLogPath()
	}
	st.view = model.NewRuntimeView(uid, sbStatuses, statuses)
	for i := range st.view.Containers {
		st.view.Containers[i].SandboxID = st.sandboxOf[st.view.Containers[i].ID]
	}
	return st, nil
}

// fillTerminationMessages reads the termination message of every exited
// instance, as the kubelet's getTerminationMessage: the file mounted at
// terminationMessagePath, or the tail of the log for FallbackToLogsOnError
// and a non-zero exit.
func (s *Syncer) fillTerminationMessages(ctx context.Context, pod *corev1.Pod, st *podState) {
	for i := range st.view.Containers {
		inst := &st.view.Containers[i]
		if inst.State != model.ContainerExited {
			continue
		}
		if inst.TerminationMessagePath != "" {
			path := criconfig.TerminationMessageFile(pod, inst.Name, inst.RestartCount, s.cfg)
			data, err := readTail(path, maxTerminationMessageLength)
			switch {
			case errors.Is(err, os.ErrNotExist):
			case err != nil:
				inst.TerminationMessage = fmt.Sprintf("Error on reading termination log %s: %v", path, err)
				continue
			default:
				inst.TerminationMessage = string(data)
			}
		}
		if model.NeedsLogFallback(inst) {
			if msg, err := logTail(ctx, st.logPath[inst.ID], maxTerminationMessageLogLine, maxTerminationMessageLogLen); err == nil {
				inst.TerminationMessage = msg
			} else {
				inst.TerminationMessage = fmt.Sprintf("Error on reading termination message from logs: %v", err)
			}
		}
	}
}

// readTail returns at most the last max bytes of the file at path.
func readTail(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if off := fi.Size() - max; off > 0 {
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			return nil, err
		}
	}
	return io.ReadAll(io.LimitReader(f, max))
}

// logTail is the kubelet's readLastStringFromContainerLogs: the CRI log
// at path read as `kubectl logs --tail=<lines>` reads it (cri-client's
// ReadLogs: the last lines of the file, each full line with its newline,
// a partial one without, the runtime's last unterminated write too), of
// which the last maxBytes are kept.
func logTail(ctx context.Context, path string, lines int64, maxBytes int) (string, error) {
	if path == "" {
		return "", errors.New("container has no log path")
	}
	buf, err := buffer.NewTypedRingFixed[byte](maxBytes)
	if err != nil {
		return "", err
	}
	// ReadLogs logs what it skips through the context's klog logger,
	// which would otherwise be klog's global one, outside podsyncd's
	// structured log.
	ctx = klog.NewContext(ctx, logr.Discard())
	if err := crilogs.ReadLogs(ctx, path, "", &crilogs.LogOptions{TailLines: &lines}, nil, buf, buf); err != nil {
		return "", err
	}
	return string(buf.Slice()), nil
}
