package provider

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"google.golang.org/protobuf/testing/protocmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fakeServices are an API server's Services.
type fakeServices []*corev1.Service

func (f fakeServices) Services(namespace string) ([]*corev1.Service, error) {
	var out []*corev1.Service
	for _, s := range f {
		if s.Namespace == namespace {
			out = append(out, s)
		}
	}
	return out, nil
}

// TestEnvStaysReferences: the pod's env reaches podsyncd as the API
// server stores it — references to Secrets, ConfigMaps and the downward
// API, in its order — never a Secret's value (the node library resolved
// them into plain values, which podsyncd stored and showed); before it
// come the kubelet's service variables, sorted, but those env or envFrom
// define.
func TestEnvStaysReferences(t *testing.T) {
	f := newFake()
	p := New("vk-1", f, zap.NewNop())
	objs := testObjects()
	objs.cms["default/env"] = &corev1.ConfigMap{ObjectMeta: apiMeta("env"), Data: map[string]string{"REDIS_SERVICE_PORT": "from-envfrom"}}
	p.UseObjects(objs)
	svc := func(ns, name, ip string, ports ...corev1.ServicePort) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{ClusterIP: ip, Ports: ports}}
	}
	p.UseServices(fakeServices{
		svc("default", "kubernetes", "10.250.0.1", corev1.ServicePort{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP}),
		svc("default", "redis", "10.250.0.9", corev1.ServicePort{Port: 6379}),
		svc("default", "headless", corev1.ClusterIPNone, corev1.ServicePort{Port: 80}),
		svc("other", "db", "10.250.0.7", corev1.ServicePort{Port: 5432}),
	})
	pod := testPod("1")
	c := &pod.Spec.Containers[0]
	c.EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "env"}}}}
	c.Env = []corev1.EnvVar{
		{Name: "PW", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "web-pw"}, Key: "pw"}}},
		{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
		{Name: "CPU", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}}},
		{Name: "URL", Value: "redis://$(REDIS_SERVICE_HOST)"},
		{Name: "KUBERNETES_SERVICE_HOST", Value: "mine"},
	}
	if err := p.CreatePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if len(f.synced) != 1 {
		t.Fatalf("%d SyncPods, want 1", len(f.synced))
	}
	got := f.synced[0].GetPod()
	var names []string
	for _, e := range got.GetSpec().GetContainers()[0].GetEnv() {
		names = append(names, e.GetName())
	}
	want := []string{
		// The kubernetes Service's but the host env defines, redis's but
		// the port envFrom defines, sorted; none of the headless Service
		// or another namespace's.
		"KUBERNETES_PORT", "KUBERNETES_PORT_443_TCP", "KUBERNETES_PORT_443_TCP_ADDR", "KUBERNETES_PORT_443_TCP_PORT", "KUBERNETES_PORT_443_TCP_PROTO",
		"KUBERNETES_SERVICE_PORT", "KUBERNETES_SERVICE_PORT_HTTPS",
		"REDIS_PORT", "REDIS_PORT_6379_TCP", "REDIS_PORT_6379_TCP_ADDR", "REDIS_PORT_6379_TCP_PORT", "REDIS_PORT_6379_TCP_PROTO", "REDIS_SERVICE_HOST",
		// The pod's own, in its order.
		"PW", "POD_IP", "CPU", "URL", "KUBERNETES_SERVICE_HOST",
	}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("env names (-want +got):\n%s", diff)
	}
	env := got.GetSpec().GetContainers()[0].GetEnv()
	for _, e := range env {
		switch e.GetName() {
		case "PW":
			if e.GetValueFrom().GetSecretKeyRef().GetName() != "web-pw" || e.GetValue() != "" {
				t.Errorf("PW = %v, want the secretKeyRef", e)
			}
		case "POD_IP":
			if e.GetValueFrom().GetFieldRef().GetFieldPath() != "status.podIP" {
				t.Errorf("POD_IP = %v, want the fieldRef", e)
			}
		case "CPU":
			if e.GetValueFrom().GetResourceFieldRef().GetResource() != "limits.cpu" {
				t.Errorf("CPU = %v, want the resourceFieldRef", e)
			}
		case "REDIS_SERVICE_HOST":
			if e.GetValue() != "10.250.0.9" {
				t.Errorf("REDIS_SERVICE_HOST = %q", e.GetValue())
			}
		}
	}
	if got.GetSpec().GetContainers()[0].GetEnvFrom()[0].GetConfigMapRef().GetName() != "env" {
		t.Errorf("envFrom = %v, want the ConfigMap reference", got.GetSpec().GetContainers()[0].GetEnvFrom())
	}
	for _, e := range env {
		if e.GetValue() == "p" {
			t.Errorf("%s holds the Secret's value", e.GetName())
		}
	}

	// The same pod again: the same spec.
	if err := p.UpdatePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(f.synced[0].GetPod().GetSpec(), f.synced[len(f.synced)-1].GetPod().GetSpec(), protocmp.Transform()); diff != "" {
		t.Errorf("a second apply changed the spec:\n%s", diff)
	}
}
