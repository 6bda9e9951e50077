package engine

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

// benchNow is the planning time of the benchmarks.
var benchNow = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// benchPod returns a defaulted-looking pod of n web-like containers:
// command, env, a port, requests and limits, a volume mount and a
// termination message path, as convert.Default leaves them.
func benchPod(n int) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "bench", Namespace: "default", UID: "uid-bench",
			Labels: map[string]string{"app": "bench"}},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: ptr.To[int64](30),
			DNSPolicy:                     corev1.DNSClusterFirst,
			SecurityContext:               &corev1.PodSecurityContext{},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
	for i := range n {
		name := "c" + strconv.Itoa(i)
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{
			Name:    name,
			Image:   "registry.local/busybox:local",
			Command: []string{"/bin/sh", "-c"},
			Args:    []string{"trap 'exit 0' TERM; sleep 3600 & wait"},
			Env: []corev1.EnvVar{
				{Name: "NAME", Value: name},
				{Name: "LOG_LEVEL", Value: "info"},
				{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
			},
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: int32(8000 + i), Protocol: corev1.ProtocolTCP}},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
			},
			VolumeMounts:             []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
			TerminationMessagePath:   "/dev/termination-log",
			TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			ImagePullPolicy:          corev1.PullIfNotPresent,
		})
	}
	return pod
}

// benchView returns the runtime view of pod: one ready sandbox and one
// running instance of every container, except that every container whose
// index satisfies exited has exited with code 1 (its first failure: the
// planner restarts it at once).
func benchView(pod *corev1.Pod, exited func(i int) bool) RuntimeView {
	v := RuntimeView{Sandboxes: []Sandbox{{ID: "sb-1", State: SandboxReady, CreatedAt: benchNow.Add(-time.Hour),
		IPs: []string{"10.88.0.5"}, NetworkMode: runtimeapi.NamespaceMode_POD}}}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		spec := NewContainerSpec(pod, c)
		inst := ContainerInstance{
			ID: fmt.Sprintf("ctr-%d", i), Name: c.Name, State: ContainerRunning,
			CreatedAt: benchNow.Add(-time.Hour + time.Duration(i)*time.Millisecond),
			StartedAt: benchNow.Add(-time.Hour + time.Duration(i)*time.Millisecond),
			Image:     c.Image, ImageRef: "sha256:0123456789abcdef", Hash: spec.Hash(), Spec: spec,
			TerminationMessagePath: c.TerminationMessagePath, TerminationMessagePolicy: string(c.TerminationMessagePolicy),
		}
		if exited(i) {
			inst.State, inst.ExitCode, inst.Reason = ContainerExited, 1, "Error"
			inst.FinishedAt = benchNow.Add(-time.Second)
		}
		v.Containers = append(v.Containers, inst)
	}
	// Newest first, as NewRuntimeView orders them.
	for i, j := 0, len(v.Containers)-1; i < j; i, j = i+1, j-1 {
		v.Containers[i], v.Containers[j] = v.Containers[j], v.Containers[i]
	}
	return v
}

// BenchmarkComputePodActions plans pods of 1, 10 and 50 containers in
// three states: all running (nothing to do), every fifth container exited
// for the first time (restart at once; with 1 container, that one), and a
// new pod (create the sandbox, start every container).
func BenchmarkComputePodActions(b *testing.B) {
	for _, n := range []int{1, 10, 50} {
		pod := benchPod(n)
		states := []struct {
			name string
			view RuntimeView
			want func(PodActions) error
		}{
			{"running", benchView(pod, func(int) bool { return false }), func(a PodActions) error {
				if a.KillPod || len(a.Start) != 0 || len(a.Kill) != 0 {
					return fmt.Errorf("plan for a running pod does something: %+v", a)
				}
				return nil
			}},
			{"exited", benchView(pod, func(i int) bool { return i%5 == 0 }), func(a PodActions) error {
				if want := (n + 4) / 5; len(a.Start) != want || len(a.BackOff) != 0 {
					return fmt.Errorf("plan restarts %d, backs off %d; want %d restarts", len(a.Start), len(a.BackOff), want)
				}
				return nil
			}},
			{"new", RuntimeView{}, func(a PodActions) error {
				if !a.Sandbox.Create || len(a.Start) != n {
					return fmt.Errorf("plan for a new pod: create=%t, %d starts", a.Sandbox.Create, len(a.Start))
				}
				return nil
			}},
		}
		for _, st := range states {
			b.Run(fmt.Sprintf("containers=%d/%s", n, st.name), func(b *testing.B) {
				if err := st.want(ComputePodActions(pod, st.view, ProbeResults{}, benchNow, BackoffPolicy{})); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				for b.Loop() {
					_ = ComputePodActions(pod, st.view, ProbeResults{}, benchNow, BackoffPolicy{})
				}
			})
		}
	}
}

// BenchmarkContainerHash is the hash the planner computes for every
// running container on every pass.
func BenchmarkContainerHash(b *testing.B) {
	pod := benchPod(1)
	b.ReportAllocs()
	for b.Loop() {
		_ = ContainerHash(pod, &pod.Spec.Containers[0])
	}
}

// BenchmarkComputePodStatus computes the status of a running 10-container
// pod, as every pass does after the plan.
func BenchmarkComputePodStatus(b *testing.B) {
	pod := benchPod(10)
	view := benchView(pod, func(int) bool { return false })
	opts := StatusOptions{HostIPs: []string{"127.0.0.1"}}
	b.ReportAllocs()
	for b.Loop() {
		_ = ComputePodStatus(pod, view, ProbeResults{}, benchNow, opts)
	}
}
