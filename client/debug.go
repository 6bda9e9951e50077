package client

import (
	"context"
	"fmt"
	"time"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
)

// AddEphemeralContainer adds a debug container to a running pod and
// returns the pod after the pass that started it. It is not retried: a
// retry after a lost answer would fail on the duplicate name.
func (c *Client) AddEphemeralContainer(ctx context.Context, req *podsyncv1.AddEphemeralContainerRequest) (*podsyncv1.AddEphemeralContainerResponse, error) {
	resp, err := c.api.AddEphemeralContainer(ctx, req)
	if err != nil {
		return nil, wrap("AddEphemeralContainer", podName(req.GetNamespace(), req.GetName()), err)
	}
	return resp, nil
}

// debugPoll is how often Debug reads the pod while the debug container
// is being created.
const debugPoll = 250 * time.Millisecond

// ContainerWaitError is Debug's error for a debug container that waits
// for a reason other than its creation (an image that cannot be pulled, a
// target that does not run): Reason and Message are its waiting state's.
type ContainerWaitError struct {
	Container, Reason, Message string
}

func (e *ContainerWaitError) Error() string {
	return fmt.Sprintf("debug container %q is waiting: %s: %s", e.Container, e.Reason, e.Message)
}

// Debug adds ec to the pod namespace/name, as kubectl debug's
// ephemeral-container flow does, and waits until it runs or has exited
// already (a short command): it returns the container's status then. A
// container that waits for another reason than its creation (ErrImagePull,
// CreateContainerConfigError, …) ends the wait with a *ContainerWaitError;
// ctx bounds the wait. Attach to it (with ec's stdin/tty) or read its logs
// next.
func (c *Client) Debug(ctx context.Context, namespace, name string, ec *podsyncv1.EphemeralContainer) (*podsyncv1.ContainerStatus, error) {
	resp, err := c.AddEphemeralContainer(ctx, &podsyncv1.AddEphemeralContainerRequest{Namespace: namespace, Name: name, EphemeralContainer: ec})
	if err != nil {
		return nil, err
	}
	pod := resp.GetPod()
	for {
		st := ephemeralStatus(pod, ec.GetName())
		if st != nil {
			switch s := st.GetState(); {
			case s.GetRunning() != nil, s.GetTerminated() != nil:
				return st, nil
			case s.GetWaiting() != nil && !creating(s.GetWaiting().GetReason()):
				return st, &ContainerWaitError{Container: ec.GetName(), Reason: s.GetWaiting().GetReason(), Message: s.GetWaiting().GetMessage()}
			}
		}
		select {
		case <-ctx.Done():
			return st, fmt.Errorf("wait for debug container %q of pod %s: %w", ec.GetName(), podName(namespace, name), ctx.Err())
		case <-time.After(debugPoll):
		}
		got, err := c.GetPod(ctx, namespace, name)
		if err != nil {
			return nil, err
		}
		pod = got.GetPod()
	}
}

// creating reports whether a waiting reason is the kubelet's for a
// container on its way to start.
func creating(reason string) bool {
	return reason == "" || reason == "ContainerCreating" || reason == "PodInitializing"
}

func ephemeralStatus(pod *podsyncv1.Pod, name string) *podsyncv1.ContainerStatus {
	for _, st := range pod.GetStatus().GetEphemeralContainerStatuses() {
		if st.GetName() == name {
			return st
		}
	}
	return nil
}
