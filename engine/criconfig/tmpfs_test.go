package criconfig_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/podsync/podsync/engine/criconfig"
)

// TestTmpfsSize is the kubelet's TestCalculateEmptyDirMemorySize, with
// the cases podsync adds: a pod whose memory limit is not declared by
// every container has none, a secret (no size limit), and an unknown node
// memory.
func TestTmpfsSize(t *testing.T) {
	limits := func(mem ...string) []corev1.Container {
		var out []corev1.Container
		for _, m := range mem {
			c := corev1.Container{}
			if m != "" {
				c.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(m)}
			}
			out = append(out, c)
		}
		return out
	}
	gi := int64(1 << 30)
	for _, tc := range []struct {
		name       string
		containers []corev1.Container
		requests   bool
		allocMem   string
		capacity   int64
		sizeLimit  *resource.Quantity
		want       int64
	}{
		{name: "EmptyDirLocalLimit", containers: limits("10Gi"), allocMem: "16Gi", sizeLimit: ptrQ("1Gi"), want: gi},
		{name: "PodLocalLimit", containers: limits("10Gi"), allocMem: "16Gi", sizeLimit: ptrQ("0"), want: 10 * gi},
		{name: "NodeAllocatableLimit", containers: limits("10Gi"), requests: true, allocMem: "16Gi", sizeLimit: ptrQ("0"), want: 16 * gi},
		{name: "size limit above the pod's limit", containers: limits("1Gi"), allocMem: "16Gi", sizeLimit: ptrQ("2Gi"), want: gi},
		{name: "pod limits summed", containers: limits("1Gi", "2Gi"), allocMem: "16Gi", want: 3 * gi},
		{name: "a container without a limit: no pod limit", containers: limits("1Gi", ""), allocMem: "16Gi", want: 16 * gi},
		{name: "secret without a pod limit", containers: limits(""), allocMem: "16Gi", want: 16 * gi},
		{name: "capacity when allocatable is unknown", containers: limits(""), capacity: 8 * gi, want: 8 * gi},
		{name: "nothing known: kernel default", containers: limits(""), want: 0},
		{name: "nothing known but the size limit", containers: limits(""), sizeLimit: ptrQ("64Mi"), want: 64 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: tc.containers}}
			if tc.requests {
				for i := range pod.Spec.Containers {
					c := &pod.Spec.Containers[i]
					c.Resources.Requests, c.Resources.Limits = c.Resources.Limits, nil
				}
			}
			opts := criconfig.Options{MemoryCapacity: tc.capacity}
			if tc.allocMem != "" {
				opts.NodeAllocatable = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(tc.allocMem)}
			}
			if got := criconfig.TmpfsSize(pod, tc.sizeLimit, opts); got != tc.want {
				t.Errorf("TmpfsSize = %d, want %d", got, tc.want)
			}
		})
	}
}

func ptrQ(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}
