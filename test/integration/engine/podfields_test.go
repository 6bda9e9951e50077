//go:build integration

package engine_test

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/engine/admit"
	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/podstatus"
	"github.com/podsync/podsync/engine/syncer"
	"github.com/podsync/podsync/internal/testing/localcri"
	"github.com/podsync/podsync/internal/testing/localcri/localcritest"
)

// TestShareProcessNamespace: with shareProcessNamespace one container
// sees the other's processes (and the pause process); without it, only
// its own.
func TestShareProcessNamespace(t *testing.T) {
	t.Parallel()
	for _, share := range []bool{true, false} {
		e := newEnv(t)
		pod := e.newPod()
		pod.Spec.ShareProcessNamespace = ptr.To(share)
		pod.Spec.Containers = []corev1.Container{
			localcritest.Shell("app", "sleep 3600 & wait"),
			localcritest.Shell("marker", "sleep 3601 & wait"),
		}
		res := e.until(pod, "running", e.running(pod))
		id := newest(t, res, "app").ID
		var out []byte
		deadline := time.Now().Add(30 * time.Second)
		for {
			var err error
			out, _, err = e.rt.ExecSync(e.ctx, id, []string{"/bin/ps", "-o", "pid,args"}, 10*time.Second)
			if err != nil {
				t.Fatalf("ps in app: %v", err)
			}
			if !share || strings.Contains(string(out), "sleep 3601") || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if got := strings.Contains(string(out), "sleep 3601"); got != share {
			t.Errorf("shareProcessNamespace %v: app sees the marker container's process = %v; ps:\n%s", share, got, out)
		}
	}
}

// TestImagePullSecretsBasicAuth: an image in a repository of the local
// registry behind basic auth is pulled with the pod's
// kubernetes.io/dockerconfigjson Secret; without it the pull fails with
// ErrImagePull and containerd's report of the registry's challenge, and
// with a wrong password with ErrImagePull and the registry's 401.
func TestImagePullSecretsBasicAuth(t *testing.T) {
	t.Parallel()
	reg := inst.Registry()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	prefix := "private-" + hex.EncodeToString(b) + "/"
	reg.RequireBasicAuth(prefix, "puller", "s3cret")
	imgs, err := localcri.LayoutImages(inst.Images().Layout)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	if err := reg.Push(e.ctx, prefix+"busybox:v1", imgs[localcri.BusyboxImage]); err != nil {
		t.Fatal(err)
	}
	ref := reg.Ref(prefix + "busybox:v1")

	secret := func(ns, password string) []*corev1.Secret {
		auth := base64.StdEncoding.EncodeToString([]byte("puller:" + password))
		return []*corev1.Secret{{
			ObjectMeta: metav1.ObjectMeta{Name: "regcred", Namespace: ns},
			Type:       corev1.SecretTypeDockerConfigJson,
			Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"` + reg.Addr() + `":{"auth":"` + auth + `"}}}`)},
		}}
	}
	// containerd 2.x answers a Basic challenge it has no credentials for
	// itself; 1.6 reports the registry's 401.
	anonymous := map[localcri.Flavour]string{
		localcri.Containerd2:  "authorization failed: no basic auth credentials",
		localcri.Containerd16: "401 Unauthorized",
	}[inst.Flavour()]
	for _, tc := range []struct {
		name, password, want string
	}{
		{"without credentials", "", anonymous},
		{"with a wrong password", "wrong", "401 Unauthorized"},
	} {
		e := newEnv(t)
		pod := e.newPod("app")
		pod.Spec.Containers[0].Image = ref
		if tc.password != "" {
			pod.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}}
			e.in.Secrets = secret(pod.Namespace, tc.password)
		}
		res := e.sync(pod)
		st := res.Step(syncer.ActionPullImage, ref)
		if st == nil || st.Reason != podstatus.ReasonErrImagePull {
			t.Fatalf("%s: steps %v, want a failed pull with ErrImagePull", tc.name, steps(res.Steps))
		}
		if !strings.Contains(st.Message, tc.want) {
			t.Errorf("%s: pull message %q does not say %q", tc.name, st.Message, tc.want)
		}
	}

	// With the pod's Secret: pulled and running.
	e2 := newEnv(t)
	pod := e2.newPod("app")
	pod.Spec.Containers[0].Image = ref
	pod.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}}
	e2.in.Secrets = secret(pod.Namespace, "s3cret")
	res := e2.until(pod, "running", e2.running(pod))
	if s := res.Step(syncer.ActionPullImage, ref); s == nil || s.Err != nil {
		t.Errorf("steps %v, want a successful pull with the Secret's credentials", steps(res.Steps))
	}
}

// TestHostnameOverride: spec.hostnameOverride is the pod's hostname (the
// kernel's nodename) and its hosts file's name for the pod's IP, with no
// domain, whatever hostname and subdomain say: `hostname` and
// `hostname -f` both print it, as pod_hostnameoverride.go's e2e tests
// expect.
func TestHostnameOverride(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pod := e.newPod()
	pod.Spec.Hostname, pod.Spec.Subdomain, pod.Spec.HostnameOverride = "custom-host", "t", ptr.To("override.example.host")
	pod.Spec.Containers = []corev1.Container{localcritest.Shell("app", "sleep 3600 & wait")}
	res := e.until(pod, "running", e.running(pod))
	id := newest(t, res, "app").ID
	out, stderr, err := e.rt.ExecSync(e.ctx, id, []string{"/bin/sh", "-c", "echo $(hostname)';'$(hostname -f)';'"}, 10*time.Second)
	if err != nil {
		t.Fatalf("hostname: %v %s", err, stderr)
	}
	if got, want := strings.TrimSpace(string(out)), "override.example.host;override.example.host;"; got != want {
		hosts, _, _ := e.rt.ExecSync(e.ctx, id, []string{"/bin/cat", "/etc/hosts"}, 10*time.Second)
		t.Errorf("hostname;hostname -f = %q, want %q; /etc/hosts:\n%s", got, want, hosts)
	}
}

// TestHostUsersFalse: a runtime that reports user namespaces (its default
// handler's user_namespaces feature: containerd 2.x with idmap mounts)
// runs a hostUsers false pod in a user namespace of its own, container
// root mapped to the pod's 65536 host IDs; one that does not (containerd
// 1.6 always; 2.x where its file systems lack idmap mounts, as on this
// project's cgroup v1 machines) has the pod refused by admission, naming
// the value and what to do.
func TestHostUsersFalse(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	status, err := e.rt.Status(e.ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	supported := syncer.SupportsUserNamespaces(status)
	if inst.Flavour() == localcri.Containerd16 && supported {
		t.Fatal("containerd 1.6 reports user namespaces")
	}
	pod := e.newPod()
	pod.Spec.HostUsers = ptr.To(false)
	pod.Spec.Containers = []corev1.Container{localcritest.Shell("app", "sleep 3600 & wait")}
	r := admit.Admit(pod, nil, admit.Node{UserNamespaces: supported}, admit.Policy{})
	if !supported {
		t.Logf("the runtime reports no user namespaces: %v", status.GetRuntimeHandlers())
		if r.Admit || r.Reason != admit.ReasonUserNamespacesUnsupported || !strings.Contains(r.Message, "hostUsers: false") ||
			!strings.Contains(r.Message, "set it to true") {
			t.Errorf("admission = %+v, want %s naming hostUsers: false and what to do", r, admit.ReasonUserNamespacesUnsupported)
		}
		return
	}
	if !r.Admit {
		t.Fatalf("admission on a runtime with user namespaces = %+v", r)
	}
	res := e.until(pod, "running", e.running(pod))
	out, stderr, err := e.rt.ExecSync(e.ctx, newest(t, res, "app").ID, []string{"/bin/cat", "/proc/self/uid_map"}, 10*time.Second)
	if err != nil {
		t.Fatalf("cat uid_map: %v %s", err, stderr)
	}
	if f := strings.Fields(string(out)); len(f) != 3 || f[0] != "0" || f[1] != "65536" || f[2] != "65536" {
		t.Errorf("uid_map %q, want container root mapped to host 65536 for 65536 IDs", out)
	}
}

// TestPodLevelResourcesCgroup: a pod's pod-level limits are its pod
// cgroup's, made before its sandbox as the kubelet's pod container manager
// makes it, and its containers, which limit nothing themselves, run
// inside them: the Guaranteed pod's cgroup is kubepods/pod<uid>.
func TestPodLevelResourcesCgroup(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pod := e.newPod()
	pod.Spec.Containers = []corev1.Container{localcritest.Shell("app", "sleep 3600 & wait")}
	l := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("96Mi")}
	pod.Spec.Resources = &corev1.ResourceRequirements{Requests: l.DeepCopy(), Limits: l}
	e.until(pod, "running", e.running(pod))
	parent := criconfig.PodCgroupParent(pod, e.cfg)
	if !strings.HasSuffix(parent, "/kubepods/pod"+string(pod.UID)) {
		t.Errorf("cgroup parent %s, want the Guaranteed pod's", parent)
	}
	root := "/sys/fs/cgroup"
	read := func(path string) string {
		t.Helper()
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(data))
	}
	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err == nil {
		if got := read(filepath.Join(root, parent, "memory.max")); got != "100663296" {
			t.Errorf("memory.max = %s, want 96Mi", got)
		}
		if got := read(filepath.Join(root, parent, "cpu.max")); got != "50000 100000" {
			t.Errorf("cpu.max = %s, want 50000 100000", got)
		}
		return
	}
	if got := read(filepath.Join(root, "memory", parent, "memory.limit_in_bytes")); got != "100663296" {
		t.Errorf("memory.limit_in_bytes = %s, want 96Mi", got)
	}
	cpu := filepath.Join(root, "cpu")
	if _, err := os.Stat(filepath.Join(root, "cpu,cpuacct")); err == nil {
		cpu = filepath.Join(root, "cpu,cpuacct")
	}
	if got := read(filepath.Join(cpu, parent, "cpu.cfs_quota_us")); got != "50000" {
		t.Errorf("cpu.cfs_quota_us = %s, want 50000", got)
	}
}

// TestOverheadInThePodCgroup: a pod's spec.overhead (its RuntimeClass's)
// counts in its pod cgroup's limits, beside its pod-level ones, as in the
// kubelet's ResourceConfigForPod; the pod runs with it on containerd.
func TestOverheadInThePodCgroup(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pod := e.newPod()
	pod.Spec.Containers = []corev1.Container{localcritest.Shell("app", "sleep 3600 & wait")}
	l := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("96Mi")}
	pod.Spec.Resources = &corev1.ResourceRequirements{Requests: l.DeepCopy(), Limits: l}
	pod.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("16Mi")}
	e.until(pod, "running", e.running(pod))
	parent := criconfig.PodCgroupParent(pod, e.cfg)
	root := "/sys/fs/cgroup"
	read := func(path string) string {
		t.Helper()
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(data))
	}
	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err == nil {
		if got := read(filepath.Join(root, parent, "memory.max")); got != "117440512" {
			t.Errorf("memory.max = %s, want 112Mi (96Mi and the 16Mi overhead)", got)
		}
		if got := read(filepath.Join(root, parent, "cpu.max")); got != "60000 100000" {
			t.Errorf("cpu.max = %s, want 60000 100000 (500m and the 100m overhead)", got)
		}
		return
	}
	if got := read(filepath.Join(root, "memory", parent, "memory.limit_in_bytes")); got != "117440512" {
		t.Errorf("memory.limit_in_bytes = %s, want 112Mi (96Mi and the 16Mi overhead)", got)
	}
}
