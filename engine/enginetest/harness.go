package enginetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	crierrors "k8s.io/cri-api/pkg/errors"
)

// Harness is what a conformance row works with: the runtime under test and
// helpers that create pods and containers named after the test and remove
// them when it ends.
type Harness struct {
	// RT is the runtime under test.
	RT Runtime
	// Ctx is the row's context, ending with the test or after two minutes.
	Ctx context.Context
	t   *testing.T
}

// NewHarness returns a harness for rt whose context ends with the test or
// after two minutes.
func NewHarness(t *testing.T, rt Runtime) *Harness {
	ctx, cancel := context.WithTimeout(t.Context(), conformanceTimeout)
	t.Cleanup(cancel)
	return &Harness{RT: rt, Ctx: ctx, t: t}
}

// conformanceTimeout bounds every row.
const conformanceTimeout = 2 * time.Minute

// pollInterval is how often rows re-check a condition.
const pollInterval = 20 * time.Millisecond

// name returns a DNS-label-like name made of the test name and suffix.
func (h *Harness) name(suffix string) string {
	n := strings.ToLower(h.t.Name())
	n = regexp.MustCompile(`[^a-z0-9]+`).ReplaceAllString(n, "-")
	if len(n) > 40 {
		n = n[len(n)-40:]
	}
	n = strings.Trim(n, "-")
	if suffix != "" {
		n += "-" + suffix
	}
	return n
}

func randomUID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// PodConfig returns a sandbox config on the pod network, named after the
// test and suffix, with a fresh uid, a log directory in a temporary
// directory and the label "conformance.podsync.io/test" = the name.
func (h *Harness) PodConfig(suffix string) *runtimeapi.PodSandboxConfig {
	name := h.name(suffix)
	return &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{
			Name:      name,
			Namespace: "conformance",
			Uid:       randomUID(),
		},
		Hostname:     "conformance",
		LogDirectory: h.t.TempDir(),
		Labels:       map[string]string{"conformance.podsync.io/test": name},
		Linux:        &runtimeapi.LinuxPodSandboxConfig{},
	}
}

// RunPod runs a sandbox and removes it (and its containers) when the test
// ends, under a fresh context.
func (h *Harness) RunPod(cfg *runtimeapi.PodSandboxConfig) string {
	h.t.Helper()
	id, err := h.RT.RunPodSandbox(h.Ctx, cfg, "")
	if err != nil {
		h.t.Fatalf("RunPodSandbox: %v", err)
	}
	h.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := h.RT.StopPodSandbox(ctx, id); err != nil && !crierrors.IsNotFound(err) {
			h.t.Errorf("cleanup: StopPodSandbox %s: %v", id, err)
		}
		if err := h.RT.RemovePodSandbox(ctx, id); err != nil {
			h.t.Errorf("cleanup: RemovePodSandbox %s: %v", id, err)
		}
	})
	return id
}

// ContainerConfig returns a config for a container of ConformanceImage
// running argv, logging to <name>_<attempt>.log.
func (h *Harness) ContainerConfig(name string, attempt uint32, argv ...string) *runtimeapi.ContainerConfig {
	return &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name, Attempt: attempt},
		Image:    &runtimeapi.ImageSpec{Image: ConformanceImage},
		Command:  argv,
		LogPath:  fmt.Sprintf("%s_%d.log", name, attempt),
		Labels:   map[string]string{"conformance.podsync.io/container": name},
		Linux:    &runtimeapi.LinuxContainerConfig{},
	}
}

// Create creates a container.
func (h *Harness) Create(podID string, pod *runtimeapi.PodSandboxConfig, cfg *runtimeapi.ContainerConfig) string {
	h.t.Helper()
	id, err := h.RT.CreateContainer(h.Ctx, podID, cfg, pod)
	if err != nil {
		h.t.Fatalf("CreateContainer %s: %v", cfg.GetMetadata().GetName(), err)
	}
	return id
}

// Start starts a container.
func (h *Harness) Start(id string) {
	h.t.Helper()
	if err := h.RT.StartContainer(h.Ctx, id); err != nil {
		h.t.Fatalf("StartContainer %s: %v", id, err)
	}
}

// Run creates and starts a container.
func (h *Harness) Run(podID string, pod *runtimeapi.PodSandboxConfig, cfg *runtimeapi.ContainerConfig) string {
	h.t.Helper()
	id := h.Create(podID, pod, cfg)
	h.Start(id)
	return id
}

// Status returns a container's status.
func (h *Harness) Status(id string) *runtimeapi.ContainerStatus {
	h.t.Helper()
	st, err := h.RT.ContainerStatus(h.Ctx, id, false)
	if err != nil {
		h.t.Fatalf("ContainerStatus %s: %v", id, err)
	}
	return st.GetStatus()
}

// WaitState polls until the container is in state and returns its status.
func (h *Harness) WaitState(id string, state runtimeapi.ContainerState) *runtimeapi.ContainerStatus {
	h.t.Helper()
	var last *runtimeapi.ContainerStatus
	err := pollUntil(h.Ctx, func() (bool, error) {
		st, err := h.RT.ContainerStatus(h.Ctx, id, false)
		if err != nil {
			return false, err
		}
		last = st.GetStatus()
		return last.GetState() == state, nil
	})
	if err != nil {
		h.t.Fatalf("container %s never reached %s (last %s): %v", id, state, last.GetState(), err)
	}
	return last
}

// WaitLog polls until a line of the container's log (CRI format, at its
// status's log path) says text.
func (h *Harness) WaitLog(id, text string) {
	h.t.Helper()
	path := h.Status(id).GetLogPath()
	err := pollUntil(h.Ctx, func() (bool, error) {
		raw, err := os.ReadFile(path)
		if err != nil {
			return false, nil
		}
		for line := range strings.SplitSeq(string(raw), "\n") {
			if m := criLogLine.FindStringSubmatch(line); m != nil && m[4] == text {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		h.t.Fatalf("container %s never logged %q in %s: %v", id, text, path, err)
	}
}

// EnsureImage pulls ref unless the runtime holds it.
func (h *Harness) EnsureImage(ref string) {
	h.t.Helper()
	st, err := h.RT.ImageStatus(h.Ctx, &runtimeapi.ImageSpec{Image: ref}, false)
	if err != nil {
		h.t.Fatalf("ImageStatus %s: %v", ref, err)
	}
	if st.GetImage() != nil {
		return
	}
	if _, err := h.RT.PullImage(h.Ctx, &runtimeapi.ImageSpec{Image: ref}, nil, nil); err != nil {
		h.t.Fatalf("PullImage %s: %v", ref, err)
	}
}

// pollUntil calls cond every pollInterval until it returns true or an
// error, or ctx ends.
func pollUntil(ctx context.Context, cond func() (bool, error)) error {
	return wait.PollUntilContextCancel(ctx, pollInterval, true, func(context.Context) (bool, error) { return cond() })
}
