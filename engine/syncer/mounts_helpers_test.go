package syncer_test

import (
	"context"
	"os"
	"sync"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podsync/podsync/engine/syncer"
	"github.com/podsync/podsync/host/mounttable"
)

// recordingRuntime records the mounts of every container the syncer
// creates (the fake runtime keeps configs but does not report mounts).
type recordingRuntime struct {
	syncer.Runtime
	mu   sync.Mutex
	mnts map[string][]*runtimeapi.Mount // by container name, the latest
}

// wrap is a syncertest.New option.
func (r *recordingRuntime) wrap(o *syncer.SyncerOptions) {
	r.Runtime = o.Runtime
	o.Runtime = r
}

func (r *recordingRuntime) CreateContainer(ctx context.Context, sb string, cfg *runtimeapi.ContainerConfig, sbc *runtimeapi.PodSandboxConfig) (string, error) {
	r.mu.Lock()
	if r.mnts == nil {
		r.mnts = map[string][]*runtimeapi.Mount{}
	}
	r.mnts[cfg.GetMetadata().GetName()] = cfg.GetMounts()
	r.mu.Unlock()
	return r.Runtime.CreateContainer(ctx, sb, cfg, sbc)
}

// mounts returns the volume mounts (not /etc/hosts nor the termination
// message file) of the container's latest instance.
func (r *recordingRuntime) mounts(name string) []*runtimeapi.Mount {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*runtimeapi.Mount
	for _, m := range r.mnts[name] {
		if m.GetContainerPath() != "/etc/hosts" && m.GetContainerPath() != "/dev/termination-log" {
			out = append(out, m)
		}
	}
	return out
}

func sameFile(t *testing.T, a, b string) bool {
	t.Helper()
	fa, err := os.Stat(a)
	if err != nil {
		t.Errorf("stat %s: %v", a, err)
		return false
	}
	fb, err := os.Stat(b)
	if err != nil {
		t.Errorf("stat %s: %v", b, err)
		return false
	}
	return os.SameFile(fa, fb)
}

// mountsBelow returns the mount points at or below dir.
func mountsBelow(t *testing.T, dir string) []string {
	t.Helper()
	mps, err := mounttable.Below(dir)
	if err != nil {
		t.Fatal(err)
	}
	return mps
}

// requireRoot fails a test that needs real mounts when it does not run
// as root: CI runs as root, and a skip would hide the refusals these
// tests show.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test bind-mounts as the syncer does and needs root (CI runs the unit tests as root)")
	}
}
