package server_test

import (
	"errors"
	"io"
	"testing"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc/codes"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/convert"
	"github.com/podsync/podsync/engine/admit"
	"github.com/podsync/podsync/errorinfo"
	"github.com/podsync/podsync/internal/testing/testdaemon"
)

func podFieldsPod(t *testing.T, name string, mutate func(*corev1.Pod)) *podsyncv1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: testImage, Command: []string{"sleep", "inf"},
		}}},
	}
	mutate(pod)
	p, err := convert.PodToProto(pod)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// syncErr runs SyncPod and returns the stream's error.
func syncErr(h *svcHarness, pod *podsyncv1.Pod) error {
	stream, err := h.c.SyncPod(h.ctx, &podsyncv1.SyncPodRequest{Pod: pod})
	if err != nil {
		return err
	}
	for {
		if _, err := stream.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// TestPodFieldsThroughTheAPI: the pod fields travel through SyncPod and
// GetPod; podsyncd sets spec.priority from the class; an unknown class,
// an undeclared extended resource and a pod-level request above the
// allocatable are refused with the kubelet's (or the API server's)
// reasons and gRPC codes.
func TestPodFieldsThroughTheAPI(t *testing.T) {
	h := newHarness(t, testdaemon.Options{Transport: testdaemon.Bufconn, Logger: zaptest.NewLogger(t),
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1Gi"),
			"example.com/foo": resource.MustParse("2")}}, nil)
	pod := podFieldsPod(t, "fields", func(p *corev1.Pod) {
		p.Spec.ShareProcessNamespace = ptr.To(true)
		p.Spec.HostUsers = ptr.To(true)
		p.Spec.Hostname, p.Spec.Subdomain, p.Spec.SetHostnameAsFQDN = "web", "pods", ptr.To(true)
		p.Spec.OS = &corev1.PodOS{Name: corev1.Linux}
		p.Spec.PriorityClassName = admit.SystemClusterCritical
		p.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}}
		p.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}}
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"example.com/foo": resource.MustParse("1")}
	})
	h.sync(pod)
	got, err := h.c.GetPod(h.ctx, &podsyncv1.GetPodRequest{Namespace: "default", Name: "fields"})
	if err != nil {
		t.Fatal(err)
	}
	s := got.GetPod().GetSpec()
	if !s.GetShareProcessNamespace() || !s.GetHostUsers() || !s.GetSetHostnameAsFqdn() || s.GetOs().GetName() != "linux" ||
		s.GetPriorityClassName() != admit.SystemClusterCritical || s.GetPriority() != admit.SystemClusterCriticalPriority ||
		len(s.GetImagePullSecrets()) != 1 || s.GetResources().GetRequests()["memory"] != "256Mi" {
		t.Errorf("stored spec %v: want every field, the class's priority and the defaulted pod-level request", s)
	}

	for _, tc := range []struct {
		name   string
		mutate func(*corev1.Pod)
		code   codes.Code
		reason string
	}{
		{"unknown priority class", func(p *corev1.Pod) { p.Spec.PriorityClassName = "high" }, codes.FailedPrecondition, admit.ReasonPriorityClass},
		{"undeclared extended resource", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"example.com/bar": resource.MustParse("1")}
		}, codes.ResourceExhausted, "OutOfexample.com/bar"},
		{"extended resource beyond the capacity", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"example.com/foo": resource.MustParse("2")}
		}, codes.ResourceExhausted, "OutOfexample.com/foo"},
		{"pod-level request beyond the allocatable", func(p *corev1.Pod) {
			p.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}}
		}, codes.ResourceExhausted, "OutOfcpu"},
		// Valid on the API server; a Linux kubelet refuses it at admission.
		{"os windows", func(p *corev1.Pod) { p.Spec.OS = &corev1.PodOS{Name: corev1.Windows} }, codes.FailedPrecondition, admit.ReasonPodOSNotSupported},
		{"os unknown", func(p *corev1.Pod) { p.Spec.OS = &corev1.PodOS{Name: "plan9"} }, codes.InvalidArgument, errorinfo.ReasonInvalidSpec},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, syncErr(h, podFieldsPod(t, "refused", tc.mutate)), tc.code, tc.reason)
		})
	}
}
