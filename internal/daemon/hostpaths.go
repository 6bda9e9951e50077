package daemon

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"

	"go.uber.org/zap"
	cri "k8s.io/cri-api/pkg/apis"

	"github.com/podsync/podsync/engine/admit"
)

// ownDeniedPaths are podsyncd's own paths no hostPath volume may reach,
// whatever --allowed-host-paths say: its root directory (pod volumes,
// the bind mounts it gives the runtime) and store, the pod log
// directory, its API sockets and the runtime's sockets.
func ownDeniedPaths(cfg Config) []admit.DeniedHostPath {
	out := []admit.DeniedHostPath{
		{Path: cfg.RootDir, Why: "podsync's root directory (--root-dir)"},
		{Path: filepath.Join(cfg.RootDir, StoreFile), Why: "podsync's store, which holds every Secret (--root-dir)"},
		{Path: cfg.PodLogDir, Why: "the pod log directory (--pod-log-dir)"},
	}
	for _, ep := range []struct{ flag, value string }{{"--runtime-endpoint", cfg.RuntimeEndpoint}, {"--image-endpoint", cfg.ImageEndpoint}} {
		if p, ok := strings.CutPrefix(ep.value, "unix://"); ok {
			out = append(out, admit.DeniedHostPath{Path: p, Why: "the container runtime's socket (" + ep.flag + ")"})
		}
	}
	for _, l := range cfg.Listen {
		if p, ok := strings.CutPrefix(l, "unix://"); ok {
			out = append(out, admit.DeniedHostPath{Path: p, Why: "podsyncd's API socket (--listen)"})
		}
	}
	return out
}

// runtimeStatusConfig is what podsync reads of the CRI Status verbose
// info's "config": containerd's CRI plugin reports its configuration
// there, with the same keys in 1.6 and 2.x.
type runtimeStatusConfig struct {
	ContainerdRootDir  string `json:"containerdRootDir"`
	ContainerdEndpoint string `json:"containerdEndpoint"`
	RootDir            string `json:"rootDir"`
	StateDir           string `json:"stateDir"`
}

// runtimeDeniedPaths asks the runtime where its root, state and socket
// are (CRI Status, verbose). A runtime that does not say is not an
// error: the string and inode checks still cover podsync's own paths.
func runtimeDeniedPaths(ctx context.Context, rt cri.RuntimeService, log *zap.Logger) []admit.DeniedHostPath {
	resp, err := rt.Status(ctx, true)
	if err != nil {
		log.Warn("runtime status unavailable: its root and state directories are not known to the hostPath policy", zap.Error(err))
		return nil
	}
	var c runtimeStatusConfig
	if raw, ok := resp.GetInfo()["config"]; !ok || json.Unmarshal([]byte(raw), &c) != nil {
		log.Warn("runtime status has no configuration podsync reads: its root and state directories are not known to the hostPath policy")
		return nil
	}
	var out []admit.DeniedHostPath
	add := func(p, why string) {
		if filepath.IsAbs(p) {
			out = append(out, admit.DeniedHostPath{Path: filepath.Clean(p), Why: why})
		}
	}
	add(c.ContainerdRootDir, "the container runtime's root directory (containerd's root)")
	add(c.RootDir, "the container runtime's CRI root directory")
	add(c.StateDir, "the container runtime's CRI state directory")
	if c.StateDir != "" && strings.HasPrefix(filepath.Base(c.StateDir), "io.containerd.") {
		// <state>/io.containerd.grpc.v1.cri (1.6) or
		// <state>/io.containerd.cri.v1.runtime... (2.x): containerd's
		// own state, with the shims' and tasks' sockets, is its parent.
		add(filepath.Dir(c.StateDir), "the container runtime's state directory (containerd's state)")
	}
	if p, ok := strings.CutPrefix(c.ContainerdEndpoint, "unix://"); ok {
		add(p, "the container runtime's socket (containerd's address)")
	} else {
		add(c.ContainerdEndpoint, "the container runtime's socket (containerd's address)")
	}
	return out
}

// withDenied returns p with denied added, each also under the path its
// symbolic links resolve to (admission compares strings), and warns of
// every allowed prefix that contains a denied path: those stay refused.
func withDenied(p admit.Policy, denied []admit.DeniedHostPath, log *zap.Logger) admit.Policy {
	p.DeniedHostPaths = nil
	seen := map[string]bool{}
	for _, d := range denied {
		d.Path = filepath.Clean(d.Path)
		for _, path := range []string{d.Path, evalSymlinks(d.Path)} {
			if !seen[path] {
				seen[path] = true
				p.DeniedHostPaths = append(p.DeniedHostPaths, admit.DeniedHostPath{Path: path, Why: d.Why})
			}
		}
	}
	paths := make([]string, len(p.DeniedHostPaths))
	for i, d := range p.DeniedHostPaths {
		paths[i] = d.Path
	}
	log.Info("hostPath volumes never reach these paths", zap.Strings("denied", paths))
	for _, pre := range p.AllowedHostPaths {
		for _, d := range p.DeniedInside(pre) {
			log.Warn("an allowed host path prefix contains a path the node always refuses; hostPath volumes reaching it stay refused",
				zap.String("prefix", pre.String()), zap.String("denied", d.Path), zap.String("denied_why", d.Why))
		}
	}
	return p
}

// evalSymlinks is filepath.EvalSymlinks, or path if it cannot be
// resolved (it does not exist yet).
func evalSymlinks(path string) string {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		return real
	}
	return path
}
