//go:build integration

package faults_test

import (
	"context"
	"sync"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podsync/podsync/engine/model"
)

// initHistory remembers every init container instance the runtime has
// held during a test and how its start ended, so that the check that no
// init container ran twice in one sandbox can count the starts that
// podsyncd's death cut short (StartError) even when the instance is gone
// by the time the pods converge: the kubelet's pruneInitContainersBeforeStart
// removes every exited instance of an init container but the newest one
// before it starts init containers again, and with it the evidence.
type initHistory struct {
	mu sync.Mutex
	// reasons is the exit reason of each exited init instance, by pod UID
	// and container ID.
	reasons map[string]map[string]string
}

// watchInits polls the runtime until the test ends, recording the reason of
// every exited init container instance once. An instance lives at least
// until a newer instance of its container has exited and another start
// is due, well above the poll interval.
func watchInits(t *testing.T) *initHistory {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h := &initHistory{reasons: map[string]map[string]string{}}
	rs, err := inst.RuntimeService(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() { _ = rs.Close(context.WithoutCancel(ctx)) }()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			h.poll(ctx, rs)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return h
}

// runtimeClient is what poll needs of the runtime service.
type runtimeClient interface {
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	ContainerStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.ContainerStatusResponse, error)
}

func (h *initHistory) poll(ctx context.Context, rs runtimeClient) {
	cs, err := rs.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_EXITED},
	})
	if err != nil {
		return // the next poll retries; ctx may be done
	}
	for _, c := range cs {
		info := model.ContainerInfoFromLabels(c.GetLabels())
		if info.ContainerName != "init" || h.known(string(info.UID), c.GetId()) {
			continue
		}
		resp, err := rs.ContainerStatus(ctx, c.GetId(), false)
		if err != nil {
			continue // removed meanwhile, or ctx done
		}
		h.record(string(info.UID), c.GetId(), resp.GetStatus().GetReason())
	}
}

func (h *initHistory) known(uid, id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.reasons[uid][id]
	return ok
}

func (h *initHistory) record(uid, id, reason string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.reasons[uid] == nil {
		h.reasons[uid] = map[string]string{}
	}
	h.reasons[uid][id] = reason
}

// startErrors counts the init instances of the pod, held now (cs) or seen
// before, whose start failed midway: reason StartError.
func (h *initHistory) startErrors(ctx context.Context, t *testing.T, uid string, cs []*runtimeapi.Container) int {
	t.Helper()
	// The instances held now are read once more: the last poll may
	// predate their exit.
	for _, c := range cs {
		if reason, ok := containerReason(ctx, t, c); ok {
			h.record(uid, c.GetId(), reason)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, reason := range h.reasons[uid] {
		if reason == "StartError" {
			n++
		}
	}
	return n
}
