package enginetest

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Image is held by every fake runtime (NewFakeRuntime's images).
const Image = "registry.local/busybox:1"

// RunForever is a command the fake runtime keeps running until stopped.
var RunForever = []string{"/bin/sh", "-c", "while :; do sleep 1; done"}

// Pod returns the pod the syncer and node tests start from: web in
// namespace shop (uid-1), restartPolicy Always, a 30 s grace period and
// two regular containers, app and helper, that run until stopped.
func Pod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "uid-1"},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: ptr.To[int64](30),
			Containers: []corev1.Container{
				Container("app", RunForever...),
				Container("helper", RunForever...),
			},
		},
	}
}

// Container returns a container of Image running command, defaulted as
// the API server would (pull policy, termination message path and policy).
func Container(name string, command ...string) corev1.Container {
	return corev1.Container{
		Name: name, Image: Image, Command: command, ImagePullPolicy: corev1.PullIfNotPresent,
		TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile,
	}
}
