package model_test

import (
	"fmt"
	"testing"

	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/plan/plantest"
)

// BenchmarkContainerHash is the hash the planner computes for every
// running container on every pass.
func BenchmarkContainerHash(b *testing.B) {
	pod := plantest.BenchPod(1)
	b.ReportAllocs()
	for b.Loop() {
		_ = model.ContainerHash(pod, &pod.Spec.Containers[0])
	}
}

// BenchmarkEncodePodSpec is the pod-spec annotation every new sandbox
// carries (a pod of one and of ten containers), and its length.
func BenchmarkEncodePodSpec(b *testing.B) {
	for _, n := range []int{1, 10} {
		pod := plantest.BenchPod(n)
		b.Run(fmt.Sprintf("containers=%d", n), func(b *testing.B) {
			spec, ok := model.EncodePodSpec(pod)
			if !ok {
				b.Fatal("EncodePodSpec: too long")
			}
			b.ReportAllocs()
			for b.Loop() {
				_, _ = model.EncodePodSpec(pod)
			}
			b.ReportMetric(float64(len(spec)), "annotation-bytes")
		})
	}
}
