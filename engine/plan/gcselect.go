package plan

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsync/podsync/engine/model"
)

// garbage is what the per-pod garbage collection removes.
type garbage struct {
	Containers []model.ContainerInstance
	Sandboxes  []model.Sandbox
}

// FindGarbage picks the dead instances and sandboxes of a pod that are no
// longer needed, as the kubelet's container GC with MaxPerPodContainer 1
// does, adapted to podsync's back-off, which is computed from what the
// runtime holds. Of each container in the spec it keeps
//
//   - the newest instance (its state is the container's state),
//   - the newest exited one beside it (its last termination state), and
//   - the first exited instance of the current crash-loop run, whose
//     restart count tells CrashLoopBackoff how long the run is;
//
// a created-but-never-started instance that is not the newest (left by a
// failed or interrupted pass) is removed, and so is every dead instance of
// a container no longer in the spec. Running and unknown instances are
// never removed. A sandbox is removed when it is not ready, not the newest,
// and holds no container any more (the kubelet's evictSandboxes).
func FindGarbage(pod *corev1.Pod, view *model.RuntimeView, sandboxOf map[string]string, bo BackoffPolicy) garbage {
	var g garbage
	keep := map[string]bool{}
	byName := map[string][]*model.ContainerInstance{}
	var names []string
	for i := range view.Containers {
		inst := &view.Containers[i]
		if _, ok := byName[inst.Name]; !ok {
			names = append(names, inst.Name)
		}
		byName[inst.Name] = append(byName[inst.Name], inst)
	}
	for _, name := range names {
		insts := byName[name]
		c := model.SpecContainer(pod, name)
		if c != nil {
			keep[insts[0].ID] = true
			// Created instances behind the newest are junk; skip them.
			var history []*model.ContainerInstance
			for _, inst := range insts[1:] {
				if inst.State != model.ContainerCreated {
					history = append(history, inst)
				}
			}
			if i := slices.IndexFunc(history, func(x *model.ContainerInstance) bool { return x.State == model.ContainerExited }); i >= 0 {
				keep[history[i].ID] = true
			}
			if _, first := crashLoopRun(append([]*model.ContainerInstance{insts[0]}, history...), sameDefinition(pod, c), bo); first != nil {
				keep[first.ID] = true
			}
		}
		for _, inst := range insts {
			if keep[inst.ID] || (inst.State != model.ContainerExited && inst.State != model.ContainerCreated) {
				continue
			}
			g.Containers = append(g.Containers, *inst)
		}
	}
	used := map[string]bool{}
	for _, inst := range view.Containers {
		if !slices.ContainsFunc(g.Containers, func(x model.ContainerInstance) bool { return x.ID == inst.ID }) {
			used[sandboxOf[inst.ID]] = true
		}
	}
	for i, sb := range view.Sandboxes {
		if i == 0 || sb.State == model.SandboxReady || used[sb.ID] {
			continue
		}
		g.Sandboxes = append(g.Sandboxes, sb)
	}
	return g
}
