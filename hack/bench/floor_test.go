package main

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/model"
)

// benchConfigs are the podsync-shaped configs of one bench pod, as
// e.rawPods builds them.
func benchConfigs(t *testing.T) rawPod {
	t.Helper()
	pod := newPods("t", 1)[0]
	opts := criconfig.Options{RootDir: "/r", PodLogDir: "/l", ClusterDomain: "cluster.local", CgroupDriver: "cgroupfs",
		NodeName: benchNode, NodeIPs: []string{benchNodeIP}, MemoryCapacity: 1 << 34, SeccompDefault: true}
	sb, err := criconfig.SandboxConfig(pod, 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := criconfig.ContainerConfig(criconfig.ContainerConfigInput{Pod: pod, Container: &pod.Spec.Containers[0],
		ImageRef: "sha256:0123", PodIPs: []string{"10.255.255.254"}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if spec, ok := model.EncodePodSpec(pod); ok {
		sb.Annotations = map[string]string{model.AnnotationPodSpec: spec}
	}
	return rawPod{uid: pod.UID, sandbox: sb, container: cc}
}

func TestConfigDiff(t *testing.T) {
	base := func() *runtimeapi.PodSandboxConfig {
		return &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "a", Uid: "u"}}
	}
	tests := []struct {
		name   string
		mutate func(*runtimeapi.PodSandboxConfig)
		want   []string
	}{
		{"identical", func(*runtimeapi.PodSandboxConfig) {}, nil},
		{"scalar", func(c *runtimeapi.PodSandboxConfig) { c.Hostname = "h" }, []string{"s.hostname"}},
		{"scalar inside a shared message", func(c *runtimeapi.PodSandboxConfig) { c.Metadata.Name = "b" }, []string{"s.metadata.name"}},
		{"fields inside a message only one side has", func(c *runtimeapi.PodSandboxConfig) {
			c.Linux = &runtimeapi.LinuxPodSandboxConfig{CgroupParent: "/p", SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_CONTAINER}}}
		}, []string{"s.linux.cgroup_parent", "s.linux.security_context.namespace_options.pid"}},
		{"an empty message set on one side", func(c *runtimeapi.PodSandboxConfig) {
			c.Linux = &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{Seccomp: &runtimeapi.SecurityProfile{}}}
		}, []string{"s.linux.security_context.seccomp"}},
		{"list and map", func(c *runtimeapi.PodSandboxConfig) {
			c.DnsConfig = &runtimeapi.DNSConfig{Servers: []string{"1.1.1.1"}}
			c.Labels = map[string]string{"k": "v"}
		}, []string{"s.dns_config.servers", "s.labels"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := base()
			tt.mutate(b)
			if diff := cmp.Diff(tt.want, configDiff("s", base(), b)); diff != "" {
				t.Errorf("configDiff (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCopyField(t *testing.T) {
	src := &runtimeapi.PodSandboxConfig{Linux: &runtimeapi.LinuxPodSandboxConfig{CgroupParent: "/p",
		SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{Seccomp: &runtimeapi.SecurityProfile{}}}, Labels: map[string]string{"k": "v"}}
	dst := &runtimeapi.PodSandboxConfig{Hostname: "h"}
	for _, path := range []string{"linux.cgroup_parent", "linux.security_context.seccomp", "labels"} {
		if err := copyField(dst, src, path); err != nil {
			t.Fatal(err)
		}
	}
	want := &runtimeapi.PodSandboxConfig{Hostname: "h", Linux: &runtimeapi.LinuxPodSandboxConfig{CgroupParent: "/p",
		SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{Seccomp: &runtimeapi.SecurityProfile{}}}, Labels: map[string]string{"k": "v"}}
	if diff := cmp.Diff(want, dst, protocmp.Transform()); diff != "" {
		t.Errorf("after copy (-want +got):\n%s", diff)
	}
	// dst shares nothing with src.
	src.Labels["k"] = "changed"
	src.Linux.SecurityContext.Seccomp.LocalhostRef = "changed"
	if dst.Labels["k"] != "v" || dst.Linux.SecurityContext.Seccomp.LocalhostRef != "" {
		t.Errorf("dst changed with src: %v", dst)
	}
	// A field src lacks is cleared.
	if err := copyField(dst, &runtimeapi.PodSandboxConfig{}, "hostname"); err != nil || dst.Hostname != "" {
		t.Errorf("copy of an unset field: hostname %q, err %v", dst.Hostname, err)
	}
	for _, bad := range []string{"nope", "hostname.x", "labels.k"} {
		if err := copyField(dst, src, bad); err == nil {
			t.Errorf("copyField %q: no error", bad)
		}
	}
}

// TestFloorPieces checks that the pieces of the bench pod's real configs
// cover every field in which they differ from the minimal ones exactly
// once (minimal + every piece = the podsync-shaped configs), and that the
// pieces the report must name are there.
func TestFloorPieces(t *testing.T) {
	p := benchConfigs(t)
	pieces := floorPieces(p.sandbox, p.container)
	all := rawPod{uid: p.uid, sandbox: minimalSandbox(p.sandbox), container: minimalContainer(p.container)}
	seen := map[string]bool{}
	var names []string
	for _, pc := range pieces {
		names = append(names, pc.name)
		if strings.Contains(pc.why, "not classified") {
			t.Errorf("piece %q is not classified: name it in pieceRules", pc.name)
		}
		for _, path := range pc.paths {
			if seen[path] {
				t.Errorf("field %s is in two pieces", path)
			}
			seen[path] = true
			part := strings.SplitN(path, ".", 2)
			var err error
			if part[0] == "sandbox" {
				err = copyField(all.sandbox, p.sandbox, part[1])
			} else {
				err = copyField(all.container, p.container, part[1])
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	if !proto.Equal(all.sandbox, p.sandbox) {
		t.Errorf("minimal + every piece is not the podsync-shaped sandbox config:\n%s", cmp.Diff(p.sandbox, all.sandbox, protocmp.Transform()))
	}
	if !proto.Equal(all.container, p.container) {
		t.Errorf("minimal + every piece is not the podsync-shaped container config:\n%s", cmp.Diff(p.container, all.container, protocmp.Transform()))
	}
	for _, want := range []string{"pod cgroup parent (/kubepods/besteffort/pod<uid>)", "mounts (/etc/hosts, /dev/termination-log)",
		"namespace options (a PID namespace per container)", "log directory and log path"} {
		if !slices.Contains(names, want) {
			t.Errorf("no piece %q in %q", want, names)
		}
	}
	// seccomp RuntimeDefault is part of the minimal floor (issue 40): no
	// piece holds it.
	for _, pc := range pieces {
		for _, path := range pc.paths {
			if strings.Contains(path, "seccomp") {
				t.Errorf("piece %q holds %s, which the minimal floor has", pc.name, path)
			}
		}
	}
	runtimeDefault := &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}
	if got := minimalSandbox(p.sandbox).GetLinux().GetSecurityContext().GetSeccomp(); !proto.Equal(got, runtimeDefault) {
		t.Errorf("minimal sandbox seccomp %v, want RuntimeDefault", got)
	}
	if got := minimalContainer(p.container).GetLinux().GetSecurityContext().GetSeccomp(); !proto.Equal(got, runtimeDefault) {
		t.Errorf("minimal container seccomp %v, want RuntimeDefault", got)
	}
}

// TestWithPiece checks one piece's configs: the minimal ones plus that
// piece's fields, nothing else.
func TestWithPiece(t *testing.T) {
	p := benchConfigs(t)
	var cgroup *floorPiece
	for _, pc := range floorPieces(p.sandbox, p.container) {
		if strings.HasPrefix(pc.name, "pod cgroup parent") {
			cgroup = &pc
		}
	}
	if cgroup == nil {
		t.Fatal("no cgroup parent piece")
	}
	q, err := withPiece(p, cgroup)
	if err != nil {
		t.Fatal(err)
	}
	runtimeDefault := &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}
	want := &runtimeapi.PodSandboxConfig{Metadata: p.sandbox.GetMetadata(),
		Linux: &runtimeapi.LinuxPodSandboxConfig{CgroupParent: "/kubepods/besteffort/pod" + string(p.uid),
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{Seccomp: runtimeDefault}}}
	if diff := cmp.Diff(want, q.sandbox, protocmp.Transform()); diff != "" {
		t.Errorf("sandbox (-want +got):\n%s", diff)
	}
	wantC := &runtimeapi.ContainerConfig{Metadata: p.container.GetMetadata(), Image: &runtimeapi.ImageSpec{Image: "sha256:0123"},
		Command: p.container.GetCommand(),
		Linux:   &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{Seccomp: runtimeDefault}}}
	if diff := cmp.Diff(wantC, q.container, protocmp.Transform()); diff != "" {
		t.Errorf("container (-want +got):\n%s", diff)
	}
	m, err := withPiece(p, nil)
	if err != nil || !proto.Equal(m.container, wantC) || !proto.Equal(m.sandbox, minimalSandbox(p.sandbox)) {
		t.Errorf("minimal configs: %v %v %v", m.sandbox, m.container, err)
	}
}

func TestFloorRatios(t *testing.T) {
	f := &floorResult{}
	f.addRatios(110, 105, 100)
	f.addRatios(math.NaN(), 120, 100)
	f.addRatios(90, 90, math.NaN())
	if diff := cmp.Diff([]float64{1.10}, f.podsyncRatio.vals); diff != "" {
		t.Errorf("podsync ratios: %s", diff)
	}
	if diff := cmp.Diff([]float64{1.05, 1.20}, f.shapedRatio.vals); diff != "" {
		t.Errorf("shaped ratios: %s", diff)
	}
}

func TestRenderFloor(t *testing.T) {
	rr := newRunResult(10)
	rr.podsync.vals = []float64{1100, 1200}
	rr.raw[10].vals = []float64{1050, 1150}
	rr.floor = &floorResult{
		minimal:      sample{vals: []float64{1000, 1000}},
		podsyncRatio: sample{vals: []float64{1.1, 1.2}},
		shapedRatio:  sample{vals: []float64{1.05, 1.15}},
		pieces: []*pieceResult{
			{floorPiece: floorPiece{name: "pod cgroup parent", why: "pod-level limits", paths: []string{"sandbox.linux.cgroup_parent"}},
				added: sample{vals: []float64{30, -4, 12}}},
			{floorPiece: floorPiece{name: "hostname", why: "the pod's hostname", paths: []string{"sandbox.hostname"}},
				time: sample{errs: []string{"RunPodSandbox: boom"}}},
		},
	}
	fr := &flavourResult{flavour: "2", runs: []*runResult{newRunResult(1), rr}}
	var w strings.Builder
	renderFloor(&w, fr)
	got := w.String()
	for _, want := range []string{
		"| 10 | **podsync RunPods** | 1150 ms (1100 ms–1200 ms) | **1.15 (1.10–1.20)** |",
		"| 10 | raw CRI, podsync-shaped configs (the floor above) | 1100 ms (1050 ms–1150 ms) | 1.10 (1.05–1.15) |",
		"| 10 | raw CRI, minimal configs (minimal floor) | 1000 ms (1000 ms–1000 ms) | 1 |",
		"| pod cgroup parent | `sandbox.linux.cgroup_parent` | +12.0 ms (−4.00 ms … +30.0 ms) |",
		"| hostname | `sandbox.hostname` | FAILED |",
		"- **pod cgroup parent**: pod-level limits.",
		"N = 10, hostname FAILED: RunPodSandbox: boom",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no line %q in:\n%s", want, got)
		}
	}
	var targets strings.Builder
	renderFloorTargets(&targets, fr)
	if want := "| RunPods ÷ minimal floor (with seccomp RuntimeDefault), N = 10, containerd 2.x: ≤ 1.10 | 1.15 (1.10–1.20), 2 rounds | " +
		"— (2 rounds; a verdict needs 7) |\n"; targets.String() != want {
		t.Errorf("targets:\n got %q\nwant %q", targets.String(), want)
	}
	// No floor: nothing.
	var none strings.Builder
	renderFloor(&none, &flavourResult{flavour: "2", runs: []*runResult{newRunResult(1)}})
	if none.Len() != 0 {
		t.Errorf("rendered without a floor: %q", none.String())
	}
}

func TestNewRunResultLarge(t *testing.T) {
	if got := newRunResult(30).concs; !slices.Equal(got, []int{1, 4, 30}) {
		t.Errorf("N = 30 concurrencies %v", got)
	}
	if got := newRunResult(largeN).concs; !slices.Equal(got, []int{largeN}) {
		t.Errorf("N = %d concurrencies %v, want the floor's only", largeN, got)
	}
	if hasFloor(1) || !hasFloor(10) || !hasFloor(30) || hasFloor(largeN) {
		t.Error("hasFloor: want N = 10 and 30 only")
	}
}

func TestMean(t *testing.T) {
	if got := mean([]float64{800, 1000}); got != 900 {
		t.Errorf("mean = %v, want 900", got)
	}
	if got := mean([]float64{5}); got != 5 {
		t.Errorf("mean of one = %v", got)
	}
}
