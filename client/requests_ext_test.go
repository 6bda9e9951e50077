package client_test

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsync/podsync/client"
	"github.com/podsync/podsync/convert"
)

// TestRunPodsRequestFromManifests: pods, ConfigMaps and Secrets are
// defaulted copies; the manifests stay as they were.
func TestRunPodsRequestFromManifests(t *testing.T) {
	m, err := convert.Decode(strings.NewReader(`
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: shop}
spec:
  containers: [{name: app, image: "registry.local/busybox:latest"}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cfg}
---
apiVersion: v1
kind: Secret
metadata: {name: creds}
stringData: {password: hunter2}
`))
	if err != nil {
		t.Fatal(err)
	}
	req, err := client.RunPodsRequestFromManifests(m)
	if err != nil {
		t.Fatal(err)
	}
	if len(req.GetPods()) != 1 || len(req.GetConfigMaps()) != 1 || len(req.GetSecrets()) != 1 {
		t.Fatalf("request %v", req)
	}
	pod := req.GetPods()[0]
	if pod.GetMetadata().GetUid() != string(convert.PodUID("shop", "web")) {
		t.Errorf("uid %q", pod.GetMetadata().GetUid())
	}
	if p := pod.GetSpec().GetContainers()[0].GetImagePullPolicy(); p != "Always" {
		t.Errorf("pull policy %q of a :latest image, want Always", p)
	}
	if ns := req.GetConfigMaps()[0].GetMetadata().GetNamespace(); ns != "default" {
		t.Errorf("config map namespace %q", ns)
	}
	if s := req.GetSecrets()[0]; string(s.GetData()["password"]) != "hunter2" || s.GetType() != "Opaque" {
		t.Errorf("secret %v: want stringData folded into data, type Opaque", s)
	}
	if m.Pods[0].UID != "" || m.Pods[0].Spec.Containers[0].ImagePullPolicy != "" || m.Secrets[0].Data != nil || m.ConfigMaps[0].Namespace != "" {
		t.Error("RunPodsRequestFromManifests modified the manifests")
	}
}

// TestRequestErrors: unsupported fields are named; no pod is an error.
func TestRequestErrors(t *testing.T) {
	pod := testPod("", "web", nil)
	pod.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "x"}}
	_, err := client.SyncPodRequestFromPod(pod, nil, nil)
	var ie *convert.InvalidError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "spec.readinessGates") {
		t.Errorf("SyncPodRequestFromPod with readinessGates: %v", err)
	}
	if _, err := client.PlanPodRequestFromPod(nil, nil, nil); err == nil {
		t.Error("PlanPodRequestFromPod(nil) succeeded")
	}
	if _, err := client.RunPodsRequestFromManifests(&convert.Manifests{}); err == nil {
		t.Error("RunPodsRequestFromManifests without pods succeeded")
	}
}

// TestPlanPodRequestFromPod: the pod, ConfigMaps and Secrets, defaulted.
func TestPlanPodRequestFromPod(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"}}
	req, err := client.PlanPodRequestFromPod(testPod("", "web", nil), []*corev1.ConfigMap{cm}, []*corev1.Secret{secret})
	if err != nil {
		t.Fatal(err)
	}
	if req.GetPod().GetMetadata().GetNamespace() != "default" || len(req.GetConfigMaps()) != 1 || req.GetSecrets()[0].GetType() != "Opaque" {
		t.Errorf("request %v", req)
	}
}

// TestRequestBuildersValidate: the builders run podsyncd's checks and
// report every problem at once, before anything is sent.
func TestRequestBuildersValidate(t *testing.T) {
	pod := testPod("", "web", nil)
	pod.Spec.Containers = append(pod.Spec.Containers, pod.Spec.Containers[0])
	pod.Spec.Containers[0].Image = ""
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	_, err := client.SyncPodRequestFromPod(pod, nil, nil)
	var me *convert.ManifestsError
	if !errors.As(err, &me) {
		t.Fatalf("SyncPodRequestFromPod of an invalid pod: %v, want a *convert.ManifestsError", err)
	}
	var got []string
	for _, p := range me.Problems {
		got = append(got, p.Field)
	}
	want := []string{"spec.containers[0].image", "spec.containers[0].volumeMounts[0].name", "spec.containers[1].name"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("problems at %q, want %q:\n%v", got, want, err)
	}
}

// TestRequestBuildersDropServerFields: what a `kubectl get -o yaml` dump
// carries from the API server, and the service account fields but its
// name (which the downward API reads), are dropped.
func TestRequestBuildersDropServerFields(t *testing.T) {
	pod := testPod("", "web", nil)
	pod.ResourceVersion, pod.Generation = "42", 1
	pod.Spec.ServiceAccountName, pod.Spec.DeprecatedServiceAccount = "builder", "builder"
	pod.Spec.AutomountServiceAccountToken = new(false)
	pod.Status.Phase = corev1.PodRunning
	req, err := client.RunPodsRequestFromManifests(&convert.Manifests{Pods: []*corev1.Pod{pod}})
	if err != nil {
		t.Fatal(err)
	}
	if got := req.GetPods()[0]; got.GetStatus() != nil {
		t.Errorf("status sent: %v", got.GetStatus())
	}
	if got := req.GetPods()[0].GetSpec().GetServiceAccountName(); got != "builder" {
		t.Errorf("serviceAccountName sent = %q, want builder", got)
	}
	if pod.ResourceVersion != "42" || pod.Status.Phase != corev1.PodRunning {
		t.Error("the builder modified its argument")
	}
}
