package enginetest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	crierrors "k8s.io/cri-api/pkg/errors"
	utilexec "k8s.io/utils/exec"
)

// ConformanceRow is one behaviour RuntimeConformance checks.
type ConformanceRow struct {
	// Name names the subtest.
	Name string
	// RealOnly marks a row a TestDouble cannot honour; Reason says why.
	RealOnly bool
	// Reason explains RealOnly.
	Reason string
	// Run checks the behaviour; the runtime is fresh for a double and shared
	// for a real runtime, so rows clean up what they create.
	Run func(t *testing.T, h *Harness)
}

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

// TermScript runs until SIGTERM and then exits 0 at once.
const TermScript = `trap "exit 0" TERM; while :; do sleep 1 & wait; done`

// RuntimeConformance runs every conformance row against runtimes made by
// newRuntime: on a TestDouble the RealOnly rows are left out (and named in
// the test log). newRuntime may return a fresh runtime per call (a double)
// or the same connection to a shared real runtime.
func RuntimeConformance(t *testing.T, newRuntime func(t *testing.T) Runtime) {
	t.Helper()
	double := false
	if d, ok := newRuntime(t).(TestDouble); ok && d.IsTestDouble() {
		double = true
	}
	for _, row := range conformanceRows {
		if row.RealOnly && double {
			t.Logf("row %q needs a real runtime: %s", row.Name, row.Reason)
			continue
		}
		t.Run(row.Name, func(t *testing.T) {
			h := NewHarness(t, newRuntime(t))
			h.EnsureImage(ConformanceImage)
			row.Run(t, h)
		})
	}
}

var conformanceRows = []ConformanceRow{
	{Name: "sandbox gets a pod IP from CNI", Run: testSandboxIP},
	{Name: "container exits with its exit code", Run: testExitCode},
	{Name: "container logs are written in CRI format to the log path", Run: testLogs},
	{Name: "StopContainer lets a container handle SIGTERM", Run: testStopGraceful},
	{Name: "StopContainer kills a PID 1 without a SIGTERM handler after the grace period", Run: testStopKill},
	{Name: "StopContainer ends a process that is not PID 1 with SIGTERM", Run: testStopTerm},
	{Name: "StopContainer kills a container that ignores SIGTERM", Run: testStopIgnored},
	{Name: "labels and annotations round-trip", Run: testLabels},
	{Name: "stopping a sandbox stops its containers", Run: testStopSandbox},
	{Name: "removing a sandbox removes its containers", Run: testRemoveSandbox},
	{Name: "unknown ids are NotFound for status, fine for remove", Run: testUnknownIDs},
	{Name: "list filters by label, state, sandbox and id", Run: testListFilters},
	{Name: "names are reserved while their sandbox or container exists", Run: testNameReservation},
	{Name: "a restarted container is a new attempt beside the old one", Run: testAttempts},
	{Name: "container events stream, or Unimplemented", Run: testEvents},
	{Name: "images are pulled and reported", Run: testImages},
	{Name: "ExecSync returns output and exit code", Run: testExecSync},
	{
		Name:     "containers share the pod network namespace",
		RealOnly: true,
		Reason:   "a test double runs no processes and has no network namespaces",
		Run:      testSharedNetwork,
	},
}

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

func testExitCode(t *testing.T, h *Harness) {
	cfg := h.PodConfig("")
	pod := h.RunPod(cfg)
	failing := h.Run(pod, cfg, h.ContainerConfig("fails", 0, "/bin/sh", "-c", "echo hello; exit 3"))
	st := h.WaitState(failing, runtimeapi.ContainerState_CONTAINER_EXITED)
	if st.ExitCode != 3 || st.Reason != "Error" {
		t.Errorf("exit code %d reason %q, want 3 %q", st.ExitCode, st.Reason, "Error")
	}
	// containerd takes FinishedAt from the shim's exit event and StartedAt
	// from its own clock after the start: a process that exits at once can
	// finish "before" it started. Only creation comes first.
	if st.StartedAt == 0 || st.FinishedAt == 0 || st.CreatedAt > st.StartedAt || st.CreatedAt > st.FinishedAt {
		t.Errorf("created %d started %d finished %d: want both times set, not before the creation", st.CreatedAt, st.StartedAt, st.FinishedAt)
	}
	ok := h.Run(pod, cfg, h.ContainerConfig("succeeds", 0, "/bin/sh", "-c", "exit 0"))
	st = h.WaitState(ok, runtimeapi.ContainerState_CONTAINER_EXITED)
	if st.ExitCode != 0 || st.Reason != "Completed" {
		t.Errorf("exit code %d reason %q, want 0 %q", st.ExitCode, st.Reason, "Completed")
	}
}

// criLogLine is a line of the CRI log format: time, stream, tag, message.
var criLogLine = regexp.MustCompile(`^(\S+) (stdout|stderr) ([FP]) (.*)$`)

func testLogs(t *testing.T, h *Harness) {
	cfg := h.PodConfig("")
	pod := h.RunPod(cfg)
	id := h.Run(pod, cfg, h.ContainerConfig("logs", 0, "/bin/sh", "-c", "echo out-line; echo err-line >&2; exit 0"))
	st := h.WaitState(id, runtimeapi.ContainerState_CONTAINER_EXITED)
	want := cfg.LogDirectory + "/logs_0.log"
	if st.LogPath != want {
		t.Fatalf("log path = %q, want %q", st.LogPath, want)
	}
	got := map[string]string{}
	// The runtime may flush the log just after the exit is reported.
	err := pollUntil(h.Ctx, func() (bool, error) {
		f, err := os.Open(st.LogPath)
		if err != nil {
			return false, nil
		}
		defer func() { _ = f.Close() }()
		s := bufio.NewScanner(f)
		for s.Scan() {
			m := criLogLine.FindStringSubmatch(s.Text())
			if m == nil {
				return false, fmt.Errorf("log line %q is not in CRI format", s.Text())
			}
			if _, err := time.Parse(time.RFC3339Nano, m[1]); err != nil {
				return false, fmt.Errorf("log line %q: time: %w", s.Text(), err)
			}
			if m[3] != "F" {
				return false, fmt.Errorf("log line %q: tag %q, want F", s.Text(), m[3])
			}
			got[m[4]] = m[2]
		}
		return len(got) >= 2, s.Err()
	})
	if err != nil {
		t.Fatalf("read log %s: %v (got %v)", st.LogPath, err, got)
	}
	if got["out-line"] != "stdout" || got["err-line"] != "stderr" {
		t.Errorf("log lines = %v, want out-line on stdout and err-line on stderr", got)
	}
}

func testStopGraceful(t *testing.T, h *Harness) {
	cfg := h.PodConfig("")
	pod := h.RunPod(cfg)
	id := h.Run(pod, cfg, h.ContainerConfig("traps", 0, "/bin/sh", "-c", TermScript))
	h.WaitState(id, runtimeapi.ContainerState_CONTAINER_RUNNING)
	if err := h.RT.StopContainer(h.Ctx, id, 30); err != nil {
		t.Fatalf("StopContainer: %v", err)
	}
	st := h.Status(id)
	if st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != 0 || st.FinishedAt == 0 {
		t.Errorf("after stop: state %s exit code %d finished %d, want EXITED 0 and a finish time", st.State, st.ExitCode, st.FinishedAt)
	}
	// Stopping again does nothing.
	if err := h.RT.StopContainer(h.Ctx, id, 30); err != nil {
		t.Errorf("second StopContainer: %v", err)
	}
}

// testStopCode stops a running container made from cfg with a one second
// grace period and checks its exit code.
func testStopCode(t *testing.T, h *Harness, cfg *runtimeapi.ContainerConfig, want int32) {
	pod := h.PodConfig("")
	podID := h.RunPod(pod)
	id := h.Run(podID, pod, cfg)
	h.WaitState(id, runtimeapi.ContainerState_CONTAINER_RUNNING)
	if err := h.RT.StopContainer(h.Ctx, id, 1); err != nil {
		t.Fatalf("StopContainer: %v", err)
	}
	st := h.Status(id)
	if st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != want || st.FinishedAt == 0 {
		t.Errorf("after stop: state %s exit code %d finished %d, want EXITED %d and a finish time", st.State, st.ExitCode, st.FinishedAt, want)
	}
}

func testStopKill(t *testing.T, h *Harness) {
	cfg := h.ContainerConfig("pid1", 0, "sleep", "3600")
	cfg.Linux.SecurityContext = &runtimeapi.LinuxContainerSecurityContext{
		NamespaceOptions: &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_CONTAINER},
	}
	testStopCode(t, h, cfg, KillExitCode)
}

func testStopTerm(t *testing.T, h *Harness) {
	// The default PID namespace mode is POD: the sandbox's pause is PID 1.
	testStopCode(t, h, h.ContainerConfig("child", 0, "sleep", "3600"), TermExitCode)
}

func testStopIgnored(t *testing.T, h *Harness) {
	testStopCode(t, h, h.ContainerConfig("ignores", 0, "/bin/sh", "-c", `trap "" TERM; while :; do sleep 1 & wait; done`), KillExitCode)
}

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

func testAttempts(t *testing.T, h *Harness) {
	cfg := h.PodConfig("")
	pod := h.RunPod(cfg)
	first := h.Run(pod, cfg, h.ContainerConfig("app", 0, "/bin/sh", "-c", "echo first; exit 1"))
	h.WaitState(first, runtimeapi.ContainerState_CONTAINER_EXITED)
	second := h.Run(pod, cfg, h.ContainerConfig("app", 1, "/bin/sh", "-c", "echo second; exit 0"))
	st := h.WaitState(second, runtimeapi.ContainerState_CONTAINER_EXITED)
	if first == second {
		t.Fatalf("both attempts have id %s", first)
	}
	if st.GetMetadata().GetAttempt() != 1 || st.ExitCode != 0 {
		t.Errorf("second attempt: metadata %v exit code %d, want attempt 1 exit code 0", st.GetMetadata(), st.ExitCode)
	}
	if old := h.Status(first); old.ExitCode != 1 || old.GetMetadata().GetAttempt() != 0 {
		t.Errorf("first attempt: metadata %v exit code %d, want attempt 0 exit code 1", old.GetMetadata(), old.ExitCode)
	}
	ctrs, err := h.RT.ListContainers(h.Ctx, &runtimeapi.ContainerFilter{PodSandboxId: pod})
	if err != nil || len(ctrs) != 2 {
		t.Errorf("ListContainers: %d containers, %v; want both attempts", len(ctrs), err)
	}
}

func testEvents(t *testing.T, h *Harness) {
	ctx, cancel := context.WithCancel(h.Ctx)
	events := make(chan *runtimeapi.ContainerEventResponse, 256)
	streamErr := make(chan error, 1)
	go func() {
		streamErr <- h.RT.GetContainerEvents(ctx, events, nil)
	}()
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		// The client sends into events without watching ctx: drain until
		// the call returns.
		for {
			select {
			case err := <-streamErr:
				return err
			case <-events:
			}
		}
	}
	defer func() { _ = stop() }()

	cfg := h.PodConfig("")
	pod := h.RunPod(cfg)
	// A probe container's event proves the subscription is live before the
	// checked sequence starts, so no event of it can be missed. The stream
	// may start after a probe's events were sent, so start another probe
	// until one is seen.
	probes := map[string]bool{}
	newProbe := func() {
		probes[h.Run(pod, cfg, h.ContainerConfig(fmt.Sprintf("probe-%d", len(probes)), 0, "/bin/sh", "-c", "exit 0"))] = true
	}
	newProbe()
	retry := time.NewTicker(500 * time.Millisecond)
	defer retry.Stop()
	live := false
	for !live {
		select {
		case ev := <-events:
			live = probes[ev.ContainerId]
		case <-retry.C:
			newProbe()
		case err := <-streamErr:
			stopped = true
			if status.Code(err) == codes.Unimplemented {
				t.Logf("runtime has no container events: %v", err)
				return
			}
			t.Fatalf("GetContainerEvents: %v", err)
		case <-h.Ctx.Done():
			t.Fatalf("no event for the probe container: %v", h.Ctx.Err())
		}
	}

	id := h.Run(pod, cfg, h.ContainerConfig("app", 0, "/bin/sh", "-c", TermScript))
	h.WaitState(id, runtimeapi.ContainerState_CONTAINER_RUNNING)
	if err := h.RT.StopContainer(h.Ctx, id, 30); err != nil {
		t.Fatalf("StopContainer: %v", err)
	}
	if err := h.RT.RemoveContainer(h.Ctx, id); err != nil {
		t.Fatalf("RemoveContainer: %v", err)
	}
	want := []runtimeapi.ContainerEventType{
		runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT,
		runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT,
		runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT,
		runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT,
	}
	var got []runtimeapi.ContainerEventType
	for len(got) < len(want) {
		select {
		case ev := <-events:
			if ev.ContainerId != id {
				continue
			}
			got = append(got, ev.ContainerEventType)
			if ev.CreatedAt == 0 {
				t.Errorf("event %s has no time", ev.ContainerEventType)
			}
			if ev.ContainerEventType != runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT && ev.GetPodSandboxStatus().GetId() != pod {
				t.Errorf("event %s names sandbox %q, want %q", ev.ContainerEventType, ev.GetPodSandboxStatus().GetId(), pod)
			}
		case err := <-streamErr:
			stopped = true
			t.Fatalf("GetContainerEvents ended: %v (events so far %v)", err, got)
		case <-h.Ctx.Done():
			t.Fatalf("events = %v, want %v: %v", got, want, h.Ctx.Err())
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("events = %v, want %v", got, want)
	}
	if err := stop(); status.Code(err) != codes.Canceled {
		t.Errorf("GetContainerEvents after cancel: %v, want Canceled", err)
	}
}

func testImages(t *testing.T, h *Harness) {
	ref, err := h.RT.PullImage(h.Ctx, &runtimeapi.ImageSpec{Image: ConformanceImage}, nil, nil)
	if err != nil {
		t.Fatalf("PullImage: %v", err)
	}
	if ref == "" {
		t.Error("PullImage returned no image ref")
	}
	st, err := h.RT.ImageStatus(h.Ctx, &runtimeapi.ImageSpec{Image: ConformanceImage}, false)
	if err != nil {
		t.Fatalf("ImageStatus: %v", err)
	}
	if st.GetImage() == nil || !slices.Contains(st.GetImage().GetRepoTags(), ConformanceImage) {
		t.Errorf("ImageStatus = %v, want the image tagged %s", st.GetImage(), ConformanceImage)
	}
	// containerd ignores ListImages' filter: list everything.
	imgs, err := h.RT.ListImages(h.Ctx, nil)
	if err != nil {
		t.Fatalf("ListImages: %v", err)
	}
	if !slices.ContainsFunc(imgs, func(img *runtimeapi.Image) bool { return slices.Contains(img.RepoTags, ConformanceImage) }) {
		t.Errorf("ListImages lacks %s", ConformanceImage)
	}
	absent, err := h.RT.ImageStatus(h.Ctx, &runtimeapi.ImageSpec{Image: "registry.local/absent:none"}, false)
	if err != nil || absent.GetImage() != nil {
		t.Errorf("ImageStatus of an absent image = %v, %v; want no image and no error", absent.GetImage(), err)
	}
}

func testExecSync(t *testing.T, h *Harness) {
	cfg := h.PodConfig("")
	pod := h.RunPod(cfg)
	id := h.Run(pod, cfg, h.ContainerConfig("app", 0, "/bin/sh", "-c", TermScript))
	h.WaitState(id, runtimeapi.ContainerState_CONTAINER_RUNNING)
	stdout, stderr, err := h.RT.ExecSync(h.Ctx, id, []string{"/bin/sh", "-c", "echo hi; echo oops >&2"}, 30*time.Second)
	if err != nil {
		t.Fatalf("ExecSync: %v", err)
	}
	if string(stdout) != "hi\n" || string(stderr) != "oops\n" {
		t.Errorf("ExecSync output = %q, %q; want %q, %q", stdout, stderr, "hi\n", "oops\n")
	}
	_, _, err = h.RT.ExecSync(h.Ctx, id, []string{"/bin/sh", "-c", "exit 7"}, 30*time.Second)
	var exit utilexec.ExitError
	if !errors.As(err, &exit) || exit.ExitStatus() != 7 {
		t.Errorf("ExecSync of exit 7: %v, want an exit error with status 7", err)
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
