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
	resp, err := unary(ctx, c, "GetPodStats", podName(namespace, name), c.api.GetPodStats,
		&podsyncv1.GetPodStatsRequest{Namespace: namespace, Name: name})
	return resp.GetStats(), err
}

// ListPodStats returns GetPodStats of every running pod of namespace (all
// namespaces if empty). With WithRetry it is retried on ErrUnavailable.
func (c *Client) ListPodStats(ctx context.Context, namespace string) ([]*podsyncv1.PodStats, error) {
	resp, err := unary(ctx, c, "ListPodStats", namespace, c.api.ListPodStats, &podsyncv1.ListPodStatsRequest{Namespace: namespace})
	return resp.GetPods(), err
}

// StatsSummary returns ListPodStats' whole answer: the usage of every
// running pod of namespace (all namespaces if empty) and the node's own
// (the whole machine's; unset when podsyncd cannot read it), as the
// kubelet's /stats/summary. With WithRetry it is retried on
// ErrUnavailable.
func (c *Client) StatsSummary(ctx context.Context, namespace string) (*podsyncv1.ListPodStatsResponse, error) {
	return unary(ctx, c, "ListPodStats", namespace, c.api.ListPodStats, &podsyncv1.ListPodStatsRequest{Namespace: namespace})
}
