package engine

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsync/podsync/engine/runpods"
)

// RunPods runs a batch of pods to a target and reports each pod's outcome:
// the kubelet's run-once mode with a contract (engine/runpods). The node
// admits the batch once, as a whole (each pod beside the node's pods and
// the batch's pods before it; with AllOrNothing one refusal refuses all),
// then applies each admitted pod as Apply does, without admitting it
// again, and waits on the revision log for its target, its failure or its
// timeout. progress, if not nil, gets each step and status as they come,
// one at a time.
//
// It returns an error only when the batch could not run at all: the
// store could not be read, or the runtime stopped answering (an error
// wrapping ErrRuntimeUnavailable), or ctx ended.
func (n *Node) RunPods(ctx context.Context, req RunPodsRequest, progress func(RunPodsProgress)) (RunPodsSummary, error) {
	if err := n.Leases().Check(FenceOf(ctx)); err != nil {
		return RunPodsSummary{}, fmt.Errorf("run pods: %w", err)
	}
	return runpods.Run(ctx, runpods.Options{
		Pods:  n,
		Admit: n.admission.batch,
		Apply: func(ctx context.Context, pod *corev1.Pod, configMaps []*corev1.ConfigMap, secrets []*corev1.Secret, emit func(StepResult)) (corev1.PodStatus, []StepResult, error) {
			res, err := n.apply(ctx, pod, configMaps, secrets, req.Preconditions[pod.UID], emit, true)
			return res.Status, res.Steps, err
		},
		PodLogDir: n.cfg.node.PodLogDir,
		Logger:    n.cfg.log,
	}, req, progress)
}
