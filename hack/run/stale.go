package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/podsync/podsync/host/mounttable"
	"github.com/podsync/podsync/internal/testing/localcri"
)

// state is what a run leaves in .tmp/run/state so that the next one can
// clean up after a run that was killed.
func writeState(dir, instanceID string, podsyncdPID int) error {
	data := fmt.Sprintf("%s %d\n", instanceID, podsyncdPID)
	if err := os.WriteFile(filepath.Join(dir, "state"), []byte(data), 0o644); err != nil {
		return fmt.Errorf("write run state: %w", err)
	}
	return nil
}

// removeStale stops what a killed earlier run left: its podsyncd and its
// containerd instance.
func (r *runner) removeStale(ctx context.Context) error {
	b, err := os.ReadFile(filepath.Join(r.dir, "state"))
	if errors.Is(err, os.ErrNotExist) {
		return os.RemoveAll(r.dir)
	}
	if err != nil {
		return err
	}
	var id string
	var pid int
	if _, err := fmt.Sscanf(string(b), "%s %d", &id, &pid); err != nil {
		return fmt.Errorf("read %s: %w", filepath.Join(r.dir, "state"), err)
	}
	r.say("cleaning up after an earlier run that did not finish (instance %s, podsyncd %d)", id, pid)
	if pid > 0 && localcri.Alive(pid) && strings.Contains(localcri.Cmdline(pid), filepath.Join(r.bin, "podsyncd")) {
		if strings.Contains(localcri.Cmdline(pid), r.address()) {
			p, _ := os.FindProcess(pid)
			_ = p.Signal(syscall.SIGTERM)
			deadline := time.Now().Add(30 * time.Second)
			for localcri.Alive(pid) && time.Now().Before(deadline) {
				time.Sleep(100 * time.Millisecond)
			}
			if localcri.Alive(pid) {
				return fmt.Errorf("podsyncd %d of an earlier run is still running: another make run?", pid)
			}
		}
	}
	infos, err := localcri.ListInstances()
	if err != nil {
		return err
	}
	for _, in := range infos {
		if in.ID == id {
			if in.OwnerAlive {
				return fmt.Errorf("containerd %s of an earlier run is owned by a live process %d: is another make run running?", id, in.OwnerPID)
			}
			if err := localcri.Cleanup(ctx, newLogger(), id); err != nil {
				return err
			}
		}
	}
	// Removing through a volume's bind mount would remove the host's files.
	if err := mounttable.UnmountBelow(r.dir); err != nil {
		return err
	}
	return os.RemoveAll(r.dir)
}
