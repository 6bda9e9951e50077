package enginetest

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	crierrors "k8s.io/cri-api/pkg/errors"
)

func testSandboxIP(t *testing.T, h *Harness) {
	cfg := h.PodConfig("")
	id := h.RunPod(cfg)
	st, err := h.RT.PodSandboxStatus(h.Ctx, id, false)
	if err != nil {
		t.Fatalf("PodSandboxStatus: %v", err)
	}
	if got := st.GetStatus().GetState(); got != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Errorf("state = %s, want SANDBOX_READY", got)
	}
	ip, err := netip.ParseAddr(st.GetStatus().GetNetwork().GetIp())
	if err != nil {
		t.Fatalf("pod IP %q: %v", st.GetStatus().GetNetwork().GetIp(), err)
	}
	if !ip.Is4() || ip.IsLoopback() || ip.IsUnspecified() {
		t.Errorf("pod IP = %s, want a routable IPv4 address", ip)
	}
	if got := st.GetStatus().GetMetadata().GetName(); got != cfg.Metadata.Name {
		t.Errorf("metadata name = %q, want %q", got, cfg.Metadata.Name)
	}
}

func testStopSandbox(t *testing.T, h *Harness) {
	cfg := h.PodConfig("")
	pod := h.RunPod(cfg)
	a := h.Run(pod, cfg, h.ContainerConfig("traps", 0, "/bin/sh", "-c", TermScript))
	b := h.Run(pod, cfg, h.ContainerConfig("sleeps", 0, "sleep", "3600"))
	h.WaitState(a, runtimeapi.ContainerState_CONTAINER_RUNNING)
	h.WaitState(b, runtimeapi.ContainerState_CONTAINER_RUNNING)
	if err := h.RT.StopPodSandbox(h.Ctx, pod); err != nil {
		t.Fatalf("StopPodSandbox: %v", err)
	}
	for _, id := range []string{a, b} {
		st := h.Status(id)
		if st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != KillExitCode || st.FinishedAt == 0 {
			t.Errorf("container %s after sandbox stop: state %s exit code %d finished %d, want EXITED %d",
				st.GetMetadata().GetName(), st.State, st.ExitCode, st.FinishedAt, KillExitCode)
		}
	}
	pst, err := h.RT.PodSandboxStatus(h.Ctx, pod, false)
	if err != nil {
		t.Fatalf("PodSandboxStatus: %v", err)
	}
	if pst.GetStatus().GetState() != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Errorf("sandbox state = %s, want SANDBOX_NOTREADY", pst.GetStatus().GetState())
	}
	// Stopping again is fine.
	if err := h.RT.StopPodSandbox(h.Ctx, pod); err != nil {
		t.Errorf("second StopPodSandbox: %v", err)
	}
}

func testRemoveSandbox(t *testing.T, h *Harness) {
	cfg := h.PodConfig("")
	pod := h.RunPod(cfg)
	a := h.Run(pod, cfg, h.ContainerConfig("runs", 0, "/bin/sh", "-c", TermScript))
	h.WaitState(a, runtimeapi.ContainerState_CONTAINER_RUNNING)
	h.Create(pod, cfg, h.ContainerConfig("created", 0, "/bin/sh", "-c", "exit 0"))
	if err := h.RT.StopPodSandbox(h.Ctx, pod); err != nil {
		t.Fatalf("StopPodSandbox: %v", err)
	}
	if err := h.RT.RemovePodSandbox(h.Ctx, pod); err != nil {
		t.Fatalf("RemovePodSandbox: %v", err)
	}
	ctrs, err := h.RT.ListContainers(h.Ctx, &runtimeapi.ContainerFilter{PodSandboxId: pod})
	if err != nil {
		t.Fatalf("ListContainers: %v", err)
	}
	if len(ctrs) != 0 {
		t.Errorf("%d containers left in the removed sandbox", len(ctrs))
	}
	if _, err := h.RT.ContainerStatus(h.Ctx, a, false); !crierrors.IsNotFound(err) {
		t.Errorf("ContainerStatus of a removed container: %v, want NotFound", err)
	}
	if _, err := h.RT.PodSandboxStatus(h.Ctx, pod, false); !crierrors.IsNotFound(err) {
		t.Errorf("PodSandboxStatus of a removed sandbox: %v, want NotFound", err)
	}
}

func testSharedNetwork(t *testing.T, h *Harness) {
	cfg := h.PodConfig("")
	pod := h.RunPod(cfg)
	pst, err := h.RT.PodSandboxStatus(h.Ctx, pod, false)
	if err != nil {
		t.Fatalf("PodSandboxStatus: %v", err)
	}
	ip := pst.GetStatus().GetNetwork().GetIp()
	id := h.Run(pod, cfg, h.ContainerConfig("app", 0, "/bin/sh", "-c", TermScript))
	h.WaitState(id, runtimeapi.ContainerState_CONTAINER_RUNNING)
	stdout, _, err := h.RT.ExecSync(h.Ctx, id, []string{"ip", "-o", "-4", "addr", "show", "eth0"}, 30*time.Second)
	if err != nil {
		t.Fatalf("ExecSync ip addr: %v", err)
	}
	if !strings.Contains(string(stdout), " "+ip+"/") {
		t.Errorf("container's eth0 = %q, want the pod IP %s", stdout, ip)
	}
}

// testNoStartInStoppedSandbox: a stopped sandbox takes no new container,
// and a container created before the stop cannot start: it is left
// exited with StartErrorExitCode and StartErrorReason.
func testNoStartInStoppedSandbox(t *testing.T, h *Harness) {
	cfg := h.PodConfig("")
	pod := h.RunPod(cfg)
	created := h.Create(pod, cfg, h.ContainerConfig("created", 0, "/bin/sh", "-c", TermScript))
	if err := h.RT.StopPodSandbox(h.Ctx, pod); err != nil {
		t.Fatalf("StopPodSandbox: %v", err)
	}
	if id, err := h.RT.CreateContainer(h.Ctx, pod, h.ContainerConfig("late", 0, "/bin/sh", "-c", TermScript), cfg); err == nil {
		t.Errorf("CreateContainer in a stopped sandbox created %s", id)
	}
	if err := h.RT.StartContainer(h.Ctx, created); err == nil {
		t.Fatal("StartContainer in a stopped sandbox succeeded")
	}
	st := h.Status(created)
	if st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != StartErrorExitCode || st.Reason != StartErrorReason {
		t.Errorf("container after a refused start: state %s exit code %d reason %q, want EXITED %d %q",
			st.State, st.ExitCode, st.Reason, StartErrorExitCode, StartErrorReason)
	}
}
