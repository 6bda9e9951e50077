package convert_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/convert"
)

// manifests decodes every file of testdata/manifests.
func manifests(t *testing.T) map[string]*convert.Manifests {
	t.Helper()
	files, err := filepath.Glob("../testdata/manifests/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 8 {
		t.Fatalf("want at least 8 manifests in testdata/manifests, found %d", len(files))
	}
	out := map[string]*convert.Manifests{}
	for _, f := range files {
		r, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		m, err := convert.Decode(r)
		_ = r.Close()
		if err != nil {
			t.Fatalf("decode %s: %v", f, err)
		}
		out[filepath.Base(f)] = m
	}
	return out
}

// TestRoundTripManifests checks YAML → core/v1 → Default → proto → core/v1
// gives back the defaulted original, for every manifest and object kind.
func TestRoundTripManifests(t *testing.T) {
	pods := 0
	for name, m := range manifests(t) {
		t.Run(name, func(t *testing.T) {
			for _, pod := range m.Pods {
				convert.Default(pod)
				pb, err := convert.PodToProto(pod)
				if err != nil {
					t.Fatalf("pod %s: %v", pod.Name, err)
				}
				back, err := convert.PodFromProto(pb)
				if err != nil {
					t.Fatalf("pod %s back: %v", pod.Name, err)
				}
				if diff := cmp.Diff(pod, back); diff != "" {
					t.Errorf("pod %s round trip (-want +got):\n%s", pod.Name, diff)
				}
				// What the server stores converts back the same without
				// the check.
				if diff := cmp.Diff(pb, convert.StoredPodToProto(back), protocmp.Transform()); diff != "" {
					t.Errorf("pod %s: StoredPodToProto differs from PodToProto (-want +got):\n%s", pod.Name, diff)
				}
				pods++
			}
			for _, cm := range m.ConfigMaps {
				convert.DefaultConfigMap(cm)
				pb, err := convert.ConfigMapToProto(cm)
				if err != nil {
					t.Fatalf("configmap %s: %v", cm.Name, err)
				}
				if diff := cmp.Diff(cm, convert.ConfigMapFromProto(pb)); diff != "" {
					t.Errorf("configmap %s round trip (-want +got):\n%s", cm.Name, diff)
				}
			}
			for _, s := range m.Secrets {
				convert.DefaultSecret(s)
				pb, err := convert.SecretToProto(s)
				if err != nil {
					t.Fatalf("secret %s: %v", s.Name, err)
				}
				if diff := cmp.Diff(s, convert.SecretFromProto(pb)); diff != "" {
					t.Errorf("secret %s round trip (-want +got):\n%s", s.Name, diff)
				}
			}
		})
	}
	if pods < 8 {
		t.Errorf("round-tripped %d pods, want at least 8", pods)
	}
}

// TestKubernetesJSONParsesAsProto checks the API's JSON names: a pod as
// kubectl prints it in JSON parses with protojson (as grpcurl -d does) into
// the same pod.
func TestKubernetesJSONParsesAsProto(t *testing.T) {
	for name, m := range manifests(t) {
		for _, pod := range m.Pods {
			t.Run(name+"/"+pod.Name, func(t *testing.T) {
				convert.Default(pod)
				raw, err := json.Marshal(pod)
				if err != nil {
					t.Fatal(err)
				}
				var pb podsyncv1.Pod
				if err := protojson.Unmarshal(raw, &pb); err != nil {
					t.Fatalf("protojson rejects the pod's Kubernetes JSON: %v\n%s", err, raw)
				}
				back, err := convert.PodFromProto(&pb)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(pod, back); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
			})
		}
		for _, s := range m.Secrets {
			t.Run(name+"/secret/"+s.Name, func(t *testing.T) {
				raw, err := json.Marshal(s)
				if err != nil {
					t.Fatal(err)
				}
				var pb podsyncv1.Secret
				if err := protojson.Unmarshal(raw, &pb); err != nil {
					t.Fatalf("protojson rejects the secret's Kubernetes JSON: %v", err)
				}
				if diff := cmp.Diff(s, convert.SecretFromProto(&pb)); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
			})
		}
	}
}

func basePod() *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:  "app",
				Image: "registry.local/busybox:1.37",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				Env:   []corev1.EnvVar{{Name: "A", Value: "1"}},
				Resources: corev1.ResourceRequirements{
					Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")},
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
				LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
					HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromString("http")},
				}},
				Lifecycle:       &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}},
				SecurityContext: &corev1.SecurityContext{},
			}},
			Volumes:         []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			SecurityContext: &corev1.PodSecurityContext{},
		},
	}
	convert.Default(pod)
	return pod
}

// TestUnsupportedFieldsAreRejected checks that a field podsync does not
// support is an error naming its path, never dropped.
func TestUnsupportedFieldsAreRejected(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*corev1.Pod)
		want   []string
	}{
		{"ephemeral containers", func(p *corev1.Pod) {
			p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "dbg", Image: "x"}}}
		}, []string{"spec.ephemeralContainers"}},
		{"readiness gates", func(p *corev1.Pod) {
			p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "x"}}
		}, []string{"spec.readinessGates"}},
		{"owner references", func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "X", Name: "x", UID: "1"}}
		}, []string{"metadata.ownerReferences"}},
		{"finalizers", func(p *corev1.Pod) { p.Finalizers = []string{"x"} }, []string{"metadata.finalizers"}},
		{"projected serviceAccountToken and clusterTrustBundle", func(p *corev1.Pod) {
			p.Spec.Volumes[0].EmptyDir = nil
			p.Spec.Volumes[0].Projected = &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}},
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
				{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{Path: "ca.crt"}},
			}}
		}, []string{"spec.volumes[0].projected.sources[1].serviceAccountToken", "spec.volumes[0].projected.sources[2].clusterTrustBundle"}},
		{"windows options", func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext.WindowsOptions = &corev1.WindowsSecurityContextOptions{RunAsUserName: ptr.To("x")}
		}, []string{"spec.containers[0].securityContext.windowsOptions"}},
		{"pod seLinuxChangePolicy", func(p *corev1.Pod) {
			p.Spec.SecurityContext.SELinuxChangePolicy = ptr.To(corev1.SELinuxChangePolicyRecursive)
		}, []string{"spec.securityContext.seLinuxChangePolicy"}},
		{"lifecycle tcpSocket hook", func(p *corev1.Pod) {
			p.Spec.Containers[0].Lifecycle.PreStop = &corev1.LifecycleHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}}
		}, []string{"spec.containers[0].lifecycle.preStop.tcpSocket"}},
		{"nominated node in status", func(p *corev1.Pod) { p.Status.NominatedNodeName = "n1" }, []string{"status.nominatedNodeName"}},
		{"several at once, in path order", func(p *corev1.Pod) {
			p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "x"}}
			p.Spec.Containers[0].Lifecycle.PostStart = &corev1.LifecycleHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}}
			p.Spec.Tolerations = []corev1.Toleration{{Key: "k"}} // accepted
		}, []string{"spec.containers[0].lifecycle.postStart.tcpSocket", "spec.readinessGates"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := basePod()
			tt.mutate(pod)
			_, err := convert.PodToProto(pod)
			var inv *convert.InvalidError
			if !errors.As(err, &inv) {
				t.Fatalf("PodToProto error = %v, want *InvalidError", err)
			}
			var got []string
			for _, fe := range inv.Errors {
				got = append(got, fe.Field)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("paths (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("base pod is accepted", func(t *testing.T) {
		if _, err := convert.PodToProto(basePod()); err != nil {
			t.Fatal(err)
		}
	})
}

func TestUnsupportedObjectFields(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Finalizers: []string{"f"}}, Immutable: ptr.To(true)}
	var inv *convert.InvalidError
	if _, err := convert.ConfigMapToProto(cm); !errors.As(err, &inv) || inv.Errors[0].Field != "metadata.finalizers" {
		t.Errorf("ConfigMap finalizers: err = %v, want InvalidError at metadata.finalizers", err)
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Finalizers: []string{"f"}}, Immutable: ptr.To(true)}
	if _, err := convert.SecretToProto(s); !errors.As(err, &inv) || inv.Errors[0].Field != "metadata.finalizers" {
		t.Errorf("Secret finalizers: err = %v, want InvalidError at metadata.finalizers", err)
	}
	// immutable converts.
	if out, err := convert.ConfigMapToProto(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Immutable: ptr.To(true)}); err != nil || !out.GetImmutable() {
		t.Errorf("ConfigMap immutable: %v, %v", out, err)
	}
	m := &convert.Manifests{ConfigMaps: []*corev1.ConfigMap{cm}, Secrets: []*corev1.Secret{s}, Pods: []*corev1.Pod{basePod()}}
	_, _, _, err := convert.ManifestsToProto(m)
	if err == nil {
		t.Fatal("ManifestsToProto accepted unsupported fields")
	}
	joined, ok := errors.Unwrap(err).(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("ManifestsToProto error %v does not hold one error per object", err)
	}
	var kinds []string
	for _, e := range joined.Unwrap() {
		if errors.As(e, &inv) {
			kinds = append(kinds, inv.Kind)
		}
	}
	if diff := cmp.Diff([]string{"ConfigMap", "Secret"}, kinds); diff != "" {
		t.Errorf("objects reported (-want +got):\n%s", diff)
	}
}

func TestPodFromProtoRejectsUnrepresentableValues(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*podsyncv1.Pod)
		want   []string
	}{
		{"bad quantity", func(p *podsyncv1.Pod) {
			p.Spec.Containers[0].Resources = &podsyncv1.ResourceRequirements{Limits: map[string]string{"cpu": "lots"}}
		}, []string{"spec.containers[0].resources.limits[cpu]"}},
		{"bad sizeLimit", func(p *podsyncv1.Pod) {
			p.Spec.Volumes[0].EmptyDir.SizeLimit = "1 GB"
		}, []string{"spec.volumes[0].emptyDir.sizeLimit"}},
		{"fractional probe port", func(p *podsyncv1.Pod) {
			p.Spec.Containers[0].LivenessProbe.HttpGet.Port = structpb.NewNumberValue(80.5)
		}, []string{"spec.containers[0].livenessProbe.httpGet.port"}},
		{"boolean probe port", func(p *podsyncv1.Pod) {
			p.Spec.Containers[0].LivenessProbe.HttpGet.Port = structpb.NewBoolValue(true)
		}, []string{"spec.containers[0].livenessProbe.httpGet.port"}},
		{"out of range tcp port", func(p *podsyncv1.Pod) {
			p.Spec.Containers[0].ReadinessProbe = &podsyncv1.Probe{TcpSocket: &podsyncv1.TCPSocketAction{Port: structpb.NewNumberValue(1 << 40)}}
		}, []string{"spec.containers[0].readinessProbe.tcpSocket.port"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pb, err := convert.PodToProto(basePod())
			if err != nil {
				t.Fatal(err)
			}
			tt.mutate(pb)
			_, err = convert.PodFromProto(pb)
			var inv *convert.InvalidError
			if !errors.As(err, &inv) {
				t.Fatalf("err = %v, want *InvalidError", err)
			}
			var got []string
			for _, fe := range inv.Errors {
				got = append(got, fe.Field)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("paths (-want +got):\n%s", diff)
			}
		})
	}
}

func TestProbePortForms(t *testing.T) {
	for _, port := range []intstr.IntOrString{intstr.FromInt32(8080), intstr.FromString("http")} {
		pod := basePod()
		pod.Spec.Containers[0].LivenessProbe.HTTPGet.Port = port
		pod.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: port}}}
		convert.Default(pod)
		pb, err := convert.PodToProto(pod)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := protojson.Marshal(pb.Spec.Containers[0].LivenessProbe.HttpGet)
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Port any `json:"port"`
		}
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatal(err)
		}
		want := any(port.StrVal)
		if port.Type == intstr.Int {
			want = float64(port.IntVal)
		}
		if got.Port != want {
			t.Errorf("JSON port = %#v, want %#v (as core/v1 writes it)", got.Port, want)
		}
	}
}

func TestStatusRoundTrip(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 11, 29, 10, 0, 0, 123456789, time.UTC).Local())
	t1 := metav1.NewTime(t0.Add(5 * time.Second))
	st := corev1.PodStatus{
		Phase: corev1.PodRunning,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", Message: "m", LastTransitionTime: t0},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastProbeTime: t1, LastTransitionTime: t0},
		},
		Message: "msg", Reason: "r",
		HostIP: "10.0.0.1", HostIPs: []corev1.HostIP{{IP: "10.0.0.1"}},
		PodIP: "10.88.0.5", PodIPs: []corev1.PodIP{{IP: "10.88.0.5"}, {IP: "fd00::5"}},
		StartTime: &t0,
		InitContainerStatuses: []corev1.ContainerStatus{{
			Name: "init", Ready: true,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 0, Reason: "Completed", StartedAt: t0, FinishedAt: t1, ContainerID: "containerd://a",
			}},
			Image: "registry.local/busybox:1.37", ImageID: "registry.local/busybox@sha256:00", ContainerID: "containerd://a",
		}},
		ContainerStatuses: []corev1.ContainerStatus{{
			Name:                 "app",
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 20s"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Signal: 9, Reason: "Error", Message: "x", StartedAt: t0, FinishedAt: t1}},
			RestartCount:         3, Started: ptr.To(false), Image: "i", ImageID: "iid", ContainerID: "containerd://b",
		}, {
			Name:  "side",
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: t1}},
			Ready: true, Started: ptr.To(true),
		}},
		QOSClass:           corev1.PodQOSBurstable,
		ObservedGeneration: 2,
	}
	pb := convert.PodStatusToProto(&st)
	if diff := cmp.Diff(&st, convert.PodStatusFromProto(pb)); diff != "" {
		t.Errorf("status round trip (-want +got):\n%s", diff)
	}
	pod := basePod()
	pod.Status = st
	ppb, err := convert.PodToProto(pod)
	if err != nil {
		t.Fatalf("pod with full status: %v", err)
	}
	if got := ppb.Status.GetContainerStatuses()[0].GetLastState().GetTerminated().GetExitCode(); got != 137 {
		t.Errorf("exit code = %d, want 137", got)
	}
	raw, err := protojson.Marshal(ppb.Status)
	if err != nil {
		t.Fatal(err)
	}
	var names map[string]any
	if err := json.Unmarshal(raw, &names); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"hostIP", "podIP", "podIPs", "startTime", "containerStatuses", "initContainerStatuses", "qosClass"} {
		if _, ok := names[k]; !ok {
			keys := make([]string, 0, len(names))
			for k := range names {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			t.Errorf("status JSON lacks Kubernetes name %q; has %v", k, keys)
		}
	}
}

// TestPodConditionsToProto: each condition gets its own times, whichever
// of them are set, and distinct messages (they are allocated together).
func TestPodConditionsToProto(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 123456789, time.UTC)
	t1, t2 := t0.Add(time.Second), t0.Add(2*time.Second)
	st := &corev1.PodStatus{Conditions: []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
		{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastProbeTime: metav1.NewTime(t0), Reason: "r", Message: "m"},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t1)},
		{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastProbeTime: metav1.NewTime(t2), LastTransitionTime: metav1.NewTime(t0)},
	}}
	want := []*podsyncv1.PodCondition{
		{Type: "PodScheduled", Status: "True"},
		{Type: "Ready", Status: "False", LastProbeTime: timestamppb.New(t0), Reason: "r", Message: "m"},
		{Type: "Initialized", Status: "True", LastTransitionTime: timestamppb.New(t1)},
		{Type: "ContainersReady", Status: "True", LastProbeTime: timestamppb.New(t2), LastTransitionTime: timestamppb.New(t0)},
	}
	got := convert.PodStatusToProto(st).GetConditions()
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
	got[1].LastProbeTime.Seconds++
	got[1].Reason = "changed"
	if !got[3].GetLastProbeTime().AsTime().Equal(t2) || !got[3].GetLastTransitionTime().AsTime().Equal(t0) || got[2].GetReason() != "" {
		t.Error("a change of one condition reached another")
	}
	if got := convert.PodStatusToProto(&corev1.PodStatus{Phase: corev1.PodPending}).GetConditions(); got != nil {
		t.Errorf("no conditions: %v, want nil", got)
	}
}

// TestUnsupportedFieldsSayWhy: a refused field names its value when it is
// a scalar, and says why and what to do.
func TestUnsupportedFieldsSayWhy(t *testing.T) {
	pod := basePod()
	pod.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/quota"}}
	_, err := convert.PodToProto(pod)
	var inv *convert.InvalidError
	if !errors.As(err, &inv) || len(inv.Errors) != 1 {
		t.Fatalf("PodToProto error = %v, want one refusal", err)
	}
	if got := inv.Errors[0].Detail; got != `scheduling gates are removed by controllers podsync does not run, so the pod would never start; remove them` {
		t.Errorf("detail %q", got)
	}
}

// TestEphemeralContainersRoundTrip: a stored pod's ephemeral containers
// and their statuses survive the API both ways (GetPod shows what
// AddEphemeralContainer added), and EphemeralContainerFromProto is the
// inverse of EphemeralContainerToProto.
func TestEphemeralContainersRoundTrip(t *testing.T) {
	ec := corev1.EphemeralContainer{
		EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name: "debug", Image: "registry.local/busybox:local", ImagePullPolicy: corev1.PullIfNotPresent,
			Command: []string{"ps"}, Args: []string{"-ef"}, WorkingDir: "/tmp",
			Env:                      []corev1.EnvVar{{Name: "A", Value: "b"}},
			VolumeMounts:             []corev1.VolumeMount{{Name: "data", MountPath: "/data", ReadOnly: true}},
			TerminationMessagePath:   "/dev/termination-log",
			TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			SecurityContext:          &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_PTRACE"}}},
			Stdin:                    true, TTY: true, StdinOnce: true,
		},
		TargetContainerName: "httpd",
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: corev1.PodSpec{
			Containers:          []corev1.Container{{Name: "httpd", Image: "registry.local/busybox:local"}},
			EphemeralContainers: []corev1.EphemeralContainer{ec},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, EphemeralContainerStatuses: []corev1.ContainerStatus{{
			Name: "debug", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}},
		}}},
	}
	back, err := convert.PodFromProto(convert.StoredPodToProto(pod))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(pod.Spec.EphemeralContainers, back.Spec.EphemeralContainers); diff != "" {
		t.Errorf("spec.ephemeralContainers (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(pod.Status.EphemeralContainerStatuses, back.Status.EphemeralContainerStatuses); diff != "" {
		t.Errorf("status.ephemeralContainerStatuses (-want +got):\n%s", diff)
	}
	one, err := convert.EphemeralContainerFromProto(convert.EphemeralContainerToProto(ec))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ec, one); diff != "" {
		t.Errorf("EphemeralContainerFromProto(EphemeralContainerToProto) (-want +got):\n%s", diff)
	}
}
