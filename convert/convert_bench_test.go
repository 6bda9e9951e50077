package convert_test

import (
	"bytes"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsync/podsync/convert"
)

// benchManifest is the typical manifest of the benchmarks: a pod of two
// containers with ports, env, requests and limits.
const benchManifest = "../testdata/manifests/multi-container.yaml"

func readBenchManifest(b *testing.B) []byte {
	b.Helper()
	data, err := os.ReadFile(benchManifest)
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// BenchmarkManifestToProto is what a client does with a manifest before
// RunPods: Decode, Default and PodToProto (with its round-trip check).
func BenchmarkManifestToProto(b *testing.B) {
	data := readBenchManifest(b)
	b.ReportAllocs()
	for b.Loop() {
		m, err := convert.Decode(bytes.NewReader(data))
		if err != nil {
			b.Fatal(err)
		}
		for _, pod := range m.Pods {
			convert.Default(pod)
			if _, err := convert.PodToProto(pod); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkDecode, BenchmarkDefault and BenchmarkPodToProto split
// BenchmarkManifestToProto into its steps.
func BenchmarkDecode(b *testing.B) {
	data := readBenchManifest(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := convert.Decode(bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDefault(b *testing.B) {
	pod := benchPod(b)
	pod.UID = ""
	b.ReportAllocs()
	for b.Loop() {
		p := pod.DeepCopy()
		convert.Default(p)
	}
}

func BenchmarkPodToProto(b *testing.B) {
	pod := benchPod(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := convert.PodToProto(pod); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPodToProtoWithStatus converts a stored pod with a running
// status, as GetPod and ListPods do for every pod they return.
func BenchmarkPodToProtoWithStatus(b *testing.B) {
	pod := benchPod(b)
	pod.Status = runningStatus(pod)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := convert.PodToProto(pod); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPodFromProto is the server's side of a RunPods or SyncPod
// request.
func BenchmarkPodFromProto(b *testing.B) {
	pb, err := convert.PodToProto(benchPod(b))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := convert.PodFromProto(pb); err != nil {
			b.Fatal(err)
		}
	}
}

// benchPod returns the defaulted pod of benchManifest.
func benchPod(b *testing.B) *corev1.Pod {
	b.Helper()
	m, err := convert.Decode(bytes.NewReader(readBenchManifest(b)))
	if err != nil {
		b.Fatal(err)
	}
	if len(m.Pods) != 1 {
		b.Fatalf("%s: %d pods, want 1", benchManifest, len(m.Pods))
	}
	pod := m.Pods[0]
	convert.Default(pod)
	return pod
}

// runningStatus is the status of pod with every container running.
func runningStatus(pod *corev1.Pod) corev1.PodStatus {
	start := metav1.NewTime(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	st := corev1.PodStatus{
		Phase: corev1.PodRunning, HostIP: "127.0.0.1", HostIPs: []corev1.HostIP{{IP: "127.0.0.1"}},
		PodIP: "10.88.0.5", PodIPs: []corev1.PodIP{{IP: "10.88.0.5"}}, StartTime: &start,
		QOSClass: corev1.PodQOSBurstable,
	}
	for _, ct := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized,
		corev1.PodReady, corev1.ContainersReady, corev1.PodScheduled} {
		st.Conditions = append(st.Conditions, corev1.PodCondition{Type: ct, Status: corev1.ConditionTrue, LastTransitionTime: start})
	}
	for _, c := range pod.Spec.Containers {
		st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Ready: true, Started: new(true), Image: c.Image, ImageID: "registry.local/busybox@sha256:0123",
			ContainerID: "containerd://0123456789abcdef", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: start}},
		})
	}
	return st
}

// BenchmarkStoredPodToProto is GetPod's and ListPods' conversion of a
// stored pod with a running status, when the pod changed since they last
// returned it.
func BenchmarkStoredPodToProto(b *testing.B) {
	pod := benchPod(b)
	pod.Status = runningStatus(pod)
	b.ReportAllocs()
	for b.Loop() {
		convert.StoredPodToProto(pod)
	}
}

// BenchmarkPodStatusToProto is the status part of BenchmarkStoredPodToProto,
// which WatchPods and the status updates of RunPods and SyncPod pay alone.
func BenchmarkPodStatusToProto(b *testing.B) {
	pod := benchPod(b)
	st := runningStatus(pod)
	b.ReportAllocs()
	for b.Loop() {
		convert.PodStatusToProto(&st)
	}
}
