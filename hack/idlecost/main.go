package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/convert"
	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/syncer"
	"github.com/podsync/podsync/internal/testing/localcri"
)

func main() {
	flavour := flag.String("flavour", "2", "containerd flavour: 2 or 1.6")
	periods := flag.String("periods", localcri.ContainerdStatsCollectPeriod+","+localcri.DefaultStatsCollectPeriod,
		"comma-separated stats_collect_period of the instances (2.x), \"containerd\" for containerd's default")
	pods := flag.Int("pods", 30, "idle pods per phase")
	window := flag.Duration("window", time.Minute, "length of one measurement window")
	windows := flag.Int("windows", 2, "windows per phase")
	phases := flag.String("phases", "none,podcgroup,noparent,podsyncd,kubelet", "phases to run, in order")
	podsyncdBin := flag.String("podsyncd", "", "podsyncd binary for the podsyncd phase (built into .tmp/idlecost when empty)")
	kubeletBin := flag.String("kubelet", ".tmp/kube/v1.37.2/bin/kubelet", "kubelet binary for the kubelet phase (hack/kube/build.sh builds it)")
	flag.Parse()

	log, _ := zap.NewDevelopment()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, log, config{flavour: localcri.Flavour(*flavour), periods: strings.Split(*periods, ","), pods: *pods,
		window: *window, windows: *windows, phases: strings.Split(*phases, ","), podsyncd: *podsyncdBin, kubelet: *kubeletBin}); err != nil {
		fmt.Fprintln(os.Stderr, "idlecost:", err)
		os.Exit(1)
	}
}

type config struct {
	flavour  localcri.Flavour
	periods  []string
	pods     int
	window   time.Duration
	windows  int
	phases   []string
	podsyncd string
	kubelet  string
}

// instance is one containerd under measurement.
type instance struct {
	period  string
	inst    *localcri.Instance
	rt      *syncer.RemoteRuntime
	image   string
	dir     string
	opts    criconfig.Options
	uids    []types.UID
	daemon  *localcri.Agent // podsyncd or the kubelet
	kubelet bool            // daemon is the kubelet
	api     podsyncv1.PodSyncServiceClient
	conn    *grpc.ClientConn
}

func run(ctx context.Context, log *zap.Logger, cfg config) error {
	repo, err := localcri.RepoDir()
	if err != nil {
		return err
	}
	if cfg.flavour == localcri.Containerd16 {
		cfg.periods = []string{"(none in 1.6)"}
	}
	if slices.Contains(cfg.phases, "podsyncd") && cfg.podsyncd == "" {
		cfg.podsyncd = filepath.Join(repo, ".tmp", "idlecost", "podsyncd")
		build := exec.CommandContext(ctx, "go", "build", "-o", cfg.podsyncd, "./cmd/podsyncd")
		build.Dir, build.Stderr = repo, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("build podsyncd: %w", err)
		}
	}
	var insts []*instance
	defer func() {
		for _, in := range insts {
			in.close(context.WithoutCancel(ctx))
		}
	}()
	for _, p := range cfg.periods {
		opts := localcri.Options{Flavour: cfg.flavour, Logger: log.Named("localcri")}
		if cfg.flavour != localcri.Containerd16 {
			opts.StatsCollectPeriod = p
		}
		in, err := start(ctx, repo, opts)
		if err != nil {
			return err
		}
		in.period = p
		insts = append(insts, in)
	}
	outf("%s, %d pods, %d windows of %s; CPU-s per minute (utime+stime)\n\n", cfg.flavour, cfg.pods, cfg.windows, cfg.window)
	outf("| phase | stats_collect_period | containerd | shims | agent (podsyncd or kubelet) |\n")
	outf("|---|---|---|---|---|\n")
	for _, phase := range cfg.phases {
		if err := forAll(insts, func(in *instance) error { return in.create(ctx, phase, cfg) }); err != nil {
			return fmt.Errorf("phase %s: %w", phase, err)
		}
		// Let the starts settle: CNI, shims and the first stats reads.
		sleep(ctx, 15*time.Second)
		rows := make([][3][]float64, len(insts))
		for range cfg.windows {
			before := make([]snapshot, len(insts))
			for i, in := range insts {
				before[i] = in.snapshot()
			}
			sleep(ctx, cfg.window)
			for i, in := range insts {
				after := in.snapshot()
				per := time.Minute.Seconds() / after.at.Sub(before[i].at).Seconds()
				rows[i][0] = append(rows[i][0], (after.containerd-before[i].containerd)*per)
				rows[i][1] = append(rows[i][1], shimDelta(before[i], after)*per)
				rows[i][2] = append(rows[i][2], (after.daemon-before[i].daemon)*per)
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
		for i, in := range insts {
			d := "–"
			if phase == "podsyncd" || phase == "kubelet" {
				d = figures(rows[i][2])
			}
			outf("| %s | %s | %s | %s | %s |\n", phase, in.period, figures(rows[i][0]), figures(rows[i][1]), d)
		}
		if err := forAll(insts, func(in *instance) error { return in.clear(ctx) }); err != nil {
			return fmt.Errorf("phase %s: clear: %w", phase, err)
		}
	}
	return nil
}

// outf writes a line of the report to stdout.
func outf(format string, args ...any) { _, _ = fmt.Fprintf(os.Stdout, format, args...) }

// figures prints each window's figure.
func figures(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatFloat(x, 'f', 2, 64)
	}
	return strings.Join(s, " / ")
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func forAll(insts []*instance, f func(*instance) error) error {
	errs := make([]error, len(insts))
	var wg sync.WaitGroup
	for i, in := range insts {
		wg.Go(func() { errs[i] = f(in) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func start(ctx context.Context, repo string, opts localcri.Options) (*instance, error) {
	inst, err := localcri.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	in := &instance{inst: inst, dir: filepath.Join(repo, ".tmp", "idlecost", inst.ID())}
	if in.rt, err = syncer.DialRuntime(ctx, inst.Endpoint(), 0); err != nil {
		_ = inst.Teardown(context.WithoutCancel(ctx))
		return nil, err
	}
	img, err := in.rt.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: localcri.BusyboxImage}, false)
	if err != nil || img.GetImage() == nil {
		_ = inst.Teardown(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("busybox image status: %v: %w", img, err)
	}
	in.image = img.GetImage().GetId()
	in.opts = criconfig.Options{RootDir: filepath.Join(in.dir, "raw", "root"), PodLogDir: filepath.Join(in.dir, "raw", "logs"),
		ClusterDomain: "cluster.local", CgroupDriver: criconfig.CgroupfsDriver, CgroupRoot: inst.CgroupRoot(), NodeName: "idlecost", NodeIPs: []string{"10.255.255.1"},
		MemoryCapacity: 4 << 30, SeccompDefault: true}
	return in, nil
}

// newPods are n defaulted busybox pods with random UIDs (the UID names the
// pod cgroup: another process on the host must never share it).
func newPods(n int) []*corev1.Pod {
	out := make([]*corev1.Pod, n)
	for i := range out {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("idle-%03d", i), Namespace: "idlecost", UID: types.UID(uuid.NewString())},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: localcri.BusyboxImage,
				Command: []string{"/bin/sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"}}}},
		}
		convert.Default(p)
		out[i] = p
	}
	return out
}

// create brings the instance's pods of phase up.
func (in *instance) create(ctx context.Context, phase string, cfg config) error {
	pods := newPods(cfg.pods)
	for _, p := range pods {
		in.uids = append(in.uids, p.UID)
	}
	switch phase {
	case "none":
		return nil
	case "podcgroup", "noparent":
		for _, pod := range pods {
			if err := in.runRaw(ctx, pod, phase == "noparent"); err != nil {
				return err
			}
		}
		return nil
	case "podsyncd":
		return in.runPodsyncd(ctx, cfg.podsyncd, pods)
	case "kubelet":
		bin, err := filepath.Abs(cfg.kubelet)
		if err != nil {
			return err
		}
		return in.runKubelet(ctx, bin, pods)
	}
	return fmt.Errorf("unknown phase %q (want none, podcgroup, noparent, podsyncd or kubelet)", phase)
}

// runRaw runs one pod through CRI with podsync's configs, optionally with
// no cgroup parent.
func (in *instance) runRaw(ctx context.Context, pod *corev1.Pod, noParent bool) error {
	sb, err := criconfig.SandboxConfig(pod, 0, in.opts)
	if err != nil {
		return err
	}
	c := &pod.Spec.Containers[0]
	cc, err := criconfig.ContainerConfig(criconfig.ContainerConfigInput{Pod: pod, Container: c, ImageRef: in.image,
		PodIPs: []string{"10.255.255.254"}}, in.opts)
	if err != nil {
		return err
	}
	delete(sb.Labels, model.LabelManaged)
	delete(cc.Labels, model.LabelManaged)
	if noParent {
		sb.Linux.CgroupParent = ""
	}
	if err := os.MkdirAll(filepath.Join(sb.GetLogDirectory(), c.Name), 0o755); err != nil {
		return err
	}
	for _, m := range cc.GetMounts() {
		if err := os.MkdirAll(filepath.Dir(m.GetHostPath()), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(m.GetHostPath(), []byte("127.0.0.1\tlocalhost\n"), 0o644); err != nil {
			return err
		}
	}
	id, err := in.rt.RunPodSandbox(ctx, sb, "")
	if err != nil {
		return fmt.Errorf("run sandbox: %w", err)
	}
	cid, err := in.rt.CreateContainer(ctx, id, cc, sb)
	if err != nil {
		return fmt.Errorf("create container: %w", err)
	}
	if err := in.rt.StartContainer(ctx, cid); err != nil {
		return fmt.Errorf("start container: %w", err)
	}
	return nil
}

// runPodsyncd starts podsyncd on the instance and runs pods through it
// until they are running.
func (in *instance) runPodsyncd(ctx context.Context, bin string, pods []*corev1.Pod) error {
	dir := filepath.Join(in.dir, "podsyncd")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	sockDir, err := os.MkdirTemp("/run", "idlecost-")
	if err != nil {
		return err
	}
	sock := filepath.Join(sockDir, "podsync.sock")
	cfgPath := filepath.Join(dir, "podsyncd.yaml")
	if err := os.WriteFile(cfgPath, []byte("security:\n  roles:\n    admin: [\"uid:0\"]\n"), 0o644); err != nil {
		return err
	}
	logf, err := os.Create(filepath.Join(dir, "podsyncd.log"))
	if err != nil {
		return err
	}
	defer func() { _ = logf.Close() }()
	cmd := exec.Command(bin, "--config", cfgPath, "--runtime-endpoint", in.inst.Endpoint(), "--listen", "unix://"+sock,
		"--root-dir", filepath.Join(dir, "root"), "--pod-log-dir", filepath.Join(dir, "logs"), "--node-name", "idlecost",
		"--node-ip", "10.255.255.1", "--resolv-conf=", "--shutdown-timeout", "10s", "--cgroup-root", in.inst.CgroupRoot())
	in.daemon = &localcri.Agent{}
	if err := in.daemon.Start(cmd, logf); err != nil {
		return fmt.Errorf("start podsyncd: %w", err)
	}
	in.conn, err = grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	in.api = podsyncv1.NewPodSyncServiceClient(in.conn)
	req := &podsyncv1.RunPodsRequest{WaitFor: podsyncv1.WaitFor_WAIT_FOR_RUNNING, Timeout: durationpb.New(3 * time.Minute)}
	for _, p := range pods {
		pb, err := convert.PodToProto(p)
		if err != nil {
			return err
		}
		req.Pods = append(req.Pods, pb)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		err = in.runPods(ctx, req)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		sleep(ctx, 200*time.Millisecond) // not serving yet
	}
}

func (in *instance) runPods(ctx context.Context, req *podsyncv1.RunPodsRequest) error {
	stream, err := in.api.RunPods(ctx, req)
	if err != nil {
		return err
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			return err
		}
		if sum := resp.GetSummary(); sum != nil {
			if int(sum.GetReachedTarget()) != len(req.GetPods()) {
				return fmt.Errorf("%d of %d pods running", sum.GetReachedTarget(), len(req.GetPods()))
			}
			return nil
		}
	}
}

// clear stops podsyncd (deleting its pods first) and removes every pod
// and the pods' cgroups.
func (in *instance) clear(ctx context.Context) error {
	var errs []error
	if in.kubelet {
		in.stopKubelet(ctx)
	}
	if in.daemon != nil {
		list, err := in.api.ListPods(ctx, &podsyncv1.ListPodsRequest{})
		errs = append(errs, err)
		for _, p := range list.GetPods() {
			_, err := in.api.DeletePod(ctx, &podsyncv1.DeletePodRequest{Namespace: p.GetMetadata().GetNamespace(),
				Name: p.GetMetadata().GetName(), GracePeriodSeconds: ptr.To[int64](0)})
			errs = append(errs, err)
		}
		sleep(ctx, 10*time.Second)
		_ = in.conn.Close()
		in.daemon.Stop(30 * time.Second)
		in.daemon = nil
	}
	sbs, err := in.rt.ListPodSandbox(ctx, nil)
	errs = append(errs, err)
	for _, sb := range sbs {
		errs = append(errs, in.rt.StopPodSandbox(ctx, sb.GetId()), in.rt.RemovePodSandbox(ctx, sb.GetId()))
	}
	hierarchies, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, u := range in.uids {
		for _, h := range hierarchies {
			_ = os.Remove(filepath.Join(h, in.inst.CgroupRoot(), "kubepods", "besteffort", "pod"+string(u)))
		}
	}
	in.uids = nil
	return errors.Join(errs...)
}

func (in *instance) close(ctx context.Context) {
	if err := in.clear(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "idlecost: clear:", err)
	}
	if err := in.inst.Teardown(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "idlecost: teardown:", err)
	}
	_ = os.RemoveAll(in.dir)
}

// snapshot is the CPU time of containerd, its shims and podsyncd, in
// seconds.
type snapshot struct {
	at         time.Time
	containerd float64
	shims      map[int]float64
	daemon     float64
}

func (in *instance) snapshot() snapshot {
	s := snapshot{at: time.Now(), containerd: cpuSeconds(in.inst.PID()), shims: map[int]float64{}}
	for _, pid := range localcri.ShimPIDs(in.inst.Socket()) {
		s.shims[pid] = cpuSeconds(pid)
	}
	if in.daemon != nil {
		s.daemon = cpuSeconds(in.daemon.PID)
	}
	return s
}

func shimDelta(before, after snapshot) float64 {
	var d float64
	for pid, v := range after.shims {
		if b, ok := before.shims[pid]; ok {
			d += v - b
		}
	}
	return d
}

// cpuSeconds is the CPU time of pid and its waited-for children, in
// seconds (0 if it is gone).
func cpuSeconds(pid int) float64 {
	t, err := localcri.ProcCPU(pid)
	if err != nil {
		return 0
	}
	return t.Seconds()
}
