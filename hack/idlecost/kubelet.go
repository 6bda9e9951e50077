package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podsync/podsync/internal/testing/localcri"
)

// cgroupRootName is the kubelet's --cgroup-root on the instance: its
// kubepods hierarchy of its own, so that it never sees (nor removes as
// orphans) the pod cgroups of another agent on the host.
func (in *instance) cgroupRootName() string { return "/idlecost-" + in.inst.ID() }

// runKubelet starts the kubelet standalone in its default configuration
// (QoS and pod cgroups) on the instance, with pods as static pods, and
// waits until their containers run.
func (in *instance) runKubelet(ctx context.Context, bin string, pods []*corev1.Pod) error {
	dir := filepath.Join(in.dir, "kubelet")
	manifests := filepath.Join(dir, "manifests")
	for _, d := range []string{manifests, filepath.Join(dir, "logs"), filepath.Join(dir, "plugins"), filepath.Join(dir, "sysctl")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := localcri.MakeCgroupRoot(in.cgroupRootName()); err != nil {
		return err
	}
	ports, err := localcri.FreePorts(2)
	if err != nil {
		return err
	}
	port, healthz := ports[0], ports[1]
	cfg := map[string]any{
		"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
		"staticPodPath": manifests, "cgroupDriver": "cgroupfs", "cgroupRoot": in.cgroupRootName(),
		"failSwapOn": false, "failCgroupV1": false,
		"podLogsDir": filepath.Join(dir, "logs"), "volumePluginDir": filepath.Join(dir, "plugins"),
		"port": port, "healthzPort": healthz, "healthzBindAddress": "127.0.0.1", "address": "127.0.0.1", "readOnlyPort": 0,
		"makeIPTablesUtilChains": false,
		"authentication":         map[string]any{"anonymous": map[string]any{"enabled": true}, "webhook": map[string]any{"enabled": false}},
		"authorization":          map[string]any{"mode": "AlwaysAllow"},
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	cfgPath := filepath.Join(dir, "kubelet.json")
	if err := os.WriteFile(cfgPath, b, 0o644); err != nil {
		return err
	}
	var script strings.Builder
	for i, s := range localcri.KubeletSysctls {
		f := filepath.Join(dir, "sysctl", fmt.Sprint(i))
		fmt.Fprintf(&script, "cat /proc/sys/%s > %s && mount --bind %s /proc/sys/%s && ", s, f, f, s)
	}
	script.WriteString(`exec "$@"`)
	logf, err := os.Create(filepath.Join(dir, "kubelet.log"))
	if err != nil {
		return err
	}
	defer func() { _ = logf.Close() }()
	cmd := exec.Command("unshare", "-m", "--propagation", "slave", "--", "sh", "-c", script.String(), "sh",
		bin, "--config", cfgPath, "--container-runtime-endpoint", in.inst.Endpoint(), "--root-dir", filepath.Join(dir, "root"),
		"--hostname-override", "idlecost-"+in.inst.ID(), "--v", "0")
	in.daemon, in.kubelet = &localcri.Agent{}, true
	if err := in.daemon.Start(cmd, logf); err != nil {
		return fmt.Errorf("start kubelet: %w", err)
	}
	// The static pods go in together once it runs, as one mv would.
	for _, p := range pods {
		p := p.DeepCopy()
		p.APIVersion, p.Kind, p.UID = "v1", "Pod", ""
		p.Spec.Containers[0].ImagePullPolicy = corev1.PullIfNotPresent
		b, err := json.Marshal(p)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(manifests, p.Name+".json"), b, 0o644); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(4 * time.Minute)
	for {
		ctrs, err := in.rt.ListContainers(ctx, &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
		if err == nil && len(ctrs) >= len(pods) {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("kubelet: %d of %d containers running (log %s)", len(ctrs), len(pods), logf.Name())
		}
		sleep(ctx, time.Second)
	}
}

// stopKubelet stops the kubelet, removes its pods through CRI and its
// cgroup root.
func (in *instance) stopKubelet(ctx context.Context) {
	in.daemon.Stop(30 * time.Second)
	in.daemon, in.kubelet = nil, false
	if sbs, err := in.rt.ListPodSandbox(ctx, nil); err == nil {
		for _, sb := range sbs {
			_ = in.rt.StopPodSandbox(ctx, sb.GetId())
			_ = in.rt.RemovePodSandbox(ctx, sb.GetId())
		}
	}
	_ = localcri.RemoveCgroupRoot(in.cgroupRootName())
	// The kubelet's links to its containers' logs (a fixed directory);
	// its static pods are named <name>-<node name>.
	links, _ := filepath.Glob("/var/log/containers/*-idlecost-" + in.inst.ID() + "_idlecost_*")
	for _, l := range links {
		_ = os.Remove(l)
	}
}
