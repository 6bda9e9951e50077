package criconfig

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/podsync/podsync/engine/plan/plantest"
)

// TestEnvResourceFieldRef: env resourceFieldRef values as the kubelet
// computes them (ExtractContainerResourceValue after
// defaultPodLimitsForDownwardAPI): the container's value divided by the
// divisor and rounded up (cpu in millicores); an unset limit is the
// pod-level limit (PodLevelResources), else the node's allocatable; a
// downwardAPI volume file takes an unset limit from the node's
// allocatable only, as the kubelet's volume plugin does.
func TestEnvResourceFieldRef(t *testing.T) {
	ref := func(name, resourceName, divisor string) corev1.EnvVar {
		s := &corev1.ResourceFieldSelector{Resource: resourceName}
		if divisor != "" {
			s.Divisor = resource.MustParse(divisor)
		}
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: s}}
	}
	env := []corev1.EnvVar{
		ref("LIMITS_MEMORY", "limits.memory", ""),
		ref("LIMITS_MEMORY_MI", "limits.memory", "1Mi"),
		ref("LIMITS_MEMORY_M", "limits.memory", "1M"),
		ref("LIMITS_CPU", "limits.cpu", ""),
		ref("LIMITS_CPU_M", "limits.cpu", "1m"),
		ref("REQUESTS_MEMORY", "requests.memory", ""),
	}
	opts := Options{NodeAllocatable: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("3500m"), corev1.ResourceMemory: resource.MustParse("8000000000"),
		corev1.ResourceEphemeralStorage: resource.MustParse("10Gi"),
	}}
	rl := func(cpu, memory string) corev1.ResourceList {
		l := corev1.ResourceList{}
		if cpu != "" {
			l[corev1.ResourceCPU] = resource.MustParse(cpu)
		}
		if memory != "" {
			l[corev1.ResourceMemory] = resource.MustParse(memory)
		}
		return l
	}
	tests := []struct {
		name      string
		container corev1.ResourceRequirements
		podLevel  *corev1.ResourceRequirements
		want      map[string]string
	}{
		{
			name:      "the container's limits",
			container: corev1.ResourceRequirements{Requests: rl("100m", "32Mi"), Limits: rl("500m", "64Mi")},
			want: map[string]string{"LIMITS_MEMORY": "67108864", "LIMITS_MEMORY_MI": "64", "LIMITS_MEMORY_M": "68",
				"LIMITS_CPU": "1", "LIMITS_CPU_M": "500", "REQUESTS_MEMORY": "33554432"},
		},
		{
			name: "no limits: the node's allocatable",
			want: map[string]string{"LIMITS_MEMORY": "8000000000", "LIMITS_MEMORY_MI": "7630", "LIMITS_MEMORY_M": "8000",
				"LIMITS_CPU": "4", "LIMITS_CPU_M": "3500", "REQUESTS_MEMORY": "0"},
		},
		{
			name:     "no container limits: the pod-level limits",
			podLevel: &corev1.ResourceRequirements{Requests: rl("250m", "32Mi"), Limits: rl("1250m", "64Mi")},
			want: map[string]string{"LIMITS_MEMORY": "67108864", "LIMITS_MEMORY_MI": "64", "LIMITS_MEMORY_M": "68",
				"LIMITS_CPU": "2", "LIMITS_CPU_M": "1250", "REQUESTS_MEMORY": "0"},
		},
		{
			name:     "a pod-level cpu limit only: memory from the node's allocatable",
			podLevel: &corev1.ResourceRequirements{Requests: rl("250m", "32Mi"), Limits: rl("1250m", "")},
			want: map[string]string{"LIMITS_MEMORY": "8000000000", "LIMITS_MEMORY_MI": "7630", "LIMITS_MEMORY_M": "8000",
				"LIMITS_CPU": "2", "LIMITS_CPU_M": "1250", "REQUESTS_MEMORY": "0"},
		},
		{
			name:      "the container's limits before the pod-level ones",
			container: corev1.ResourceRequirements{Limits: rl("500m", "16Mi")},
			podLevel:  &corev1.ResourceRequirements{Limits: rl("1250m", "64Mi")},
			want: map[string]string{"LIMITS_MEMORY": "16777216", "LIMITS_MEMORY_MI": "16", "LIMITS_MEMORY_M": "17",
				"LIMITS_CPU": "1", "LIMITS_CPU_M": "500", "REQUESTS_MEMORY": "16777216"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := plantest.BasePod()
			c := &pod.Spec.Containers[0]
			c.Resources = tt.container
			if tt.container.Requests == nil && tt.container.Limits != nil {
				// The API server defaults requests to limits.
				c.Resources.Requests = tt.container.Limits.DeepCopy()
			}
			c.Env = env
			pod.Spec.Resources = tt.podLevel
			vars, err := makeEnvironment(ContainerConfigInput{Pod: pod, Container: c}, opts)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, v := range vars {
				got[v.Name] = v.Value
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
			// A downwardAPI file of the same pod keeps the node's allocatable.
			files, err := downwardAPIFiles(pod, []corev1.DownwardAPIVolumeFile{{Path: "mem", ResourceFieldRef: &corev1.ResourceFieldSelector{
				ContainerName: c.Name, Resource: "limits.memory"}}}, 0o644, opts)
			if err != nil {
				t.Fatal(err)
			}
			want := tt.want["LIMITS_MEMORY"]
			if _, ok := tt.container.Limits[corev1.ResourceMemory]; !ok {
				want = "8000000000"
			}
			if got := string(files["mem"].Data); got != want {
				t.Errorf("downwardAPI file limits.memory = %s, want %s", got, want)
			}
		})
	}
}
