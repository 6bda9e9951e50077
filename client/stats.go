package client

import (
	"context"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
)

// GetPodStats returns a pod's CPU, memory, network and storage usage, per
// pod and per running container. Errors: ErrNotFound, ErrFailedPrecondition
// (ReasonPodNotRunning) for a pod without a ready sandbox. With WithRetry
// it is retried on ErrUnavailable.
func (c *Client) GetPodStats(ctx context.Context, namespace, name string) (*podsyncv1.PodStats, error) {
	var resp *podsyncv1.GetPodStatsResponse
	err := c.retry(ctx, func(ctx context.Context) error {
		var err error
		resp, err = c.api.GetPodStats(ctx, &podsyncv1.GetPodStatsRequest{Namespace: namespace, Name: name})
		return err
	})
	if err != nil {
		return nil, wrap("GetPodStats", podName(namespace, name), err)
	}
	return resp.GetStats(), nil
}

// ListPodStats returns GetPodStats of every running pod of namespace (all
// namespaces if empty). With WithRetry it is retried on ErrUnavailable.
func (c *Client) ListPodStats(ctx context.Context, namespace string) ([]*podsyncv1.PodStats, error) {
	var resp *podsyncv1.ListPodStatsResponse
	err := c.retry(ctx, func(ctx context.Context) error {
		var err error
		resp, err = c.api.ListPodStats(ctx, &podsyncv1.ListPodStatsRequest{Namespace: namespace})
		return err
	})
	if err != nil {
		return nil, wrap("ListPodStats", namespace, err)
	}
	return resp.GetPods(), nil
}
