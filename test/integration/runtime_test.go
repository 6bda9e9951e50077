//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/internal/testing/localcri"
)

func TestFlavour(t *testing.T) {
	ctx := testContext(t)
	rt := newRuntime(t)
	v, err := rt.Version(ctx, "v1")
	if err != nil {
		t.Fatalf("Version: %v", err)
	}
	want := map[localcri.Flavour]string{localcri.Containerd2: "2.4.2", localcri.Containerd16: "1.6."}[inst.Flavour()]
	if v.RuntimeName != "containerd" || !strings.HasPrefix(strings.TrimPrefix(v.RuntimeVersion, "v"), want) {
		t.Errorf("runtime = %s %s, want containerd %s…", v.RuntimeName, v.RuntimeVersion, want)
	}

	// Events: a stream on 2.x, Unimplemented on 1.6.
	ectx, cancel := context.WithCancel(ctx)
	events := make(chan *runtimeapi.ContainerEventResponse, 16)
	errc := make(chan error, 1)
	go func() { errc <- rt.GetContainerEvents(ectx, events, nil) }()
	var streamErr error
	if inst.Flavour() == localcri.Containerd16 {
		streamErr = <-errc
		cancel()
		if status.Code(streamErr) != codes.Unimplemented {
			t.Errorf("GetContainerEvents on 1.6: %v, want Unimplemented", streamErr)
		}
		return
	}
	h := enginetest.NewHarness(t, rt)
	pod := h.PodConfig("")
	h.RunPod(pod)
	select {
	case <-events:
	case err := <-errc:
		t.Errorf("GetContainerEvents on 2.x ended: %v", err)
	case <-ctx.Done():
		t.Errorf("no event from GetContainerEvents on 2.x for a new sandbox")
	}
	cancel()
	for {
		select {
		case err := <-errc:
			if err != nil && status.Code(err) != codes.Canceled && !errors.Is(err, context.Canceled) {
				t.Errorf("GetContainerEvents after cancel: %v, want a cancellation", err)
			}
			return
		case <-events:
		}
	}
}

func TestStopStartKeepsState(t *testing.T) {
	ctx := testContext(t)
	rt := newRuntime(t)
	h := enginetest.NewHarness(t, rt)
	pod := h.PodConfig("")
	podID := h.RunPod(pod)
	id := h.Run(podID, pod, h.ContainerConfig("survivor", 0, "/bin/sh", "-c", enginetest.TermScript))
	h.WaitState(id, runtimeapi.ContainerState_CONTAINER_RUNNING)
	oldPID := inst.PID()

	if err := inst.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if inst.PID() != 0 {
		t.Errorf("PID() = %d after Stop, want 0", inst.PID())
	}
	if _, err := localcri.ProbeVersion(ctx, inst.Endpoint()); err == nil {
		t.Error("CRI still answers after Stop")
	}
	// runc, the oracle, still runs the container.
	out, err := exec.CommandContext(ctx, "runc", "--root", filepath.Join(inst.Dir(), "runc", "k8s.io"), "list", "--format", "json").Output()
	if err != nil {
		t.Fatalf("runc list: %v", err)
	}
	var list []struct{ ID, Status string }
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatalf("parse runc list: %v", err)
	}
	running := false
	for _, c := range list {
		running = running || c.ID == id && c.Status == "running"
	}
	if !running {
		t.Errorf("runc does not run container %s while containerd is stopped: %s", id, out)
	}

	if err := inst.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if inst.PID() == 0 || inst.PID() == oldPID {
		t.Errorf("PID() = %d after Start (was %d), want a new containerd", inst.PID(), oldPID)
	}
	// The old connection reconnects; the state is back.
	st := h.WaitState(id, runtimeapi.ContainerState_CONTAINER_RUNNING)
	if st.GetMetadata().GetName() != "survivor" {
		t.Errorf("container after restart = %v", st.GetMetadata())
	}
	pst, err := rt.PodSandboxStatus(ctx, podID, false)
	if err != nil || pst.GetStatus().GetState() != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Errorf("sandbox after restart: %v, %v; want ready", pst.GetStatus().GetState(), err)
	}
	if err := rt.StopContainer(ctx, id, 30); err != nil {
		t.Fatalf("StopContainer after restart: %v", err)
	}
	if st := h.Status(id); st.ExitCode != 0 {
		t.Errorf("exit code after restart and stop = %d, want 0", st.ExitCode)
	}
}

func TestPodNetwork(t *testing.T) {
	ctx := testContext(t)
	rt := newRuntime(t)
	h := enginetest.NewHarness(t, rt)
	hostPort, err := inst.HostPort(ctx)
	if err != nil {
		t.Fatalf("HostPort: %v", err)
	}
	pod := h.PodConfig("")
	pod.PortMappings = []*runtimeapi.PortMapping{{
		Protocol: runtimeapi.Protocol_TCP, ContainerPort: 8080, HostPort: int32(hostPort), HostIp: "127.0.0.1",
	}}
	podID := h.RunPod(pod)
	pst, err := rt.PodSandboxStatus(ctx, podID, false)
	if err != nil {
		t.Fatalf("PodSandboxStatus: %v", err)
	}
	ip := pst.GetStatus().GetNetwork().GetIp()
	if !inst.Subnet().Contains(mustAddr(t, ip)) {
		t.Errorf("pod IP %s is outside the instance subnet %s", ip, inst.Subnet())
	}
	h.Run(podID, pod, h.ContainerConfig("web", 0, "/bin/sh", "-c",
		"echo hello-from-pod > /tmp/index.html; exec httpd -f -p 8080 -h /tmp"))

	get := func(addr string) (string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/index.html", nil)
		if err != nil {
			return "", err
		}
		tr := &http.Transport{DisableKeepAlives: true}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: 2 * time.Second}).Do(req)
		if err != nil {
			return "", err
		}
		defer func() { _ = resp.Body.Close() }()
		b, err := io.ReadAll(resp.Body)
		return strings.TrimSpace(string(b)), err
	}
	for _, addr := range []string{
		net.JoinHostPort(ip, "8080"),                        // the pod, over the instance's bridge
		net.JoinHostPort("127.0.0.1", fmt.Sprint(hostPort)), // the host port, through portmap
	} {
		var body string
		err := poll(ctx, func() (bool, error) {
			b, err := get(addr)
			body = b
			return err == nil, nil
		})
		if err != nil || body != "hello-from-pod" {
			t.Errorf("GET %s = %q, %v; want hello-from-pod", addr, body, err)
		}
	}
}

func mustAddr(t *testing.T, s string) netip.Addr {
	t.Helper()
	a, err := netip.ParseAddr(s)
	if err != nil {
		t.Fatalf("pod IP %q: %v", s, err)
	}
	return a
}

func TestInstancesAreIsolated(t *testing.T) {
	ctx := testContext(t)
	second, err := localcri.Start(ctx, localcri.Options{Flavour: inst.Flavour(), Logger: logger})
	if err != nil {
		t.Fatalf("start a second instance: %v", err)
	}
	torn := false
	t.Cleanup(func() {
		if !torn {
			_ = second.Teardown(context.Background())
		}
	})
	for _, c := range []struct{ what, a, b string }{
		{"id", inst.ID(), second.ID()},
		{"socket", inst.Socket(), second.Socket()},
		{"dir", inst.Dir(), second.Dir()},
		{"bridge", inst.Bridge(), second.Bridge()},
		{"network", inst.Network(), second.Network()},
		{"registry", inst.Registry().Addr(), second.Registry().Addr()},
	} {
		if c.a == c.b {
			t.Errorf("both instances have %s %q", c.what, c.a)
		}
	}
	if inst.Subnet().Overlaps(second.Subnet()) {
		t.Errorf("subnets overlap: %s and %s", inst.Subnet(), second.Subnet())
	}
	if len(second.Bridge()) > 15 || !strings.Contains(second.Bridge(), second.ID()) {
		t.Errorf("bridge name %q: want at most 15 characters holding the run id", second.Bridge())
	}

	// A pod in each.
	rs, err := second.RuntimeService(ctx)
	if err != nil {
		t.Fatal(err)
	}
	is, err := second.ImageService(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rt2 := &criRuntime{RuntimeService: rs, ImageManagerService: is}
	h1, h2 := enginetest.NewHarness(t, newRuntime(t)), enginetest.NewHarness(t, rt2)
	pod1, pod2 := h1.PodConfig("one"), h2.PodConfig("two")
	id1 := h1.Run(h1.RunPod(pod1), pod1, h1.ContainerConfig("app", 0, "/bin/sh", "-c", enginetest.TermScript))
	pod2ID, err := rt2.RunPodSandbox(ctx, pod2, "")
	if err != nil {
		t.Fatalf("RunPodSandbox in the second instance: %v", err)
	}
	id2 := h2.Run(pod2ID, pod2, h2.ContainerConfig("app", 0, "/bin/sh", "-c", enginetest.TermScript))
	h2.WaitState(id2, runtimeapi.ContainerState_CONTAINER_RUNNING)
	if ctrs, err := newRuntime(t).ListContainers(ctx, &runtimeapi.ContainerFilter{Id: id2}); err != nil || len(ctrs) != 0 {
		t.Errorf("the first instance lists the second's container: %d, %v", len(ctrs), err)
	}
	if len(second.Leftovers(ctx)) == 0 {
		t.Error("Leftovers of a live instance is empty, want its processes, mounts and links")
	}

	// Tearing the second down while its containerd is stopped and its pod
	// runs leaves nothing, and leaves the first alone.
	_ = rt2.Close(ctx)
	if err := second.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	torn = true
	if err := second.Teardown(ctx); err != nil {
		t.Fatalf("Teardown: %v", err)
	}
	if left := second.Leftovers(ctx); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
	if st := h1.WaitState(id1, runtimeapi.ContainerState_CONTAINER_RUNNING); st.GetId() != id1 {
		t.Errorf("first instance's container: %v", st)
	}
}

// TestCleanupFromRecord tears an instance down from its record alone, as
// `localcri down` and `localcri gc` do when the owning process died.
func TestCleanupFromRecord(t *testing.T) {
	ctx := testContext(t)
	other, err := localcri.Start(ctx, localcri.Options{Flavour: inst.Flavour(), Logger: logger})
	if err != nil {
		t.Fatalf("start another instance: %v", err)
	}
	t.Cleanup(func() {
		// Closes its registry; everything else is gone already.
		if err := other.Teardown(context.Background()); err != nil {
			t.Errorf("Teardown after Cleanup: %v", err)
		}
	})
	rs, err := other.RuntimeService(ctx)
	if err != nil {
		t.Fatal(err)
	}
	is, err := other.ImageService(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rt := &criRuntime{RuntimeService: rs, ImageManagerService: is}
	defer func() { _ = rt.Close(context.Background()) }()
	h := enginetest.NewHarness(t, rt)
	pod := h.PodConfig("")
	podID, err := rt.RunPodSandbox(ctx, pod, "")
	if err != nil {
		t.Fatal(err)
	}
	h.WaitState(h.Run(podID, pod, h.ContainerConfig("app", 0, "/bin/sh", "-c", enginetest.TermScript)),
		runtimeapi.ContainerState_CONTAINER_RUNNING)

	infos, err := localcri.ListInstances()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, in := range infos {
		if in.ID == other.ID() {
			found = true
			if !in.OwnerAlive || in.ContainerdPID != other.PID() || in.Endpoint != other.Endpoint() {
				t.Errorf("ListInstances entry = %+v", in)
			}
		}
	}
	if !found {
		t.Fatalf("ListInstances lacks run %s", other.ID())
	}
	if err := localcri.Cleanup(ctx, logger, other.ID()); err != nil {
		t.Fatalf("Cleanup: %v", err)
	}
	if left := other.Leftovers(ctx); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}

	// The leak check sees what a broken teardown would leave: a link named
	// after the run and a mount in its directory.
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	run("ip", "link", "add", other.Bridge(), "type", "bridge")
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", other.Bridge()).Run() })
	mnt := filepath.Join(other.Dir(), "leak")
	run("mkdir", "-p", mnt)
	t.Cleanup(func() { _ = exec.Command("rm", "-rf", other.Dir()).Run() })
	run("mount", "-t", "tmpfs", "leak", mnt)
	t.Cleanup(func() { _ = exec.Command("umount", mnt).Run() })
	left := strings.Join(other.Leftovers(ctx), "\n")
	for _, want := range []string{"link " + other.Bridge(), "mount " + mnt, "directory " + other.Dir()} {
		if !strings.Contains(left, want) {
			t.Errorf("Leftovers lacks %q:\n%s", want, left)
		}
	}
}
