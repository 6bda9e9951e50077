package enginetest

import (
	"slices"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	crierrors "k8s.io/cri-api/pkg/errors"
)

func testLabels(t *testing.T, h *Harness) {
	cfg := h.PodConfig("")
	cfg.Labels["io.kubernetes.pod.name"] = "web"
	cfg.Annotations = map[string]string{"podsync.io/spec": `{"a":1}`, "empty": ""}
	pod := h.RunPod(cfg)
	ccfg := h.ContainerConfig("app", 2, "/bin/sh", "-c", TermScript)
	ccfg.Labels["io.kubernetes.container.name"] = "app"
	ccfg.Annotations = map[string]string{"io.kubernetes.container.restartCount": "2", "podsync.io/hash": "abc"}
	id := h.Create(pod, cfg, ccfg)

	pst, err := h.RT.PodSandboxStatus(h.Ctx, pod, false)
	if err != nil {
		t.Fatalf("PodSandboxStatus: %v", err)
	}
	checkSubset(t, "sandbox status labels", cfg.Labels, pst.GetStatus().GetLabels())
	checkSubset(t, "sandbox status annotations", cfg.Annotations, pst.GetStatus().GetAnnotations())
	pods, err := h.RT.ListPodSandbox(h.Ctx, &runtimeapi.PodSandboxFilter{Id: pod})
	if err != nil || len(pods) != 1 {
		t.Fatalf("ListPodSandbox by id: %d pods, %v", len(pods), err)
	}
	checkSubset(t, "listed sandbox labels", cfg.Labels, pods[0].GetLabels())
	checkSubset(t, "listed sandbox annotations", cfg.Annotations, pods[0].GetAnnotations())

	st := h.Status(id)
	checkSubset(t, "container status labels", ccfg.Labels, st.GetLabels())
	checkSubset(t, "container status annotations", ccfg.Annotations, st.GetAnnotations())
	if st.GetMetadata().GetName() != "app" || st.GetMetadata().GetAttempt() != 2 {
		t.Errorf("container metadata = %v, want app attempt 2", st.GetMetadata())
	}
	ctrs, err := h.RT.ListContainers(h.Ctx, &runtimeapi.ContainerFilter{Id: id})
	if err != nil || len(ctrs) != 1 {
		t.Fatalf("ListContainers by id: %d containers, %v", len(ctrs), err)
	}
	checkSubset(t, "listed container labels", ccfg.Labels, ctrs[0].GetLabels())
	checkSubset(t, "listed container annotations", ccfg.Annotations, ctrs[0].GetAnnotations())
	if ctrs[0].GetPodSandboxId() != pod {
		t.Errorf("listed container sandbox = %q, want %q", ctrs[0].GetPodSandboxId(), pod)
	}
}

// checkSubset reports every key of want that got lacks or holds differently.
// Runtimes may add their own keys.
func checkSubset(t *testing.T, what string, want, got map[string]string) {
	t.Helper()
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s[%q] = %q (present %t), want %q", what, k, g, ok, v)
		}
	}
}

func testUnknownIDs(t *testing.T, h *Harness) {
	const unknown = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	if _, err := h.RT.ContainerStatus(h.Ctx, unknown, false); !crierrors.IsNotFound(err) {
		t.Errorf("ContainerStatus: %v, want NotFound", err)
	}
	if _, err := h.RT.PodSandboxStatus(h.Ctx, unknown, false); !crierrors.IsNotFound(err) {
		t.Errorf("PodSandboxStatus: %v, want NotFound", err)
	}
	// containerd 1.6 answers stops of unknown ids with NotFound, 2.x with
	// success: the engine must take both.
	if err := h.RT.StopContainer(h.Ctx, unknown, 0); err != nil && !crierrors.IsNotFound(err) {
		t.Errorf("StopContainer: %v, want NotFound or no error", err)
	}
	if err := h.RT.StopPodSandbox(h.Ctx, unknown); err != nil && !crierrors.IsNotFound(err) {
		t.Errorf("StopPodSandbox: %v, want NotFound or no error", err)
	}
	if err := h.RT.RemoveContainer(h.Ctx, unknown); err != nil {
		t.Errorf("RemoveContainer: %v, want no error", err)
	}
	if err := h.RT.RemovePodSandbox(h.Ctx, unknown); err != nil {
		t.Errorf("RemovePodSandbox: %v, want no error", err)
	}
}

func testListFilters(t *testing.T, h *Harness) {
	cfgA, cfgB := h.PodConfig("a"), h.PodConfig("b")
	group := h.name("group")
	cfgA.Labels["conformance.podsync.io/group"] = group
	cfgB.Labels["conformance.podsync.io/group"] = group
	podA, podB := h.RunPod(cfgA), h.RunPod(cfgB)
	if err := h.RT.StopPodSandbox(h.Ctx, podB); err != nil {
		t.Fatalf("StopPodSandbox: %v", err)
	}

	listPods := func(f *runtimeapi.PodSandboxFilter) []string {
		t.Helper()
		pods, err := h.RT.ListPodSandbox(h.Ctx, f)
		if err != nil {
			t.Fatalf("ListPodSandbox: %v", err)
		}
		var ids []string
		for _, p := range pods {
			ids = append(ids, p.Id)
		}
		slices.Sort(ids)
		return ids
	}
	both := []string{podA, podB}
	slices.Sort(both)
	groupSel := map[string]string{"conformance.podsync.io/group": group}
	for _, c := range []struct {
		what string
		f    *runtimeapi.PodSandboxFilter
		want []string
	}{
		{"by group label", &runtimeapi.PodSandboxFilter{LabelSelector: groupSel}, both},
		{"by name label", &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"conformance.podsync.io/test": cfgA.Labels["conformance.podsync.io/test"]}}, []string{podA}},
		{"by label and ready", &runtimeapi.PodSandboxFilter{LabelSelector: groupSel, State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}}, []string{podA}},
		{"by label and not ready", &runtimeapi.PodSandboxFilter{LabelSelector: groupSel, State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY}}, []string{podB}},
		{"by id", &runtimeapi.PodSandboxFilter{Id: podB}, []string{podB}},
		{"by absent label value", &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"conformance.podsync.io/group": group + "-none"}}, nil},
	} {
		if got := listPods(c.f); !slices.Equal(got, c.want) {
			t.Errorf("pods %s = %v, want %v", c.what, got, c.want)
		}
	}

	run := h.Run(podA, cfgA, h.ContainerConfig("runs", 0, "/bin/sh", "-c", TermScript))
	created := h.Create(podA, cfgA, h.ContainerConfig("created", 0, "/bin/sh", "-c", "exit 0"))
	h.WaitState(run, runtimeapi.ContainerState_CONTAINER_RUNNING)
	listCtrs := func(f *runtimeapi.ContainerFilter) []string {
		t.Helper()
		ctrs, err := h.RT.ListContainers(h.Ctx, f)
		if err != nil {
			t.Fatalf("ListContainers: %v", err)
		}
		var ids []string
		for _, c := range ctrs {
			ids = append(ids, c.Id)
		}
		slices.Sort(ids)
		return ids
	}
	all := []string{run, created}
	slices.Sort(all)
	for _, c := range []struct {
		what string
		f    *runtimeapi.ContainerFilter
		want []string
	}{
		{"by sandbox", &runtimeapi.ContainerFilter{PodSandboxId: podA}, all},
		{"by other sandbox", &runtimeapi.ContainerFilter{PodSandboxId: podB}, nil},
		{"by label", &runtimeapi.ContainerFilter{PodSandboxId: podA, LabelSelector: map[string]string{"conformance.podsync.io/container": "runs"}}, []string{run}},
		{"by running", &runtimeapi.ContainerFilter{PodSandboxId: podA, State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}, []string{run}},
		{"by created", &runtimeapi.ContainerFilter{PodSandboxId: podA, State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_CREATED}}, []string{created}},
		{"by id", &runtimeapi.ContainerFilter{Id: created}, []string{created}},
	} {
		if got := listCtrs(c.f); !slices.Equal(got, c.want) {
			t.Errorf("containers %s = %v, want %v", c.what, got, c.want)
		}
	}
}

func testNameReservation(t *testing.T, h *Harness) {
	cfg := h.PodConfig("")
	pod := h.RunPod(cfg)
	if id, err := h.RT.RunPodSandbox(h.Ctx, cfg, ""); err == nil {
		t.Errorf("second RunPodSandbox with the same metadata gave %s, want an error", id)
		_ = h.RT.StopPodSandbox(h.Ctx, id)
		_ = h.RT.RemovePodSandbox(h.Ctx, id)
	}
	ccfg := h.ContainerConfig("app", 0, "/bin/sh", "-c", "exit 0")
	h.Create(pod, cfg, ccfg)
	if id, err := h.RT.CreateContainer(h.Ctx, pod, ccfg, cfg); err == nil {
		t.Errorf("second CreateContainer with the same metadata gave %s, want an error", id)
	}
}
