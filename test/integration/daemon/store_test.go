//go:build integration

package daemon_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/internal/daemon"
)

// TestCorruptStoreAdoptRuntime: two pods run; podsyncd stops and its
// store file is truncated. podsyncd then exits 1 naming the file and what
// was found, and every pod keeps running; with --adopt-runtime it moves
// the file aside and takes the pods back under management (GetPod shows
// them Running) with the same sandboxes and containers, none restarted,
// and a SyncPod of the same pod changes nothing.
func TestCorruptStoreAdoptRuntime(t *testing.T) {
	ctx := testContext(t)
	rs := runtimeClient(t)
	root, logs := t.TempDir(), t.TempDir()
	d := startPodsyncd(t, daemonOptions{RootDir: root, PodLogDir: logs})
	pods := []*podsyncv1.Pod{newPod(t, "a", sleeper("app")), newPod(t, "b", sleeper("app"), sleeper("side"))}
	type running struct {
		sandbox    string
		containers map[string]string // name -> id
	}
	before := map[string]running{}
	for _, p := range pods {
		stream, err := d.client().SyncPod(ctx, &podsyncv1.SyncPodRequest{Pod: p})
		if err != nil {
			t.Fatal(err)
		}
		st := lastSyncResult(t, stream).GetStatus()
		if st.GetPhase() != "Running" {
			t.Fatalf("pod %s is %s, want Running", p.GetMetadata().GetName(), st.GetPhase())
		}
		r := running{sandbox: st.GetSandboxId(), containers: map[string]string{}}
		for _, cs := range st.GetContainerStatuses() {
			r.containers[cs.GetName()] = strings.TrimPrefix(cs.GetContainerId(), "containerd://")
		}
		before[p.GetMetadata().GetUid()] = r
	}
	d.Stop()

	// What the runtime holds of each pod is as before: its one sandbox
	// ready, its containers running.
	checkRuntime := func(when string) {
		t.Helper()
		for _, p := range pods {
			uid := p.GetMetadata().GetUid()
			ready, notReady := sandboxesOf(ctx, t, rs, uid)
			if len(ready) != 1 || ready[0] != before[uid].sandbox || len(notReady) != 0 {
				t.Errorf("%s: pod %s: sandboxes ready %v, not ready %v, want only %s ready", when, uid, ready, notReady, before[uid].sandbox)
			}
			ctrs, err := rs.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{model.LabelPodUID: uid}})
			if err != nil {
				t.Fatal(err)
			}
			if len(ctrs) != len(before[uid].containers) {
				t.Errorf("%s: pod %s has %d containers, want %d", when, uid, len(ctrs), len(before[uid].containers))
			}
			for _, c := range ctrs {
				if before[uid].containers[c.GetMetadata().GetName()] != c.GetId() || c.GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
					t.Errorf("%s: container %s %s is %s, want %s running", when, c.GetMetadata().GetName(), c.GetId(), c.GetState(),
						before[uid].containers[c.GetMetadata().GetName()])
				}
			}
		}
	}

	// Truncated past its meta pages: the pages its meta page counts are
	// gone.
	path := filepath.Join(root, daemon.StoreFile)
	if err := os.Truncate(path, 2*4096+100); err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(t.TempDir(), "podsync.sock")
	code, stderr := runToExit(t, "--runtime-endpoint="+inst.Endpoint(), "--listen=unix://"+socket, "--root-dir="+root,
		"--pod-log-dir="+logs, "--node-ip=127.0.0.1", "--node-name=itest-"+inst.ID())
	if code != daemon.ExitFailure {
		t.Errorf("podsyncd on a truncated store exited %d, want %d", code, daemon.ExitFailure)
	}
	for _, want := range []string{path, "store file is corrupt", "truncated", "--adopt-runtime", "--remove-orphans"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("podsyncd's refusal lacks %q:\n%s", want, stderr)
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != 2*4096+100 {
		t.Errorf("the truncated store was changed: %v %v", fi, err)
	}
	checkRuntime("after the refusal")

	d = startPodsyncd(t, daemonOptions{RootDir: root, PodLogDir: logs, Args: []string{"--adopt-runtime"}})
	if aside, _ := filepath.Glob(path + ".corrupt-*"); len(aside) != 1 {
		t.Errorf("moved-aside stores %v, want one", aside)
	}
	for _, p := range pods {
		md := p.GetMetadata()
		var got *podsyncv1.Pod
		eventually(ctx, t, "pod "+md.GetName()+" adopted and Running", func() bool {
			resp, err := d.client().GetPod(ctx, &podsyncv1.GetPodRequest{Namespace: md.GetNamespace(), Name: md.GetName()})
			got = resp.GetPod()
			return err == nil && got.GetStatus().GetPhase() == "Running" && len(got.GetStatus().GetContainerStatuses()) == len(p.GetSpec().GetContainers())
		})
		if got.GetMetadata().GetUid() != md.GetUid() || got.GetStatus().GetSandboxId() != before[md.GetUid()].sandbox {
			t.Errorf("pod %s: uid %s sandbox %s, want %s and %s", md.GetName(), got.GetMetadata().GetUid(),
				got.GetStatus().GetSandboxId(), md.GetUid(), before[md.GetUid()].sandbox)
		}
		for _, cs := range got.GetStatus().GetContainerStatuses() {
			if cs.GetRestartCount() != 0 || cs.GetState().GetRunning() == nil {
				t.Errorf("pod %s container %s: %d restarts, state %v, want running, never restarted", md.GetName(), cs.GetName(),
					cs.GetRestartCount(), cs.GetState())
			}
		}
	}
	checkRuntime("after the adoption")

	// The same pod again: no step.
	stream, err := d.client().SyncPod(ctx, &podsyncv1.SyncPodRequest{Pod: pods[1]})
	if err != nil {
		t.Fatal(err)
	}
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("SyncPod: %v", err)
		}
		if s := m.GetStep(); s != nil {
			t.Errorf("SyncPod of the adopted pod's own spec ran step %v %s", s.GetAction(), s.GetTarget())
		}
	}
	checkRuntime("after a SyncPod of the same spec")
	if !d.logHas("pod adopted from the runtime") {
		t.Errorf("podsyncd did not log the adoption")
	}
}

// TestLostStoreExits1 is the black-box check of what docs/security.md
// says of a lost store: a pod runs; podsyncd stops and its store file is
// emptied, then removed. Each time podsyncd exits 1 at once (it did stay
// up, retrying "waiting for the container runtime" every second), naming
// the file and --adopt-runtime, and the pod keeps running untouched;
// --adopt-runtime then takes it back.
func TestLostStoreExits1(t *testing.T) {
	ctx := testContext(t)
	rs := runtimeClient(t)
	root, logs := t.TempDir(), t.TempDir()
	d := startPodsyncd(t, daemonOptions{RootDir: root, PodLogDir: logs})
	pod := newPod(t, "", sleeper("app"))
	stream, err := d.client().SyncPod(ctx, &podsyncv1.SyncPodRequest{Pod: pod})
	if err != nil {
		t.Fatal(err)
	}
	st := lastSyncResult(t, stream).GetStatus()
	if st.GetPhase() != "Running" {
		t.Fatalf("pod is %s, want Running", st.GetPhase())
	}
	d.Stop()

	path := filepath.Join(root, daemon.StoreFile)
	for _, lose := range []struct {
		name string
		do   func() error
	}{
		{"emptied", func() error { return os.Truncate(path, 0) }},
		{"removed", func() error { return os.Remove(path) }},
	} {
		if err := lose.do(); err != nil {
			t.Fatal(err)
		}
		socket := filepath.Join(t.TempDir(), "podsync.sock")
		code, stderr := runToExit(t, "--runtime-endpoint="+inst.Endpoint(), "--listen=unix://"+socket, "--root-dir="+root,
			"--pod-log-dir="+logs, "--node-ip=127.0.0.1", "--node-name=itest-"+inst.ID(), "--cgroup-root="+inst.CgroupRoot())
		if code != daemon.ExitFailure {
			t.Errorf("podsyncd on a %s store exited %d, want %d:\n%s", lose.name, code, daemon.ExitFailure, stderr)
		}
		for _, want := range []string{path, "is new or empty, but the runtime holds 1 of podsync's pods", "--adopt-runtime", "--remove-orphans"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("podsyncd's refusal on a %s store lacks %q:\n%s", lose.name, want, stderr)
			}
		}
		if strings.Contains(stderr, "waiting for the container runtime") {
			t.Errorf("podsyncd on a %s store waited for the runtime instead of exiting", lose.name)
		}
		ready, notReady := sandboxesOf(ctx, t, rs, pod.GetMetadata().GetUid())
		if len(ready) != 1 || ready[0] != st.GetSandboxId() || len(notReady) != 0 {
			t.Errorf("after the refusal on a %s store: sandboxes ready %v, not ready %v, want %s alone", lose.name, ready, notReady, st.GetSandboxId())
		}
	}

	d = startPodsyncd(t, daemonOptions{RootDir: root, PodLogDir: logs, Args: []string{"--adopt-runtime"}})
	eventually(ctx, t, "the pod adopted and Running", func() bool {
		resp, err := d.client().GetPod(ctx, &podsyncv1.GetPodRequest{Namespace: namespace, Name: pod.GetMetadata().GetName()})
		return err == nil && resp.GetPod().GetStatus().GetPhase() == "Running"
	})
}
