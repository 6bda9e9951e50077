package hollow

import (
	"strings"
	"sync"

	"github.com/podsync/podsync/engine/syncer"
	"github.com/podsync/podsync/host/mounttable"
)

// Mounter keeps a hollow node's memory-backed volumes as plain
// directories: a tmpfs "mount" is remembered, never made, so the syncer
// writes the volume's files to the directory itself. Safe for concurrent
// use.
type Mounter struct {
	mu      sync.Mutex
	mounted map[string]struct{}
}

var _ syncer.Mounter = (*Mounter)(nil)

// NewMounter returns a Mounter that has mounted nothing.
func NewMounter() *Mounter { return &Mounter{mounted: map[string]struct{}{}} }

// IsTmpfs reports whether dir was "mounted" and not unmounted since.
func (m *Mounter) IsTmpfs(dir string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.mounted[dir]
	return ok, nil
}

// MountTmpfs remembers dir as mounted; the options are not applied.
func (m *Mounter) MountTmpfs(dir, _ string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mounted[dir] = struct{}{}
	return nil
}

// UnmountBelow forgets the directories at or below dir, and undoes the
// real mounts there: the bind mounts of subPath and hostPath volumes
// are the kernel's on a hollow node too, and the pod's directory must
// not be removed through them.
func (m *Mounter) UnmountBelow(dir string) error {
	m.mu.Lock()
	for d := range m.mounted {
		if d == dir || strings.HasPrefix(d, dir+"/") {
			delete(m.mounted, d)
		}
	}
	m.mu.Unlock()
	return mounttable.UnmountBelow(dir)
}
