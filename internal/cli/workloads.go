package cli

import (
	"context"
	"fmt"
	"slices"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/client"
	"github.com/podsync/podsync/convert"
)

// workloadKey names a workload whose pods convert.Decode made: its
// namespace, kind and name, as the pods' labels carry them.
type workloadKey struct{ namespace, kind, name string }

// workloadsOf returns the workloads the pods belong to, in order.
func workloadsOf(pods []*podsyncv1.Pod) []workloadKey {
	var out []workloadKey
	for _, p := range pods {
		out = addWorkload(out, p.GetMetadata().GetNamespace(), p.GetMetadata().GetLabels())
	}
	return out
}

// workloadsOfManifests returns the workloads the manifests' pods belong
// to, in order.
func workloadsOfManifests(m *convert.Manifests) []workloadKey {
	var out []workloadKey
	for _, p := range m.Pods {
		out = addWorkload(out, p.Namespace, p.Labels)
	}
	return out
}

func addWorkload(out []workloadKey, namespace string, l map[string]string) []workloadKey {
	kind, name := l[convert.LabelWorkloadKind], l[convert.LabelWorkloadName]
	if kind == "" || name == "" {
		return out
	}
	k := workloadKey{namespaceOr(namespace), kind, name}
	if slices.Contains(out, k) {
		return out
	}
	return append(out, k)
}

// workloadPods returns the namespace and name of every pod podsyncd runs
// for the workloads.
func (a *app) workloadPods(ctx context.Context, c *client.Client, ws []workloadKey) ([][2]string, error) {
	var out [][2]string
	for _, w := range ws {
		lctx, cancel := a.callContext(ctx)
		resp, err := c.ListPods(lctx, &podsyncv1.ListPodsRequest{Namespace: w.namespace,
			LabelSelector: convert.LabelWorkloadKind + "=" + w.kind + "," + convert.LabelWorkloadName + "=" + w.name})
		cancel()
		if err != nil {
			return nil, err
		}
		for _, p := range resp.GetPods() {
			out = append(out, [2]string{p.GetMetadata().GetNamespace(), p.GetMetadata().GetName()})
		}
	}
	return out, nil
}

// withWorkloadPods adds to refs the other pods of the manifests'
// workloads: those of more replicas than the manifests now say.
func (a *app) withWorkloadPods(ctx context.Context, c *client.Client, refs [][2]string, m *convert.Manifests) ([][2]string, error) {
	more, err := a.workloadPods(ctx, c, workloadsOfManifests(m))
	if err != nil {
		return nil, err
	}
	for _, r := range more {
		if !slices.Contains(refs, r) {
			refs = append(refs, r)
		}
	}
	return refs, nil
}

// staleWorkloadPods are the pods of the request's workloads that the
// request no longer holds: replicas scaled down.
func (a *app) staleWorkloadPods(ctx context.Context, c *client.Client, req *podsyncv1.RunPodsRequest) ([][2]string, error) {
	have, err := a.workloadPods(ctx, c, workloadsOf(req.GetPods()))
	if err != nil {
		return nil, err
	}
	var stale [][2]string
	for _, r := range have {
		if !slices.ContainsFunc(req.GetPods(), func(p *podsyncv1.Pod) bool {
			return namespaceOr(p.GetMetadata().GetNamespace()) == r[0] && p.GetMetadata().GetName() == r[1]
		}) {
			stale = append(stale, r)
		}
	}
	return stale, nil
}

// pruneWorkloads deletes the pods of the request's workloads that it no
// longer holds, so that re-applying a workload with fewer replicas leaves
// only its replicas; each deletion is a notice on stderr.
func (a *app) pruneWorkloads(ctx context.Context, c *client.Client, req *podsyncv1.RunPodsRequest) error {
	stale, err := a.staleWorkloadPods(ctx, c, req)
	if err != nil {
		return err
	}
	for _, r := range stale {
		dctx, cancel := a.waitContext(ctx)
		_, err := c.DeletePod(dctx, &podsyncv1.DeletePodRequest{Namespace: r[0], Name: r[1]})
		cancel()
		if err != nil {
			return err
		}
		_, _ = fmt.Fprintf(a.stderr, "notice: pod %q deleted: its workload has fewer replicas now\n", r[0]+"/"+r[1])
	}
	return nil
}
