package security_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/client"
	"github.com/podsync/podsync/convert"
	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/engine/admit"
	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/store"
	"github.com/podsync/podsync/internal/testing/testdaemon"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// env is one in-process podsyncd under podsyncd's default policy.
type env struct {
	t   *testing.T
	ctx context.Context
	d   *testdaemon.Daemon
}

func newEnv(t *testing.T, mutate ...func(*testdaemon.Options)) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	opts := testdaemon.Options{
		Logger: zaptest.NewLogger(t),
		// Admission on, with podsyncd's default policy: baseline, no
		// exemptions.
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"),
			corev1.ResourcePods: resource.MustParse("3")},
		Policy: &admit.Policy{},
	}
	for _, m := range mutate {
		m(&opts)
	}
	return &env{t: t, ctx: ctx, d: testdaemon.New(t, opts)}
}

func basePod(name string) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: testdaemon.Image, Command: []string{"sleep", "inf"},
		}}},
	}
}

// sync applies pod with SyncPod and returns the final result or the
// call's error.
func (e *env) sync(pod *corev1.Pod, cms ...*corev1.ConfigMap) (*podsyncv1.SyncPodResult, error) {
	e.t.Helper()
	res, _, err := e.syncSteps(pod, cms...)
	return res, err
}

// syncSteps is sync that also returns the pass's steps.
func (e *env) syncSteps(pod *corev1.Pod, cms ...*corev1.ConfigMap) (*podsyncv1.SyncPodResult, []*podsyncv1.SyncStep, error) {
	e.t.Helper()
	p, err := convert.PodToProto(pod)
	if err != nil {
		e.t.Fatalf("convert: %v", err)
	}
	req := &podsyncv1.SyncPodRequest{Pod: p}
	for _, cm := range cms {
		pcm, err := convert.ConfigMapToProto(cm)
		if err != nil {
			e.t.Fatal(err)
		}
		req.ConfigMaps = append(req.ConfigMaps, pcm)
	}
	stream, err := e.d.Client.SyncPod(e.ctx, req)
	if err != nil {
		return nil, nil, err
	}
	var res *podsyncv1.SyncPodResult
	var steps []*podsyncv1.SyncStep
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return res, steps, nil
		}
		if err != nil {
			return nil, nil, err
		}
		if s := msg.GetStep(); s != nil {
			steps = append(steps, s)
		}
		if r := msg.GetResult(); r != nil {
			res = r
		}
	}
}

// nothingCreated fails unless the runtime holds no sandbox or container
// and the store no pod named name.
func (e *env) nothingCreated(name string) {
	e.t.Helper()
	sbs, _ := e.d.Runtime.ListPodSandbox(e.ctx, nil)
	ctrs, _ := e.d.Runtime.ListContainers(e.ctx, nil)
	for _, sb := range sbs {
		if sb.GetMetadata().GetName() == name {
			e.t.Errorf("sandbox %s created for %s", sb.GetId(), name)
		}
	}
	if len(ctrs) > 0 && len(sbs) == 0 {
		e.t.Errorf("%d containers created", len(ctrs))
	}
	if _, err := e.d.Store.GetByName("default", name); err == nil {
		e.t.Errorf("pod %s stored", name)
	}
}

// refused checks err is a refusal with code and reason whose message
// says each of want.
func refused(t *testing.T, err error, code codes.Code, reason string, want ...string) {
	t.Helper()
	if status.Code(err) != code || client.Reason(err) != reason {
		t.Fatalf("error = %v (reason %q), want %s with reason %s", err, client.Reason(err), code, reason)
	}
	for _, w := range want {
		if !strings.Contains(status.Convert(err).Message(), w) {
			t.Errorf("message %q does not say %q", status.Convert(err).Message(), w)
		}
	}
}

func addCaps(caps ...corev1.Capability) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: caps}}
	}
}

// TestAttacksAreRefused is issue 17's table: each row reproduces an
// attack against podsyncd's default policy and shows it refused with a
// clear reason and nothing created.
func TestAttacksAreRefused(t *testing.T) {
	const failed = codes.FailedPrecondition
	podSec := func(check string, more ...string) []string {
		return append([]string{`violates PodSecurity "baseline:latest"`, "check " + check}, more...)
	}
	tests := []struct {
		name string
		// pod, if set, is applied with SyncPod and must be refused with
		// code, reason and a message saying want, nothing created.
		pod    func(*corev1.Pod)
		code   codes.Code
		reason string
		want   []string
		// run, if set, is the attack instead of pod; it checks its own
		// outcome.
		run func(t *testing.T, e *env)
	}{
		// Capabilities: each class beyond the baseline set.
		{name: "capability SYS_ADMIN", pod: addCaps("SYS_ADMIN"), code: failed, reason: admit.ReasonPodSecurity,
			want: podSec("capabilities_baseline", `"SYS_ADMIN"`, "securityContext.capabilities.add", "--allowed-capabilities")},
		{name: "capability SYS_MODULE", pod: addCaps("SYS_MODULE"), code: failed, reason: admit.ReasonPodSecurity, want: podSec("capabilities_baseline", `"SYS_MODULE"`)},
		{name: "capability SYS_PTRACE", pod: addCaps("SYS_PTRACE"), code: failed, reason: admit.ReasonPodSecurity, want: podSec("capabilities_baseline", `"SYS_PTRACE"`)},
		{name: "capability NET_ADMIN", pod: addCaps("NET_ADMIN"), code: failed, reason: admit.ReasonPodSecurity, want: podSec("capabilities_baseline", `"NET_ADMIN"`)},
		{name: "capability NET_RAW", pod: addCaps("NET_RAW"), code: failed, reason: admit.ReasonPodSecurity, want: podSec("capabilities_baseline", `"NET_RAW"`)},
		{name: "capability ALL", pod: addCaps("ALL"), code: failed, reason: admit.ReasonPodSecurity, want: podSec("capabilities_baseline", `"ALL"`)},
		{name: "privileged container", pod: func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		}, code: failed, reason: admit.ReasonPodSecurity, want: podSec("privileged", "--allow-privileged")},
		{name: "privileged init container", pod: func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: testdaemon.Image, SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}}
		}, code: failed, reason: admit.ReasonPodSecurity, want: podSec("privileged", `"init"`)},
		{name: "privileged debug container", run: func(t *testing.T, e *env) {
			if _, err := e.sync(basePod("web")); err != nil {
				t.Fatal(err)
			}
			_, err := e.d.Client.AddEphemeralContainer(e.ctx, &podsyncv1.AddEphemeralContainerRequest{Name: "web",
				EphemeralContainer: &podsyncv1.EphemeralContainer{Name: "dbg", Image: testdaemon.Image, Command: []string{"sh"},
					SecurityContext: &podsyncv1.SecurityContext{Privileged: ptr.To(true)}}})
			refused(t, err, failed, admit.ReasonPodSecurity, podSec("privileged", `"dbg"`)...)
			rec, err := e.d.Store.GetByName("default", "web")
			if err != nil || len(rec.Pod.Spec.EphemeralContainers) != 0 {
				t.Errorf("stored pod = %v, %v; want it without the debug container", rec, err)
			}
		}},
		{name: "seccomp Unconfined", pod: func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}
		}, code: failed, reason: admit.ReasonPodSecurity, want: podSec("seccompProfile_baseline", "Unconfined")},
		{name: "seccomp Unconfined by the legacy annotation", pod: func(p *corev1.Pod) {
			p.Annotations = map[string]string{"seccomp.security.alpha.kubernetes.io/pod": "unconfined"}
		}, code: failed, reason: admit.ReasonPodSecurity, want: podSec("seccompProfile_baseline", "Unconfined")},
		{name: "AppArmor Unconfined", pod: func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}}
		}, code: failed, reason: admit.ReasonPodSecurity, want: podSec("appArmorProfile", "Unconfined")},
		{name: "AppArmor profile on a node without AppArmor", pod: func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault}}
		}, code: failed, reason: admit.ReasonAppArmor, want: []string{"Cannot enforce AppArmor: AppArmor is not enabled on the host"}},
		{name: "procMount Unmasked", pod: func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{ProcMount: ptr.To(corev1.UnmaskedProcMount)}
		}, code: codes.InvalidArgument, reason: client.ReasonInvalidSpec, want: []string{"procMount"}},
		{name: "host network", pod: func(p *corev1.Pod) { p.Spec.HostNetwork = true }, code: failed, reason: admit.ReasonPodSecurity,
			want: podSec("hostNamespaces", "hostNetwork=true", "--allow-host-namespaces")},
		{name: "host PID", pod: func(p *corev1.Pod) { p.Spec.HostPID = true }, code: failed, reason: admit.ReasonPodSecurity, want: podSec("hostNamespaces", "hostPID=true")},
		{name: "hostPort 22", pod: func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 22, HostPort: 22, Protocol: corev1.ProtocolTCP}}
		}, code: failed, reason: admit.ReasonPodSecurity, want: podSec("hostPorts", "22", "--allowed-host-ports")},
		{name: "hostPath of the node's root", pod: func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "root", MountPath: "/host"}}
		}, code: failed, reason: admit.ReasonPodSecurity, want: podSec("hostPathVolumes", "--allowed-host-paths")},
		{name: "hostPath containing the store under an allowed prefix", run: func(t *testing.T, _ *env) {
			e := newEnv(t, func(o *testdaemon.Options) {
				o.Policy = &admit.Policy{AllowedHostPaths: []admit.HostPathPrefix{{Path: "/var"}},
					DeniedHostPaths: []admit.DeniedHostPath{{Path: "/var/lib/podsync", Why: "podsync's root directory (--root-dir)"}}}
			})
			p := basePod("attack")
			p.Spec.Volumes = []corev1.Volume{{Name: "var", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var"}}}}
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "var", MountPath: "/host"}}
			_, err := e.sync(p)
			refused(t, err, failed, admit.ReasonPolicyHostPath, "/var contains /var/lib/podsync", "always refuses")
			e.nothingCreated("attack")
		}},
		{name: "hostPath symlink out of an allowed prefix", run: func(t *testing.T, _ *env) {
			dir := t.TempDir()
			if err := os.Mkdir(filepath.Join(dir, "data"), 0o755); err != nil {
				t.Fatal(err)
			}
			// What the pod could plant in a prefix it can write.
			if err := os.Symlink("/", filepath.Join(dir, "data", "escape")); err != nil {
				t.Fatal(err)
			}
			e := newEnv(t, func(o *testdaemon.Options) {
				o.Policy = &admit.Policy{AllowedHostPaths: []admit.HostPathPrefix{{Path: filepath.Join(dir, "data")}}}
			})
			p := basePod("attack")
			p.Spec.Volumes = []corev1.Volume{{Name: "etc", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: filepath.Join(dir, "data", "escape", "etc")}}}}
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "etc", MountPath: "/host"}}
			_, steps, err := e.syncSteps(p)
			if err != nil {
				t.Fatalf("SyncPod: %v", err)
			}
			var failures []string
			for _, s := range steps {
				if s.GetOutcome() != podsyncv1.StepOutcome_STEP_OUTCOME_SUCCEEDED {
					failures = append(failures, s.GetMessage())
				}
			}
			if len(failures) == 0 || !strings.Contains(strings.Join(failures, "\n"), "escape") {
				t.Errorf("failed steps %q, want the volume's refusal naming the link", failures)
			}
			t.Logf("refused: %s", strings.Join(failures, "; "))
			if ctrs, _ := e.d.Runtime.ListContainers(e.ctx, nil); len(ctrs) != 0 {
				t.Errorf("%d containers created, want none", len(ctrs))
			}
		}},
		{name: "unsafe sysctl", pod: func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: "kernel.msgmax", Value: "65536"}}}
		}, code: failed, reason: admit.ReasonPodSecurity, want: podSec("sysctls", "kernel.msgmax", "--allowed-unsafe-sysctls")},
		{name: "runAsNonRoot with runAsUser 0", run: func(t *testing.T, e *env) {
			p := basePod("root")
			p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To(int64(0))}
			res, err := e.sync(p)
			if err != nil {
				t.Fatalf("SyncPod: %v", err)
			}
			var msgs []string
			for _, s := range res.GetStatus().GetContainerStatuses() {
				if w := s.GetState().GetWaiting(); w != nil {
					msgs = append(msgs, w.GetReason()+": "+w.GetMessage())
				}
			}
			if len(msgs) != 1 || !strings.HasPrefix(msgs[0], "CreateContainerConfigError: container's runAsUser breaks non-root policy") {
				t.Errorf("container waiting %q, want CreateContainerConfigError with the kubelet's message", msgs)
			}
			if ctrs, _ := e.d.Runtime.ListContainers(e.ctx, nil); len(ctrs) != 0 {
				t.Errorf("%d containers created, want none", len(ctrs))
			}
		}},
		{name: "concurrent applies against max pods", run: func(t *testing.T, e *env) {
			var wg sync.WaitGroup
			errs := make([]error, 10)
			for i := range errs {
				wg.Go(func() { _, errs[i] = e.sync(basePod(fmt.Sprintf("race-%d", i))) })
			}
			wg.Wait()
			ok := 0
			for _, err := range errs {
				switch {
				case err == nil:
					ok++
				case client.Reason(err) != admit.ReasonOutOfPods:
					t.Errorf("SyncPod: %v, want admitted or OutOfpods", err)
				}
			}
			sbs, _ := e.d.Runtime.ListPodSandbox(e.ctx, nil)
			if ok != 3 || len(sbs) != 3 {
				t.Errorf("%d admitted, %d sandboxes; want 3 of each on a 3-pod node", ok, len(sbs))
			}
		}},
		{name: "record amplification with unreferenced objects", run: func(t *testing.T, e *env) {
			var cms []*corev1.ConfigMap
			for i := range 50 {
				cms = append(cms, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("cm-%d", i)},
					Data: map[string]string{"blob": strings.Repeat("x", 16<<10)}})
			}
			if _, err := e.sync(basePod("amp"), cms...); err != nil {
				t.Fatalf("SyncPod: %v", err)
			}
			rec, err := e.d.Store.GetByName("default", "amp")
			if err != nil {
				t.Fatal(err)
			}
			if len(rec.ConfigMaps) != 0 {
				t.Errorf("the record keeps %d ConfigMaps the pod does not refer to", len(rec.ConfigMaps))
			}
		}},
		{name: "a PlanPod loop against the runtime", run: func(t *testing.T, e *env) {
			p, err := convert.PodToProto(basePod("plan"))
			if err != nil {
				t.Fatal(err)
			}
			for i := range 100 {
				_, err = e.d.Client.PlanPod(e.ctx, &podsyncv1.PlanPodRequest{Pod: p})
				if err != nil {
					t.Logf("refused after %d plans", i)
					break
				}
			}
			refused(t, err, codes.ResourceExhausted, client.ReasonRateLimited)
		}},
		{name: "empty store on a runtime with pods", run: func(t *testing.T, e *env) { lostStore(t, e, func(string) {}, errdefs.ErrStoreLost) }},
		{name: "truncated store", run: func(t *testing.T, e *env) {
			lostStore(t, e, func(path string) {
				if err := os.Truncate(path, 8292); err != nil {
					t.Fatal(err)
				}
			}, errdefs.ErrStoreCorrupt)
		}},
		{name: "garbage store", run: func(t *testing.T, e *env) {
			lostStore(t, e, func(path string) {
				if err := os.WriteFile(path, []byte(strings.Repeat("garbage", 4096)), 0o600); err != nil {
					t.Fatal(err)
				}
			}, errdefs.ErrStoreCorrupt)
		}},
		{name: "stream exhaustion by one identity", run: func(t *testing.T, e *env) {
			ctx, cancel := context.WithCancel(e.ctx)
			defer cancel()
			var streams []podsyncv1.PodSyncService_WatchPodsClient
			for range 64 {
				s, err := e.d.Client.WatchPods(ctx, &podsyncv1.WatchPodsRequest{})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := s.Recv(); err != nil {
					t.Fatalf("watch %d: %v", len(streams), err)
				}
				streams = append(streams, s)
			}
			s, err := e.d.Client.WatchPods(ctx, &podsyncv1.WatchPodsRequest{})
			if err == nil {
				_, err = s.Recv()
			}
			refused(t, err, codes.ResourceExhausted, client.ReasonTooManyStreams)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			if tt.run != nil {
				tt.run(t, e)
				return
			}
			pod := basePod("attack")
			tt.pod(pod)
			_, err := e.sync(pod)
			refused(t, err, tt.code, tt.reason, tt.want...)
			e.nothingCreated("attack")
		})
	}
}

// lostStore runs a pod, then starts a node on the daemon's runtime with a
// store file that damage leaves behind (an empty file when damage does
// nothing to it): the start fails with want, names the file, panics never,
// and the pod's sandbox and container keep running.
func lostStore(t *testing.T, e *env, damage func(path string), want error) {
	t.Helper()
	if _, err := e.sync(basePod("keep")); err != nil {
		t.Fatalf("SyncPod: %v", err)
	}
	path := filepath.Join(t.TempDir(), "podsync.db")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(want, errdefs.ErrStoreLost) {
		// A store with history, then damaged.
		src, err := os.ReadFile(e.d.StorePath)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, src, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	damage(path)
	err := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("panic: %v", r)
			}
		}()
		st, err := store.Open(path, store.Options{})
		if err != nil {
			return err
		}
		defer func() { _ = st.Close() }()
		n, err := engine.NewNode(engine.NodeOptions{Runtime: e.d.Runtime, Images: e.d.Runtime, Store: st, Logger: zaptest.NewLogger(t),
			Config: criconfig.Options{RootDir: t.TempDir(), PodLogDir: t.TempDir()}})
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(e.ctx, 5*time.Second)
		defer cancel()
		return n.Run(ctx)
	}()
	if !errors.Is(err, want) || !strings.Contains(err.Error(), path) {
		t.Fatalf("start on the damaged store = %v, want %v naming %s", err, want, path)
	}
	sbs, _ := e.d.Runtime.ListPodSandbox(e.ctx, nil)
	ctrs, _ := e.d.Runtime.ListContainers(e.ctx, nil)
	if len(sbs) != 1 || sbs[0].GetState() != runtimeapi.PodSandboxState_SANDBOX_READY || len(ctrs) != 1 || ctrs[0].GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("after the refusal: sandboxes %v, containers %v; want the pod's, running", sbs, ctrs)
	}
}
