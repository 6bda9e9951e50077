package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/podsync/podsync/host/mounttable"
)

// cleanup deletes the pods, stops podsyncd and containerd (whose teardown
// removes the pods' cgroups, under the instance's cgroup root), checks
// that nothing is left and, when everything went ok, removes the run dir.
func (r *runner) cleanup(ok bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var errs []error
	if r.daemon != nil && r.api != nil {
		if err := r.podsyncctl(ctx, true, "delete", "--all"); err != nil {
			errs = append(errs, err)
		}
	}
	if r.api != nil {
		_ = r.api.Close()
	}
	if r.daemon != nil {
		r.say("stopping podsyncd")
		if err := stopProcess(r.daemon.Process, r.exited, 30*time.Second); err != nil {
			errs = append(errs, fmt.Errorf("stop podsyncd: %w", err))
		}
	}
	if r.inst != nil {
		r.say("stopping containerd %s", r.inst.ID())
		if err := r.inst.Teardown(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if r.dir != "" {
		// podsyncd's pod volumes are mounts under its root dir: deleting
		// the pods unmounts them.
		mps, err := mounttable.Below(r.dir)
		if err != nil {
			errs = append(errs, err)
		}
		for _, mp := range mps {
			errs = append(errs, fmt.Errorf("mount left behind (now unmounted): %s", mp))
		}
		if len(mps) > 0 {
			errs = append(errs, mounttable.UnmountBelow(r.dir))
		}
	}
	if r.base != nil {
		if left := r.leftovers(); len(left) > 0 {
			errs = append(errs, fmt.Errorf("left behind:\n  %s", strings.Join(left, "\n  ")))
		}
	}
	// Everything stays when something failed; otherwise the logs do,
	// until the next run.
	if ok && len(errs) == 0 && r.dir != "" {
		if err := r.removeAllButLogs(); err != nil {
			errs = append(errs, fmt.Errorf("remove run dir: %w", err))
		}
	}
	return errors.Join(errs...)
}

// removeAllButLogs empties the run dir but for podsyncd's and
// containerd's logs, and its state file, so that the next run takes it for
// a clean one (and removes the logs as it starts).
func (r *runner) removeAllButLogs() error {
	keep := map[string]bool{"podsyncd.log": true}
	if r.inst != nil && filepath.Dir(r.inst.LogPath()) == r.dir {
		keep[filepath.Base(r.inst.LogPath())] = true
	}
	entries, err := os.ReadDir(r.dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if keep[e.Name()] {
			continue
		}
		errs = append(errs, os.RemoveAll(filepath.Join(r.dir, e.Name())))
	}
	return errors.Join(errs...)
}

// keptLogs names the logs a run leaves in its run dir, relative to the
// working directory where they are under it.
func (r *runner) keptLogs() string {
	logs := "podsyncd's " + relOrAbs(filepath.Join(r.dir, "podsyncd.log"))
	if r.inst != nil {
		logs += ", containerd's " + relOrAbs(r.inst.LogPath())
	}
	return logs
}

// stopProcess sends SIGTERM to p, then SIGKILL after grace, and waits
// until it has exited.
func stopProcess(p *os.Process, exited <-chan struct{}, grace time.Duration) error {
	if err := p.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-exited:
		return nil
	case <-time.After(grace):
	}
	if err := p.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	<-exited
	return fmt.Errorf("pid %d did not stop within %s and was killed", p.Pid, grace)
}

// leftovers lists what the run left behind: processes of its binaries or
// run dir. (The containerd instance's processes, mounts, links, network
// namespaces and cgroup root are checked by its Teardown, which also knows
// the pods' network namespaces and veths.)
func (r *runner) leftovers() []string {
	var out []string
	now := takeSnapshot()
	for pid, cmd := range now.procs {
		if pid == os.Getpid() {
			continue
		}
		if strings.Contains(cmd, r.dir) || strings.Contains(cmd, filepath.Join(r.bin, "podsyncd")) ||
			(r.inst != nil && strings.Contains(cmd, r.inst.ID())) {
			out = append(out, fmt.Sprintf("process %d: %s", pid, cmd))
		}
	}
	slices.Sort(out)
	return out
}

// snapshot is what the leak check compares.
type snapshot struct {
	procs map[int]string
}

func takeSnapshot() *snapshot {
	s := &snapshot{procs: map[int]string{}}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && len(b) > 0 {
			s.procs[pid] = strings.TrimSpace(string(bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
		}
	}
	return s
}
