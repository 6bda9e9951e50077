package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The minimal floor: the raw CRI calls with the least config containerd
// accepts, and the same with each piece podsync's configs add, so the
// report shows what those configs cost the runtime.

// floorMinN and floorMaxN bound the N at which the minimal floor and its
// pieces run (each piece is one more run per round).
const (
	floorMinN = 10
	floorMaxN = 30
)

// largeN is the N from which a pods-to-running run is large: fewer
// rounds (-runs-large), the raw baseline at concurrency N only and no
// crictl loop (one pod after another would take minutes).
const largeN = 100

// floorOf is the round's podsync-shaped floor, its raw run at
// concurrency n, NaN if that failed.
func floorOf(rawMS map[int]float64, n int) float64 {
	if v, ok := rawMS[n]; ok {
		return v
	}
	return math.NaN()
}

// hasFloor reports whether the minimal floor runs at N = n.
func hasFloor(n int) bool { return n >= floorMinN && n <= floorMaxN }

// The minimal floor is the least config containerd accepts plus the
// seccomp profile every kubelet node sends (issue 40): RuntimeDefault for
// the sandbox, which the kubelet always sends, and for the containers,
// podsyncd's default as the kubelet's with seccompDefault: true. A floor
// without it would count the profile, which no node leaves out, as
// podsync's cost.

// minimalSandbox is the least PodSandboxConfig containerd accepts for a
// pod, its metadata (name, namespace, UID, attempt), with the shaped
// config's seccomp profile. No labels, log directory, DNS, hostname,
// cgroup parent or other security context.
func minimalSandbox(shaped *runtimeapi.PodSandboxConfig) *runtimeapi.PodSandboxConfig {
	out := &runtimeapi.PodSandboxConfig{Metadata: proto.CloneOf(shaped.GetMetadata())}
	if sc := shaped.GetLinux().GetSecurityContext().GetSeccomp(); sc != nil {
		out.Linux = &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{Seccomp: proto.CloneOf(sc)}}
	}
	return out
}

// minimalContainer is the least ContainerConfig containerd accepts, the
// container's metadata, image (by the same reference) and command, with
// the shaped config's seccomp profile. No mounts, log path, labels,
// resources or other security context.
func minimalContainer(shaped *runtimeapi.ContainerConfig) *runtimeapi.ContainerConfig {
	out := &runtimeapi.ContainerConfig{
		Metadata: proto.CloneOf(shaped.GetMetadata()),
		Image:    &runtimeapi.ImageSpec{Image: shaped.GetImage().GetImage()},
		Command:  slices.Clone(shaped.GetCommand()),
		Args:     slices.Clone(shaped.GetArgs()),
	}
	if sc := shaped.GetLinux().GetSecurityContext().GetSeccomp(); sc != nil {
		out.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{Seccomp: proto.CloneOf(sc)}}
	}
	return out
}

// configDiff returns the paths of the fields in which b differs from a
// (two messages of one type), prefixed by prefix: a message field set on
// either side is descended into (an unset one reads as empty), and is a
// difference as a whole only when its presence differs and nothing
// inside it does (`seccomp: {}` against none); lists, maps and scalars
// differ when their values do.
// Paths use the proto field names ("linux.security_context.seccomp") and
// come in field-number order.
func configDiff(prefix string, a, b proto.Message) []string {
	var out []string
	diffMessage(prefix, a.ProtoReflect(), b.ProtoReflect(), &out)
	return out
}

func diffMessage(prefix string, a, b protoreflect.Message, out *[]string) {
	fields := b.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		path := string(fd.Name())
		if prefix != "" {
			path = prefix + "." + path
		}
		ha, hb := a.Has(fd), b.Has(fd)
		switch {
		case !ha && !hb:
		case fd.Message() != nil && !fd.IsList() && !fd.IsMap():
			n := len(*out)
			diffMessage(path, a.Get(fd).Message(), b.Get(fd).Message(), out)
			if len(*out) == n && ha != hb {
				*out = append(*out, path)
			}
		case !a.Get(fd).Equal(b.Get(fd)):
			*out = append(*out, path)
		}
	}
}

// copyField sets the field at path (as configDiff names it, without its
// prefix) of dst to its value in src, or clears it where src has none,
// creating dst's enclosing messages as needed. The value is cloned.
func copyField(dst, src proto.Message, path string) error {
	d, s := dst.ProtoReflect(), src.ProtoReflect()
	names := strings.Split(path, ".")
	for i, name := range names {
		fd := d.Descriptor().Fields().ByName(protoreflect.Name(name))
		if fd == nil {
			return fmt.Errorf("%s has no field %q", d.Descriptor().FullName(), name)
		}
		if i == len(names)-1 {
			if !s.Has(fd) {
				d.Clear(fd)
				return nil
			}
			// Clone through a fresh copy of the whole source message,
			// so dst shares nothing with src.
			c := proto.Clone(s.Interface()).ProtoReflect()
			d.Set(fd, c.Get(fd))
			return nil
		}
		if fd.Message() == nil || fd.IsList() || fd.IsMap() {
			return fmt.Errorf("%s.%s is not a message", d.Descriptor().FullName(), name)
		}
		if !s.Has(fd) {
			d.Clear(fd)
			return nil
		}
		s = s.Get(fd).Message()
		d = d.Mutable(fd).Message()
	}
	return nil
}

// floorPiece is one thing podsync's configs add to the minimal ones: a
// set of fields of the sandbox ("sandbox.…") and container
// ("container.…") configs.
type floorPiece struct {
	name  string
	why   string // which kubelet semantics need it
	paths []string
}

// pieceRule classifies the config fields that differ: a field belongs to
// the first rule one of whose prefixes it starts with.
type pieceRule struct {
	name     string
	why      string
	prefixes []string
}

// pieceRules name the pieces and say, from pkg/kubelet/kuberuntime, what
// the kubelet itself sends and why. A differing field no rule names is a
// piece of its own, named by its path, so nothing podsync adds is hidden.
var pieceRules = []pieceRule{
	{"pod cgroup parent (/kubepods/besteffort/pod<uid>)",
		"the kubelet sends it (generatePodSandboxLinuxConfig: CgroupParent from the pod container manager): " +
			"pod-level limits, overhead and QoS accounting need a pod cgroup",
		[]string{"sandbox.linux.cgroup_parent"}},
	{"mounts", "the kubelet mounts the pod's managed /etc/hosts (makeMounts, for a pod with an IP, not " +
		"host network) and each container's termination-message file (terminationMessagePath); " +
		"resolv.conf and /etc/hostname are the runtime's own, from the sandbox's DNS config and hostname",
		[]string{"container.mounts"}},
	{"namespace options (a PID namespace per container)",
		"the kubelet sends pid CONTAINER unless shareProcessNamespace (kuberuntime/util.NamespacesForPod); left out, the " +
			"runtime shares the pod's PID namespace, which is shareProcessNamespace: true",
		[]string{"sandbox.linux.security_context.namespace_options", "container.linux.security_context.namespace_options"}},
	{"masked and read-only /proc and /sys paths",
		"the kubelet sends the default lists for procMount Default (securitycontext.ConvertToRuntimeMaskedPaths); " +
			"the runtime's own defaults are the same lists, so this is what procMount: Unmasked changes",
		[]string{"container.linux.security_context.masked_paths", "container.linux.security_context.readonly_paths"}},
	{"other security context", "the rest of the pod's and container's security context, as the kubelet's " +
		"determineEffectiveSecurityContext sends it",
		[]string{"sandbox.linux.security_context", "container.linux.security_context"}},
	{"log directory and log path",
		"the kubelet always sends both (BuildPodLogsDirectory, buildContainerLogsPath): container logs " +
			"(GetContainerLogs, kubectl logs) and the termination message's FallbackToLogsOnError",
		[]string{"sandbox.log_directory", "container.log_path"}},
	{"resources (CPU shares and period, OOM score, overhead)",
		"the kubelet sends them for every pod and container (generateLinuxContainerResources, " +
			"generatePodSandboxLinuxConfig): CPU shares 2 and OOM score 1000 are what best effort means",
		[]string{"sandbox.linux.resources", "sandbox.linux.overhead", "container.linux.resources"}},
	{"DNS config", "the kubelet sends the pod's DNS (dnsConfigurer.GetPodDNS: dnsPolicy, dnsConfig); without it " +
		"the runtime copies the host's resolv.conf",
		[]string{"sandbox.dns_config"}},
	{"hostname", "the kubelet sends the pod's hostname (GeneratePodHostNameAndDomain); without it the pod has the host's",
		[]string{"sandbox.hostname"}},
	{"labels, annotations and image name",
		"the kubelet sends its io.kubernetes.* labels and annotations (newPodLabels, newContainerAnnotations): " +
			"what a restart of the agent reads back, and what crictl shows; podsync's own podsync.io/pod-spec " +
			"(sandbox) and podsync.io/container-spec (container) annotations, which the kubelet does not send, " +
			"are what a node that lost its store adopts its pods from",
		[]string{"sandbox.labels", "sandbox.annotations", "container.labels", "container.annotations", "container.image"}},
}

// floorPieces groups the fields in which the podsync-shaped configs of a
// pod differ from the minimal ones into pieces, in the order of
// pieceRules, then the unclassified fields one each.
func floorPieces(sb *runtimeapi.PodSandboxConfig, c *runtimeapi.ContainerConfig) []floorPiece {
	diff := append(configDiff("sandbox", minimalSandbox(sb), sb), configDiff("container", minimalContainer(c), c)...)
	pieces := make([]floorPiece, len(pieceRules))
	var other []floorPiece
	for _, path := range diff {
		matched := false
		for i, r := range pieceRules {
			if slices.ContainsFunc(r.prefixes, func(p string) bool { return path == p || strings.HasPrefix(path, p+".") }) {
				pieces[i].paths = append(pieces[i].paths, path)
				matched = true
				break
			}
		}
		if !matched {
			other = append(other, floorPiece{name: path, why: "not classified: a field podsync sends that no rule names", paths: []string{path}})
		}
	}
	var out []floorPiece
	for i, p := range pieces {
		if len(p.paths) == 0 {
			continue
		}
		p.name, p.why = pieceRules[i].name, pieceRules[i].why
		if pieceRules[i].prefixes[0] == "container.mounts" {
			p.name = "mounts (" + strings.Join(mountPaths(c), ", ") + ")"
		}
		out = append(out, p)
	}
	return append(out, other...)
}

func mountPaths(c *runtimeapi.ContainerConfig) []string {
	var out []string
	for _, m := range c.GetMounts() {
		out = append(out, m.GetContainerPath())
	}
	return out
}

// withPiece returns the minimal configs of p plus the fields of piece
// (nil: the minimal configs alone), taken from p's podsync-shaped ones.
func withPiece(p rawPod, piece *floorPiece) (rawPod, error) {
	out := rawPod{uid: p.uid, sandbox: minimalSandbox(p.sandbox), container: minimalContainer(p.container)}
	if piece == nil {
		return out, nil
	}
	for _, path := range piece.paths {
		var err error
		switch {
		case strings.HasPrefix(path, "sandbox."):
			err = copyField(out.sandbox, p.sandbox, strings.TrimPrefix(path, "sandbox."))
		case strings.HasPrefix(path, "container."):
			err = copyField(out.container, p.container, strings.TrimPrefix(path, "container."))
		default:
			err = fmt.Errorf("field %q is neither the sandbox's nor the container's", path)
		}
		if err != nil {
			return rawPod{}, err
		}
	}
	return out, nil
}

// floorResult is the minimal floor of one N and the cost of each piece.
type floorResult struct {
	minimal sample // time to running of the minimal configs, ms
	// podsyncRatio and shapedRatio are podsync's time and the
	// podsync-shaped floor's ÷ the minimal floor's, per round.
	podsyncRatio, shapedRatio sample
	pieces                    []*pieceResult
}

// pieceResult is one piece: its time to running, and what it adds to
// the minimal floor of the same round (ms).
type pieceResult struct {
	floorPiece
	time, added sample
}

// floorRuns runs, at concurrency rr.n and each from a clean runtime, the
// minimal configs first and last, and minimal + each piece in between, in
// an order that turns with the round so drift within a round does not
// always hit the same piece; it records the times in rr.floor. The
// round's minimal floor is the mean of its two runs, so a drift across
// the round (later runs slower as the runtime's background work of the
// earlier ones builds up) does not count as the pieces' cost. It returns
// that floor (NaN if both runs failed) and an error only when the runtime
// cannot be cleaned.
func floorRuns(ctx context.Context, e *env, rr *runResult) (float64, error) {
	if rr.floor == nil {
		rr.floor = &floorResult{}
	}
	f := rr.floor
	probe, err := e.rawPods(newPods("floor", 1))
	if err != nil {
		return math.NaN(), err
	}
	if f.pieces == nil {
		for _, p := range floorPieces(probe[0].sandbox, probe[0].container) {
			f.pieces = append(f.pieces, &pieceResult{floorPiece: p})
		}
	}
	// Run -1 is the minimal floor, k ≥ 0 piece k; the pieces' order
	// turns by one each round.
	order := []int{-1}
	for i := range f.pieces {
		order = append(order, (i+rr.roundsDone)%len(f.pieces))
	}
	order = append(order, -1)
	times := map[int]float64{}
	var minimal []float64
	for _, k := range order {
		var piece *floorPiece
		row := &f.minimal
		if k >= 0 {
			piece, row = &f.pieces[k].floorPiece, &f.pieces[k].time
		}
		shaped, err := e.rawPods(newPods("floor", rr.n))
		if err != nil {
			return math.NaN(), err
		}
		pods := make([]rawPod, len(shaped))
		for i, p := range shaped {
			if pods[i], err = withPiece(p, piece); err != nil {
				return math.NaN(), err
			}
		}
		ms, err := timeRaw(ctx, e, pods, rr.n)
		switch {
		case err != nil:
			row.fail(err)
		case k < 0:
			row.add(ms)
			minimal = append(minimal, ms)
		default:
			row.add(ms)
			times[k] = ms
		}
		if err := e.cleanAll(ctx); err != nil {
			return math.NaN(), fmt.Errorf("clean after minimal floor run: %w", err)
		}
	}
	if len(minimal) == 0 {
		return math.NaN(), nil
	}
	minMS := mean(minimal)
	for k, p := range f.pieces {
		if ms, ok := times[k]; ok {
			p.added.add(ms - minMS)
		}
	}
	return minMS, nil
}

// addFloorRatios records a round's podsync time and podsync-shaped floor
// ÷ its minimal floor; NaN times (failed runs) add nothing.
func (f *floorResult) addRatios(podsyncMS, shapedMS, minimalMS float64) {
	if math.IsNaN(minimalMS) || minimalMS <= 0 {
		return
	}
	if !math.IsNaN(podsyncMS) {
		f.podsyncRatio.add(podsyncMS / minimalMS)
	}
	if !math.IsNaN(shapedMS) {
		f.shapedRatio.add(shapedMS / minimalMS)
	}
}

// timeRaw runs pods through the raw CRI calls at concurrency conc and
// returns the time until all are running, ms.
func timeRaw(ctx context.Context, e *env, pods []rawPod, conc int) (float64, error) {
	start := time.Now()
	if _, err := e.runRaw(ctx, pods, conc); err != nil {
		return math.NaN(), err
	}
	return msOf(time.Since(start)), nil
}

// Target of issue 24 for the minimal floor, which issue 40 made include
// seccomp RuntimeDefault. (Its target of RunPods ≤ 1.00× the raw floor at
// N = largeN is, since issue 40, ≤ targetRunVsKubelet× the kubelet.)
const targetMinimalRatio = 1.10

// renderFloorTargets renders the target rows of the minimal floor: RunPods
// ÷ the minimal floor per N that has one.
func renderFloorTargets(w *strings.Builder, fr *flavourResult) {
	for _, rr := range fr.runs {
		if rr.floor == nil {
			continue
		}
		m, v := roundTarget(&rr.floor.podsyncRatio, "%.2f", targetMinimalRatio)
		fmt.Fprintf(w, "| RunPods ÷ minimal floor (with seccomp RuntimeDefault), N = %d, containerd %s: ≤ %.2f | %s | %s |\n",
			rr.n, flavourName(fr.flavour), targetMinimalRatio, m, v)
	}
}

// renderFloor renders the minimal floor and the cost of each piece of
// podsync's configs, per N that has them.
func renderFloor(w *strings.Builder, fr *flavourResult) {
	var rows []*runResult
	for _, rr := range fr.runs {
		if rr.floor != nil {
			rows = append(rows, rr)
		}
	}
	if len(rows) == 0 {
		return
	}
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	name := flavourName(fr.flavour)
	p("### Minimal floor and what each piece of podsync's configs costs — containerd %s\n\n", name)
	p("The minimal floor is the raw CRI calls at concurrency N with the least config containerd accepts\n" +
		"(metadata, image, command) plus seccomp RuntimeDefault for the sandbox and the container (the kubelet\n" +
		"always sends it for the sandbox, and for containers with seccompDefault: true, podsyncd's default),\n" +
		"run first and last in each round; each piece is one more run of the minimal configs plus that piece of\n" +
		"the podsync-shaped ones, the fields in which they differ grouped as below. *Added* is the piece's run\n" +
		"minus the mean of the same round's two minimal runs.\n\n")
	p("| N | run | time to running | ÷ minimal floor |\n|---|---|---|---|\n")
	for _, rr := range rows {
		f := rr.floor
		p("| %d | **podsync RunPods** | %s | **%s** |\n", rr.n, rr.podsync.ms(), f.podsyncRatio.ratio())
		p("| %d | raw CRI, podsync-shaped configs (the floor above) | %s | %s |\n", rr.n, rr.raw[rr.n].ms(), f.shapedRatio.ratio())
		p("| %d | raw CRI, minimal configs (minimal floor) | %s | 1 |\n", rr.n, f.minimal.ms())
	}
	p("\n| piece | fields |")
	for _, rr := range rows {
		p(" added, N = %d |", rr.n)
	}
	p("\n|---|---|")
	for range rows {
		p("---|")
	}
	p("\n")
	// The pieces of every N, in the order of the first N that has them.
	var names []string
	whys := map[string]string{}
	fields := map[string][]string{}
	for _, rr := range rows {
		for _, pc := range rr.floor.pieces {
			if !slices.Contains(names, pc.name) {
				names = append(names, pc.name)
				whys[pc.name], fields[pc.name] = pc.why, pc.paths
			}
		}
	}
	for _, n := range names {
		p("| %s | `%s` |", n, strings.Join(fields[n], "`, `"))
		for _, rr := range rows {
			cell := "—"
			for _, pc := range rr.floor.pieces {
				if pc.name == n {
					cell = signedMS(&pc.added)
					if !pc.added.ok() && !pc.time.ok() {
						cell = pc.time.failed()
					}
				}
			}
			p(" %s |", cell)
		}
		p("\n")
	}
	p("\nWhich kubelet semantics need each piece (what `pkg/kubelet/kuberuntime` sends):\n\n")
	for _, n := range names {
		p("- **%s**: %s.\n", n, whys[n])
	}
	for _, rr := range rows {
		for _, e := range rr.floor.minimal.errs {
			p("\nN = %d, minimal floor FAILED: %s\n", rr.n, oneLine(e))
		}
		for _, pc := range rr.floor.pieces {
			for _, e := range pc.time.errs {
				p("\nN = %d, %s FAILED: %s\n", rr.n, pc.name, oneLine(e))
			}
		}
	}
	p("\n")
}

// signedMS renders a sample of added milliseconds, which may be
// negative: "+12.0 ms (−3.10–+20.5)".
func signedMS(s *sample) string {
	if !s.ok() {
		return s.failed()
	}
	f := func(v float64) string {
		sign := "+"
		if v < 0 {
			sign, v = "−", -v
		}
		return sign + fmtMS(v)
	}
	return fmt.Sprintf("%s (%s … %s)%s", f(s.median()), f(s.min()), f(s.max()), s.partial())
}

func mean(vals []float64) float64 {
	var sum float64
	for _, v := range vals {
		sum += v
	}
	return sum / float64(len(vals))
}
