package logs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"go.uber.org/zap"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/logx"
)

// Defaults of Rotation.
const (
	// DefaultMaxSize and DefaultMaxFiles are the kubelet's
	// containerLogMaxSize and containerLogMaxFiles.
	DefaultMaxSize  = 10 << 20
	DefaultMaxFiles = 5
	// DefaultRotationPeriod is how often container logs are checked
	// against Rotation.MaxSize (the kubelet's monitor period).
	DefaultRotationPeriod = 10 * time.Second
)

// Rotation configures the rotation of container logs by size, as the
// kubelet's container log manager (without compression).
type Rotation struct {
	// MaxSize is the size above which a running container's log is
	// rotated; zero means DefaultMaxSize.
	MaxSize int64
	// MaxFiles is how many files a container's log may span, the live one
	// included; zero means DefaultMaxFiles. At least 2.
	MaxFiles int
	// Period is how often logs are checked; zero means
	// DefaultRotationPeriod.
	Period time.Duration
}

// WithDefaults returns r with its zero fields set to their defaults.
func (r Rotation) WithDefaults() Rotation {
	if r.MaxSize <= 0 {
		r.MaxSize = DefaultMaxSize
	}
	if r.MaxFiles <= 0 {
		r.MaxFiles = DefaultMaxFiles
	}
	r.MaxFiles = max(r.MaxFiles, 2)
	if r.Period <= 0 {
		r.Period = DefaultRotationPeriod
	}
	return r
}

// rotatedTimeFormat is the kubelet's timestamp suffix of rotated logs.
const rotatedTimeFormat = "20060102-150405"

// Rotate rotates the log of every running podsync container whose log
// file exceeds Rotation.MaxSize, as the kubelet's container log manager:
// the file is renamed to <path>.<UTC timestamp>, the runtime reopens the
// log (CRI ReopenContainerLog), and rotated files beyond MaxFiles-1 are
// removed, oldest first. The node calls it every Rotation.Period;
// failures are logged.
//
// A container's log path never changes, so it is read (CRI
// ContainerStatus) once per container and remembered while the container
// runs, where the kubelet reads every running container's status every
// round: on an idle node of hundreds of pods those reads were most of
// podsyncd's work.
func (m *Manager) Rotate(ctx context.Context) {
	ctrs, err := m.rt.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: map[string]string{model.LabelManaged: "true"},
	})
	if err != nil {
		if ctx.Err() == nil {
			m.log.Warn("log rotation: list containers", zap.Error(err))
		}
		return
	}
	m.rotMu.Lock()
	defer m.rotMu.Unlock()
	seen := make(map[string]bool, len(ctrs))
	for _, c := range ctrs {
		if !model.IsManaged(c.GetLabels()) {
			continue
		}
		seen[c.GetId()] = true
		path, ok := m.logPaths[c.GetId()]
		if !ok {
			resp, err := m.rt.ContainerStatus(ctx, c.GetId(), false)
			if err != nil {
				continue
			}
			path = resp.GetStatus().GetLogPath()
			if m.logPaths == nil {
				m.logPaths = map[string]string{}
			}
			m.logPaths[c.GetId()] = path
		}
		if path == "" || !filepath.IsAbs(path) {
			continue
		}
		if err := m.rotateLog(ctx, c.GetId(), path); err != nil && ctx.Err() == nil {
			m.log.Warn("log rotation failed", zap.String(logx.ContainerID, c.GetId()), zap.String(logx.Path, path), zap.Error(err))
		}
	}
	for id := range m.logPaths {
		if !seen[id] {
			delete(m.logPaths, id)
		}
	}
}

// rotateLog rotates one container's log if it is too big and removes the
// rotated files beyond the limit.
func (m *Manager) rotateLog(ctx context.Context, id, path string) error {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stat log: %w", err)
	}
	if fi.Size() > m.rot.MaxSize {
		rotated := path + "." + m.now().UTC().Format(rotatedTimeFormat)
		for i := 1; ; i++ {
			if _, err := os.Lstat(rotated); errors.Is(err, fs.ErrNotExist) {
				break
			}
			rotated = path + "." + m.now().UTC().Format(rotatedTimeFormat) + "-" + strconv.Itoa(i)
		}
		if err := os.Rename(path, rotated); err != nil {
			return fmt.Errorf("rename log: %w", err)
		}
		if err := m.rt.ReopenContainerLog(ctx, id); err != nil {
			// As the kubelet: put the log back, so the runtime keeps
			// writing to a file that is read.
			if rerr := os.Rename(rotated, path); rerr != nil {
				err = errors.Join(err, fmt.Errorf("restore log: %w", rerr))
			}
			return fmt.Errorf("reopen container log: %w", err)
		}
		m.log.Info("container log rotated", zap.String(logx.ContainerID, id), zap.String(logx.Path, rotated),
			zap.Int64(logx.Size, fi.Size()))
	}
	old, err := filepath.Glob(escapeGlob(path) + ".*")
	if err != nil {
		return fmt.Errorf("list rotated logs: %w", err)
	}
	slices.SortFunc(old, compareRotated)
	var errs []error
	for len(old) > m.rot.MaxFiles-1 {
		if err := os.Remove(old[0]); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
		old = old[1:]
	}
	return errors.Join(errs...)
}

// compareRotated orders rotated files oldest first: by timestamp, then by
// the counter of files rotated within one second.
func compareRotated(a, b string) int {
	if len(a) != len(b) && (len(a) < len(b) && b[:len(a)] == a || len(b) < len(a) && a[:len(b)] == b) {
		return len(a) - len(b)
	}
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// escapeGlob escapes the characters filepath.Match treats specially.
func escapeGlob(s string) string {
	var out []byte
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', '\\':
			out = append(out, '\\')
		}
		out = append(out, s[i])
	}
	return string(out)
}

// RotationPeriod is how often the node calls Rotate.
func (m *Manager) RotationPeriod() time.Duration { return m.rot.Period }
