package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podsync/podsync/engine/model"
)

// restartPods is how many pods the restart section stops, one at a time.
const restartPods = 8

// targetRestartVsKubelet bounds podsync's median restart after an
// external stop as a fraction of the kubelet's.
const targetRestartVsKubelet = 0.2

// restartResult is the restart-after-an-external-stop rows of one
// flavour: from the return of `crictl stop -t 0` of a pod's container
// until a new container of the pod runs (CRI poll), ms. floor is the
// bench itself creating and starting the new container the moment the
// stop returns: an agent that reacts in no time, the runtime's share.
type restartResult struct {
	podsync, kubelet, floor sample
	errs                    []string
}

// restartAfterStop runs restartPods pods through podsyncd (RunPods,
// restartPolicy Always) and then as the kubelet's static pods, and times
// the first restart of each after its container is stopped from outside.
func (b *bench) restartAfterStop(ctx context.Context, e *env) *restartResult {
	res := &restartResult{}
	log := b.log.With(zap.String("flavour", string(e.flavour)))
	if err := b.restartPodsync(ctx, e, res); err != nil {
		res.errs = append(res.errs, "podsync: "+err.Error())
		log.Error("restart after stop, podsync", zap.Error(err))
	}
	if ctx.Err() == nil {
		if err := b.restartKubelet(ctx, e, res); err != nil {
			res.errs = append(res.errs, "kubelet: "+err.Error())
			log.Error("restart after stop, kubelet", zap.Error(err))
		}
	}
	if ctx.Err() == nil {
		if err := restartFloor(ctx, e, res); err != nil {
			res.errs = append(res.errs, "floor: "+err.Error())
			log.Error("restart after stop, floor", zap.Error(err))
		}
	}
	log.Info("restart after stop done", zap.String("podsync", res.podsync.ms()), zap.String("kubelet", res.kubelet.ms()),
		zap.String("floor", res.floor.ms()))
	return res
}

func (b *bench) restartPodsync(ctx context.Context, e *env, res *restartResult) error {
	if err := e.ensurePodsyncd(ctx); err != nil {
		return err
	}
	pods := newPods("rs", restartPods)
	e.noteUIDs(uidsOf(pods)...)
	req, err := runPodsRequest(pods)
	if err != nil {
		return err
	}
	_, err = e.d.runPods(ctx, req)
	if err == nil {
		e.stopEach(ctx, pods, &res.podsync)
	}
	return errors.Join(err, e.cleanAll(ctx))
}

func (b *bench) restartKubelet(ctx context.Context, e *env, res *restartResult) error {
	k, err := b.startKubelet(ctx, e)
	if err != nil {
		res.kubelet.fail(err)
		return errors.Join(err, e.restartPodsyncd(ctx), e.cleanAll(ctx))
	}
	pods := newPods("rk", restartPods)
	_, err = e.kubeletPods(ctx, k, pods, runTimeout(restartPods))
	if err == nil {
		e.stopEach(ctx, pods, &res.kubelet)
	} else {
		res.kubelet.fail(err)
	}
	return errors.Join(err, b.endKubelet(ctx, e, k))
}

// restartFloor runs restartPods pods through CRI as the raw baseline
// does (podsyncd leaves them alone), then stops each one's container as
// the other rows do and, as soon as the stop returns, creates and starts
// its next attempt itself: what a restart costs with an agent that
// reacts in no time.
func restartFloor(ctx context.Context, e *env, res *restartResult) error {
	raws, err := e.rawPods(newPods("rf", restartPods))
	if err != nil {
		res.floor.fail(err)
		return err
	}
	sandboxes, err := e.runRaw(ctx, raws, 1)
	if err != nil {
		res.floor.fail(err)
		return errors.Join(err, e.cleanAll(ctx))
	}
	for i, p := range raws {
		next := proto.CloneOf(p.container)
		next.Metadata.Attempt = 1
		ms, err := e.stopAndTime(ctx, p.uid, func(ctx context.Context) error {
			id, err := e.rt.CreateContainer(ctx, sandboxes[i], next, p.sandbox)
			if err != nil {
				return fmt.Errorf("CreateContainer: %w", err)
			}
			return e.rt.StartContainer(ctx, id)
		})
		if err != nil {
			res.floor.fail(fmt.Errorf("pod %d: %w", i, err))
			continue
		}
		res.floor.add(ms)
	}
	return e.cleanAll(ctx)
}

// stopEach stops each pod's container in turn and records the time to
// its restart in s.
func (e *env) stopEach(ctx context.Context, pods []*corev1.Pod, s *sample) {
	for _, p := range pods {
		ms, err := e.stopAndTime(ctx, p.UID, nil)
		if err != nil {
			s.fail(fmt.Errorf("pod %s: %w", p.Name, err))
			continue
		}
		s.add(ms)
	}
}

// stopAndTime stops the running container of pod uid with `crictl stop
// -t 0` (SIGKILL at once, as an operator or another tool would) and
// returns the ms from the command's return until another container of
// the pod is RUNNING. restart, when set, is called as soon as the stop
// returns (the floor's own create and start).
func (e *env) stopAndTime(ctx context.Context, uid types.UID, restart func(context.Context) error) (float64, error) {
	ids, err := e.podRunning(ctx, uid)
	if err != nil {
		return 0, err
	}
	if len(ids) != 1 {
		return 0, fmt.Errorf("%d running containers before the stop, want 1", len(ids))
	}
	old := ids[0]
	if _, err := e.crictlRun(ctx, "stop", "--timeout", "0", old); err != nil {
		return 0, err
	}
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if restart != nil {
		if err := restart(wctx); err != nil {
			return 0, err
		}
	}
	for {
		ids, err := e.podRunning(wctx, uid)
		if err != nil {
			return 0, err
		}
		for _, id := range ids {
			if id != old {
				return msOf(time.Since(start)), nil
			}
		}
		select {
		case <-wctx.Done():
			return 0, fmt.Errorf("no new container running: %w", wctx.Err())
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// podRunning lists the running containers of pod uid.
func (e *env) podRunning(ctx context.Context, uid types.UID) ([]string, error) {
	ctrs, err := e.rt.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: map[string]string{model.LabelPodUID: string(uid)},
	})
	if err != nil {
		return nil, fmt.Errorf("list running containers: %w", err)
	}
	ids := make([]string, len(ctrs))
	for i, c := range ctrs {
		ids[i] = c.GetId()
	}
	return ids, nil
}

func renderRestart(w *strings.Builder, fr *flavourResult) {
	r := fr.restart
	if r == nil {
		return
	}
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("## Restart after an external stop — containerd %s (%s)\n\n", flavourName(fr.flavour), fr.version)
	p("From the return of `crictl stop --timeout 0` of a pod's container to another container of the pod\n"+
		"RUNNING (CRI poll); %d pods, one stop each (first restart, no back-off).\n\n", restartPods)
	p("| agent | median (min–max) |\n|---|---|\n")
	p("| **podsyncd** (RunPods, restartPolicy Always) | %s |\n", r.podsync.ms())
	p("| kubelet (static pods) | %s |\n", r.kubelet.ms())
	p("| floor: the bench creates and starts the next container itself as the stop returns | %s |\n", r.floor.ms())
	ratio := r.podsync.median() / r.kubelet.median()
	p("| podsync ÷ kubelet (medians) | %s |\n", ratioOr(ratio, r.podsync.ok() && r.kubelet.ok()))
	floorRatio := r.floor.median() / r.kubelet.median()
	p("| floor ÷ kubelet (medians): the least the ratio can be on this runtime | %s |\n\n", ratioOr(floorRatio, r.floor.ok() && r.kubelet.ok()))
}
