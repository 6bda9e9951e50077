package store

import (
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// benchStore opens a store holding n running single-container pods, as
// podsyncd holds them after RunPods (defaulted spec, running status).
func benchStore(b *testing.B, n int) *Store {
	b.Helper()
	s, err := Open(filepath.Join(b.TempDir(), "podsync.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	start := metav1.NewTime(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	for i := range n {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: fmt.Sprintf("pod-%03d", i),
				UID: types.UID(fmt.Sprintf("uid-%03d", i)), Labels: map[string]string{"app": "bench"}},
			Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyAlways, DNSPolicy: corev1.DNSClusterFirst,
				TerminationGracePeriodSeconds: ptr.To[int64](30), SchedulerName: "default-scheduler",
				SecurityContext: &corev1.PodSecurityContext{}, EnableServiceLinks: ptr.To(true),
				Containers: []corev1.Container{{
					Name: "main", Image: "registry.local/busybox:local",
					Command:                  []string{"/bin/sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"},
					TerminationMessagePath:   "/dev/termination-log",
					TerminationMessagePolicy: corev1.TerminationMessageReadFile,
					ImagePullPolicy:          corev1.PullIfNotPresent,
				}},
			},
		}
		if _, err := s.Put(PodRecord{Pod: pod}); err != nil {
			b.Fatal(err)
		}
		st := &corev1.PodStatus{Phase: corev1.PodRunning, HostIP: "127.0.0.1", PodIP: "10.88.0.5", StartTime: &start,
			QOSClass: corev1.PodQOSBestEffort,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: start},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: start},
			},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "main", Ready: true, Image: "registry.local/busybox:local",
				ContainerID: "containerd://0123456789abcdef", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: start}}}},
		}
		if _, err := s.Append(StatusChange(RefOf(pod), st)); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

// BenchmarkList is the store's part of ListPods with 200 pods: a read
// transaction and the JSON decoding of every record.
func BenchmarkList(b *testing.B) {
	s := benchStore(b, 200)
	b.ReportAllocs()
	for b.Loop() {
		recs, _, err := s.List(Filter{})
		if err != nil || len(recs) != 200 {
			b.Fatalf("List: %d records, %v", len(recs), err)
		}
	}
}

// BenchmarkGetByName is the store's part of GetPod among 200 pods.
func BenchmarkGetByName(b *testing.B) {
	s := benchStore(b, 200)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := s.GetByName("bench", fmt.Sprintf("pod-%03d", i%200)); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkPutAndAppend is the store's part of starting a pod: the Put of
// its record and the Append of its first status, each a durable commit,
// on a store holding 200 pods, in a directory on disk (the repository's
// .tmp, not a tmpfs: fdatasync and the pages each commit writes are the
// cost). cpu-ns/op is the process's user+system CPU per op, which the
// wall time (mostly waiting for the disk) hides.
func BenchmarkPutAndAppend(b *testing.B) {
	s := benchStore(b, 200)
	var ru0, ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	b.ResetTimer()
	for i := range b.N {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: fmt.Sprintf("new-%d", i),
			UID: types.UID(fmt.Sprintf("uid-new-%d", i))}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox"}}}}
		if _, err := s.Put(PodRecord{Pod: pod}); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Append(StatusChange(RefOf(pod), &corev1.PodStatus{Phase: corev1.PodRunning})); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := time.Duration(ru1.Utime.Nano()-ru0.Utime.Nano()) + time.Duration(ru1.Stime.Nano()-ru0.Stime.Nano())
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
}
