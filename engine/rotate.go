package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"go.uber.org/zap"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/logx"
)

// rotatedTimeFormat is the kubelet's timestamp suffix of rotated logs.
const rotatedTimeFormat = "20060102-150405"

// RotateLogs rotates the log of every running podsync container whose log
// file exceeds LogRotation.MaxSize, as the kubelet's container log
// manager: the file is renamed to <path>.<UTC timestamp>, the runtime
// reopens the log (CRI ReopenContainerLog), and rotated files beyond
// MaxFiles-1 are removed, oldest first. Run calls it every
// LogRotation.Period; failures are logged.
//
// A container's log path never changes, so it is read (CRI
// ContainerStatus) once per container and remembered while the container
// runs, where the kubelet reads every running container's status every
// round: on an idle node of hundreds of pods those reads were most of
// podsyncd's work.
func (n *Node) RotateLogs(ctx context.Context) {
	ctrs, err := n.rt.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: map[string]string{model.LabelManaged: "true"},
	})
	if err != nil {
		if ctx.Err() == nil {
			n.log.Warn("log rotation: list containers", zap.Error(err))
		}
		return
	}
	n.rotMu.Lock()
	defer n.rotMu.Unlock()
	seen := make(map[string]bool, len(ctrs))
	for _, c := range ctrs {
		if !model.IsManaged(c.GetLabels()) {
			continue
		}
		seen[c.GetId()] = true
		path, ok := n.logPaths[c.GetId()]
		if !ok {
			resp, err := n.rt.ContainerStatus(ctx, c.GetId(), false)
			if err != nil {
				continue
			}
			path = resp.GetStatus().GetLogPath()
			if n.logPaths == nil {
				n.logPaths = map[string]string{}
			}
			n.logPaths[c.GetId()] = path
		}
		if path == "" || !filepath.IsAbs(path) {
			continue
		}
		if err := n.rotateLog(ctx, c.GetId(), path); err != nil && ctx.Err() == nil {
			n.log.Warn("log rotation failed", zap.String(logx.ContainerID, c.GetId()), zap.String(logx.Path, path), zap.Error(err))
		}
	}
	for id := range n.logPaths {
		if !seen[id] {
			delete(n.logPaths, id)
		}
	}
}

// rotateLog rotates one container's log if it is too big and removes the
// rotated files beyond the limit.
func (n *Node) rotateLog(ctx context.Context, id, path string) error {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stat log: %w", err)
	}
	if fi.Size() > n.rot.MaxSize {
		rotated := path + "." + n.clock.Now().UTC().Format(rotatedTimeFormat)
		for i := 1; ; i++ {
			if _, err := os.Lstat(rotated); errors.Is(err, fs.ErrNotExist) {
				break
			}
			rotated = path + "." + n.clock.Now().UTC().Format(rotatedTimeFormat) + "-" + strconv.Itoa(i)
		}
		if err := os.Rename(path, rotated); err != nil {
			return fmt.Errorf("rename log: %w", err)
		}
		if err := n.rt.ReopenContainerLog(ctx, id); err != nil {
			// As the kubelet: put the log back, so the runtime keeps
			// writing to a file that is read.
			if rerr := os.Rename(rotated, path); rerr != nil {
				err = errors.Join(err, fmt.Errorf("restore log: %w", rerr))
			}
			return fmt.Errorf("reopen container log: %w", err)
		}
		n.log.Info("container log rotated", zap.String(logx.ContainerID, id), zap.String(logx.Path, rotated),
			zap.Int64(logx.Size, fi.Size()))
	}
	old, err := filepath.Glob(escapeGlob(path) + ".*")
	if err != nil {
		return fmt.Errorf("list rotated logs: %w", err)
	}
	slices.SortFunc(old, compareRotated)
	var errs []error
	for len(old) > n.rot.MaxFiles-1 {
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
