package localcri

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// containerdEnv is containerd's environment: the flavour's shim first on PATH.
func containerdEnv(shimDir string) []string {
	env := make([]string, 0, len(os.Environ())+1)
	path := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	for _, kv := range os.Environ() {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v + ":" + path
			continue
		}
		env = append(env, kv)
	}
	return append(env, "PATH="+shimDir+":"+path)
}

// startContainerd starts containerd as a child process and waits until CRI
// answers Version and reports the runtime and the network ready.
func (i *Instance) startContainerd(ctx context.Context) error {
	if i.running() {
		return errors.New("containerd is running already")
	}
	i.mu.Lock()
	logf, err := os.OpenFile(i.rec.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		i.mu.Unlock()
		return fmt.Errorf("open containerd log: %w", err)
	}
	cmd := exec.Command(i.bins.containerd, "--config", i.rec.ConfigPath)
	cmd.Env = containerdEnv(i.bins.shimDir)
	cmd.Dir = i.rec.Dir
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group: a ^C meant for the test binary does not reach it,
	// so that teardown still finds it running.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	_ = logf.Close()
	if err != nil {
		i.mu.Unlock()
		return fmt.Errorf("start containerd: %w", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	i.proc, i.procDone = cmd.Process, done
	i.started = true
	i.rec.ContainerdPID = cmd.Process.Pid
	i.mu.Unlock()
	if err := i.writeRecord(); err != nil {
		return err
	}
	return i.waitReady(ctx, done)
}

// waitReady waits until CRI answers Version and Status says the runtime and
// the network are ready; it fails early if containerd exits.
func (i *Instance) waitReady(ctx context.Context, done <-chan struct{}) error {
	conn, err := dialCRI(i.rec.Socket)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	rs := runtimeapi.NewRuntimeServiceClient(conn)
	var last error
	err = poll(ctx, 50*time.Millisecond, func() (bool, error) {
		select {
		case <-done:
			return false, errors.New("containerd exited during start")
		default:
		}
		if !fileExists(i.rec.Socket) {
			return false, nil
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if _, err := rs.Version(cctx, &runtimeapi.VersionRequest{}); err != nil {
			last = err
			return false, nil
		}
		st, err := rs.Status(cctx, &runtimeapi.StatusRequest{})
		if err != nil {
			last = err
			return false, nil
		}
		for _, c := range st.GetStatus().GetConditions() {
			// Other conditions, such as containerd 2.x's deprecation warnings
			// (cgroup v1 here), do not keep pods from running.
			if (c.Type == runtimeapi.RuntimeReady || c.Type == runtimeapi.NetworkReady) && !c.Status {
				last = fmt.Errorf("condition %s: %s %s", c.Type, c.Reason, c.Message)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("wait for cri: %w (last: %w)", err, last)
	}
	if err != nil {
		return fmt.Errorf("wait for cri: %w", err)
	}
	return nil
}

// Stop stops containerd (SIGTERM, then SIGKILL after 15 s or when ctx is
// done) and keeps all its state: pods and containers keep running under
// their shims, and Start brings containerd back to them.
func (i *Instance) Stop(ctx context.Context) error {
	i.mu.Lock()
	p, done := i.proc, i.procDone
	i.mu.Unlock()
	if p == nil {
		return nil
	}
	err := stopProcess(ctx, p.Pid, done, 15*time.Second)
	i.mu.Lock()
	i.proc, i.procDone = nil, nil
	i.rec.ContainerdPID = 0
	i.mu.Unlock()
	if werr := i.writeRecord(); werr != nil && err == nil {
		err = werr
	}
	if err != nil {
		return fmt.Errorf("stop containerd: %w", err)
	}
	return nil
}

// Start starts containerd again after Stop, with the same configuration
// and state, and waits until CRI is ready.
func (i *Instance) Start(ctx context.Context) error {
	i.mu.Lock()
	torn := i.torn
	i.mu.Unlock()
	if torn {
		return errors.New("instance was torn down")
	}
	return i.startContainerd(ctx)
}

// stopProcess sends SIGTERM to pid and waits for it to exit; after grace, or
// when ctx is done, it sends SIGKILL and waits again. done, if not nil, is
// closed when the process is reaped; otherwise /proc is polled.
func stopProcess(ctx context.Context, pid int, done <-chan struct{}, grace time.Duration) error {
	exited := func() bool {
		if done != nil {
			select {
			case <-done:
				return true
			default:
				return false
			}
		}
		return !Alive(pid)
	}
	waitExit := func(ctx context.Context) error {
		return poll(ctx, 20*time.Millisecond, func() (bool, error) { return exited(), nil })
	}
	if exited() {
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	gctx, cancel := context.WithTimeout(ctx, grace)
	err := waitExit(gctx)
	cancel()
	if err == nil {
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := waitExit(kctx); err != nil {
		return fmt.Errorf("process %d survived SIGKILL: %w", pid, err)
	}
	return nil
}

// logTail returns the last lines of containerd's log.
func (i *Instance) logTail() string {
	b, err := os.ReadFile(i.rec.LogPath)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return strings.Join(lines, "\n")
}
