package model_test

import (
	"bytes"
	"encoding/json"
	"hash/fnv"
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/plan/plantest"
)

// referenceHash is ContainerSpec.Hash as it was first written, the
// definition every stored hash follows: FNV-64a of json.Marshal, in hex.
func referenceHash(t testing.TB, s *model.ContainerSpec) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	h := fnv.New64a()
	_, _ = h.Write(b)
	return strconv.FormatUint(h.Sum64(), 16)
}

// checkSpecEncoding fails t unless the spec encoder writes json.Marshal's
// bytes for c of pod, and every hash path agrees with referenceHash.
func checkSpecEncoding(t testing.TB, pod *corev1.Pod, c *corev1.Container) {
	t.Helper()
	s := model.NewContainerSpec(pod, c)
	want, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := model.AppendContainerSpecJSON(nil, s); !bytes.Equal(got, want) {
		t.Fatalf("spec encoder differs from json.Marshal:\n got %s\nwant %s", got, want)
	}
	ref := referenceHash(t, s)
	if got := s.Hash(); got != ref {
		t.Fatalf("ContainerSpec.Hash = %s, want %s (json %s)", got, ref, want)
	}
	if got := model.ContainerHash(pod, c); got != ref {
		t.Fatalf("ContainerHash = %s, want %s (json %s)", got, ref, want)
	}
}

// TestContainerHashUnchanged pins hash values computed before the spec
// encoder existed (json.Marshal): running containers carry them.
func TestContainerHashUnchanged(t *testing.T) {
	pod := plantest.BenchPod(3)
	want := []string{"4a3edda1532708b7", "5337ce5d7cc85af1", "d4d5be22802845bf"}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if got := model.ContainerHash(pod, c); got != want[i] {
			t.Errorf("ContainerHash(%s) = %s, want %s", c.Name, got, want[i])
		}
		checkSpecEncoding(t, pod, c)
	}
}

// TestSpecEncoderMatchesJSON compares the spec encoder with json.Marshal
// on random specs that set every field it writes itself, with strings that
// need escaping, odd quantities and volumes, env sources and security
// contexts it hands to encoding/json.
func TestSpecEncoderMatchesJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 1))
	n := 3000
	if testing.Short() {
		n = 300
	}
	for range n {
		pod := randomSpecPod(r)
		for i := range pod.Spec.Containers {
			checkSpecEncoding(t, pod, &pod.Spec.Containers[i])
		}
	}
}

// FuzzSpecEncoder compares the spec encoder with json.Marshal on strings
// and quantities from the fuzzer.
func FuzzSpecEncoder(f *testing.F) {
	f.Add("nginx", "a&b<c>", "é\u2028\xff", "100m", int32(80), true)
	f.Add("", "\x00\x1f\x7f\"\\", "\t\n\r\b\f", "+5", int32(-1), false)
	f.Add("x", "日本", "a\xc3", "64Mi", int32(0), true)
	f.Fuzz(func(t *testing.T, s1, s2, s3, qty string, port int32, flag bool) {
		q, err := resource.ParseQuantity(qty)
		if err != nil {
			q = resource.MustParse("1")
		}
		pod := &corev1.Pod{Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{},
			Volumes: []corev1.Volume{
				{Name: s1, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMedium(s2), SizeLimit: &q}}},
				{Name: s2, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: s3, Type: ptr.To(corev1.HostPathType(s1))}}},
			},
			Containers: []corev1.Container{{
				Image: s1, Command: []string{s2, s3}, Args: []string{s3}, WorkingDir: s2,
				Ports: []corev1.ContainerPort{{Name: s3, HostPort: port, ContainerPort: port, Protocol: corev1.Protocol(s1), HostIP: s2}},
				Env: []corev1.EnvVar{
					{Name: s1, Value: s2},
					{Name: s3, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: s2, FieldPath: s3}}},
					{Name: s2, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
						LocalObjectReference: corev1.LocalObjectReference{Name: s3}, Key: s1, Optional: &flag}}},
				},
				Resources: corev1.ResourceRequirements{
					Limits:   corev1.ResourceList{corev1.ResourceName(s1): q, corev1.ResourceName(s2): q},
					Requests: corev1.ResourceList{corev1.ResourceName(s3): q},
				},
				VolumeMounts: []corev1.VolumeMount{
					{Name: s1, MountPath: s2, SubPath: s3, ReadOnly: flag, BindMountOptions: []string{s1}},
					{Name: s2, MountPath: s3, SubPathExpr: s1, MountPropagation: ptr.To(corev1.MountPropagationMode(s2))},
				},
				Stdin: flag, TTY: !flag, TerminationMessagePath: s3, TerminationMessagePolicy: corev1.TerminationMessagePolicy(s2),
			}},
		}}
		checkSpecEncoding(t, pod, &pod.Spec.Containers[0])
	})
}

// TestSpecEncoderKnowsEveryField fails when k8s.io/api adds, removes or
// retags a field of a type the spec encoder writes itself: extend the
// encoder in hash_json.go (and randomSpecPod), then update this list.
func TestSpecEncoderKnowsEveryField(t *testing.T) {
	want := map[string][]string{
		"ContainerSpec": {"image", "command,omitempty", "args,omitempty", "workingDir,omitempty", "ports,omitempty",
			"envFrom,omitempty", "env,omitempty", "resources", "volumeMounts,omitempty", "volumeDevices,omitempty",
			"securityContext,omitempty", "stdin,omitempty", "stdinOnce,omitempty", "tty,omitempty",
			"terminationMessagePath,omitempty", "terminationMessagePolicy,omitempty", "lifecycle,omitempty", "volumes,omitempty",
			"podSecurityContext,omitempty", "shareProcessNamespace,omitempty", "userNamespace,omitempty"},
		"ContainerPort":        {"name,omitempty", "hostPort,omitempty", "containerPort", "protocol,omitempty", "hostIP,omitempty"},
		"EnvVar":               {"name", "value,omitempty", "valueFrom,omitempty"},
		"ObjectFieldSelector":  {"apiVersion,omitempty", "fieldPath"},
		"ConfigMapKeySelector": {"", "key", "optional,omitempty"},
		"SecretKeySelector":    {"", "key", "optional,omitempty"},
		"LocalObjectReference": {"name,omitempty"},
		"VolumeMount": {"name", "readOnly,omitempty", "recursiveReadOnly,omitempty", "mountPath", "subPath,omitempty",
			"mountPropagation,omitempty", "subPathExpr,omitempty", "bindMountOptions,omitempty"},
		"ResourceRequirements": {"limits,omitempty", "requests,omitempty", "claims,omitempty"},
		"Volume":               {"name", ""},
		"EmptyDirVolumeSource": {"medium,omitempty", "sizeLimit,omitempty", "mode,omitempty"},
		"HostPathVolumeSource": {"path", "type,omitempty"},
		"PodSecurityContext": {"seLinuxOptions,omitempty", "windowsOptions,omitempty", "runAsUser,omitempty",
			"runAsGroup,omitempty", "runAsNonRoot,omitempty", "supplementalGroups,omitempty",
			"supplementalGroupsPolicy,omitempty", "fsGroup,omitempty", "sysctls,omitempty",
			"fsGroupChangePolicy,omitempty", "seccompProfile,omitempty", "appArmorProfile,omitempty",
			"seLinuxChangePolicy,omitempty"},
	}
	for _, v := range []any{model.ContainerSpec{}, corev1.ContainerPort{}, corev1.EnvVar{}, corev1.ObjectFieldSelector{},
		corev1.ConfigMapKeySelector{}, corev1.SecretKeySelector{}, corev1.LocalObjectReference{}, corev1.VolumeMount{},
		corev1.ResourceRequirements{}, corev1.Volume{}, corev1.EmptyDirVolumeSource{}, corev1.HostPathVolumeSource{},
		corev1.PodSecurityContext{}} {
		typ := reflect.TypeOf(v)
		var got []string
		for i := range typ.NumField() {
			got = append(got, typ.Field(i).Tag.Get("json"))
		}
		if diff := cmp.Diff(want[typ.Name()], got); diff != "" {
			t.Errorf("json fields of %s changed; update the spec encoder (hash_json.go) (-known +now):\n%s", typ.Name(), diff)
		}
	}
}

// randomSpecPod returns a pod of one to three containers whose specs set
// a random subset of every field ContainerSpec covers.
func randomSpecPod(r *rand.Rand) *corev1.Pod {
	strs := []string{"", "a", "web", "/bin/sh", "trap 'exit 0' TERM; sleep 3600 & wait", "a&&b", "<x>", `q"uote`,
		`back\slash`, "tab\t", "nl\n", "cr\r", "\b\f", "\x00", "\x1f", "\x7f", "é", "日本語", "\u2028", "x\u2029y",
		"\xff", "a\xc3", "\xed\xa0\x80", "registry.local/busybox:local", "/data", "metadata.name"}
	str := func() string { return strs[r.IntN(len(strs))] }
	maybe := func() bool { return r.IntN(2) == 0 }
	strSlice := func() []string {
		switch r.IntN(4) {
		case 0:
			return nil
		case 1:
			return []string{}
		}
		out := make([]string, 1+r.IntN(3))
		for i := range out {
			out[i] = str()
		}
		return out
	}
	qtys := []string{"0", "1", "+5", "-5", "1.5", "1500m", "100m", "10m", "64Mi", "16Mi", "1Gi", "1e3", "5k",
		"0.1", "1000m", "2Ki", "123456789", "1.2345678901", "1E", "100Ei", "1n", "0.5Gi", "007"}
	qty := func() resource.Quantity { return resource.MustParse(qtys[r.IntN(len(qtys))]) }
	resList := func() corev1.ResourceList {
		switch r.IntN(4) {
		case 0:
			return nil
		case 1:
			return corev1.ResourceList{}
		}
		names := []corev1.ResourceName{"cpu", "memory", "ephemeral-storage", "nvidia.com/gpu", "a<b", "é", "hugepages-2Mi",
			"Z", "aa", "a"}
		l := corev1.ResourceList{}
		for range 1 + r.IntN(9) {
			l[names[r.IntN(len(names))]] = qty()
		}
		return l
	}
	optBool := func() *bool {
		if maybe() {
			return nil
		}
		return ptr.To(maybe())
	}
	envSource := func() *corev1.EnvVarSource {
		switch r.IntN(8) {
		case 0:
			return nil
		case 1:
			return &corev1.EnvVarSource{}
		case 2, 3:
			return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: str(), FieldPath: str()}}
		case 4:
			return &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: str()}, Key: str(), Optional: optBool()}}
		case 5:
			return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: str()}, Key: str(), Optional: optBool()}}
		case 6:
			return &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu", Divisor: qty()}}
		}
		return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: str()},
			SecretKeyRef: &corev1.SecretKeySelector{Key: str()}}
	}
	volNames := []string{"data", "cache", "a&b", "cfg"}
	volume := func() corev1.Volume {
		v := corev1.Volume{Name: volNames[r.IntN(len(volNames))]}
		switch r.IntN(8) {
		case 0:
			v.EmptyDir = &corev1.EmptyDirVolumeSource{}
		case 1:
			v.EmptyDir = &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: ptr.To(qty())}
			if maybe() {
				v.EmptyDir.Mode = ptr.To(int32(r.IntN(01000)))
			}
		case 2:
			v.HostPath = &corev1.HostPathVolumeSource{Path: str()}
		case 3:
			v.HostPath = &corev1.HostPathVolumeSource{Path: str(), Type: ptr.To(corev1.HostPathDirectoryOrCreate)}
		case 4:
			v.ConfigMap = &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: str()},
				DefaultMode: ptr.To[int32](0o644)}
		case 5:
			v.EmptyDir = &corev1.EmptyDirVolumeSource{}
			v.HostPath = &corev1.HostPathVolumeSource{Path: str()}
		case 6:
			// No source at all.
		default:
			v.Secret = &corev1.SecretVolumeSource{SecretName: str(), Optional: optBool()}
		}
		return v
	}
	podSC := func() *corev1.PodSecurityContext {
		switch r.IntN(6) {
		case 0:
			return nil
		case 1:
			return &corev1.PodSecurityContext{}
		case 2:
			return &corev1.PodSecurityContext{SupplementalGroups: []int64{}, Sysctls: []corev1.Sysctl{}}
		case 3:
			return &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000), FSGroup: ptr.To[int64](2000)}
		case 4:
			return &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: str(), Value: str()}}}
		}
		return &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	}

	pod := &corev1.Pod{Spec: corev1.PodSpec{SecurityContext: podSC(), ShareProcessNamespace: optBool(), HostUsers: optBool()}}
	for range r.IntN(5) {
		pod.Spec.Volumes = append(pod.Spec.Volumes, volume())
	}
	for i := range 1 + r.IntN(3) {
		c := corev1.Container{Name: "c" + strconv.Itoa(i), Image: str(), Command: strSlice(), Args: strSlice(), WorkingDir: str(),
			Stdin: maybe(), StdinOnce: maybe(), TTY: maybe(), TerminationMessagePath: str(),
			TerminationMessagePolicy: corev1.TerminationMessagePolicy(str())}
		for range r.IntN(3) {
			c.Ports = append(c.Ports, corev1.ContainerPort{Name: str(), HostPort: int32(r.IntN(3) * 8080),
				ContainerPort: int32(r.IntN(70000) - 1000), Protocol: corev1.Protocol(str()), HostIP: str()})
		}
		if r.IntN(4) == 0 {
			c.EnvFrom = []corev1.EnvFromSource{{Prefix: str(), ConfigMapRef: &corev1.ConfigMapEnvSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: str()}}}}
		}
		for range r.IntN(4) {
			c.Env = append(c.Env, corev1.EnvVar{Name: str(), Value: str(), ValueFrom: envSource()})
		}
		c.Resources = corev1.ResourceRequirements{Limits: resList(), Requests: resList()}
		switch r.IntN(4) {
		case 0:
			c.Lifecycle = &corev1.Lifecycle{}
		case 1:
			c.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: int64(r.IntN(30))}},
				StopSignal: ptr.To(corev1.Signal(str()))}
		case 2:
			c.Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: str(), Port: intstr.FromString(str()), HTTPHeaders: []corev1.HTTPHeader{{Name: str(), Value: str()}}}}}
		}
		if r.IntN(5) == 0 {
			c.Resources.Claims = []corev1.ResourceClaim{{Name: str(), Request: str()}}
		}
		for range r.IntN(4) {
			m := corev1.VolumeMount{Name: volNames[r.IntN(len(volNames))], MountPath: str(), ReadOnly: maybe(),
				SubPath: str(), SubPathExpr: str(), BindMountOptions: strSlice()}
			if maybe() {
				m.RecursiveReadOnly = ptr.To(corev1.RecursiveReadOnlyIfPossible)
			}
			if maybe() {
				m.MountPropagation = ptr.To(corev1.MountPropagationHostToContainer)
			}
			c.VolumeMounts = append(c.VolumeMounts, m)
		}
		if r.IntN(5) == 0 {
			c.VolumeDevices = []corev1.VolumeDevice{{Name: str(), DevicePath: str()}}
		}
		if r.IntN(4) == 0 {
			c.SecurityContext = &corev1.SecurityContext{Privileged: optBool(), RunAsUser: ptr.To[int64](0)}
		}
		pod.Spec.Containers = append(pod.Spec.Containers, c)
	}
	return pod
}
