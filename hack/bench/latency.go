package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
)

// latencyResult is the status-latency rows of one flavour.
type latencyResult struct {
	// exitSeen: kill → the first WatchPods status of the pod that shows
	// the exit (terminated or waiting state, or a new restart count with
	// lastState terminated). running: kill → the first status with the
	// container running again, restart count 1. firstMsg: kill → the
	// first WatchPods message of any kind about the pod.
	exitSeen, running, firstMsg sample
	// runtimeExit: kill → the runtime reports the container exited, a
	// CRI CONTAINER_STOPPED event to a client of our own (2.x) or, without
	// events (1.6), ContainerStatus polled every 10 ms: the floor.
	runtimeExit sample
	runtimeHow  string
	// passMS is the time podsyncd spent in sync passes between the kill
	// and the running status (from its metrics), passes how many it ran.
	passMS, passes sample
	// terminatedShown counts samples in which a status showed the
	// container terminated or waiting before it ran again.
	terminatedShown, samples int
	errs                     []string
}

type watchMsg struct {
	at   time.Time
	resp *podsyncv1.WatchPodsResponse
	err  error
}

// statusLatency runs k pods, then for each in turn kills its container's
// process with SIGKILL from outside (its PID from CRI ContainerStatus
// info) and times the WatchPods messages that follow. Each pod crashes
// once, so the restart is not backed off.
func (b *bench) statusLatency(ctx context.Context, e *env, k int) *latencyResult {
	res := &latencyResult{}
	log := b.log.With(zap.String("flavour", string(e.flavour)))
	if err := b.measureLatency(ctx, e, k, res); err != nil {
		res.errs = append(res.errs, err.Error())
		log.Error("status latency", zap.Error(err))
	}
	if err := e.cleanAll(ctx); err != nil {
		res.errs = append(res.errs, "cleanup: "+err.Error())
	}
	log.Info("status latency done", zap.String("exit_seen", res.exitSeen.ms()), zap.String("running", res.running.ms()))
	return res
}

func (b *bench) measureLatency(ctx context.Context, e *env, k int, res *latencyResult) error {
	pods := newPods("lat", k)
	e.noteUIDs(uidsOf(pods)...)
	req, err := runPodsRequest(pods)
	if err != nil {
		return err
	}
	if _, err := e.d.runPods(ctx, req); err != nil {
		return err
	}
	list, err := e.d.api.ListPods(ctx, &podsyncv1.ListPodsRequest{Namespace: benchNamespace})
	if err != nil {
		return fmt.Errorf("ListPods: %w", err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := e.d.api.WatchPods(wctx, &podsyncv1.WatchPodsRequest{SinceRevision: list.GetRevision(), Namespace: benchNamespace})
	if err != nil {
		return fmt.Errorf("WatchPods: %w", err)
	}
	criEvents := e.followCRIEvents(wctx)
	msgs := make(chan watchMsg, 1024)
	go func() {
		for {
			resp, err := stream.Recv()
			select {
			case msgs <- watchMsg{at: time.Now(), resp: resp, err: err}:
			case <-wctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	// Let the statuses that follow RunPods (readiness) settle.
	time.Sleep(500 * time.Millisecond)
	for _, pod := range pods {
		if err := b.latencySample(ctx, e, pod.Name, msgs, criEvents, res); err != nil {
			res.exitSeen.fail(err)
			res.running.fail(err)
			b.log.Warn("latency sample failed", zap.String("pod", pod.Name), zap.Error(err))
		}
		res.samples++
	}
	return nil
}

// latencySample kills the container of pod name and records in res how
// long the WatchPods messages about it (msgs), the runtime's report of the
// exit and the running status of the restarted container took, and the
// sync passes podsyncd ran meanwhile.
func (b *bench) latencySample(ctx context.Context, e *env, name string, msgs <-chan watchMsg, criEvents *criEventFollower, res *latencyResult) error {
	id, pid, restarts, err := e.runningContainer(ctx, name)
	if err != nil {
		return err
	}
	// Drop what arrived before the kill.
	if err := drainWatch(msgs); err != nil {
		return err
	}
	counts0, cerr := e.d.scrapeCounts(ctx)
	criEvents.drain()
	t0 := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill %d: %w", pid, err)
	}
	floor := make(chan time.Time, 1)
	go func() { floor <- e.runtimeExit(ctx, id, criEvents) }()
	defer func() {
		if at := <-floor; !at.IsZero() {
			res.runtimeExit.add(msOf(at.Sub(t0)))
		}
	}()
	res.runtimeHow = criEvents.how()
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	first, exitSeen := false, false
	for {
		var m watchMsg
		select {
		case m = <-msgs:
		case <-timeout.C:
			return fmt.Errorf("pod %s: no running status within 30s of the kill", name)
		case <-ctx.Done():
			return ctx.Err()
		}
		if m.err != nil {
			return fmt.Errorf("WatchPods: %w", m.err)
		}
		if m.resp.GetPod().GetName() != name {
			continue
		}
		if !first {
			first = true
			res.firstMsg.add(msOf(m.at.Sub(t0)))
		}
		st := m.resp.GetStatus()
		if st == nil || len(st.GetContainerStatuses()) == 0 {
			continue
		}
		cs := st.GetContainerStatuses()[0]
		running := cs.GetState().GetRunning() != nil
		if !exitSeen && (!running || cs.GetRestartCount() > restarts) {
			exitSeen = true
			res.exitSeen.add(msOf(m.at.Sub(t0)))
			if !running {
				res.terminatedShown++
			}
		}
		if running && cs.GetRestartCount() > restarts {
			res.running.add(msOf(m.at.Sub(t0)))
			if counts1, err := e.d.scrapeCounts(ctx); err == nil && cerr == nil {
				res.passMS.add((counts1["pass_seconds"] - counts0["pass_seconds"]) * 1000)
				res.passes.add(counts1["passes"] - counts0["passes"])
			}
			return nil
		}
	}
}

// runningContainer returns the id, host PID and restart count of the one
// container of pod name, which must be running.
func (e *env) runningContainer(ctx context.Context, name string) (id string, pid int, restarts int32, err error) {
	got, err := e.d.api.GetPod(ctx, &podsyncv1.GetPodRequest{Namespace: benchNamespace, Name: name})
	if err != nil {
		return "", 0, 0, fmt.Errorf("GetPod: %w", err)
	}
	css := got.GetPod().GetStatus().GetContainerStatuses()
	if len(css) != 1 || css[0].GetState().GetRunning() == nil {
		return "", 0, 0, fmt.Errorf("pod %s is not running", name)
	}
	_, id, _ = strings.Cut(css[0].GetContainerId(), "://")
	pid, err = e.containerPID(ctx, id)
	if err != nil {
		return "", 0, 0, err
	}
	return id, pid, css[0].GetRestartCount(), nil
}

// drainWatch drops the WatchPods messages that have arrived; it fails if
// one of them is the stream's error.
func drainWatch(msgs <-chan watchMsg) error {
	for {
		select {
		case m := <-msgs:
			if m.err != nil {
				return fmt.Errorf("WatchPods: %w", m.err)
			}
		default:
			return nil
		}
	}
}

// containerPID returns the host PID of a container's init process, from
// CRI's verbose ContainerStatus info (both containerd flavours report
// "pid").
func (e *env) containerPID(ctx context.Context, id string) (int, error) {
	resp, err := e.rt.ContainerStatus(ctx, id, true)
	if err != nil {
		return 0, fmt.Errorf("container status %s: %w", id, err)
	}
	var info struct {
		PID int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(resp.GetInfo()["info"]), &info); err != nil {
		return 0, fmt.Errorf("container %s info: %w", id, err)
	}
	if info.PID <= 0 {
		return 0, errors.New("container info has no pid")
	}
	return info.PID, nil
}

// criEventFollower follows CRI container events with a client of the
// bench's own, where the runtime streams them.
type criEventFollower struct {
	events chan timedEvent
	failed chan struct{} // closed when the stream ended (1.6: at once)
}

type timedEvent struct {
	at time.Time
	ev *runtimeapi.ContainerEventResponse
}

func (e *env) followCRIEvents(ctx context.Context) *criEventFollower {
	f := &criEventFollower{events: make(chan timedEvent, 4096), failed: make(chan struct{})}
	raw := make(chan *runtimeapi.ContainerEventResponse, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = e.rt.GetContainerEvents(ctx, raw, nil)
		close(f.failed)
	}()
	go func() {
		// The client sends without watching ctx: read until it returns.
		for {
			select {
			case ev := <-raw:
				select {
				case f.events <- timedEvent{at: time.Now(), ev: ev}:
				default:
				}
			case <-done:
				return
			}
		}
	}()
	// Give the stream a moment to open or fail.
	time.Sleep(200 * time.Millisecond)
	return f
}

func (f *criEventFollower) streaming() bool {
	select {
	case <-f.failed:
		return false
	default:
		return true
	}
}

func (f *criEventFollower) how() string {
	if f.streaming() {
		return "a CRI CONTAINER_STOPPED event to a GetContainerEvents client of the bench's own"
	}
	return "CRI ContainerStatus, polled every 10 ms, reporting EXITED"
}

// drain drops the events received so far.
func (f *criEventFollower) drain() {
	for {
		select {
		case <-f.events:
		default:
			return
		}
	}
}

// runtimeExit returns when the runtime reported container id exited: its
// CONTAINER_STOPPED event, or without events the first ContainerStatus
// poll (every 10 ms) that says EXITED. Zero if not within 30 s.
func (e *env) runtimeExit(ctx context.Context, id string, f *criEventFollower) time.Time {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if f.streaming() {
		for {
			select {
			case te := <-f.events:
				if te.ev.GetContainerId() == id && te.ev.GetContainerEventType() == runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT {
					return te.at
				}
			case <-ctx.Done():
				return time.Time{}
			}
		}
	}
	for {
		resp, err := e.rt.ContainerStatus(ctx, id, false)
		at := time.Now()
		if err == nil && resp.GetStatus().GetState() == runtimeapi.ContainerState_CONTAINER_EXITED {
			return at
		}
		select {
		case <-ctx.Done():
			return time.Time{}
		case <-time.After(10 * time.Millisecond):
		}
	}
}
