package plantest

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/engine/model"
)

// T0 is the time the fixtures are built relative to: "now" of the tests.
var T0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// BasePod is web in namespace shop (uid-1), restartPolicy Always, with two
// regular containers, app and helper.
func BasePod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "uid-1"},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: ptr.To[int64](30),
			Containers: []corev1.Container{
				{Name: "app", Image: "busybox:1", Command: []string{"sleep", "3600"}, TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile},
				{Name: "helper", Image: "busybox:1", TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile},
			},
		},
	}
}

// Inst builds an instance of the container named name in pod, with the
// hash pod gives it, in BaseView's sandbox sb1.
func Inst(pod *corev1.Pod, name, id string, state model.ContainerState, restarts int32, age time.Duration) model.ContainerInstance {
	c := model.SpecContainer(pod, name)
	i := model.ContainerInstance{ID: id, SandboxID: "sb1", Name: name, State: state, RestartCount: restarts, CreatedAt: T0.Add(-age), StartedAt: T0.Add(-age)}
	if c != nil {
		i.Hash = model.ContainerHash(pod, c)
		i.Spec = model.NewContainerSpec(pod, c)
		i.Image = c.Image
	}
	if state == model.ContainerExited {
		i.FinishedAt = T0.Add(-age / 2)
	}
	return i
}

// Exited returns i exited with code, finishedAgo before T0.
func Exited(i model.ContainerInstance, code int32, finishedAgo time.Duration) model.ContainerInstance {
	i.State = model.ContainerExited
	i.ExitCode = code
	i.FinishedAt = T0.Add(-finishedAgo)
	return i
}

// BaseView is BasePod's view: a ready sandbox sb1 with both containers
// running.
func BaseView() model.RuntimeView {
	p := BasePod()
	return model.RuntimeView{
		Sandboxes: []model.Sandbox{Sandbox("sb1", 0, true, time.Hour)},
		Containers: []model.ContainerInstance{
			Inst(p, "helper", "c-helper", model.ContainerRunning, 0, 50*time.Minute),
			Inst(p, "app", "c-app", model.ContainerRunning, 0, 55*time.Minute),
		},
	}
}

// WithInit gives the pod init containers: "init-a" and "init-b" run to
// completion; names ending in "-sidecar" are restartable.
func WithInit(names ...string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		for _, n := range names {
			c := corev1.Container{Name: n, Image: "busybox:1"}
			if strings.HasSuffix(n, "-sidecar") {
				c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
			}
			p.Spec.InitContainers = append(p.Spec.InitContainers, c)
		}
	}
}

// Chain applies the pod mutators fs in order.
func Chain(fs ...func(*corev1.Pod)) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		for _, f := range fs {
			f(p)
		}
	}
}

// Policy sets the pod's restart policy.
func Policy(rp corev1.RestartPolicy) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.RestartPolicy = rp }
}

// SetContainers replaces the view's containers, newest first.
func SetContainers(is ...model.ContainerInstance) func(*corev1.Pod, *model.RuntimeView) {
	return func(_ *corev1.Pod, v *model.RuntimeView) { v.Containers = is }
}

// BenchNow is the planning time of the benchmarks.
var BenchNow = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// BenchPod returns a defaulted-looking pod of n web-like containers:
// command, env, a port, requests and limits, a volume mount and a
// termination message path, as convert.Default leaves them.
func BenchPod(n int) *corev1.Pod {
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

// BenchView returns the runtime view of pod: one ready sandbox and one
// running instance of every container, except that every container whose
// index satisfies exited has exited with code 1 (its first failure: the
// planner restarts it at once).
func BenchView(pod *corev1.Pod, exited func(i int) bool) model.RuntimeView {
	v := model.RuntimeView{Sandboxes: []model.Sandbox{{ID: "sb-1", State: model.SandboxReady, CreatedAt: BenchNow.Add(-time.Hour),
		IPs: []string{"10.88.0.5"}, NetworkMode: runtimeapi.NamespaceMode_POD}}}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		spec := model.NewContainerSpec(pod, c)
		inst := model.ContainerInstance{
			ID: fmt.Sprintf("ctr-%d", i), SandboxID: "sb-1", Name: c.Name, State: model.ContainerRunning,
			CreatedAt: BenchNow.Add(-time.Hour + time.Duration(i)*time.Millisecond),
			StartedAt: BenchNow.Add(-time.Hour + time.Duration(i)*time.Millisecond),
			Image:     c.Image, ImageRef: "sha256:0123456789abcdef", Hash: spec.Hash(), Spec: spec,
			TerminationMessagePath: c.TerminationMessagePath, TerminationMessagePolicy: string(c.TerminationMessagePolicy),
		}
		if exited(i) {
			inst.State, inst.ExitCode, inst.Reason = model.ContainerExited, 1, "Error"
			inst.FinishedAt = BenchNow.Add(-time.Second)
		}
		v.Containers = append(v.Containers, inst)
	}
	// Newest first, as NewRuntimeView orders them.
	for i, j := 0, len(v.Containers)-1; i < j; i, j = i+1, j-1 {
		v.Containers[i], v.Containers[j] = v.Containers[j], v.Containers[i]
	}
	return v
}

// Sandbox builds a sandbox created age before T0 with one IP, ready or not.
func Sandbox(id string, attempt uint32, ready bool, age time.Duration) model.Sandbox {
	s := model.Sandbox{ID: id, Attempt: attempt, CreatedAt: T0.Add(-age), IPs: []string{"10.0.0.5"}, NetworkMode: runtimeapi.NamespaceMode_POD}
	if ready {
		s.State = model.SandboxReady
	}
	return s
}
