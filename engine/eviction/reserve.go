package eviction

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/podsync/podsync/engine/store"
	"github.com/podsync/podsync/logx"
)

// DefaultStoreReserve is EvictionPolicy.StoreReserve's default.
const DefaultStoreReserve = 16 << 20

// reservePath is the reserve file of the store at storePath.
func reservePath(storePath string) string { return storePath + ".reserve" }

// ensureReserve preallocates the store's reserve file if it is missing and
// the file system has room for it above the watermark (available bytes
// of capacity). It reports whether the reserve is in place.
func (m *Manager) ensureReserve(available, capacity int64) bool {
	p := m.policy
	if p.StoreMinAvailable.Disabled || p.StoreReserve <= 0 {
		return false
	}
	path := reservePath(m.store.Path())
	if fi, err := os.Stat(path); err == nil && fi.Size() >= p.StoreReserve {
		return true
	}
	if available < p.StoreMinAvailable.bytesOf(capacity)+p.StoreReserve {
		return false
	}
	if err := preallocate(path, p.StoreReserve); err != nil {
		m.log.Warn("store reserve not made", zap.String(logx.Path, path), zap.Error(err))
		return false
	}
	m.log.Info("store reserve made", zap.String(logx.Path, path), zap.Int64(logx.Size, p.StoreReserve))
	return true
}

// preallocate makes path a file of size bytes whose blocks are allocated.
func preallocate(path string, size int64) (err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		err = errors.Join(err, f.Close())
		if err != nil {
			_ = os.Remove(path)
		}
	}()
	err = unix.Fallocate(int(f.Fd()), 0, 0, size)
	if errors.Is(err, unix.EOPNOTSUPP) {
		// A file system without fallocate: write the blocks.
		err = nil
		buf := make([]byte, 1<<20)
		for off := int64(0); off < size && err == nil; {
			var k int
			k, err = f.Write(buf[:min(int64(len(buf)), size-off)])
			off += int64(k)
		}
	}
	if err != nil {
		return fmt.Errorf("preallocate %s: %w", path, err)
	}
	return f.Sync()
}

// CheckReserve makes the store's reserve if it is missing and there is
// room for it; the node calls it once recovered, Check every period.
func (m *Manager) CheckReserve() {
	available, capacity, err := fsSpace(m.storeDir)
	if err != nil {
		m.log.Warn("local storage: stat the store's file system", zap.Error(err))
		return
	}
	m.ensureReserve(available, capacity)
}

// Append appends changes to the store; if the file system is full
// (ENOSPC) it releases the store's reserve and tries once more, so that an
// eviction that frees the space can be recorded on a full disk.
func (m *Manager) Append(changes ...store.Change) error {
	_, err := m.store.Append(changes...)
	if err == nil || !errors.Is(err, syscall.ENOSPC) {
		return err
	}
	path := reservePath(m.store.Path())
	if rerr := os.Remove(path); rerr != nil {
		if !errors.Is(rerr, fs.ErrNotExist) {
			m.log.Warn("store reserve not released", zap.String(logx.Path, path), zap.Error(rerr))
		}
		return err
	}
	m.log.Warn("file system of the store full: store reserve released", zap.String(logx.Path, path))
	_, err = m.store.Append(changes...)
	return err
}
