package localcri

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podsync/podsync/host/mounttable"
)

// cniCacheDir is where libcni caches results, whatever the network config.
const cniCacheDir = "/var/lib/cni/results"

// Teardown removes the instance completely: it stops and removes every pod
// through CRI (starting containerd again first if it was stopped), stops
// containerd by its PID, kills what is left of its shims and containers,
// unmounts everything under its directory (lazily if needed), removes its
// agent's cgroup root (CgroupRoot), deletes its bridge, its CNI cache
// entries and its claims, stops its registry and removes its directory.
// It then checks, as Leftovers does, that nothing
// tagged with the run id is left, and returns an error naming whatever is.
// Calling it again does nothing.
func (i *Instance) Teardown(ctx context.Context) error {
	i.mu.Lock()
	if i.torn {
		i.mu.Unlock()
		return nil
	}
	i.torn = true
	i.mu.Unlock()
	start := time.Now()
	var errs []error

	netnsDir := i.path("state", "netns")
	if !i.running() && fileExists(i.rec.ConfigPath) && fileExists(i.bins.containerd) && i.started {
		// Stopped by Stop (or orphaned): bring it back to clean up through CRI.
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		if err := i.startContainerd(sctx); err != nil {
			i.log.Warn("restart containerd for teardown", zap.Error(err))
		}
		cancel()
	}
	netns := dirNames(netnsDir)
	veths := bridgePorts(i.rec.Bridge)
	seen := map[string]bool{}
	if i.running() {
		if err := i.removePods(ctx, seen); err != nil {
			errs = append(errs, err)
		}
	}
	if err := i.stopOwnedContainerd(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := i.killShims(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := i.deleteRuncContainers(ctx, seen); err != nil {
		errs = append(errs, err)
	}
	if err := mounttable.UnmountBelow(i.rec.Dir); err != nil {
		errs = append(errs, fmt.Errorf("unmount: %w", err))
	}
	// The pods' cgroups, which runc leaves behind, with the agent's root;
	// a process killed above may take a moment to leave its cgroup.
	cgErr := RemoveCgroupRoot(i.CgroupRoot())
	for deadline := time.Now().Add(10 * time.Second); cgErr != nil && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
		cgErr = RemoveCgroupRoot(i.CgroupRoot())
	}
	if cgErr != nil {
		errs = append(errs, fmt.Errorf("pod cgroups left behind: %w", cgErr))
	}
	for _, l := range append([]string{i.rec.Bridge}, veths...) {
		if err := deleteLink(ctx, l); err != nil {
			errs = append(errs, err)
		}
	}
	for _, f := range i.cniCacheFiles() {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove cni cache: %w", err))
		}
	}
	for _, s := range i.shimSockets(seen) {
		_ = os.Remove(s)
	}
	if i.reg != nil {
		if err := i.reg.Close(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	releaseClaims(i.rec.ID)
	if err := os.RemoveAll(i.rec.Dir); err != nil {
		errs = append(errs, fmt.Errorf("remove instance dir: %w", err))
	}
	i.mu.Lock()
	i.seen = slices.Sorted(maps.Keys(seen))
	i.netns, i.veths = netns, veths
	i.mu.Unlock()
	if left := i.Leftovers(ctx); len(left) > 0 {
		errs = append(errs, fmt.Errorf("left behind by run %s:\n  %s", i.rec.ID, strings.Join(left, "\n  ")))
	}
	i.log.Info("containerd instance torn down", zap.Duration("duration", time.Since(start)), zap.Int("objects", len(seen)))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("tear down run %s: %w", i.rec.ID, err)
	}
	return nil
}

// running reports whether the instance's containerd is running.
func (i *Instance) running() bool {
	i.mu.Lock()
	p, done := i.proc, i.procDone
	i.mu.Unlock()
	if p == nil {
		return false
	}
	if done != nil {
		select {
		case <-done:
			return false
		default:
			return true
		}
	}
	return Alive(p.Pid) && strings.Contains(Cmdline(p.Pid), i.rec.ConfigPath)
}

// stopOwnedContainerd stops containerd if it runs, by its PID.
func (i *Instance) stopOwnedContainerd(ctx context.Context) error {
	if !i.running() {
		i.mu.Lock()
		i.proc, i.procDone = nil, nil
		i.mu.Unlock()
		return nil
	}
	return i.Stop(ctx)
}

// RemovePods stops and removes every pod and container of the instance
// through CRI, as its teardown does.
func (i *Instance) RemovePods(ctx context.Context) error {
	return i.removePods(ctx, map[string]bool{})
}

// removePods stops and removes every pod and container through CRI and
// records their ids in seen.
func (i *Instance) removePods(ctx context.Context, seen map[string]bool) error {
	conn, err := dialCRI(i.rec.Socket)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	rs := runtimeapi.NewRuntimeServiceClient(conn)
	call := func(f func(context.Context) error) error {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		return f(cctx)
	}
	var errs []error
	var ctrs *runtimeapi.ListContainersResponse
	listContainers := func() error {
		return call(func(ctx context.Context) (err error) {
			ctrs, err = rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
			return err
		})
	}
	// Record the containers first: removing their pods removes them.
	if err := listContainers(); err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	for _, c := range ctrs.GetContainers() {
		seen[c.Id] = true
	}
	var pods *runtimeapi.ListPodSandboxResponse
	if err := call(func(ctx context.Context) (err error) {
		pods, err = rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
		return err
	}); err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	for _, p := range pods.GetItems() {
		seen[p.Id] = true
		if err := call(func(ctx context.Context) error {
			_, err := rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: p.Id})
			return err
		}); err != nil {
			errs = append(errs, fmt.Errorf("stop pod %s: %w", p.Id, err))
		}
		if err := call(func(ctx context.Context) error {
			_, err := rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: p.Id})
			return err
		}); err != nil {
			errs = append(errs, fmt.Errorf("remove pod %s: %w", p.Id, err))
		}
	}
	if err := listContainers(); err != nil {
		return errors.Join(append(errs, fmt.Errorf("list containers: %w", err))...)
	}
	for _, c := range ctrs.GetContainers() {
		seen[c.Id] = true
		if err := call(func(ctx context.Context) error {
			_, err := rs.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: c.Id})
			return err
		}); err != nil {
			errs = append(errs, fmt.Errorf("remove container %s: %w", c.Id, err))
		}
	}
	return errors.Join(errs...)
}

// killShims waits briefly for the instance's shims to exit by themselves and
// then kills those that did not.
func (i *Instance) killShims(ctx context.Context) error {
	mine := func() []process { return processesOf(i.rec.Dir, nil) }
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_ = poll(wctx, 50*time.Millisecond, func() (bool, error) { return len(mine()) == 0, nil })
	cancel()
	left := mine()
	if len(left) == 0 {
		return nil
	}
	for _, p := range left {
		i.log.Warn("killing leftover process", zap.Int("pid", p.pid), zap.String("cmdline", p.cmdline))
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := poll(kctx, 50*time.Millisecond, func() (bool, error) { return len(mine()) == 0, nil }); err != nil {
		return fmt.Errorf("processes of run %s survive SIGKILL", i.rec.ID)
	}
	return nil
}

// deleteRuncContainers force-deletes whatever runc still holds under the
// instance's runc root and records the ids in seen.
func (i *Instance) deleteRuncContainers(ctx context.Context, seen map[string]bool) error {
	root := i.path("runc", criNamespace)
	if !fileExists(root) {
		return nil
	}
	// stdout only: runc list reports a state directory it cannot load
	// ("load container …", left by a container whose creation was cut
	// short) on stderr and goes on.
	cmd := exec.CommandContext(ctx, runcPath, "--root", root, "list", "--format", "json")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("runc list: %w: %s", err, tail(stderr.String(), 2000))
	}
	if s := strings.TrimSpace(stderr.String()); s != "" {
		i.log.Warn("runc list", zap.String("stderr", tail(s, 2000)))
	}
	var list []struct {
		ID string `json:"id"`
	}
	if s := strings.TrimSpace(string(out)); s != "" && s != "null" {
		if err := json.Unmarshal(out, &list); err != nil {
			return fmt.Errorf("parse runc list: %w", err)
		}
	}
	var errs []error
	for _, c := range list {
		seen[c.ID] = true
		i.log.Warn("force-deleting leftover runc container", zap.String("container_id", c.ID))
		if _, err := runCommand(ctx, nil, "", runcPath, "--root", root, "delete", "--force", c.ID); err != nil {
			errs = append(errs, fmt.Errorf("runc delete %s: %w", c.ID, err))
		}
	}
	return errors.Join(errs...)
}

// cniCacheFiles lists libcni's cached results for the instance's network.
func (i *Instance) cniCacheFiles() []string {
	m, _ := filepath.Glob(filepath.Join(cniCacheDir, i.rec.Network+"-*"))
	return m
}

// shimSockets lists the sockets containerd 1.6 shims create outside the
// instance directory (/run/containerd/s/<sha256(address/namespace/id)>)
// that still exist for the given ids.
func (i *Instance) shimSockets(ids map[string]bool) []string {
	var out []string
	for id := range ids {
		sum := sha256.Sum256([]byte(filepath.Join(i.rec.Socket, criNamespace, id)))
		p := filepath.Join("/run/containerd/s", fmt.Sprintf("%x", sum))
		if fileExists(p) {
			out = append(out, p)
		}
	}
	return out
}

func dirNames(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// Leftovers lists everything tagged with the instance's run id that still
// exists: processes (containerd, shims, containers), mounts, network
// namespaces, links (the bridge and its veths), the directory, CNI cache
// entries, iptables rules, cgroups, shim sockets and claims. After Teardown
// it must be empty; before, it lists the live instance.
func (i *Instance) Leftovers(ctx context.Context) []string {
	i.mu.Lock()
	ids, netns, veths := i.seen, i.netns, i.veths
	i.mu.Unlock()
	var out []string
	tags := []string{i.rec.Dir + "/", i.rec.Bridge, i.rec.Network}
	for _, p := range processes() {
		tagged := cgroupNamesAny(p.cgroup, ids)
		for _, t := range tags {
			tagged = tagged || strings.Contains(p.cmdline, t)
		}
		if tagged {
			out = append(out, fmt.Sprintf("process %d: %s", p.pid, p.cmdline))
		}
	}
	if mps, err := mounttable.Below(i.rec.Dir); err != nil {
		out = append(out, "mounts: "+err.Error())
	} else {
		for _, mp := range mps {
			out = append(out, "mount "+mp)
		}
	}
	for _, n := range netns {
		if fileExists(filepath.Join("/run/netns", n)) {
			out = append(out, "netns "+n)
		}
	}
	for _, n := range dirNames("/run/netns") {
		if strings.Contains(n, i.rec.ID) {
			out = append(out, "netns "+n)
		}
	}
	for _, l := range append([]string{i.rec.Bridge}, veths...) {
		if linkExists(l) {
			out = append(out, "link "+l)
		}
	}
	if fileExists(i.rec.Dir) {
		out = append(out, "directory "+i.rec.Dir)
	}
	for _, f := range i.cniCacheFiles() {
		out = append(out, "cni cache "+f)
	}
	if ipt := systemTool("iptables-save"); ipt != "" {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		b, err := runCommand(cctx, nil, "", ipt)
		cancel()
		if err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				if strings.Contains(line, i.rec.Network) || strings.Contains(line, i.rec.Bridge) {
					out = append(out, "iptables "+line)
				}
			}
		}
	}
	if hs, err := CgroupHierarchies(); err == nil {
		for _, h := range hs {
			if p := filepath.Join(h, i.CgroupRoot()); fileExists(p) {
				out = append(out, "cgroup "+p)
			}
		}
	}
	for _, id := range ids {
		m, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", criNamespace, id))
		m2, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", criNamespace, id))
		for _, p := range append(m, m2...) {
			out = append(out, "cgroup "+p)
		}
	}
	seen := map[string]bool{}
	for _, id := range ids {
		seen[id] = true
	}
	for _, s := range i.shimSockets(seen) {
		out = append(out, "shim socket "+s)
	}
	for _, sub := range []string{"subnets", "ports"} {
		dir := filepath.Join(machineDir, sub)
		for _, n := range dirNames(dir) {
			if b, err := os.ReadFile(filepath.Join(dir, n)); err == nil && strings.TrimSpace(string(b)) == i.rec.ID {
				out = append(out, "claim "+filepath.Join(dir, n))
			}
		}
	}
	return out
}

// InstanceInfo describes an instance found on the machine by ListInstances.
type InstanceInfo struct {
	// ID is the run id.
	ID string
	// Flavour is the containerd flavour.
	Flavour Flavour
	// Endpoint is the CRI endpoint, unix://….
	Endpoint string
	// ContainerdPID is containerd's PID (0 when stopped).
	ContainerdPID int
	// OwnerPID is the PID of the process that started the instance.
	OwnerPID int
	// OwnerAlive reports whether that process still runs; an instance whose
	// owner is gone was never torn down.
	OwnerAlive bool
}

// ListInstances lists the instances on the machine, from their records
// under /run/localcri.
func ListInstances() ([]InstanceInfo, error) {
	var out []InstanceInfo
	for _, n := range dirNames(machineDir) {
		rec, err := readRecord(n)
		if err != nil {
			continue
		}
		out = append(out, InstanceInfo{
			ID:            rec.ID,
			Flavour:       rec.Flavour,
			Endpoint:      "unix://" + rec.Socket,
			ContainerdPID: rec.ContainerdPID,
			OwnerPID:      rec.OwnerPID,
			OwnerAlive:    Alive(rec.OwnerPID),
		})
	}
	return out, nil
}

func readRecord(id string) (record, error) {
	var rec record
	b, err := os.ReadFile(filepath.Join(machineDir, id, "instance.json"))
	if err != nil {
		return rec, fmt.Errorf("read record of run %s: %w", id, err)
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec, fmt.Errorf("parse record of run %s: %w", id, err)
	}
	if rec.ID != id {
		return rec, fmt.Errorf("record of run %s names run %q", id, rec.ID)
	}
	return rec, nil
}

// Cleanup tears down the instance with run id from another process than
// the one that started it, e.g. after that process died: it attaches to the
// instance through its record and runs Teardown. Its registry, which lived
// in the dead process, is gone already.
func Cleanup(ctx context.Context, log *zap.Logger, id string) error {
	if log == nil {
		log = zap.NewNop()
	}
	rec, err := readRecord(id)
	if err != nil {
		return err
	}
	inst := &Instance{
		log:  log.With(zap.String("run_id", id)),
		rec:  rec,
		bins: flavourBinaries(rec.Flavour, rec.ToolsDir),
	}
	if rec.ContainerdPID != 0 && Alive(rec.ContainerdPID) && strings.Contains(Cmdline(rec.ContainerdPID), rec.ConfigPath) {
		if p, err := os.FindProcess(rec.ContainerdPID); err == nil {
			inst.proc = p
		}
	}
	inst.started = fileExists(rec.ConfigPath)
	return inst.Teardown(ctx)
}
