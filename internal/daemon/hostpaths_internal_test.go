package daemon

import (
	"context"
	"slices"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podsync/podsync/engine/admit"
)

// statusRuntime answers CRI Status with a verbose info "config", as
// containerd's CRI plugin does.
type statusRuntime struct {
	cri.RuntimeService
	config string
}

func (r statusRuntime) Status(context.Context, bool) (*runtimeapi.StatusResponse, error) {
	return &runtimeapi.StatusResponse{Info: map[string]string{"config": r.config}}, nil
}

// TestDeniedPaths: podsyncd denies its root, store, log directory and
// sockets, and what containerd (1.6 and 2.x report the same keys) says are
// its root, state and socket; an allowed prefix containing one of them is
// warned of.
func TestDeniedPaths(t *testing.T) {
	cfg := DefaultConfig()
	cfg.RootDir, cfg.PodLogDir = "/var/lib/podsync", "/var/log/pods"
	cfg.RuntimeEndpoint, cfg.Listen = "unix:///run/k/containerd.sock", []string{"unix:///run/podsync/podsync.sock"}
	for _, flavour := range []struct{ name, config string }{
		{"containerd 1.6", `{"containerdRootDir":"/var/lib/containerd","containerdEndpoint":"/run/containerd/containerd.sock",` +
			`"rootDir":"/var/lib/containerd/io.containerd.grpc.v1.cri","stateDir":"/run/containerd/io.containerd.grpc.v1.cri"}`},
		{"containerd 2.x", `{"containerdRootDir":"/var/lib/containerd","containerdEndpoint":"/run/containerd/containerd.sock",` +
			`"rootDir":"/var/lib/containerd/io.containerd.grpc.v1.cri","stateDir":"/run/containerd/io.containerd.grpc.v1.cri","cni":{}}`},
	} {
		t.Run(flavour.name, func(t *testing.T) {
			core, logs := observer.New(zap.InfoLevel)
			log := zap.New(core)
			base := admit.Policy{AllowedHostPaths: []admit.HostPathPrefix{{Path: "/var"}, {Path: "/srv", ReadOnly: true}}}
			p := withDenied(base, append(ownDeniedPaths(cfg), runtimeDeniedPaths(t.Context(), statusRuntime{config: flavour.config}, log)...), log)
			var got []string
			for _, d := range p.DeniedHostPaths {
				got = append(got, d.Path)
			}
			for _, want := range []string{"/var/lib/podsync", "/var/lib/podsync/podsync.db", "/var/log/pods", "/run/k/containerd.sock",
				"/run/podsync/podsync.sock", "/var/lib/containerd", "/var/lib/containerd/io.containerd.grpc.v1.cri",
				"/run/containerd/io.containerd.grpc.v1.cri", "/run/containerd", "/run/containerd/containerd.sock"} {
				if !slices.Contains(got, want) {
					t.Errorf("denied %v: missing %s", got, want)
				}
			}
			for _, path := range []string{"/var", "/var/lib/containerd/x", "/run/containerd/io.containerd.grpc.v1.cri/sandboxes"} {
				if p.HostPathAllowed(path) {
					t.Errorf("HostPathAllowed(%s) = true", path)
				}
			}
			if !p.HostPathAllowed("/var/data") || !p.HostPathAllowed("/srv/x") {
				t.Error("paths beside the denied ones are refused")
			}
			warned := map[string]bool{}
			for _, e := range logs.FilterMessageSnippet("allowed host path prefix contains").All() {
				warned[e.ContextMap()["denied"].(string)] = true
			}
			for _, want := range []string{"/var/lib/podsync", "/var/log/pods", "/var/lib/containerd"} {
				if !warned[want] {
					t.Errorf("no warning that /var:rw contains %s (warned of %v)", want, warned)
				}
			}
		})
	}
}
