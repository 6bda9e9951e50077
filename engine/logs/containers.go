package logs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	utilwait "k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"

	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/store"
	"github.com/podsync/podsync/engine/syncer"
)

// Request selects a container's output.
type Request struct {
	Namespace, Name string
	// Container may be empty when the pod has exactly one container.
	Container string
	// Previous reads the instance before the newest one.
	Previous bool
	// Options: tail, since, limit and follow.
	Options
}

// Pods finds the stored pods whose logs are read (engine/store's Store).
type Pods interface {
	// GetByNameShared returns the stored pod namespace/name, shared (not
	// to be changed), or an error wrapping ErrNotFound.
	GetByNameShared(namespace, name string) (*store.PodRecord, error)
	// Get returns the stored pod with uid, or an error wrapping
	// ErrPodNotFound.
	Get(uid types.UID) (*store.PodRecord, error)
}

// Manager is the node's container log manager: it reads a container's
// output for a pod (ContainerLogs) and rotates the logs of running
// containers by size (Rotate), as the kubelet's.
type Manager struct {
	pods Pods
	rt   syncer.Runtime
	cfg  criconfig.Options
	rot  Rotation
	log  *zap.Logger
	now  func() time.Time

	// rotMu guards logPaths, the log path of each running container
	// Rotate has seen (a container's log path never changes).
	rotMu    sync.Mutex
	logPaths map[string]string
}

// ManagerOptions configure a Manager.
type ManagerOptions struct {
	// Pods finds the pods; required.
	Pods Pods
	// Runtime lists running containers and reopens their logs; required
	// for Rotate.
	Runtime syncer.Runtime
	// Config are the node's log directories.
	Config criconfig.Options
	// Rotation configures Rotate; zero fields take their defaults.
	Rotation Rotation
	// Clock names rotated files; nil means the real clock.
	Clock clock.PassiveClock
	// Logger receives the rotation's logs; nil discards.
	Logger *zap.Logger
}

// NewManager returns a Manager.
func NewManager(o ManagerOptions) *Manager {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	return &Manager{pods: o.Pods, rt: o.Runtime, cfg: o.Config, rot: o.Rotation.WithDefaults(), log: o.Logger, now: o.Clock.Now}
}

// ContainerLogs streams a container's output from the runtime's CRI log
// files to emit, in order. With Follow it continues across restarts of the
// container and rotation of its file until ctx ends, the pod is deleted,
// or the pod reached a terminal phase and its last instance has nothing
// more to say.
//
// It returns ErrNotFound for an unknown pod or container, or for Previous
// when there is no previous instance, and ErrInvalidSpec when the pod has
// several containers and none is named.
func (m *Manager) ContainerLogs(ctx context.Context, req Request, emit func(Line) error) error {
	// Only read: the shared record spares a copy of the pod.
	rec, err := m.pods.GetByNameShared(req.Namespace, req.Name)
	if err != nil {
		return fmt.Errorf("logs of pod %s/%s: %w", req.Namespace, req.Name, err)
	}
	pod := rec.Pod
	name, err := PodContainer(pod, req.Container)
	if err != nil {
		return fmt.Errorf("logs of pod %s/%s: %w", req.Namespace, req.Name, err)
	}
	instances := ContainerLogFiles(pod, m.cfg, name)
	var path string
	switch {
	case req.Previous && len(instances) >= 2:
		path = instances[len(instances)-2]
	case req.Previous:
		return fmt.Errorf("logs of the previous instance of container %q of pod %s/%s: %w", name, req.Namespace, req.Name, errdefs.ErrNotFound)
	case len(instances) > 0:
		path = instances[len(instances)-1]
	default:
		if !req.Follow {
			return nil // not started yet: no output
		}
		// The first instance has not written yet: wait for its file.
		err := utilwait.PollUntilContextCancel(ctx, pollInterval(req.Options), true, func(context.Context) (bool, error) {
			instances = ContainerLogFiles(pod, m.cfg, name)
			return len(instances) > 0, nil
		})
		if err != nil {
			return fmt.Errorf("logs of container %q of pod %s/%s: %w", name, req.Namespace, req.Name, err)
		}
		path = instances[0]
	}
	opts := req.Options
	if req.Previous {
		opts.Follow = false
	}
	if opts.Follow && opts.Finished == nil {
		uid := pod.UID
		opts.Finished = func() bool {
			cur, err := m.pods.Get(uid)
			if errors.Is(err, errdefs.ErrPodNotFound) {
				return true
			}
			return err == nil && (cur.Deleting || cur.Pod.Status.Phase == corev1.PodSucceeded || cur.Pod.Status.Phase == corev1.PodFailed)
		}
	}
	if err := Read(ctx, path, opts, emit); err != nil {
		return fmt.Errorf("logs of container %q of pod %s/%s: %w", name, req.Namespace, req.Name, err)
	}
	return nil
}

// PodContainer resolves the container a caller names for its logs or a
// session: the named one (regular, init or ephemeral), or the only
// regular container. It returns ErrInvalidSpec when none is named and
// the pod has several, ErrNotFound for a name the pod does not have.
func PodContainer(pod *corev1.Pod, name string) (string, error) {
	if name == "" {
		if len(pod.Spec.Containers) == 1 {
			return pod.Spec.Containers[0].Name, nil
		}
		return "", fmt.Errorf("%w: the pod has %d containers: name one", errdefs.ErrInvalidSpec, len(pod.Spec.Containers))
	}
	// Regular, init and ephemeral containers (kubectl logs reads a debug
	// container's output too).
	if model.SpecContainer(pod, name) != nil {
		return name, nil
	}
	return "", fmt.Errorf("container %q: %w", name, errdefs.ErrNotFound)
}

func pollInterval(o Options) time.Duration {
	if o.PollInterval > 0 {
		return o.PollInterval
	}
	return DefaultPollInterval
}

// ContainerLogFiles lists the CRI log files of a container's instances,
// <pod-log-dir>/<ns>_<name>_<uid>/<container>/<n>.log, oldest first.
func ContainerLogFiles(pod *corev1.Pod, opts criconfig.Options, container string) []string {
	dir := filepath.Join(criconfig.PodLogDirectory(pod, opts), container)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	type inst struct {
		n    int
		path string
	}
	var found []inst
	for _, e := range entries {
		digits, ok := strings.CutSuffix(e.Name(), ".log")
		if !ok || digits == "" || strings.Trim(digits, "0123456789") != "" {
			continue
		}
		n, err := strconv.Atoi(digits)
		if err == nil {
			found = append(found, inst{n, filepath.Join(dir, e.Name())})
		}
	}
	slices.SortFunc(found, func(a, b inst) int { return a.n - b.n })
	out := make([]string, len(found))
	for i, f := range found {
		out[i] = f.path
	}
	return out
}
