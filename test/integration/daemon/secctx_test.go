//go:build integration

package daemon_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	cri "k8s.io/cri-api/pkg/apis"
	"k8s.io/utils/ptr"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
)

// ociSpec is the part of a container's OCI runtime spec, from the
// runtime's verbose status (crictl inspect's "runtimeSpec"), that the
// security context shapes.
type ociSpec struct {
	Process struct {
		ApparmorProfile string `json:"apparmorProfile"`
	} `json:"process"`
	Linux struct {
		Seccomp *struct {
			DefaultAction string `json:"defaultAction"`
			Syscalls      []struct {
				Names  []string `json:"names"`
				Action string   `json:"action"`
			} `json:"syscalls"`
		} `json:"seccomp"`
		MaskedPaths   []string `json:"maskedPaths"`
		ReadonlyPaths []string `json:"readonlyPaths"`
	} `json:"linux"`
}

// runtimeSpec returns the OCI spec the runtime created the container with
// id (a "containerd://" ID from a status) from.
func runtimeSpec(ctx context.Context, t *testing.T, rs cri.RuntimeService, id string) ociSpec {
	t.Helper()
	st, err := rs.ContainerStatus(ctx, strings.TrimPrefix(id, "containerd://"), true)
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		RuntimeSpec ociSpec `json:"runtimeSpec"`
	}
	if err := json.Unmarshal([]byte(st.GetInfo()["info"]), &info); err != nil {
		t.Fatalf("container %s: verbose info: %v", id, err)
	}
	return info.RuntimeSpec
}

// TestSecurityProfilesOnRuntime: the security context the API carries is
// what the runtime applies, as its verbose container status shows —
// seccomp Unconfined runs without a filter, RuntimeDefault under the
// runtime's filter, Localhost under the profile file in
// <root-dir>/seccomp; procMount Default keeps the masked and read-only
// paths; seLinuxOptions do not stop a pod on a node without SELinux. A
// Localhost profile outside that directory is refused at the API
// with the field's path.
func TestSecurityProfilesOnRuntime(t *testing.T) {
	ctx := testContext(t)
	// Unconfined seccomp and AppArmor profiles pass only the privileged
	// Pod Security level.
	d := startPodsyncd(t, daemonOptions{Args: []string{"--pod-security=privileged"}})
	rs := runtimeClient(t)

	// A profile that allows everything but mkdir, which fails with EPERM.
	if err := os.MkdirAll(filepath.Join(d.opts.RootDir, "seccomp", "profiles"), 0o755); err != nil {
		t.Fatal(err)
	}
	profile := `{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO"}]}`
	if err := os.WriteFile(filepath.Join(d.opts.RootDir, "seccomp", "profiles", "deny-mkdir.json"), []byte(profile), 0o644); err != nil {
		t.Fatal(err)
	}

	unconfined := sleeper("unconfined")
	unconfined.SecurityContext = &corev1.SecurityContext{
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined},
		// Unconfined runs on a node with or without AppArmor.
		AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined},
		// containerd ignores SELinux labels where SELinux is disabled.
		SELinuxOptions: &corev1.SELinuxOptions{Level: "s0:c1,c2"},
	}
	runtimeDefault := sleeper("runtime-default")
	runtimeDefault.SecurityContext = &corev1.SecurityContext{
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		ProcMount:      ptr.To(corev1.DefaultProcMount),
	}
	localhost := sleeper("localhost")
	localhost.SecurityContext = &corev1.SecurityContext{
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("profiles/deny-mkdir.json")},
	}
	pod := newPod(t, "", unconfined, runtimeDefault, localhost)
	stream, err := d.client().SyncPod(ctx, &podsyncv1.SyncPodRequest{Pod: pod})
	if err != nil {
		t.Fatal(err)
	}
	res := lastSyncResult(t, stream)
	if res.GetStatus().GetPhase() != "Running" {
		t.Fatalf("phase %q, want Running: %v", res.GetStatus().GetPhase(), res.GetStatus())
	}
	ids := map[string]string{}
	for _, cs := range res.GetStatus().GetContainerStatuses() {
		ids[cs.GetName()] = cs.GetContainerId()
	}

	if sc := runtimeSpec(ctx, t, rs, ids["unconfined"]).Linux.Seccomp; sc != nil {
		t.Errorf("Unconfined container: seccomp %+v, want no filter", sc)
	}
	wantSeccompFilter(ctx, t, rs, ids["runtime-default"])
	spec := runtimeSpec(ctx, t, rs, ids["runtime-default"])
	if !slices.Contains(spec.Linux.MaskedPaths, "/proc/kcore") || !slices.Contains(spec.Linux.ReadonlyPaths, "/proc/sys") {
		t.Errorf("procMount Default: masked paths %v, read-only paths %v; want the defaults (/proc/kcore masked, /proc/sys read-only)",
			spec.Linux.MaskedPaths, spec.Linux.ReadonlyPaths)
	}
	sc := runtimeSpec(ctx, t, rs, ids["localhost"]).Linux.Seccomp
	if sc == nil || sc.DefaultAction != "SCMP_ACT_ALLOW" || len(sc.Syscalls) != 1 || !slices.Contains(sc.Syscalls[0].Names, "mkdirat") {
		t.Errorf("Localhost container: seccomp %+v, want profiles/deny-mkdir.json", sc)
	}

	// A profile path climbing out of <root-dir>/seccomp never reaches the
	// runtime: the request is refused, naming the field.
	escaping := sleeper("app")
	escaping.SecurityContext = &corev1.SecurityContext{
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("../../../etc/escape.json")},
	}
	bad := newPod(t, "escape", escaping)
	stream, err = d.client().SyncPod(ctx, &podsyncv1.SyncPodRequest{Pod: bad})
	if err == nil {
		_, err = stream.Recv()
	}
	wantFieldViolation(t, err, "pod.spec.containers[0].securityContext.seccompProfile.localhostProfile")
	if ready, notReady := sandboxesOf(ctx, t, rs, bad.GetMetadata().GetUid()); len(ready)+len(notReady) != 0 {
		t.Errorf("refused pod has sandboxes %v %v", ready, notReady)
	}
}

// wantFieldViolation fails t unless err is InvalidArgument with a field
// violation at path.
func wantFieldViolation(t *testing.T, err error, path string) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != codes.InvalidArgument {
		t.Fatalf("err = %v, want InvalidArgument", err)
	}
	var fields []string
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				fields = append(fields, v.GetField())
			}
		}
	}
	if !slices.Contains(fields, path) {
		t.Errorf("field violations %v, want %s (%v)", fields, path, err)
	}
}

// TestAppArmorWithoutKernelSupport: a pod asking for an AppArmor profile
// on a node whose kernel has AppArmor off does not run unconfined: as the
// kubelet's AppArmor admit handler, podsyncd refuses it at admission with
// the kubelet's message, and nothing is created. Where AppArmor is on,
// the runtime default profile applies.
func TestAppArmorWithoutKernelSupport(t *testing.T) {
	ctx := testContext(t)
	d := startPodsyncd(t, daemonOptions{})
	rs := runtimeClient(t)
	enabled, _ := os.ReadFile("/sys/module/apparmor/parameters/enabled")

	c := sleeper("app")
	c.SecurityContext = &corev1.SecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault}}
	pod := newPod(t, "", c)
	stream, err := d.client().SyncPod(ctx, &podsyncv1.SyncPodRequest{Pod: pod})
	if err != nil {
		t.Fatal(err)
	}
	var res *podsyncv1.SyncPodResult
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if strings.TrimSpace(string(enabled)) == "Y" {
				t.Fatalf("AppArmor enabled: SyncPod: %v", err)
			}
			// As the kubelet's AppArmor admit handler: refused before
			// anything is created.
			if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "Cannot enforce AppArmor: AppArmor is not enabled on the host") {
				t.Fatalf("SyncPod = %v, want FAILED_PRECONDITION, the kubelet's AppArmor message", err)
			}
			if ready, notReady := sandboxesOf(ctx, t, rs, pod.GetMetadata().GetUid()); len(ready)+len(notReady) != 0 {
				t.Errorf("sandboxes created for the refused pod: %v %v", ready, notReady)
			}
			t.Logf("AppArmor is not enabled on this kernel: refused with %v", err)
			return
		}
		if r := m.GetResult(); r != nil {
			res = r
		}
	}
	if strings.TrimSpace(string(enabled)) != "Y" {
		t.Fatalf("AppArmor is not enabled, but the pod was admitted: %v", res.GetStatus())
	}
	if res.GetStatus().GetPhase() != "Running" {
		t.Fatalf("AppArmor enabled: phase %q; want the pod running", res.GetStatus().GetPhase())
	}
	id := res.GetStatus().GetContainerStatuses()[0].GetContainerId()
	if p := runtimeSpec(ctx, t, rs, id).Process.ApparmorProfile; p == "" {
		t.Errorf("AppArmor enabled: container runs without a profile")
	}
}
